"""The purge engine against fake executors: resume, drift, approval, dry run, retries, crashes.

The fakes stand for a live system: `DictExecutor` keeps objects in a dict, and the crash test's
executor keeps each object as a file, so a purger process killed at any fault point leaves real
state behind for the rerun to resume from.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mqforensics import cli
from mqforensics.api import system_of_plan
from mqforensics.errors import (
    AuthenticationFailed,
    ConfigError,
    PlanModified,
    PlanNotApproved,
    ServerUnavailable,
)
from mqforensics.purge import engine, faults, retry
from mqforensics.purge.contract import Operations, TargetChanged, Verdict
from mqforensics.purge.engine import run_purge
from mqforensics.purge.journal import Journal, read_journal
from mqforensics.retention.manifest import Action, Plan, approve, read_plan, write_plan
from mqforensics.systems import load_policy

REPO = Path(__file__).resolve().parents[2]
KIND = "fake.delete"
POLICY = """version = 1
[[rules]]
id = "r1"
kind = "consumed_mail"
older_than = "1d"
legal_basis = "test"
"""


def make_plan(
    tmp_path: Path,
    contents: dict[str, str],
    *,
    kind: str = KIND,
    approved: bool = True,
    system: str = "fake",
    name: str = "plan",
) -> Plan:
    """A plan deleting each key of `contents`, provided it still holds that content."""
    policy_path = tmp_path / "policy.toml"
    policy_path.write_text(POLICY)
    actions = [
        Action(
            kind=kind,
            target={"key": key},
            precondition={"content": value},
            rules=("r1",),
            bytes=len(value),
            tombstones=0,
            reason="consumed",
            findings=("f0123456789abcdef",),
        )
        for key, value in contents.items()
    ]
    plan = write_plan(
        tmp_path / name,
        system=system,
        as_of=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        policy=load_policy(policy_path),
        inputs={"source": "test"},
        actions=actions,
        deferred=[],
        notes=[],
    )
    if approved:
        approve(plan.directory, by="tester")
    return read_plan(plan.directory)


class DictExecutor:
    """A live system of keys -> contents; records every call so tests can count them."""

    kinds: tuple[str, ...] = (KIND,)

    def __init__(self, store: dict[str, str], plan: Plan) -> None:
        self.store = store
        self.named = {action.target["key"] for action in plan.actions()}
        self.verified: list[str] = []
        self.applied: list[str] = []
        self.fail_verify: dict[str, list[BaseException]] = {}
        self.fail_apply: dict[str, list[BaseException]] = {}
        self.also_delete: dict[str, str] = {}  # a buggy apply that touches something else
        self.closed = False

    def classify(self, exc: BaseException) -> str | None:
        if isinstance(exc, TimeoutError):
            return "retry"
        if isinstance(exc, PermissionError):
            return "auth"
        return None

    def verify(self, action: Action) -> Verdict:
        key = action.target["key"]
        self.verified.append(key)
        if self.fail_verify.get(key):
            raise self.fail_verify[key].pop(0)
        return self.check(action)

    def check(self, action: Action) -> Verdict:
        key = action.target["key"]
        if key not in self.store:
            return Verdict(ok=False, already_done=True)
        if self.store[key] != action.precondition["content"]:
            return Verdict(ok=False, reason=f"{key} changed since planning", detail={"k": key})
        return Verdict(ok=True)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        key = action.target["key"]
        self.applied.append(key)
        if self.fail_apply.get(key):
            raise self.fail_apply[key].pop(0)
        removed = 0
        if ops.destructive("delete", functools.partial(self.check, action)):
            if self.store.get(key) != action.precondition["content"]:  # a conditional delete
                raise TargetChanged(f"{key} changed between the check and the delete")
            del self.store[key]
            ops.completed("delete")
            removed = 1
        if key in self.also_delete:
            self.store.pop(self.also_delete[key], None)
        return {"objects": removed}

    def census(self) -> dict[str, Any]:
        others = {k: v for k, v in sorted(self.store.items()) if k not in self.named}
        digest = hashlib.sha256(json.dumps(others).encode()).hexdigest()
        return {"objects": len(others), "sha256": digest}

    def verify_done(self, action: Action) -> str | None:
        key = action.target["key"]
        return f"{key} still present" if key in self.store else None

    def close(self) -> None:
        self.closed = True


STORE = {"a": "1", "b": "2", "c": "3", "keep": "k"}
PLANNED = {"a": "1", "b": "2", "c": "3"}


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    return make_plan(tmp_path, PLANNED)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries in the engine record their delays instead of sleeping."""
    delays: list[float] = []
    monkeypatch.setattr(
        engine, "call_with_retries", functools.partial(retry.call_with_retries, sleep=delays.append)
    )
    return delays


def events(path: Path) -> list[tuple[str, int | None]]:
    return [(r["event"], r.get("seq")) for r in read_journal(path)]


def test_apply_deletes_what_the_plan_names_and_verifies(plan: Plan) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, out=out.append)
    assert store == {"keep": "k"}
    assert (result.done, result.skipped, result.already_final) == (3, 0, 0)
    assert result.operations == 3 and result.applied
    assert result.verification is not None and result.verification["ok"]
    journal = plan.directory / "journal.jsonl"
    assert events(journal) == [
        ("begin", None), ("census", None),
        ("started", 0), ("done", 0), ("started", 1), ("done", 1), ("started", 2), ("done", 2),
        ("verified", None),
    ]  # fmt: skip
    records = read_journal(journal)
    assert records[0]["plan_sha256"] == plan.sha256
    assert records[1]["DictExecutor"] == {"objects": 1, "sha256": executor.census()["sha256"]}
    assert records[3]["removed"] == {"objects": 1} and records[3]["kind"] == KIND
    assert any("verification: ok (3 done actions checked" in line for line in out)


def test_resume_skips_finished_actions_and_reapplies_a_started_one_once(plan: Plan) -> None:
    ids = [action.id for action in plan.actions()]
    store = {"b": "2", "c": "3", "keep": "k"}  # "a" was deleted by the interrupted run
    executor = DictExecutor(store, plan)
    with Journal.open(plan.directory / "journal.jsonl", plan.sha256) as journal:
        journal.record("census", DictExecutor=executor.census())
        journal.record("started", seq=0, id=ids[0], kind=KIND)
        journal.record("done", seq=0, id=ids[0], kind=KIND, removed={"objects": 1})
        journal.record("started", seq=1, id=ids[1], kind=KIND)  # crashed during this one
    result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert executor.verified == ["b", "c"] and executor.applied == ["b", "c"]
    assert (result.done, result.already_final) == (2, 1)
    assert store == {"keep": "k"}
    assert result.verification is not None and result.verification["ok"]
    finals = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "done"]
    assert [r["seq"] for r in finals] == [0, 1, 2]
    # A rerun of a finished plan touches nothing, verifies again and writes nothing.
    before = (plan.directory / "journal.jsonl").read_bytes()
    executor = DictExecutor(store, plan)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, out=out.append)
    assert executor.verified == executor.applied == [] and result.already_final == 3
    assert (plan.directory / "journal.jsonl").read_bytes() == before
    assert len(out) == 1 and "was already applied (3 done, 0 skipped" in out[0]
    assert out[0].endswith("verified again, unchanged (ok); nothing written")


def test_an_action_whose_target_is_already_gone_is_finished_not_skipped(plan: Plan) -> None:
    store = {"b": "2", "c": "3", "keep": "k"}
    executor = DictExecutor(store, plan)
    result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert result.done == 3 and executor.applied == ["a", "b", "c"]
    done = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "done"]
    assert done[0]["removed"] == {"objects": 0} and done[0]["already_done"] is True


def test_drift_is_skipped_with_its_reason_and_never_retried(plan: Plan) -> None:
    store = dict(STORE, b="changed")
    executor = DictExecutor(store, plan)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, out=out.append)
    assert store == {"b": "changed", "keep": "k"} and executor.applied == ["a", "c"]
    assert result.skips == [(1, KIND, "b changed since planning")] and result.skipped == 1
    (skip,) = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "skipped"]
    assert skip["reason"] == "b changed since planning" and skip["detail"] == {"k": "b"}
    assert skip["seq"] == 1 and skip["kind"] == KIND
    assert any("skipped: b changed since planning" in line for line in out)
    assert result.verification is not None and result.verification["ok"]
    executor = DictExecutor(store, plan)
    result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert executor.verified == [] and result.skips == [(1, KIND, "b changed since planning")]


class Clock:
    """A monotonic clock for the rate limiter whose sleep is the moment the live system acts."""

    def __init__(self, during_wait: Any) -> None:
        self.now = 0.0
        self.waits = 0
        self.during_wait = during_wait

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits += 1
        self.during_wait(self.waits)
        self.now += seconds


def test_a_target_changed_during_the_rate_wait_is_skipped_at_its_last_check(plan: Plan) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    # The first delete starts at once; "b" waits for its slot after the engine verified it,
    # and is rewritten meanwhile.
    clock = Clock(lambda n: store.update(b="rewritten") if n == 1 else None)
    limiter = engine.RateLimiter(2.0, clock=clock, sleep=clock.sleep)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, limiter=limiter, out=out.append)
    assert store == {"b": "rewritten", "keep": "k"} and clock.waits == 2
    assert executor.verified == ["a", "b", "c"]  # b passed the engine's verify before its wait
    assert result.skips == [(1, KIND, "b changed since planning")] and result.done == 2
    (skip,) = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "skipped"]
    assert skip["at_last_check"] is True and skip["completed_operations"] == 0
    assert any("skipped at its last check: b changed since planning" in line for line in out)
    assert result.verification is not None and result.verification["ok"]


def test_nothing_waits_between_the_last_check_and_the_delete(plan: Plan) -> None:
    trace: list[str] = []
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    original = executor.check

    def check(action: Action) -> Verdict:
        trace.append(f"check {action.target['key']}")
        return original(action)

    executor.check = check  # type: ignore[method-assign]
    clock = Clock(lambda n: trace.append("wait"))
    faults.set_hook(trace.append)
    try:
        run_purge(
            plan, [executor], apply=True, limiter=engine.RateLimiter(1.0, clock, clock.sleep),
            out=lambda line: None,
        )  # fmt: skip
    finally:
        faults.set_hook(None)
    steps = [t for t in trace if not t.startswith("journal")]
    # Each key: the engine's verify (a check), then the rate slot, the wait, the last check,
    # and the delete right after it.
    assert steps == [
        "check a", "rate slot delete", "check a", "before delete", "after delete",
        "check b", "rate slot delete", "wait", "check b", "before delete", "after delete",
        "check c", "rate slot delete", "wait", "check c", "before delete", "after delete",
    ]  # fmt: skip


def test_a_change_between_check_and_delete_is_refused_by_the_conditional_delete(
    plan: Plan,
) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    deleting: list[str] = []

    def hook(label: str) -> None:
        if label == "before delete" and len(deleting) == 1:
            store["b"] = "rewritten"
        if label == "before delete":
            deleting.append(label)

    faults.set_hook(hook)
    try:
        result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    finally:
        faults.set_hook(None)
    assert store == {"b": "rewritten", "keep": "k"}
    reason = "b changed between the check and the delete"
    assert result.skips == [(1, KIND, reason)] and result.done == 2


def test_a_retried_delete_waits_then_checks_again(
    plan: Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_apply["b"] = [TimeoutError("slow")]

    def backoff(seconds: float) -> None:
        store["b"] = "rewritten during the back-off"

    monkeypatch.setattr(
        engine, "call_with_retries", functools.partial(retry.call_with_retries, sleep=backoff)
    )
    result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert store == {"b": "rewritten during the back-off", "keep": "k"}
    assert executor.applied == ["a", "b", "b", "c"] and result.skips[0][:2] == (1, KIND)


def test_apply_refuses_an_unapproved_plan(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, PLANNED, approved=False)
    store = dict(STORE)
    with pytest.raises(PlanNotApproved):
        run_purge(plan, [DictExecutor(store, plan)], apply=True, out=lambda line: None)
    assert store == STORE and not (plan.directory / "journal.jsonl").exists()


def test_apply_refuses_an_approval_of_another_hash(plan: Plan) -> None:
    approval = plan.directory / "approval.json"
    record = json.loads(approval.read_text())
    approval.write_text(json.dumps(dict(record, plan_sha256="0" * 64)))
    store = dict(STORE)
    with pytest.raises(PlanModified):
        run_purge(plan, [DictExecutor(store, plan)], apply=True, out=lambda line: None)
    assert store == STORE


def test_a_journal_of_another_plan_is_refused(tmp_path: Path, plan: Plan) -> None:
    other = tmp_path / "other.jsonl"
    Journal.open(other, "f" * 64).close()
    store = dict(STORE)
    with pytest.raises(PlanModified):
        run_purge(plan, [DictExecutor(store, plan)], apply=True, journal_path=other, out=print)
    assert store == STORE


def test_dry_run_changes_nothing_and_writes_no_journal(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, PLANNED, approved=False)
    store = {"a": "1", "b": "changed", "keep": "k"}
    executor = DictExecutor(store, plan)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=False, out=out.append)
    assert store == {"a": "1", "b": "changed", "keep": "k"} and executor.applied == []
    assert not (plan.directory / "journal.jsonl").exists()
    assert (result.would_apply, result.skipped, result.already_final) == (1, 1, 1)
    assert not result.applied and result.verification is None
    assert out[0] == "plan not approved: --apply would refuse it"
    text = "\n".join(out)
    assert f"action 0 {KIND}" in text and ": would apply" in text
    assert "would skip: b changed since planning" in text and ": already done" in text
    assert out[-1] == "dry run: 1 would apply, 1 would skip, 1 already done; nothing was changed"


def test_dry_run_reports_an_existing_journal_without_using_it(plan: Plan) -> None:
    ids = [action.id for action in plan.actions()]
    path = plan.directory / "journal.jsonl"
    with Journal.open(path, plan.sha256) as journal:
        journal.record("started", seq=0, id=ids[0], kind=KIND)
        journal.record("done", seq=0, id=ids[0], kind=KIND, removed={})
        journal.record("started", seq=1, id=ids[1], kind=KIND)
    before = path.read_bytes()
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    out: list[str] = []
    result = run_purge(plan, [executor], apply=False, out=out.append)
    assert path.read_bytes() == before and store == STORE
    assert executor.verified == ["a", "b", "c"] and result.would_apply == 3
    assert any("1 done, 0 skipped, 1 started but not finished" in line for line in out)
    assert any("would apply [journal: done]" in line for line in out)


def test_every_kind_needs_exactly_one_executor(tmp_path: Path, plan: Plan) -> None:
    store = dict(STORE)
    with pytest.raises(ConfigError, match=r"no executor for action kind\(s\) other.kind"):
        other = make_plan(tmp_path, {"x": "1"}, kind="other.kind", name="other")
        run_purge(other, [DictExecutor(store, other)], apply=True, out=print)
    with pytest.raises(ConfigError, match="two executors"):
        run_purge(plan, [DictExecutor(store, plan), DictExecutor(store, plan)], apply=False)
    assert not (plan.directory / "journal.jsonl").exists()


def test_transient_errors_are_retried_inside_the_run(plan: Plan, no_sleep: list[float]) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_verify["a"] = [TimeoutError("slow"), TimeoutError("slow")]
    executor.fail_apply["b"] = [TimeoutError("slow")]
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, out=out.append)
    assert result.done == 3 and store == {"keep": "k"} and no_sleep == [0.5, 1.0, 0.5]
    assert executor.applied == ["a", "b", "b", "c"]
    assert any("retry 1/5 in 0.5s" in line for line in out)


def test_an_outage_stops_the_run_with_a_consistent_journal(
    plan: Plan, no_sleep: list[float]
) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_apply["b"] = [TimeoutError("no replica")] * 6
    out: list[str] = []
    with pytest.raises(ServerUnavailable, match=r"action 1 fake\.delete: gave up after 6 attempts"):
        run_purge(plan, [executor], apply=True, out=out.append)
    assert no_sleep == [0.5, 1.0, 2.0, 4.0, 8.0]
    path = plan.directory / "journal.jsonl"
    assert events(path)[-3:] == [("started", 0), ("done", 0), ("started", 1)]
    assert any(line.startswith("stopped at action 1 fake.delete") for line in out)
    assert any("1 done, 0 skipped" in line and "rerun to resume" in line for line in out)
    # The rerun resumes at the started action and finishes.
    executor = DictExecutor(store, plan)
    result = run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert executor.applied == ["b", "c"] and store == {"keep": "k"}
    assert result.verification is not None and result.verification["ok"]


@pytest.mark.parametrize(("retries", "delays"), [(0, []), (2, [0.5, 1.0])])
def test_retries_bound_the_tries_of_each_call(
    plan: Plan, no_sleep: list[float], retries: int, delays: list[float]
) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_apply["a"] = [TimeoutError("no replica")] * (retries + 1)
    tries = "1 attempt" if retries == 0 else f"{retries + 1} attempts"
    with pytest.raises(ServerUnavailable, match=rf"fake\.delete: gave up after {tries}: Timeout"):
        run_purge(plan, [executor], apply=True, out=lambda line: None, retries=retries)
    assert no_sleep == delays and executor.applied == ["a"] * (retries + 1)
    # One failure fewer than the tries: the call succeeds on its last try.
    executor = DictExecutor(store, plan)
    executor.fail_apply["a"] = [TimeoutError("no replica")] * retries
    result = run_purge(plan, [executor], apply=True, out=lambda line: None, retries=retries)
    assert result.done == 3 and store == {"keep": "k"}


def test_a_refused_login_stops_at_once(plan: Plan, no_sleep: list[float]) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_verify["a"] = [PermissionError("user admin password s3cret refused")]
    with pytest.raises(AuthenticationFailed) as caught:
        run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert "s3cret" not in str(caught.value) and no_sleep == []
    assert events(plan.directory / "journal.jsonl") == [("begin", None), ("census", None)]
    assert store == STORE


def test_an_interrupt_leaves_a_resumable_journal(plan: Plan) -> None:
    store = dict(STORE)
    executor = DictExecutor(store, plan)
    executor.fail_apply["c"] = [KeyboardInterrupt()]
    with pytest.raises(KeyboardInterrupt):
        run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert events(plan.directory / "journal.jsonl")[-1] == ("started", 2)
    executor = DictExecutor(store, plan)
    run_purge(plan, [executor], apply=True, out=lambda line: None)
    assert executor.applied == ["c"] and store == {"keep": "k"}


def test_verification_reports_a_changed_census_and_a_target_still_present(plan: Plan) -> None:
    store = dict(STORE, other="o")
    executor = DictExecutor(store, plan)
    executor.also_delete["a"] = "other"  # a buggy executor removes something the plan omits
    out: list[str] = []
    result = run_purge(plan, [executor], apply=True, out=out.append)
    verification = result.verification
    assert verification is not None and not verification["ok"]
    assert verification["problem_count"] == 2
    assert verification["problems"][0].startswith("census DictExecutor objects: before 2, after 1")
    assert verification["census_before"]["DictExecutor"]["objects"] == 2
    assert "verification: 2 problems" in out
    # A done target that reappeared is reported by the next verification pass.
    store["a"] = "1"
    result = run_purge(plan, [DictExecutor(store, plan)], apply=True, out=lambda line: None)
    assert result.verification is not None
    assert any("a still present" in p for p in result.verification["problems"])


def test_progress_prints_the_first_actions_then_every_hundredth(tmp_path: Path) -> None:
    contents = {f"k{i:03}": "v" for i in range(250)}
    plan = make_plan(tmp_path, contents)
    out: list[str] = []
    run_purge(plan, [DictExecutor(dict(contents), plan)], apply=True, out=out.append)
    per_action = [line for line in out if line.startswith("[")]
    assert [line.split("]")[0] for line in per_action] == [
        *(f"[{i}/250" for i in range(1, 21)), "[100/250", "[200/250",
    ]  # fmt: skip
    assert "applied: 250 done, 0 skipped" in out[-2]


def test_executors_are_found_by_the_plans_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(tmp_path, PLANNED)
    register_fake_system(monkeypatch)
    spec = system_of_plan(plan)
    (executor,) = spec.executors(plan, spec.purge_options())
    assert isinstance(executor, DictExecutor)
    unknown = make_plan(tmp_path, PLANNED, system="nosuch", name="unknown")
    with pytest.raises(ConfigError, match="no purger for system 'nosuch'"):
        system_of_plan(read_plan(unknown.directory))


# -- the command line ------------------------------------------------------------------------

CLI_STORE: dict[str, str] = {}
BUILT: list[DictExecutor] = []


def build_fake_executors(plan: Plan, args: Any) -> list[DictExecutor]:
    BUILT.append(DictExecutor(CLI_STORE, plan))
    return BUILT[-1:]


def register_fake_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system ``fake`` in the registry, with nothing but its executors (this file's)."""
    from mqforensics import systems
    from mqforensics.spec import NoPurgeOptions, PlanParts, System

    def unused(*_args: Any) -> Any:
        raise AssertionError("not part of these tests")

    spec = System(
        name="fake", title="fake store", options=NoPurgeOptions, load=unused, settings=unused,
        checks=(), plan=lambda *_args: PlanParts(), rule_kinds=(), executors=build_fake_executors,
    )  # fmt: skip
    monkeypatch.setitem(systems.SYSTEMS, "fake", "")
    monkeypatch.setitem(systems._loaded, "fake", spec)


def test_the_purge_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    register_fake_system(monkeypatch)
    unapproved = make_plan(tmp_path, PLANNED, approved=False, name="unapproved")
    CLI_STORE.clear()
    CLI_STORE.update(STORE, b="changed")
    BUILT.clear()
    assert cli.main(["purge", str(unapproved.directory), "--apply"]) == 2
    assert "PlanNotApproved" in capsys.readouterr().err and BUILT[-1].closed
    assert cli.main(["purge", str(unapproved.directory)]) == 0
    output = capsys.readouterr().out
    assert "1 action would be skipped:\n  1 fake.delete: b changed" in output
    plan = make_plan(tmp_path, PLANNED)
    assert cli.main(["purge", str(plan.directory), "--apply", "--rate", "1000"]) == 0
    assert "1 action skipped:" in capsys.readouterr().out
    assert CLI_STORE == {"b": "changed", "keep": "k"}
    # Verification problems exit 1: a done target is back.
    CLI_STORE["a"] = "1"
    assert cli.main(["purge", str(plan.directory), "--apply"]) == 1
    assert cli.main(["purge", str(plan.directory), "--rate", "0"]) == 2
    assert "--rate '0'" in capsys.readouterr().err
    for retries in ("-1", "x", "1.5"):
        assert cli.main(["purge", str(plan.directory), "--retries", retries]) == 2
        assert f"--retries {retries!r} is not a count of retries" in capsys.readouterr().err


def test_the_purge_command_passes_its_retries(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_sleep: list[float],
) -> None:
    register_fake_system(monkeypatch)
    plan = make_plan(tmp_path, PLANNED)
    CLI_STORE.clear()
    CLI_STORE.update(STORE)
    failing = TimeoutError("no replica")
    monkeypatch.setattr(DictExecutor, "census", lambda self: (_ for _ in ()).throw(failing))
    assert cli.main(["purge", str(plan.directory), "--apply", "--retries", "1"]) == 2
    err = capsys.readouterr().err
    assert "ServerUnavailable: census DictExecutor: gave up after 2 attempts" in err
    assert no_sleep == [0.5] and CLI_STORE == STORE
    assert cli.main(["purge", str(plan.directory), "--apply"]) == 2  # the default: 5 retries
    assert no_sleep == [0.5, 0.5, 1.0, 2.0, 4.0, 8.0]


# -- crashes at every fault point ------------------------------------------------------------

CRASH_SCRIPT = '''
"""Apply a plan to a directory store; each planned object is a data file and its marker."""

import hashlib
import json
import sys
from pathlib import Path

from mqforensics.purge.contract import Verdict
from mqforensics.purge.engine import run_purge
from mqforensics.retention.manifest import read_plan


class FileExecutor:
    kinds = ("fake.delete",)

    def __init__(self, store, plan):
        self.store = store
        self.named = set()
        for action in plan.actions():
            self.named |= {action.target["key"], action.target["key"] + ".marker"}

    def paths(self, action):
        data = self.store / action.target["key"]
        return data, data.with_name(data.name + ".marker")

    def classify(self, exc):
        return None

    def verify(self, action):
        data, marker = self.paths(action)
        if data.exists():
            if data.read_text() != action.precondition["content"]:
                return Verdict(False, "content changed")
            return Verdict(True)
        if marker.exists():
            return Verdict(True, detail={"data": "already gone"})  # half done: finish it
        return Verdict(False, already_done=True)

    def apply(self, action, ops):
        removed = {"data": 0, "markers": 0}
        # The data first, then its marker: like a partition and its deletedmailsv2 rows.
        for key, path in zip(("data", "markers"), self.paths(action)):
            if ops.destructive(f"delete {key}", lambda path=path: self.check(action, path)):
                path.unlink()
                ops.completed(f"delete {key}")
                removed[key] += 1
        return removed

    def check(self, action, path):
        if not path.exists():
            return Verdict(False, already_done=True)
        if path.suffix != ".marker" and path.read_text() != action.precondition["content"]:
            return Verdict(False, "content changed")
        return Verdict(True)

    def census(self):
        others = sorted(p for p in self.store.iterdir() if p.name not in self.named)
        digest = hashlib.sha256()
        for path in others:
            digest.update(path.name.encode() + b"\\0" + path.read_bytes() + b"\\0")
        return {"files": len(others), "sha256": digest.hexdigest()}

    def verify_done(self, action):
        left = [path.name for path in self.paths(action) if path.exists()]
        return f"{', '.join(left)} still present" if left else None

    def close(self):
        pass


def main(argv):
    plan = read_plan(argv[0])
    result = run_purge(
        plan,
        [FileExecutor(Path(argv[1]), plan)],
        apply=True,
        journal_path=Path(argv[2]),
        out=lambda line: None,
    )
    return {"done": result.done, "skipped": result.skipped, "ok": result.verification["ok"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
'''


def snapshot(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(directory.iterdir())}


def test_a_crash_at_any_fault_point_is_resumed_to_the_uninterrupted_result(
    tmp_path: Path,
) -> None:
    script = tmp_path / "crash_purge.py"
    script.write_text(textwrap.dedent(CRASH_SCRIPT))
    spec = importlib.util.spec_from_file_location("crash_purge", script)
    assert spec is not None and spec.loader is not None
    crash_purge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(crash_purge)

    # a, b, c: data + marker each; d drifted since planning; e already gone; keep*: unplanned.
    template = tmp_path / "template"
    template.mkdir()
    files = {
        "a": "1", "a.marker": "m", "b": "2", "b.marker": "m", "c": "3", "c.marker": "m",
        "d": "changed", "keep": "k", "keep.marker": "km",
    }  # fmt: skip
    for name, content in files.items():
        (template / name).write_text(content)
    plan = make_plan(tmp_path, {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"})
    unplanned = {"d": "changed", "keep": "k", "keep.marker": "km"}

    env = {k: v for k, v in os.environ.items() if not k.startswith("MQF_PURGE_")}

    def purge(
        name: str, extra_env: dict[str, str]
    ) -> tuple[subprocess.CompletedProcess[str], Path]:
        store, journal = tmp_path / name, tmp_path / f"{name}.jsonl"
        if not store.exists():
            shutil.copytree(template, store)
        argv = [sys.executable, str(script), str(plan.directory), str(store), str(journal)]
        process = subprocess.run(
            argv, env={**env, **extra_env}, cwd=REPO, capture_output=True, text=True, timeout=60
        )
        return process, store

    trace = tmp_path / "trace"
    process, store = purge("uninterrupted", {faults.FAULT_TRACE: str(trace)})
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout) == {"done": 4, "skipped": 1, "ok": True}
    expected = snapshot(store)
    assert expected == unplanned
    labels = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    assert labels.count("before delete data") == 3 and labels.count("after delete markers") == 3
    assert labels[:2] == ["journal begin", "journal census"] and labels[-1] == "journal verified"
    assert labels.count("rate slot delete data") == 4  # e's check finds it gone
    points = len(labels)  # begin, census, 3 x 8 for a b c, skipped d, 4 for e, verified
    assert points == 32

    for k in range(1, points + 1):
        process, store = purge(f"crash-{k}", {faults.FAULT_AT: str(k)})
        assert process.returncode == -signal.SIGKILL, f"point {k}: {process.stderr}"
        assert process.stdout == ""
        journal = tmp_path / f"crash-{k}.jsonl"
        summary = crash_purge.main([str(plan.directory), str(store), str(journal)])
        assert summary["ok"], f"point {k} ({labels[k - 1]})"
        assert snapshot(store) == expected, f"point {k} ({labels[k - 1]})"
        records = read_journal(journal)
        finals = [r["id"] for r in records if r["event"] in ("done", "skipped")]
        assert sorted(finals) == sorted(a.id for a in plan.actions()), f"point {k}"
        assert [r["event"] for r in records].count("census") == 1
