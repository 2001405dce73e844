"""Reclamation plans from an audit's findings, and the segment executor, on queue directories
written with the format: planning reads only findings, and the executor re-checks everything."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from mqforensics import cli, subjects
from mqforensics.errors import ConfigError
from mqforensics.file_digest import file_digest
from mqforensics.purge.engine import run_purge
from mqforensics.purge.held_unlink import held_path
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule, subject_hash
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue import plan as planner
from mqforensics.systems.logqueue.plan import (
    DAMAGED_SAVED_POSITIONS,
    DELETE_SEGMENT,
    NO_SAVED_POSITIONS,
    SAVED_POSITIONS_BEHIND,
    STILL_READ,
)
from mqforensics.systems.logqueue.purge import SegmentExecutor
from tests.purge_hooks import apply_with_hook

REPO = Path(__file__).resolve().parents[3]
T0 = 1_800_000_000_000_000
POLICY = Policy("p.toml", "0" * 64, (Rule("gc", "garbage_segments", "storage hygiene"),))
POLICY_TEXT = 'version = 1\n[[rules]]\nid = "gc"\nkind = "garbage_segments"\nlegal_basis = "x"\n'
AS_OF = "2027-01-16T00:00:00Z"


def _env(recipients: list[str]) -> dict:
    return {"sender": "s@x", "recipients": recipients, "spool": "sp", "attempt": 0,
            "not_before_us": T0}  # fmt: skip


def _write_segment(directory: Path, number: int, steps: list[tuple]) -> list[tuple[int, int]]:
    """Records (code, message, ref position or None, values); their positions."""
    data = bytearray(fmt.encode_segment_header(number, T0))
    positions = []
    for code, mid, ref, values in steps:
        positions.append((number, len(data)))
        data += fmt.encode_record(code, mid, T0, ref or (0, 0), values)
    (directory / fmt.segment_name(number)).write_bytes(bytes(data))
    return positions


def _queue(directory: Path, suffix_segment: int) -> None:
    """seg 1: A finished; seg 2: B finished; seg 3: C waiting; seg 4: D waiting."""
    directory.mkdir()
    for number, mid in ((1, uuid.UUID(int=1)), (2, uuid.UUID(int=2))):
        recipient = f"r{number}@example.org"
        (env,) = _write_segment(directory, number, [(fmt.ENVELOPE, mid, None, _env([recipient]))])
        path = directory / fmt.segment_name(number)
        data = bytearray(path.read_bytes())
        start = (number, len(data))
        data += fmt.encode_record(fmt.START, mid, T0, env, {"runner": "fast"})
        data += fmt.encode_record(fmt.FINISH, mid, T0, start, {"reason": 0})
        path.write_bytes(bytes(data))
    _write_segment(directory, 3, [(fmt.ENVELOPE, uuid.UUID(int=3), None, _env(["r3@example.org"]))])
    _write_segment(directory, 4, [(fmt.ENVELOPE, uuid.UUID(int=4), None, _env(["r"]))])
    suffix = (suffix_segment, fmt.SEGMENT_HEADER_SIZE)
    (directory / layout.RESTART_FILE).write_bytes(layout.encode_restart(suffix, (), T0))


def _policy(tmp_path: Path, text: str = POLICY_TEXT) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def _plan(tmp_path: Path, dirs: list[Path], policy: Path | None = None, name: str = "plan"):
    """`plan logqueue DIR...`: the audit, then the plan of its findings."""
    policy = policy or _policy(tmp_path)
    argv = ["plan", "logqueue", *map(str, dirs), "--policy", str(policy), "--as-of", AS_OF,
            "--out", str(tmp_path / name)]  # fmt: skip
    assert cli.main(argv) == 0
    return read_plan(tmp_path / name)


def _unreclaimed(queue: Path) -> list[dict]:
    """The `unreclaimed_segment` findings of a `_queue` (segments 1 and 2 are garbage), as the
    audit writes them to findings.raw.json (`test_plan_from_the_audit_of_a_queue` proves it),
    for the executor's tests to plan without an audit."""
    suffix = layout.saved_positions(queue)
    assert suffix is not None
    saved = suffix.suffix
    rows = []
    for number in (1, 2):
        path = queue / fmt.segment_name(number)
        size, sha256 = file_digest(path)
        detail = {
            "segment": number, "path": str(path), "size": size, "sha256": sha256,
            "garbage_end": "seg-00000003.lq@32",
            "saved_suffix": f"{fmt.segment_name(saved[0])}@{saved[1]}",
            "saved_suffix_segment": saved[0], "saved_positions": "restart.lq",
            "below_saved_suffix": number < saved[0],
        }  # fmt: skip
        rows.append({"id": f"id{number}", "check": "unreclaimed_segment", "queue": str(queue),
                     "subject": path.name, "bytes": size, "detail": detail})  # fmt: skip
    return rows


def _plan_of_findings(tmp_path: Path, queue: Path):
    parts = planner.plan(_unreclaimed(queue), POLICY, {})
    written = write_plan(
        tmp_path / "plan", system="logqueue", as_of=dt.datetime(2027, 1, 16, tzinfo=dt.UTC),
        policy=POLICY, inputs={"queues": [str(queue)]}, actions=parts.actions,
        deferred=parts.deferred, notes=parts.notes,
    )  # fmt: skip
    return read_plan(written.directory)


def _findings(plan_dir: Path) -> dict[str, dict]:
    rows = json.loads((plan_dir.with_name(plan_dir.name + ".audit") / "findings.json").read_text())
    return {r["id"]: r for r in rows}


# --- planning from findings alone ---------------------------------------------------------------


def _row(check: str, segment: int, queue: str = "/q/one", **detail) -> dict:
    facts = {
        "segment": segment, "path": f"{queue}/{fmt.segment_name(segment)}", "size": 100 + segment,
        "sha256": f"{segment:064x}", "saved_suffix_segment": 3, "saved_positions": "restart.lq",
        "below_saved_suffix": segment < 3, "garbage_end": "seg-00000004.lq@32",
        "saved_suffix": "seg-00000003.lq@32",
    }  # fmt: skip
    return {"id": f"{check}-{queue}-{segment}", "check": check, "queue": queue,
            "subject": fmt.segment_name(segment), "bytes": 100 + segment,
            "detail": {**facts, **detail}}  # fmt: skip


def _target(segment: int, queue: str = "/q/one") -> dict:
    return {"queue": queue, "segment": segment, "file": fmt.segment_name(segment)}


def test_garbage_below_the_saved_suffix_is_planned_and_lagging_garbage_deferred() -> None:
    findings = [_row("unreclaimed_segment", n) for n in (2, 1, 3)]
    findings.append({**_row("stuck_message", 9), "subject": "m"})  # not a segment finding
    parts = planner.plan(findings, POLICY, {})
    assert [(a.kind, a.target, a.precondition, a.rules, a.bytes, a.findings) for a in
            parts.actions] == [
        (DELETE_SEGMENT, _target(n), {"size": 100 + n, "sha256": f"{n:064x}",
         "saved_suffix_segment": 3}, ("gc",), 100 + n, (f"unreclaimed_segment-/q/one-{n}",))
        for n in (1, 2)
    ]  # fmt: skip
    assert [(d.target, d.rules, d.reason, d.findings) for d in parts.deferred] == [
        (_target(3), ("gc",), SAVED_POSITIONS_BEHIND, ("unreclaimed_segment-/q/one-3",))
    ]
    assert parts.notes == []
    no_rule = Policy("p.toml", "0" * 64, (Rule("x", "racl_repair", "y"),))
    assert planner.plan(findings, no_rule, {}).actions == []


def test_missing_or_damaged_restart_positions_plan_nothing() -> None:
    findings = [
        _row("unreclaimed_segment", 1, "/q/missing", saved_positions="missing"),
        _row("unreclaimed_segment", 1, "/q/damaged", saved_positions="damaged"),
        _row("unreclaimed_segment", 1, "/q/unread", sha256=None, size=None),
    ]
    parts = planner.plan(findings, POLICY, {})
    assert parts.actions == []
    assert [(d.target["queue"], d.reason) for d in parts.deferred] == [
        ("/q/damaged", DAMAGED_SAVED_POSITIONS),
        ("/q/missing", NO_SAVED_POSITIONS),
        ("/q/unread", planner.NOT_READ),
    ]
    assert parts.notes == [
        "/q/damaged: restart.lq is damaged: nothing planned there",
        "/q/missing: no restart.lq: nothing is below a saved suffix",
    ]


def test_a_rule_restricted_to_queues_names_them_by_path_or_name() -> None:
    rules = (Rule("gc", "garbage_segments", "x", queues=("one", "/q/three")),)
    policy = Policy("p.toml", "0" * 64, rules)
    findings = [_row("unreclaimed_segment", 1, f"/q/{q}") for q in ("one", "two", "three")]
    assert [a.target["queue"] for a in planner.plan(findings, policy, {}).actions] == [
        "/q/one", "/q/three"
    ]  # fmt: skip


def test_an_erasure_deletes_what_may_go_and_defers_what_the_restart_reads() -> None:
    wanted, other = "1" * 64, "2" * 64
    rules = (
        Rule("gc", "garbage_segments", "x"),
        Rule("erase", "erase_subject", "art. 17", subjects=(wanted,)),
    )
    policy = Policy("p.toml", "0" * 64, rules)
    findings = [
        _row("unreclaimed_segment", 1),
        _row("personal_data", 1, subjects=[wanted], garbage=True),
        _row("personal_data", 2, subjects=[wanted, other], garbage=True),
        _row("personal_data", 3, subjects=[wanted], garbage=True),  # garbage, still covered
        _row("personal_data", 4, subjects=[wanted], garbage=False),  # live records
        _row("personal_data", 5, subjects=[other], garbage=False),  # someone else
    ]
    parts = planner.plan(findings, policy, {})
    assert [(a.target["segment"], a.rules, a.findings, a.reason) for a in parts.actions] == [
        (1, ("erase", "gc"), ("personal_data-/q/one-1", "unreclaimed_segment-/q/one-1"),
         "entirely before the saved working suffix; holds a data subject to erase"),
        (2, ("erase",), ("personal_data-/q/one-2",),
         "entirely before the saved working suffix; holds a data subject to erase"),
    ]  # fmt: skip
    assert [(d.target["segment"], d.rules, d.reason, d.findings) for d in parts.deferred] == [
        (3, ("erase",), SAVED_POSITIONS_BEHIND, ("personal_data-/q/one-3",)),
        (4, ("erase",), STILL_READ, ("personal_data-/q/one-4",)),
    ]


# --- through the audit --------------------------------------------------------------------------


def test_plan_from_the_audit_of_a_queue(spark, tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    plan = _plan(tmp_path, [queue])
    found = _findings(plan.directory)
    size = (queue / "seg-00000001.lq").stat().st_size
    (action,) = plan.actions()
    assert (action.kind, action.target, action.bytes) == (
        DELETE_SEGMENT, {"queue": str(queue), "segment": 1, "file": "seg-00000001.lq"}, size
    )  # fmt: skip
    assert [found[i]["check"] for i in action.findings] == ["unreclaimed_segment"]
    (deferred,) = [json.loads(line) for line in (plan.directory / "deferred.jsonl").open()]
    assert (deferred["target"]["segment"], deferred["reason"]) == (2, SAVED_POSITIONS_BEHIND)
    assert [found[i]["subject"] for i in deferred["findings"]] == ["seg-00000002.lq"]
    assert plan.header["inputs"]["queues"] == [str(queue)]
    assert plan.header["as_of"] == AS_OF
    # What the executor tests below plan from, without an audit, is what the audit finds.
    audit = plan.directory.with_name(plan.directory.name + ".audit")
    raw = json.loads((audit / "findings.raw.json").read_text())
    keys = ("check", "queue", "subject", "bytes", "detail")
    assert [{k: r[k] for k in keys} for r in raw if r["check"] == "unreclaimed_segment"] == [
        {k: r[k] for k in keys} for r in _unreclaimed(queue)
    ]


def test_plan_from_findings_equals_plan_of_the_directories(spark, tmp_path: Path) -> None:
    """`plan --findings AUDIT` and `plan logqueue DIR...` give the same actions and deferrals,
    each citing findings of the audit; an erasure too (the audit looks for its subjects)."""
    one, two = tmp_path / "one", tmp_path / "two"
    _queue(one, suffix_segment=3)
    _queue(two, suffix_segment=2)
    policy = _policy(tmp_path, POLICY_TEXT + (
        '[[rules]]\nid = "erase"\nkind = "erase_subject"\nlegal_basis = "art. 17"\n'
        'addresses = ["r2@example.org", "R3@example.org"]\n'
    ))  # fmt: skip
    direct = _plan(tmp_path, [one, two], policy, name="direct")
    audit = tmp_path / "audit"
    argv = ["audit", "logqueue", str(one), str(two), "--as-of", AS_OF, "--out", str(audit),
            "--erasure-policy", str(policy)]  # fmt: skip
    assert cli.main(argv) == 1  # lost_envelope: the envelopes' spool files were never written
    argv = ["plan", "--findings", str(audit), "--policy", str(policy),
            "--out", str(tmp_path / "from-findings")]  # fmt: skip
    assert cli.main(argv) == 0
    again = read_plan(tmp_path / "from-findings")
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (again.directory / name).read_bytes() == (direct.directory / name).read_bytes()
    found = {r["id"]: r for r in json.loads((audit / "findings.json").read_text())}
    actions = list(again.actions())
    assert [(Path(a.target["queue"]).name, a.target["segment"], a.rules) for a in actions] == [
        ("one", 1, ("gc",)), ("one", 2, ("erase", "gc")), ("two", 1, ("gc",)),
    ]  # fmt: skip
    for action in actions:
        assert action.findings and all(i in found for i in action.findings)
    deferred = [json.loads(line) for line in (again.directory / "deferred.jsonl").open()]
    assert [(Path(d["target"]["queue"]).name, d["target"]["segment"], d["reason"])
            for d in deferred] == [
        ("one", 3, STILL_READ), ("two", 2, SAVED_POSITIONS_BEHIND), ("two", 3, STILL_READ),
    ]  # fmt: skip
    assert all(d["findings"] and all(i in found for i in d["findings"]) for d in deferred)
    erased = [found[i] for a in actions for i in a.findings if found[i]["check"] == "personal_data"]
    key = subjects.read_key(audit)
    assert [r["detail"]["subjects"] for r in erased] == [
        [subjects.keyed(subject_hash("r2@example.org"), key)]
    ]


def test_a_damaged_restart_file_plans_nothing(spark, tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    (queue / layout.RESTART_FILE).write_bytes(b"junk")
    plan = _plan(tmp_path, [queue])
    assert list(plan.actions()) == []
    assert plan.header["deferred"] == {DAMAGED_SAVED_POSITIONS: 2}  # segments 1 and 2
    assert plan.header["notes"] == [f"{queue}: restart.lq is damaged: nothing planned there"]


def test_an_executor_refuses_a_queue_its_plan_did_not_audit(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    plan = _plan_of_findings(tmp_path, queue)
    plan.header["inputs"]["queues"] = [str(tmp_path / "other")]
    with pytest.raises(ConfigError, match="which its audit did not read"):
        SegmentExecutor(plan)


def test_purge_deletes_exactly_the_planned_segments(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=3)
    plan = _plan_of_findings(tmp_path, queue)
    assert [a.target["segment"] for a in plan.actions()] == [1, 2]
    record_approval(plan, "ops")
    lines: list[str] = []
    result = run_purge(plan, [SegmentExecutor(plan)], apply=True, out=lines.append)
    assert result.done == 2 and result.verification and result.verification["ok"]
    assert sorted(layout.segments(queue)) == [3, 4]
    again = run_purge(plan, [SegmentExecutor(plan)], apply=True, out=lines.append)
    assert again.done == 0 and sorted(layout.segments(queue)) == [3, 4]


def test_saved_positions_moved_back_or_file_changed_skip_the_action(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=3)
    plan = _plan_of_findings(tmp_path, queue)
    record_approval(plan, "ops")
    (queue / layout.RESTART_FILE).write_bytes(
        layout.encode_restart((2, fmt.SEGMENT_HEADER_SIZE), (), T0)
    )
    result = run_purge(plan, [SegmentExecutor(plan)], apply=True, out=lambda _: None)
    assert result.done == 1  # segment 1 only
    assert [(seq, reason) for seq, _, reason in result.skips] == [
        (1, "the saved working suffix (segment 2) now covers it")
    ]
    assert sorted(layout.segments(queue)) == [2, 3, 4]


def test_census_sees_a_needed_segment_go_missing(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    plan = _plan_of_findings(tmp_path, queue)
    executor = SegmentExecutor(plan)
    assert executor.census() == {str(queue.resolve()): {"needed_segments_missing": 0}}
    (queue / "seg-00000003.lq").unlink()
    assert executor.census() == {str(queue.resolve()): {"needed_segments_missing": 1}}


def _approved_plan(tmp_path: Path):
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=3)
    plan = _plan_of_findings(tmp_path, queue)
    record_approval(plan, "ops")
    return queue, plan


def _hooked_purge(plan, hook):
    return apply_with_hook(plan, [SegmentExecutor(plan)], hook)


def _at_second(label: str, change):
    """A fault hook calling `change` at the second point named `label` (segment 2's)."""
    seen: list[str] = []

    def hook(point: str) -> None:
        if point == label:
            seen.append(point)
            if len(seen) == 2:
                change()

    return hook


def test_the_plan_records_each_segments_digest_and_a_same_size_rewrite_is_skipped(
    tmp_path: Path,
) -> None:
    queue, plan = _approved_plan(tmp_path)
    for action in plan.actions():
        data = (queue / action.target["file"]).read_bytes()
        assert action.precondition == {
            "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "saved_suffix_segment": 3,
        }  # fmt: skip
    segment = queue / fmt.segment_name(2)
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    segment.write_bytes(bytes(data))
    result = run_purge(plan, [SegmentExecutor(plan)], apply=True, out=lambda _: None)
    assert result.done == 1 and sorted(layout.segments(queue)) == [2, 3, 4]
    assert result.skips == [
        (1, DELETE_SEGMENT, "changed since the plan (content differs (SHA-256))")
    ]
    assert segment.read_bytes() == bytes(data)


def test_a_segment_appended_to_during_the_rate_wait_is_kept(tmp_path: Path) -> None:
    queue, plan = _approved_plan(tmp_path)
    segment = queue / fmt.segment_name(2)
    before = segment.read_bytes()

    def append() -> None:
        with open(segment, "ab") as handle:
            handle.write(b"appended")

    result = _hooked_purge(plan, _at_second("rate slot delete segment", append))
    assert sorted(layout.segments(queue)) == [2, 3, 4]
    assert segment.read_bytes() == before + b"appended"
    size = len(before)
    assert result.skips == [
        (1, DELETE_SEGMENT, f"changed since the plan (size {size} -> {size + 8})")
    ]
    (skip,) = [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "skipped"]
    assert skip["at_last_check"] is True and skip["completed_operations"] == 0


def test_a_segment_rewritten_between_the_check_and_the_unlink_is_put_back(tmp_path: Path) -> None:
    queue, plan = _approved_plan(tmp_path)
    segment = queue / fmt.segment_name(2)
    changed = bytearray(segment.read_bytes())
    changed[-1] ^= 0xFF

    def rewrite_in_place() -> None:
        with open(segment, "r+b") as handle:  # same inode, same size
            handle.write(bytes(changed))

    result = _hooked_purge(plan, _at_second("before delete segment", rewrite_in_place))
    assert sorted(layout.segments(queue)) == [2, 3, 4] and segment.read_bytes() == bytes(changed)
    assert result.skips == [
        (1, DELETE_SEGMENT, f"{segment.name} changed between the check and the delete "
         "(content differs (SHA-256)): kept"),
    ]  # fmt: skip
    assert sorted(p.name for p in queue.iterdir() if p.name.startswith(".")) == []
    assert result.verification is not None and result.verification["ok"]


def test_a_segment_held_by_an_interrupted_purge_is_checked_and_finished(tmp_path: Path) -> None:
    queue, plan = _approved_plan(tmp_path)
    segment = queue / fmt.segment_name(1)
    held = held_path(segment)
    segment.rename(held)  # a crash between the hold and the unlink
    result = run_purge(plan, [SegmentExecutor(plan)], apply=True, out=lambda _: None)
    assert result.done == 2 and not held.exists() and sorted(layout.segments(queue)) == [3, 4]
    assert result.verification is not None and result.verification["ok"]


def test_purge_with_a_rate_rechecks_a_segment_appended_to_while_it_waits(tmp_path: Path) -> None:
    """The issue's reproduction: `purge --apply --rate 0.5`, segment 2 appended to as soon as its
    action is journaled as started (it then waits two seconds for its slot)."""
    queue, plan = _approved_plan(tmp_path)
    segment = queue / fmt.segment_name(2)
    journal = plan.directory / "journal.jsonl"
    command = [sys.executable, "-m", "mqforensics", "purge", str(plan.directory), "--apply",
               "--rate", "0.5"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and b'"seq":1' in journal.read_bytes():
            break
        time.sleep(0.005)
    with open(segment, "ab") as handle:
        handle.write(b"appended")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert sorted(layout.segments(queue)) == [2, 3, 4]
    assert b"1 logqueue.delete_segment: changed since the plan (size" in out
