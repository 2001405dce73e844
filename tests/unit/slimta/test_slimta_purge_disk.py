"""The slimta disk executor on a DiskStorage laid out as slimta writes it: exact deletions, drift
skipped with its reason, idempotent reruns, and a crash at every fault point resumed."""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mqforensics import systems
from mqforensics.errors import ConfigError
from mqforensics.options import fields_of
from mqforensics.purge import engine, faults
from mqforensics.purge.engine import run_purge
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Action, Plan, read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.slimta import purge as slimta_purge
from mqforensics.systems.slimta.digests import file_digest, hash_fields_digest
from mqforensics.systems.slimta.options import PurgeOptions
from mqforensics.systems.slimta.purge import DELETE_FILES, DiskExecutor, build_executors
from tests.purge_hooks import apply_with_hook

REPO = Path(__file__).resolve().parents[3]
THIRTY_DAYS = dt.timedelta(days=30)
POLICY = Policy(
    "p.toml",
    "0" * 64,
    (
        Rule("old-queued", "queued_mail", "retention period", older_than=THIRTY_DAYS),
        Rule("leftovers", "queue_leftovers", "storage hygiene", older_than=THIRTY_DAYS),
    ),
)

# Message ids as slimta makes them (uuid4().hex); the letter says what the test does to each.
OLD = "a" * 32  # planned, unchanged: deleted
RETRIED = "b" * 32  # planned, its .meta rewritten by a retry after the plan: skipped
TORN = "c" * 32  # planned with .env only; the .meta appears after the plan: skipped
TORN_STAYS = "d" * 32  # planned with .env only, still so: deleted
LONE_META = "e" * 32  # a .meta without .env: deleted
DELIVERED = "f" * 32  # planned, removed by slimta after the plan: already done
KEEP = "1" * 32  # not planned
KEEP_TORN = "2" * 32  # not planned, an .env without .meta: the census counts it
TMP = "tmpq8w2_zx1"  # a stale mkstemp file in tmp_dir: deleted
TMP_NEW = "tmpnew4bc9"  # not planned
FINDING = "0123456789abcdef"  # the finding every action here cites (plans are made from findings)


@pytest.fixture(autouse=True)
def no_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slimta_purge, "CENSUS_SETTLE_SECONDS", 0)


def _meta(attempts: int) -> bytes:
    return pickle.dumps({"timestamp": 1_790_000_000.5, "attempts": attempts}, protocol=5)


def _envelope(n: int) -> bytes:
    return pickle.dumps(("envelope stand-in", n, b"x" * (1000 * n)), protocol=5)


class Store:
    """One DiskStorage: env_dir, meta_dir and tmp_dir under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env, self.meta, self.tmp = root / "env", root / "meta", root / "tmp"
        for directory in (self.env, self.meta, self.tmp):
            directory.mkdir(parents=True, exist_ok=True)

    @property
    def census_key(self) -> str:
        return f"{self.env} (meta {self.meta})"

    def env_path(self, message_id: str) -> Path:
        return self.env / f"{message_id}.env"

    def meta_path(self, message_id: str) -> Path:
        return self.meta / f"{message_id}.meta"

    def write(self, message_id: str, n: int, *, env: bool = True, meta: bool = True) -> None:
        if env:
            self.env_path(message_id).write_bytes(_envelope(n))
        if meta:
            self.meta_path(message_id).write_bytes(_meta(0))

    def snapshot(self) -> dict[str, bytes]:
        return {
            str(path.relative_to(self.root)): path.read_bytes()
            for path in sorted(self.root.rglob("*"))
            if path.is_file()
        }

    def message_action(self, message_id: str, rule: str = "old-queued") -> Action:
        files = [self.env_path(message_id), self.meta_path(message_id)]
        return self._action(message_id, files, rule)

    def leftover_action(self, path: Path) -> Action:
        name = path.name.removesuffix(".meta")
        return self._action(name, [path], "leftovers")

    def _action(self, name: str, paths: list[Path], rule: str) -> Action:
        precondition = {}
        for path in paths:
            if path.exists():
                size, sha256 = file_digest(path)
                precondition[str(path)] = {"size": size, "sha256": sha256}
        target = {"backend": "disk", "store": str(self.env), "id": name,
                  "files": [str(p) for p in paths]}  # fmt: skip
        size = sum(v["size"] for v in precondition.values())
        return Action(DELETE_FILES, target, {"files": precondition}, (rule,), size, 0, "old",
                      findings=(FINDING,))  # fmt: skip


def make_plan(
    tmp_path: Path, actions: list[Action], name: str = "plan", inputs: dict | None = None
) -> Plan:
    written = write_plan(
        tmp_path / name, system="slimta", as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=POLICY, inputs={"disk": inputs or {}}, actions=actions,
        deferred=[], notes=[],
    )  # fmt: skip
    plan = read_plan(written.directory)
    record_approval(plan, "ops")
    return plan


def spool(root: Path) -> tuple[Store, list[Action]]:
    """The store as planned, and the plan's actions."""
    store = Store(root)
    for n, message_id in enumerate((OLD, RETRIED, DELIVERED, KEEP), 1):
        store.write(message_id, n)
    store.write(TORN, 5, meta=False)
    store.write(TORN_STAYS, 6, meta=False)
    store.write(KEEP_TORN, 7, meta=False)
    store.write(LONE_META, 8, env=False)
    (store.tmp / TMP).write_bytes(_envelope(9)[:700])  # torn mkstemp write
    actions = [store.message_action(i) for i in (OLD, RETRIED, TORN, TORN_STAYS, DELIVERED)]
    actions.append(store.leftover_action(store.meta_path(LONE_META)))
    actions.append(store.leftover_action(store.tmp / TMP))
    return store, actions


def queue_moves_on(store: Store) -> None:
    """What a running slimta does after the plan was made."""
    store.meta_path(RETRIED).write_bytes(_meta(1))  # a delivery attempt failed
    store.meta_path(TORN).write_bytes(_meta(0))  # the write finished after all
    store.env_path(DELIVERED).unlink()  # delivered: slimta removed it
    store.meta_path(DELIVERED).unlink()
    store.write("3" * 32, 10)  # a new message
    (store.tmp / TMP_NEW).write_bytes(b"being written")


def test_digests_are_unambiguous_and_streamed(tmp_path: Path) -> None:
    assert hash_fields_digest({b"a": b"bc"}) != hash_fields_digest({b"ab": b"c"})
    assert hash_fields_digest({b"x": b"1", b"y": b"2"}) == hash_fields_digest(
        dict(reversed(list({b"x": b"1", b"y": b"2"}.items())))
    )
    import hashlib

    expected = hashlib.sha256(b"1:a2:bc").hexdigest()
    assert hash_fields_digest({b"a": b"bc"}) == expected
    big = tmp_path / "big"
    data = os.urandom((1 << 20) * 2 + 17)
    big.write_bytes(data)
    assert file_digest(big) == (len(data), hashlib.sha256(data).hexdigest())


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    store, actions = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, actions)
    queue_moves_on(store)
    before = store.snapshot()
    lines: list[str] = []
    result = run_purge(plan, build_executors(plan), apply=False,
                       out=lines.append)  # fmt: skip
    assert store.snapshot() == before
    assert not (plan.directory / "journal.jsonl").exists()
    assert (result.would_apply, result.skipped, result.already_final) == (4, 2, 1)


def test_apply_deletes_exactly_the_named_files_and_skips_what_slimta_touched(
    tmp_path: Path,
) -> None:
    store, actions = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, actions)
    queue_moves_on(store)
    before = store.snapshot()
    lines: list[str] = []
    executors = build_executors(plan)
    result = run_purge(plan, executors, apply=True, out=lines.append)
    assert result.verification is not None and result.verification["ok"], lines
    assert (result.done, result.skipped) == (5, 2)
    assert [(seq, reason) for seq, _, reason in result.skips] == [
        (1, f"{RETRIED}.meta changed since the plan"),
        (2, f"{TORN}.meta appeared since the plan"),
    ]
    deleted = {
        f"env/{OLD}.env", f"meta/{OLD}.meta", f"env/{TORN_STAYS}.env",
        f"meta/{LONE_META}.meta", f"tmp/{TMP}",
    }  # fmt: skip
    after = store.snapshot()
    assert set(after) == set(before) - deleted
    assert after == {name: data for name, data in before.items() if name not in deleted}
    assert result.verification["census_before"] == {
        "DiskExecutor": {store.census_key: {"torn_messages_outside_the_plan": 1}}
    }
    records = read_journal(plan.directory / "journal.jsonl")
    removed = {r["seq"]: r["removed"] for r in records if r["event"] == "done"}
    old_bytes = len(_envelope(1)) + len(_meta(0))
    assert removed[0] == {"files": 2, "bytes": old_bytes}
    assert removed[4] == {"files": 0, "bytes": 0}  # DELIVERED: already gone
    # A rerun does nothing more.
    again = run_purge(plan, build_executors(plan), apply=True,
                      out=lines.append)  # fmt: skip
    assert (again.done, again.already_final, again.operations) == (0, 7, 0)
    assert store.snapshot() == after


def test_census_counts_half_deleted_messages_outside_the_plan_only(tmp_path: Path) -> None:
    store, actions = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, actions)
    executor = DiskExecutor(plan)
    key = store.census_key
    assert executor.census() == {key: {"torn_messages_outside_the_plan": 1}}  # KEEP_TORN
    store.env_path(OLD).unlink()  # named by the plan: not counted
    store.write("3" * 32, 3)  # slimta adds and removes whole messages
    store.env_path(KEEP).unlink()
    store.meta_path(KEEP).unlink()
    assert executor.census() == {key: {"torn_messages_outside_the_plan": 1}}
    store.meta_path("3" * 32).unlink()  # what a buggy purger could do to an unnamed message
    assert executor.census() == {key: {"torn_messages_outside_the_plan": 2}}


def test_census_waits_for_a_message_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, actions = spool(tmp_path / "spool")
    executor = DiskExecutor(make_plan(tmp_path, actions))
    monkeypatch.setattr(slimta_purge, "CENSUS_SETTLE_SECONDS", 1.0)
    store.write("4" * 32, 4, meta=False)  # slimta renamed the .env in; the .meta comes next
    writer = threading.Timer(0.1, lambda: store.meta_path("4" * 32).write_bytes(_meta(0)))
    writer.start()
    try:
        assert executor.census() == {store.census_key: {"torn_messages_outside_the_plan": 1}}
    finally:
        writer.join()


def _purge_with_hook(plan: Plan, hook: Any, **kwargs: Any) -> engine.PurgeResult:
    return apply_with_hook(plan, build_executors(plan), hook, **kwargs)


def _retry_meta(store: Store, message_id: str) -> None:
    """What slimta does on a delivery attempt: the .meta rewritten (mkstemp, then rename)."""
    fresh = store.tmp / "tmpretry"
    fresh.write_bytes(_meta(1))
    os.rename(fresh, store.meta_path(message_id))


def test_a_meta_rewritten_during_the_rate_wait_keeps_the_message(tmp_path: Path) -> None:
    store, _ = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, [store.message_action(i) for i in (OLD, KEEP)])
    env = store.env_path(KEEP).read_bytes()

    class Clock:
        now = 0.0

        def sleep(self, seconds: float) -> None:  # KEEP's slot: slimta retries it meanwhile
            _retry_meta(store, KEEP)
            self.now += seconds

    clock = Clock()
    limiter = engine.RateLimiter(1.33, clock=lambda: clock.now, sleep=clock.sleep)
    result = _purge_with_hook(plan, None, limiter=limiter)
    assert result.skips == [(1, DELETE_FILES, f"{KEEP}.meta changed since the plan")]
    assert result.done == 1 and not store.env_path(OLD).exists()
    assert store.env_path(KEEP).read_bytes() == env
    assert store.meta_path(KEEP).read_bytes() == _meta(1)
    (skip,) = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "skipped"]
    assert skip["at_last_check"] is True and skip["completed_operations"] == 0


@pytest.mark.parametrize("how", ["renamed over", "rewritten in place"])
def test_a_meta_changed_between_the_check_and_the_unlink_keeps_both_files(
    tmp_path: Path, how: str
) -> None:
    store, _ = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, [store.message_action(i) for i in (KEEP, OLD)])
    env, label = store.env_path(KEEP).read_bytes(), f"before unlink {KEEP}.env, {KEEP}.meta"

    def hook(point: str) -> None:
        if point != label:
            return
        if how == "renamed over":
            _retry_meta(store, KEEP)
        else:
            with open(store.meta_path(KEEP), "r+b") as handle:
                handle.write(_meta(1)[: len(_meta(0))])

    result = _purge_with_hook(plan, hook)
    (skip,) = result.skips
    assert skip[:2] == (0, DELETE_FILES)
    assert skip[2].startswith(f"{KEEP}.meta changed between the check and the delete (")
    assert skip[2].endswith("): kept")
    assert result.done == 1 and not store.meta_path(OLD).exists()
    # All or nothing: the .env, held first, is back under its name beside the new .meta.
    assert store.env_path(KEEP).read_bytes() == env
    assert store.meta_path(KEEP).read_bytes() != _meta(0)
    assert not [p for d in (store.env, store.meta) for p in d.iterdir() if p.name.startswith(".")]
    assert result.verification is not None and result.verification["ok"]


def test_purge_with_a_rate_rechecks_a_meta_rewritten_while_it_waits(tmp_path: Path) -> None:
    """The issue's reproduction: `purge --apply --rate 1.33`, the planned .meta of the second
    action rewritten as soon as that action is journaled as started (it then waits 0.75 s)."""
    store, _ = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, [store.message_action(i) for i in (OLD, KEEP)])
    journal = plan.directory / "journal.jsonl"
    command = [sys.executable, "-m", "mqforensics", "purge", str(plan.directory), "--apply",
               "--rate", "1.33"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if journal.exists() and b'"seq":1' in journal.read_bytes():  # its "started" record
            break
        time.sleep(0.005)
    data = bytearray(store.meta_path(KEEP).read_bytes())
    data[-1] ^= 1  # one byte of the planned .meta flipped
    store.meta_path(KEEP).write_bytes(bytes(data))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert f"1 slimta.delete_files: {KEEP}.meta changed since the plan".encode() in out
    assert store.meta_path(KEEP).read_bytes() == bytes(data) and store.env_path(KEEP).exists()
    assert not store.env_path(OLD).exists()


def test_a_symlink_in_place_of_a_planned_file_is_skipped(tmp_path: Path) -> None:
    store, actions = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, actions)
    store.meta_path(OLD).unlink()
    outside = tmp_path / "precious"
    outside.write_bytes(_meta(0))
    store.meta_path(OLD).symlink_to(outside)
    action = next(a for a in plan.actions() if a.target["id"] == OLD)
    verdict = DiskExecutor(plan).verify(action)
    assert (verdict.ok, verdict.reason) == (False, f"{OLD}.meta is no longer a regular file")


def test_plans_of_the_wrong_shape_are_refused_before_anything_happens(tmp_path: Path) -> None:
    store, _ = spool(tmp_path / "spool")
    good = store.message_action(OLD)
    swapped = Action(
        DELETE_FILES, {**good.target, "files": list(reversed(good.target["files"]))},
        good.precondition, good.rules, good.bytes, 0, "old", findings=good.findings,
    )  # fmt: skip
    relative = Action(
        DELETE_FILES, {**good.target, "files": [f"env/{OLD}.env"]}, {"files": {}},
        good.rules, 0, 0, "old", findings=good.findings,
    )  # fmt: skip
    other = Action(
        DELETE_FILES, {**good.target, "files": [str(store.env_path(KEEP))]}, {"files": {}},
        good.rules, 0, 0, "old", findings=good.findings,
    )  # fmt: skip
    for name, action, message in (
        ("swapped", swapped, "its .env, then its .meta"),
        ("relative", relative, "absolute path"),
        ("other", other, f"{KEEP}.env is not a file of {OLD}"),
    ):
        plan = make_plan(tmp_path, [action], name=name)
        with pytest.raises(ConfigError, match=message):
            build_executors(plan)


def test_the_engine_finds_the_slimta_executors_through_the_registry(tmp_path: Path) -> None:
    spec = systems.get("slimta")
    assert {item.name for item in fields_of(spec.purge_options)} == {"redis", "s3_endpoint"}
    _, actions = spool(tmp_path / "spool")
    plan = make_plan(tmp_path, actions)
    options = PurgeOptions(redis=None, s3_endpoint=None)
    found = systems.get(plan.header["system"]).executors(plan, options)
    assert [type(e).__name__ for e in found] == ["DiskExecutor"]
    empty = make_plan(tmp_path, [], name="empty")
    assert list(spec.executors(empty, options)) == []


def test_the_meta_dir_comes_from_the_plan_or_is_not_guessed(tmp_path: Path) -> None:
    store = Store(tmp_path / "spool")
    store.meta = store.env  # both kinds of file in one directory
    store.write(OLD, 1)
    store.write(KEEP_TORN, 2, meta=False)
    (store.tmp / TMP).write_bytes(b"x")
    only_tmp = [store.leftover_action(store.tmp / TMP)]
    unknown = DiskExecutor(make_plan(tmp_path, only_tmp, name="unknown"))
    assert unknown.census() == {
        str(store.env): {"not_counted": "the plan does not say where its .meta files are"}
    }
    layout = {"env_dir": str(store.env), "meta_dir": str(store.meta), "tmp_dir": str(store.tmp)}
    declared = DiskExecutor(make_plan(tmp_path, only_tmp, name="declared", inputs=layout))
    assert declared.census() == {str(store.env): {"torn_messages_outside_the_plan": 1}}


# -- a crash at every fault point ------------------------------------------------------------

CRASH_SCRIPT = """
import json
import sys
from pathlib import Path

from mqforensics.purge.engine import run_purge
from mqforensics.retention.manifest import read_plan
from mqforensics.systems.slimta import purge

purge.CENSUS_SETTLE_SECONDS = 0
plan = read_plan(sys.argv[1])
executors = purge.build_executors(plan)
result = run_purge(plan, executors, apply=True, journal_path=Path(sys.argv[2]), out=lambda _: None)
print(json.dumps({"done": result.done, "skipped": result.skipped,
                  "ok": result.verification["ok"]}))
"""


def test_a_crash_at_any_fault_point_is_resumed_to_the_uninterrupted_result(
    tmp_path: Path,
) -> None:
    script = tmp_path / "crash_purge.py"
    script.write_text(textwrap.dedent(CRASH_SCRIPT))
    template = tmp_path / "template"
    store, _ = spool(template)
    actions = [store.message_action(i) for i in (OLD, RETRIED, DELIVERED, TORN_STAYS)]
    actions.append(store.leftover_action(store.tmp / TMP))
    queue_moves_on(store)
    # The plan names files under `live`, where each run gets a fresh copy of the template.
    live = tmp_path / "live"
    moved = [
        Action(
            a.kind,
            json.loads(json.dumps(a.target).replace(str(template), str(live))),
            json.loads(json.dumps(a.precondition).replace(str(template), str(live))),
            a.rules, a.bytes, a.tombstones, a.reason, findings=a.findings,
        )
        for a in actions
    ]  # fmt: skip
    plan = make_plan(tmp_path, moved)
    live_store = Store(live)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQF_PURGE_")}

    def purge(journal: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(template, live)
        argv = [sys.executable, str(script), str(plan.directory), str(journal)]
        return subprocess.run(argv, env={**env, **extra}, cwd=REPO, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    trace = tmp_path / "trace"
    process = purge(tmp_path / "uninterrupted.jsonl", {faults.FAULT_TRACE: str(trace)})
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout) == {"done": 4, "skipped": 1, "ok": True}
    expected = live_store.snapshot()
    labels = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    # Each message's files are held, .env first, then unlinked; nothing else is.
    held = [label.removeprefix("held ") for label in labels if label.startswith("held ")]
    unlinked = [label.removeprefix("unlinked ") for label in labels if "unlinked" in label]
    assert held == unlinked == [f"{OLD}.env", f"{OLD}.meta", f"{TORN_STAYS}.env", TMP]
    points = len(labels)
    # begin, census; OLD 9, RETRIED skipped 1, DELIVERED 3, TORN_STAYS 7, TMP 7; verified
    assert points == 2 + 9 + 1 + 3 + 7 + 7 + 1

    for k in range(1, points + 1):
        journal = tmp_path / f"crash-{k}.jsonl"
        process = purge(journal, {faults.FAULT_AT: str(k)})
        assert process.returncode == -signal.SIGKILL, f"point {k}: {process.stderr}"
        if labels[k - 1] == f"unlinked {OLD}.env":
            # Neither file under its name: slimta's load lists neither.
            left = live_store.snapshot()
            assert f"meta/.{OLD}.meta.mqf-purge" in left
            assert f"meta/{OLD}.meta" not in left and f"env/{OLD}.env" not in left
        lines: list[str] = []
        resumed_plan = read_plan(plan.directory)
        result = run_purge(resumed_plan, build_executors(resumed_plan),
                           apply=True, journal_path=journal, out=lines.append)  # fmt: skip
        assert result.verification and result.verification["ok"], (k, labels[k - 1], lines)
        assert live_store.snapshot() == expected, f"point {k} ({labels[k - 1]})"
        records = read_journal(journal)
        finals = sorted(r["id"] for r in records if r["event"] in ("done", "skipped"))
        assert finals == sorted(a.id for a in plan.actions()), f"point {k}"
