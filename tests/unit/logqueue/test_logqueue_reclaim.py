"""Reclamation plans and the segment executor on queue directories written with the format."""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.purge.engine import run_purge
from mqforensics.purge.held_unlink import held_path
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.reclaim import (
    DELETE_SEGMENT,
    SAVED_POSITIONS_BEHIND,
    SegmentExecutor,
    plan_reclamation,
)
from tests.purge_hooks import apply_with_hook

REPO = Path(__file__).resolve().parents[3]
T0 = 1_800_000_000_000_000
POLICY = Policy("p.toml", "0" * 64, (Rule("gc", "garbage_segments", "storage hygiene"),))


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
        (env,) = _write_segment(directory, number, [(fmt.ENVELOPE, mid, None, _env(["r"]))])
        path = directory / fmt.segment_name(number)
        data = bytearray(path.read_bytes())
        start = (number, len(data))
        data += fmt.encode_record(fmt.START, mid, T0, env, {"runner": "fast"})
        data += fmt.encode_record(fmt.FINISH, mid, T0, start, {"reason": 0})
        path.write_bytes(bytes(data))
    _write_segment(directory, 3, [(fmt.ENVELOPE, uuid.UUID(int=3), None, _env(["r"]))])
    _write_segment(directory, 4, [(fmt.ENVELOPE, uuid.UUID(int=4), None, _env(["r"]))])
    suffix = (suffix_segment, fmt.SEGMENT_HEADER_SIZE)
    (directory / layout.RESTART_FILE).write_bytes(layout.encode_restart(suffix, (), T0))


def _plan(tmp_path: Path, dirs: list[Path]):
    actions, deferred, notes = plan_reclamation(dirs, POLICY)
    written = write_plan(
        tmp_path / "plan", system="logqueue", as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=POLICY, inputs={"queues": [str(d) for d in dirs]}, actions=actions,
        deferred=deferred, notes=notes,
    )  # fmt: skip
    return read_plan(written.directory)


def test_plan_deletes_below_the_saved_suffix_and_defers_lagging_garbage(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    actions, deferred, notes = plan_reclamation([queue], POLICY)
    assert [(a.kind, a.target["segment"], a.bytes) for a in actions] == [
        (DELETE_SEGMENT, 1, (queue / "seg-00000001.lq").stat().st_size)
    ]
    assert [(d.target["segment"], d.reason) for d in deferred] == [(2, SAVED_POSITIONS_BEHIND)]
    assert notes == []
    no_rule = Policy("p.toml", "0" * 64, (Rule("x", "racl_repair", "y"),))
    assert plan_reclamation([queue], no_rule) == ([], [], [])


def test_purge_deletes_exactly_the_planned_segments(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=3)
    plan = _plan(tmp_path, [queue])
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
    plan = _plan(tmp_path, [queue])
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
    plan = _plan(tmp_path, [queue])
    executor = SegmentExecutor(plan)
    assert executor.census() == {str(queue.resolve()): {"needed_segments_missing": 0}}
    (queue / "seg-00000003.lq").unlink()
    assert executor.census() == {str(queue.resolve()): {"needed_segments_missing": 1}}


def test_unreadable_restart_file_is_an_input_error(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=2)
    (queue / layout.RESTART_FILE).write_bytes(b"junk")
    with pytest.raises(InputError, match=r"restart\.lq: not one whole RESTART record"):
        plan_reclamation([queue], POLICY)


def _approved_plan(tmp_path: Path):
    queue = tmp_path / "q"
    _queue(queue, suffix_segment=3)
    plan = _plan(tmp_path, [queue])
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
