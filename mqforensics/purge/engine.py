"""The purge engine: runs a plan's actions through per-system executors, journaled and resumable.

The engine knows *how* a purge stays safe, never *what* a kind of action does:

* it refuses an unapproved plan (`--apply`) and a plan with an action kind no executor handles,
  before touching anything;
* it takes a census of everything the plan does not name before the first action, so that the
  verification pass can prove nothing else changed;
* for each action, in ``seq`` order, it skips what the journal already finished, re-verifies the
  precondition against live state (drift becomes a ``skipped`` record with the reason), and
  brackets the executor's idempotent `apply` with ``started``/``done`` records;
* after the last action it checks every done target is gone and compares the census; a rerun of
  a purge whose journal already holds every outcome and a clean verification writes nothing;
* an executor may also say what the live system itself reports about the cost of the plan's
  deletes (`measure`, optional): the engine journals it as a ``measured`` record, phase
  ``before`` (before the first action, once per journal) and ``after`` (after the
  verification), and shows it in a dry run without writing anything.

**The last check is the last step before every destructive call.** Executors never call a
destructive operation on their own: they hand `Operations.destructive` the live check of exactly
that call, and it takes the rate slot (the only wait), *then* runs the check, then returns, so the
executor's very next statement is the delete. A check that fails raises `TargetChanged`, which the
engine journals as a ``skipped`` action with the reason. Retries (`retry.call_with_retries`) wrap
the whole `apply`, so a retried delete goes through its wait and its check again. Where the target
system offers a conditional delete (S3 ``If-Match``, Redis ``WATCH``, a Cassandra write timestamp
or lightweight transaction, an IMAP rights removal, a rename before the unlink) the executor uses
it as the last line of defence and raises `TargetChanged` when it refuses; docs/retention.md says
each executor's remaining window.

Transient server errors are retried; a server that stays away or a refused login stops the run
with a typed error after the journal is consistent, so a rerun resumes where it stopped. Crash
points for the fault-injection tests (`faults`) are marked at the rate slot, right before and
right after every destructive call, and after every journal record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, InputError, PlanModified, PlanNotApproved
from mqforensics.purge.contract import MEASURE, Executor, Operations, TargetChanged
from mqforensics.purge.journal import Journal, read_journal
from mqforensics.purge.ratelimit import RateLimiter
from mqforensics.purge.retry import DEFAULT_RETRIES, call_with_retries
from mqforensics.retention.manifest import JOURNAL, Action, Plan, require_approval
from mqforensics.units import plural

T = TypeVar("T")

# Per-action progress lines: the first few show the run works, then one every so often; skips
# (drift) are the lines an operator must read, so they are shown up to a larger cap.
FIRST_LINES = 20
EVERY = 100
SKIP_LINES = 100
MAX_RECORDED_PROBLEMS = 50
MAX_PRINTED_PROBLEMS = 20


@dataclass
class PurgeResult:
    """Outcome of `run_purge`.

    `already_final`: with `applied`, actions an earlier run had finished (resume); in a dry run,
    actions whose target is already in its final state. `skips`: (seq, kind, reason) of every
    action whose outcome is skipped, including skips journaled by earlier runs.
    `verification`: the ``verified`` journal record (apply only). `measured`: the
    measurements of this run by phase (``before``, ``after``; a dry run's is ``before``), each
    {executor name: its `measure` result}; empty when no executor measures.
    """

    applied: bool
    done: int = 0
    skipped: int = 0
    already_final: int = 0
    would_apply: int = 0
    skips: list[tuple[int, str, str]] = field(default_factory=list)
    verification: dict[str, Any] | None = None
    operations: int = 0
    journal: Path | None = None
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_purge(
    plan: Plan,
    executors: Sequence[Executor],
    *,
    apply: bool,
    journal_path: Path | None = None,
    rate: float | None = None,
    limiter: RateLimiter | None = None,
    out: Callable[[str], None] = print,
    on_action: Callable[[int, int, int], None] | None = None,
    retries: int = DEFAULT_RETRIES,
) -> PurgeResult:
    """Dry-run (``apply=False``: changes nothing, writes no journal) or apply a plan.

    The plan's integrity was checked by `read_plan`; applying also requires its approval. The
    journal defaults to ``PLAN/journal.jsonl``. Errors (`ServerUnavailable`,
    `AuthenticationFailed`, anything else, KeyboardInterrupt) propagate after the progress so
    far is printed; the journal is consistent at that point and a rerun resumes.
    `on_action(handled, total, bytes_freed)` is called after each action (a progress display;
    it sees nothing the journal does not record). `limiter` replaces ``RateLimiter(rate)``.
    `retries`: how often a call to a server that failed transiently is tried again
    (`retry.call_with_retries`), 0 for never.
    """
    if retries < 0:
        raise ValueError("retries must be at least 0")
    path = Path(journal_path) if journal_path is not None else plan.directory / JOURNAL
    if apply:
        require_approval(plan)
    by_kind = _executors_by_kind(plan, executors)
    if apply:
        run = _Run(plan, executors, by_kind, path, out, on_action, retries)
        return run.apply(limiter or RateLimiter(rate))
    try:
        require_approval(plan)
    except PlanNotApproved:
        out("plan not approved: --apply would refuse it")
    except (PlanModified, InputError) as exc:
        out(f"approval does not hold for this plan: --apply would refuse it ({exc.message})")
    return _Run(plan, executors, by_kind, path, out, on_action, retries).dry_run()


def _executors_by_kind(plan: Plan, executors: Sequence[Executor]) -> dict[str, Executor]:
    """Exactly one executor per action kind of the plan, checked before anything happens."""
    by_kind: dict[str, Executor] = {}
    for executor in executors:
        for kind in executor.kinds:
            if kind in by_kind:
                raise ConfigError(
                    f"action kind {kind} has two executors: {type(by_kind[kind]).__name__} "
                    f"and {type(executor).__name__}"
                )
            by_kind[kind] = executor
    unknown = sorted({action.kind for action in plan.actions()} - set(by_kind))
    if unknown:
        raise ConfigError(
            f"plan {plan.directory}: no executor for action kind(s) {', '.join(unknown)} "
            f"(system {plan.header.get('system')!r} handles: {', '.join(sorted(by_kind)) or '-'})"
        )
    return by_kind


def _names(executors: Sequence[Executor]) -> list[str]:
    """Census keys: executor class names, numbered when a class appears twice."""
    names: list[str] = []
    for executor in executors:
        base = type(executor).__name__
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}#{n}"
        names.append(name)
    return names


def _json(value: T) -> T:
    """`value` as it reads back from the journal (tuples become lists, keys strings)."""
    return cast(T, json.loads(json.dumps(value, sort_keys=True)))


def _short(value: object, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def census_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per census value that changed, ``census NAME KEY: before X, after Y``."""
    problems: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    problems.append(
                        f"census {name} {key}: before {_short(old.get(key))}, "
                        f"after {_short(new.get(key))}"
                    )
        elif old != new:
            problems.append(f"census {name}: before {_short(old)}, after {_short(new)}")
    return problems


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite number made None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _figure(value: Any) -> str:
    return "-" if value is None else _short(value, 60)


def measured_lines(phase: str, measured: dict[str, Any]) -> list[str]:
    """What a ``measured`` record says, one line per executor and place, for the console."""
    lines = []
    for name, figures in sorted(measured.items()):
        if not isinstance(figures, dict):
            continue
        if "error" in figures:
            lines.append(f"measured {phase}, {name}: failed ({figures['error']})")
            continue
        for kind in ("predicted", "observed"):
            places = figures.get(kind)
            if not isinstance(places, dict):
                continue
            for where, values in sorted(places.items()):
                if isinstance(values, dict) and values:
                    shown = ", ".join(f"{k} {_figure(v)}" for k, v in sorted(values.items()))
                    lines.append(f"measured {phase}, {name} {kind} {where}: {shown}")
        for note in figures.get("notes") or []:
            lines.append(f"measured {phase}, {name}: {note}")
    return lines


def _describe(action: Action) -> str:
    return f"action {action.seq} {action.kind} {action.id}"


def _removed_text(removed: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(removed.items())) or "nothing"


class _Run:
    """One invocation of `run_purge`: counters and progress output shared by both modes."""

    def __init__(
        self,
        plan: Plan,
        executors: Sequence[Executor],
        by_kind: dict[str, Executor],
        journal_path: Path,
        out: Callable[[str], None],
        on_action: Callable[[int, int, int], None] | None = None,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.plan = plan
        self.retries = retries
        self.on_action = on_action
        self.ticks = 0  # actions passed in this run, final ones included
        self.freed = 0  # bytes of the actions done in this run
        self.executors = executors
        self.by_kind = by_kind
        self.journal_path = journal_path
        self.out = out
        total = plan.header.get("action_count")
        self.total = total if isinstance(total, int) else None
        self.handled = 0  # actions looked at in this run (not already final)
        self.skip_lines = 0
        self.where = "the start"  # for the line printed when the run stops

    # -- output ---------------------------------------------------------------------------

    def progress(self, action: Action, text: str, *, skip: bool = False) -> None:
        """One line per action, for the first few, every EVERY-th, and (capped) every skip."""
        self.handled += 1
        show = self.handled <= FIRST_LINES or self.handled % EVERY == 0
        if skip and self.skip_lines < SKIP_LINES:
            show = True
            self.skip_lines += 1
            if self.skip_lines == SKIP_LINES:
                text += f" (further skips are only counted; see {self.journal_path.name})"
        if show:
            of = f"/{self.total}" if self.total is not None else ""
            self.out(f"[{self.handled}{of}] {_describe(action)}: {text}")

    def _tick(self) -> None:
        self.ticks += 1
        if self.on_action is not None:
            self.on_action(self.ticks, self.total or 0, self.freed)

    def _retrying(self, what: str, fn: Callable[[], T], executor: Executor) -> T:
        def classify(exc: BaseException) -> str | None:
            return None if isinstance(exc, TargetChanged) else executor.classify(exc)

        return call_with_retries(
            fn, classify=classify, what=what, attempts=self.retries + 1, on_retry=self.out
        )

    def _census(self) -> dict[str, Any]:
        census: dict[str, Any] = {}
        for name, executor in zip(_names(self.executors), self.executors, strict=True):
            census[name] = self._retrying(f"census {name}", executor.census, executor)
        return _json(census)

    def _measure(self) -> dict[str, Any]:
        """{executor name: its `measure` result} of the executors that measure (none: empty).
        A measurement is information, never a reason to stop: one that fails is recorded as
        ``{"error": ...}`` and the run goes on (transient errors are retried first)."""
        measured: dict[str, Any] = {}
        for name, executor in zip(_names(self.executors), self.executors, strict=True):
            measure = getattr(executor, MEASURE, None)
            if not callable(measure):
                continue
            try:
                measured[name] = self._retrying(f"measure {name}", measure, executor)
            except Exception as exc:  # recorded, and the purge goes on
                measured[name] = {"error": mask_secrets(f"{type(exc).__name__}: {exc}")}
        return _json(_finite(measured))

    def _record_measured(self, journal: Journal, phase: str, result: PurgeResult) -> None:
        measured = self._measure()
        if measured:
            journal.record("measured", phase=phase, **measured)
            result.measured[phase] = measured
            self._print_measured(phase, measured)

    def _print_measured(self, phase: str, measured: dict[str, Any]) -> None:
        for line in measured_lines(phase, measured):
            self.out(line)

    # -- dry run --------------------------------------------------------------------------

    def dry_run(self) -> PurgeResult:
        result = PurgeResult(applied=False)
        states = self._journal_states()
        self.out(f"dry run of plan {self.plan.directory}: nothing is changed, no journal written")
        try:
            self.where = "the measurement before the first action"
            measured = self._measure()
            if measured:
                result.measured["before"] = measured
                self._print_measured("before", measured)
            for action in self.plan.actions():
                self.where = _describe(action)
                executor = self.by_kind[action.kind]
                verdict = self._retrying(
                    f"action {action.seq} {action.kind}", partial(executor.verify, action), executor
                )
                state = states.get(action.id)
                suffix = f" [journal: {state}]" if state else ""
                if verdict.already_done:
                    result.already_final += 1
                    self.progress(action, "already done" + suffix)
                elif verdict.ok:
                    result.would_apply += 1
                    self.progress(action, "would apply" + suffix)
                else:
                    result.skipped += 1
                    result.skips.append((action.seq, action.kind, verdict.reason))
                    self.progress(action, f"would skip: {verdict.reason}{suffix}", skip=True)
                self._tick()
        except BaseException:
            self.out(f"dry run stopped at {self.where}: {self._dry_counts(result)}")
            raise
        self.out(f"dry run: {self._dry_counts(result)}; nothing was changed")
        return result

    @staticmethod
    def _dry_counts(result: PurgeResult) -> str:
        return (
            f"{result.would_apply} would apply, {result.skipped} would skip, "
            f"{result.already_final} already done"
        )

    def _journal_states(self) -> dict[str, str]:
        """Report (never use) an existing journal: its state per action id, and a summary."""
        if not self.journal_path.exists():
            return {}
        try:
            records = read_journal(self.journal_path)
        except InputError as exc:
            self.out(f"journal {self.journal_path}: {exc.message}: --apply would refuse it")
            return {}
        if not records or records[0].get("event") != "begin":
            self.out(f"journal {self.journal_path} has no begin record: --apply would refuse it")
            return {}
        if records[0].get("plan_sha256") != self.plan.sha256:
            self.out(
                f"journal {self.journal_path} belongs to another plan: --apply would refuse it"
            )
            return {}
        states: dict[str, str] = {}
        for record in records:
            action_id = record.get("id")
            if not isinstance(action_id, str):
                continue
            if record["event"] in ("done", "skipped"):
                states[action_id] = record["event"]
            elif record["event"] == "started":
                states[action_id] = "started, not finished"
        counts = {
            state: sum(1 for s in states.values() if s == state)
            for state in ("done", "skipped", "started, not finished")
        }
        verified = [r for r in records if r["event"] == "verified"]
        self.out(
            f"journal {self.journal_path}: {counts['done']} done, {counts['skipped']} skipped, "
            f"{counts['started, not finished']} started but not finished"
            + (
                f"; last verification {'ok' if verified[-1].get('ok') else 'found problems'}"
                if verified
                else ""
            )
            + " (an --apply run resumes from it)"
        )
        return states

    # -- apply ----------------------------------------------------------------------------

    def apply(self, limiter: RateLimiter) -> PurgeResult:
        result = PurgeResult(applied=True, journal=self.journal_path)
        ops = Operations(limiter)
        journal = Journal.open(self.journal_path, self.plan.sha256)
        try:
            if self._finished(journal, result):
                return result
            finished = sum(1 for r in journal.records if r["event"] in ("done", "skipped"))
            self.out(
                f"applying plan {self.plan.directory}"
                + (f" ({self.total} actions)" if self.total is not None else "")
                + f", journal {self.journal_path}"
                + (f": resuming, {finished} actions already finished" if finished else "")
            )
            if journal.census is None:
                self.where = "the census before the first action"
                journal.record("census", **self._census())
            if not any(
                r["event"] in ("measured", "started", "done", "skipped") for r in journal.records
            ):
                # Once per journal, and only while nothing has been touched: a resumed run
                # (or a journal older than measurements) gets no "before" in mid-purge.
                self.where = "the measurement before the first action"
                self._record_measured(journal, "before", result)
            for action in self.plan.actions():
                self.where = _describe(action)
                done_before = result.done
                self._apply_one(action, journal, ops, result)
                if result.done > done_before:
                    self.freed += action.bytes
                self._tick()
            self.where = "the verification pass"
            result.verification = self._verify(journal)
            self.where = "the measurement after the verification"
            self._record_measured(journal, "after", result)
        except BaseException:
            self.out(
                f"stopped at {self.where}: {self._apply_counts(result, ops)}; the journal "
                f"{self.journal_path} is consistent, rerun to resume"
            )
            raise
        finally:
            journal.close()
        result.operations = ops.count
        self.out(f"applied: {self._apply_counts(result, ops)}")
        self._print_verification(result.verification)
        return result

    def _finished(self, journal: Journal, result: PurgeResult) -> bool:
        """A rerun of a finished purge (every action has its outcome and the journal ends with a
        verification, and its ``measured`` record if any): verifies again, read-only. When the
        outcome is the recorded one it says so in one line and writes nothing (but the
        ``after`` measurement of a measured journal whose run stopped right before it);
        otherwise it appends the one new ``verified`` record, and a new ``after``
        measurement."""
        records = journal.records
        actions = list(self.plan.actions())
        finals = [journal.final(a.id) for a in actions]
        outcomes = [r for r in records if r["event"] != "measured"]
        if not outcomes or outcomes[-1]["event"] != "verified" or None in finals:
            return False
        last = outcomes[-1]
        result.already_final = len(actions)
        for action, final in zip(actions, finals, strict=True):
            if final is not None and final["event"] == "skipped":
                result.skips.append((action.seq, action.kind, str(final.get("reason", ""))))
        done = sum(1 for f in finals if f is not None and f["event"] == "done")
        self.where = "the verification pass"
        fields = self._verification(journal)
        summary = (
            f"plan {self.plan.directory} was already applied ({done} done, "
            f"{len(actions) - done} skipped; journal {self.journal_path})"
        )
        if (fields["ok"], fields["problems"]) == (last.get("ok"), last.get("problems")):
            result.verification = last
            state = (
                "ok" if last.get("ok") else plural(int(last.get("problem_count") or 0), "problem")
            )
            measured = [r for r in records if r["event"] == "measured"]
            if measured and records[-1]["event"] != "measured":
                # Measured before, but the run stopped between verifying and measuring after.
                self.out(f"{summary}: verified again, unchanged ({state}); measuring after it")
                self.where = "the measurement after the verification"
                self._record_measured(journal, "after", result)
                return True
            self.out(f"{summary}: verified again, unchanged ({state}); nothing written")
            if not last.get("ok"):
                self._print_verification(last)
            return True
        self.out(f"{summary}: the verification changed since {last.get('at')}")
        result.verification = journal.record("verified", **fields)
        self._print_verification(result.verification)
        self.where = "the measurement after the verification"
        self._record_measured(journal, "after", result)
        return True

    def _apply_one(
        self, action: Action, journal: Journal, ops: Operations, result: PurgeResult
    ) -> None:
        final = journal.final(action.id)
        if final is not None:
            result.already_final += 1
            if final["event"] == "skipped":
                result.skips.append((action.seq, action.kind, str(final.get("reason", ""))))
            return
        executor = self.by_kind[action.kind]
        what = f"action {action.seq} {action.kind}"
        resumed = journal.was_started(action.id)
        verdict = self._retrying(what, partial(executor.verify, action), executor)
        if not (verdict.ok or verdict.already_done):
            fields: dict[str, Any] = {"reason": verdict.reason}
            if verdict.detail:
                fields["detail"] = verdict.detail
            if resumed:
                fields["after_partial_attempt"] = True
            journal.record(
                "skipped", seq=action.seq, id=action.id, kind=action.kind, **_json(fields)
            )
            result.skipped += 1
            result.skips.append((action.seq, action.kind, verdict.reason))
            self.progress(action, f"skipped: {verdict.reason}", skip=True)
            return
        journal.record("started", seq=action.seq, id=action.id, kind=action.kind)
        before = ops.count
        try:
            removed = self._retrying(what, partial(executor.apply, action, ops), executor) or {}
        except TargetChanged as exc:
            journal.record(
                "skipped", seq=action.seq, id=action.id, kind=action.kind, reason=exc.reason,
                at_last_check=True, completed_operations=ops.count - before,
            )  # fmt: skip
            result.skipped += 1
            result.skips.append((action.seq, action.kind, exc.reason))
            self.progress(action, f"skipped at its last check: {exc.reason}", skip=True)
            return
        extra: dict[str, Any] = {"already_done": True} if verdict.already_done else {}
        journal.record(
            "done", seq=action.seq, id=action.id, kind=action.kind, removed=_json(removed), **extra
        )
        result.done += 1
        note = " (resumed)" if resumed else ""
        self.progress(action, f"done{note}, removed {_removed_text(removed)}")

    def _verify(self, journal: Journal) -> dict[str, Any]:
        """Every done target is gone, and nothing outside the plan changed (census); recorded."""
        self.out("verifying: every done target is gone, and the census outside the plan")
        return journal.record("verified", **self._verification(journal))

    def _verification(self, journal: Journal) -> dict[str, Any]:
        """The fields of a ``verified`` record, from live state; writes nothing."""
        problems: list[str] = []
        checked = 0
        for action in self.plan.actions():
            final = journal.final(action.id)
            if final is None or final["event"] != "done":
                continue
            checked += 1
            executor = self.by_kind[action.kind]
            remaining = self._retrying(
                f"verifying action {action.seq} {action.kind}",
                partial(executor.verify_done, action),
                executor,
            )
            if remaining:
                problems.append(f"{_describe(action)}: {remaining}")
        census = journal.census or {}
        before = {k: v for k, v in census.items() if k not in ("event", "at")}
        after = self._census()
        problems.extend(census_differences(before, after))
        return _json(
            {
                "ok": not problems,
                "checked": checked,
                "problem_count": len(problems),
                "problems": problems[:MAX_RECORDED_PROBLEMS],
                "census_before": before,
                "census_after": after,
            }
        )

    def _print_verification(self, verification: dict[str, Any] | None) -> None:
        if verification is None:
            return
        if verification["ok"]:
            self.out(
                f"verification: ok ({verification['checked']} done actions checked, "
                "census outside the plan unchanged)"
            )
            return
        problems: list[str] = verification["problems"]
        self.out(f"verification: {plural(int(verification['problem_count']), 'problem')}")
        for problem in problems[:MAX_PRINTED_PROBLEMS]:
            self.out(f"  {problem}")
        if verification["problem_count"] > MAX_PRINTED_PROBLEMS:
            self.out(
                f"  ... {verification['problem_count'] - MAX_PRINTED_PROBLEMS} more; "
                f"the first {MAX_RECORDED_PROBLEMS} are in {self.journal_path}"
            )

    @staticmethod
    def _apply_counts(result: PurgeResult, ops: Operations) -> str:
        return (
            f"{result.done} done, {result.skipped} skipped, {result.already_final} already "
            f"finished by an earlier run, {ops.count} destructive operations"
        )
