"""The queue writer and its restart procedure, under hundreds of in-process crashes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from datasets.logqueue.simulate import (
    GROUND_TRUTH,
    FaultPlan,
    SimConfig,
    Simulator,
    Truth,
    check_directory,
    full_view,
    observed,
    restart_view,
    run_simulation,
    write_dataset,
)
from datasets.logqueue.writer import Crash, QueueError, QueueWriter, Recovery, Write
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.replay import replay
from mqforensics.systems.logqueue.segment import read_segment

BATCHES, CRASHES_PER_BATCH = 6, 50  # 300 crash points


def _spools(directory: Path) -> set[str]:
    return {p.name for p in (directory / layout.SPOOL_DIR).iterdir()}


@pytest.mark.parametrize("batch", range(BATCHES))
def test_random_crashes_recover_to_the_ground_truth(tmp_path: Path, batch: int) -> None:
    rng = random.Random(batch)
    fired = torn = 0
    run = 0
    while fired < CRASHES_PER_BATCH:
        run += 1
        directory = tmp_path / f"run{run}"
        config = SimConfig(
            seed=batch * 1000 + run,
            messages=rng.randint(3, 7),
            concurrency=rng.randint(1, 3),
            checkpoint_every=rng.randint(2, 6),
            segment_bytes=rng.choice([600, 1024, 2048]),
            keep_deleted=rng.random() < 0.7,  # the full history stays readable in deleted/
        )
        points, at = {}, 0
        for _ in range(6):
            at += rng.randint(1, 40)
            points[at] = rng.random() if rng.random() < 0.5 else None
        plan = FaultPlan(points)

        def at_crash(crashes: int, directory: Path = directory, plan: FaultPlan = plan) -> None:
            truth = Truth.load(directory)
            assert truth.violations == [], plan.fired[-1]
            assert check_directory(directory, truth) == [], plan.fired[-1]

        def recovered(sim: Simulator, report: Recovery, directory: Path = directory) -> None:
            truth = Truth.load(directory)
            assert truth.violations == []
            assert check_directory(directory, truth) == []
            unfinished = truth.unfinished()
            assert all(m["state"] == "waiting" for m in unfinished.values())
            spools = {m.spool for m in truth.messages.values() if str(m.message_id) in unfinished}
            assert _spools(directory) == spools

        crashes = run_simulation(
            directory, config, faults=plan, on_crash=at_crash, on_recovered=recovered
        )
        assert crashes == len(plan.fired)
        fired += crashes
        torn += sum(1 for _, kind, _, cut in plan.fired if kind == "record" and cut)
        truth = Truth.load(directory)
        assert truth.complete and truth.violations == [] and truth.final_problems() == []
        assert check_directory(directory, truth) == []
        assert restart_view(directory).working_set() == {}
        assert _spools(directory) == set()
    assert torn > 0


def test_writer_state_is_replay_of_its_files(tmp_path: Path) -> None:
    compared = 0

    def same(sim: Simulator) -> None:
        nonlocal compared
        assert sim.writer is not None
        files = restart_view(sim.directory)
        assert files.suffix == sim.writer.suffix
        assert files.messages == sim.writer.state().messages
        compared += 1

    config = SimConfig(seed=7, messages=10, checkpoint_every=3, segment_bytes=700)
    run_simulation(tmp_path, config, faults=FaultPlan({40: None, 90: 0.5}), after_op=same)
    assert compared > 100


class _Tear:
    """A write hook tearing the next record write at `cut` bytes (< 0: from its end) once armed."""

    def __init__(self, cut: int) -> None:
        self.cut, self.armed = cut, False
        self.torn: Write | None = None

    def __call__(self, write: Write) -> int | None:
        if not self.armed or write.kind != "record":
            return None
        self.armed, self.torn = False, write
        return self.cut if self.cut >= 0 else len(write.data) + self.cut


@pytest.mark.parametrize("cut", [1, 43, 44, 50, -1])
def test_torn_tail_stays_in_the_old_segment(tmp_path: Path, cut: int) -> None:
    tear = _Tear(cut)
    writer = QueueWriter.open(tmp_path, hook=tear)
    mid = writer.enqueue("s@x", ["a@y", "b@y", "c@y"], b"body")
    writer.start(mid, "fast")
    writer.deliver(mid, [("a@y", fmt.DELIVERED, "250 ok")])
    tear.armed = True
    with pytest.raises(Crash):
        writer.deliver(mid, [("b@y", fmt.PERMANENT_FAILURE, "550 no")])
    writer.close()
    assert tear.torn is not None
    kept = cut if cut > 0 else len(tear.torn.data) + cut
    old, offset = tear.torn.path, tear.torn.offset
    assert old.stat().st_size == offset + kept

    again = QueueWriter.open(tmp_path)
    assert old.stat().st_size == offset + kept  # never appended to after the tear
    problems = read_segment(old).problems
    assert [(p.kind, p.offset, p.size) for p in problems] == [("torn_tail", offset, kept)]
    assert again.segment == writer.segment + 1
    msg = again.message(mid)
    assert msg.state == "waiting" and msg.attempts == 1
    assert msg.envelope is not None and msg.envelope.segment == again.segment
    assert msg.envelope.values["recipients"] == ["b@y", "c@y"]  # the torn outcome is lost
    assert restart_view(tmp_path).messages == again.state().messages


def test_recovery_finishes_an_attempt_with_nothing_left(tmp_path: Path) -> None:
    tear = _Tear(10)
    writer = QueueWriter.open(tmp_path, hook=tear)
    mid = writer.enqueue("s@x", ["a@y", "b@y"], b"body")
    writer.start(mid, "fast")
    writer.deliver(mid, [("a@y", fmt.DELIVERED, "250"), ("b@y", fmt.PERMANENT_FAILURE, "550")])
    tear.armed = True
    with pytest.raises(Crash):
        writer.finish(mid)
    writer.close()
    assert (tmp_path / layout.SPOOL_DIR / mid.hex).exists()
    again = QueueWriter(tmp_path)
    report = again.recover()
    assert report.finished == {mid: 1} and report.rewritten == {}
    assert report.problems and report.restart_file == "ok"  # saved by the first open()
    assert not (tmp_path / layout.SPOOL_DIR / mid.hex).exists()
    view = restart_view(tmp_path)
    assert observed(view) == {}  # finished: nothing from the new suffix on
    full = observed(full_view(tmp_path))[str(mid)]
    assert full["state"] == "finished" and full["delivered"] == ["a@y"]


def test_garbage_segments_go_only_below_the_saved_suffix(tmp_path: Path) -> None:
    writer = QueueWriter.open(tmp_path, segment_bytes=300)
    first = writer.enqueue("s@x", ["a@y"], b"first")
    others = [writer.enqueue("s@x", [f"r{i}@y"], b"other") for i in range(4)]
    for mid in others:
        writer.start(mid, "fast")
        writer.deliver(mid, [(writer.message(mid).remaining()[0], fmt.DELIVERED, "250")])
        writer.finish(mid)
    assert writer.segment >= 4
    envelope = writer.message(first).envelope
    assert envelope is not None
    assert writer.save_positions({"fast": envelope.position}) == envelope.position
    assert writer.delete_garbage_segments() == list(range(1, envelope.segment))

    start = writer.start(first, "fast")
    # In flight, the START is live and so is the envelope it refers to (its recipients are
    # what the restart must rewrite): the suffix stays at the envelope.
    assert writer.save_positions() == envelope.position
    records = [r for p in layout.segments(tmp_path).values() for r in read_segment(p).records]
    from_start = replay(records, start)
    assert first not in from_start.messages  # a suffix at the START would lose the message

    writer.deliver(first, [("a@y", fmt.DELIVERED, "250")])
    writer.finish(first)
    assert writer.delete_garbage_segments() == []  # only the *saved* suffix counts
    suffix = writer.save_positions()
    assert suffix == writer.end_of_log
    saved = layout.saved_positions(tmp_path)
    assert saved is not None and saved.suffix == suffix and saved.runners == (("fast", *suffix),)
    gone = writer.delete_garbage_segments()
    assert gone == [n for n in range(envelope.segment, writer.segment)]
    assert list(layout.segments(tmp_path)) == [writer.segment]
    writer.close()
    assert QueueWriter.open(tmp_path).working_set() == {}


def test_operations_refuse_what_the_state_does_not_allow(tmp_path: Path) -> None:
    writer = QueueWriter.open(tmp_path)
    mid = writer.enqueue("s@x", ["a@y"], b"x")
    with pytest.raises(QueueError):
        writer.deliver(mid, [("a@y", fmt.DELIVERED, "250")])  # not started
    writer.start(mid, "fast")
    with pytest.raises(QueueError):
        writer.deliver(mid, [("z@y", fmt.DELIVERED, "250")])  # not a recipient
    writer.deliver(mid, [("a@y", fmt.DELIVERED, "250")])
    with pytest.raises(QueueError):
        writer.deliver(mid, [("a@y", fmt.DELIVERED, "250")])  # never twice
    with pytest.raises(QueueError):
        writer.retry(mid, 0)  # nothing left
    with pytest.raises(QueueError):
        writer.enqueue("s@x", ["a@y"], b"x", message_id=mid)


@pytest.mark.parametrize("stop", [True, False])
def test_dataset_with_its_ground_truth(tmp_path: Path, stop: bool) -> None:
    truth = write_dataset(tmp_path, seed=5, messages=6, crashes=3, stop_at_last_crash=stop)
    assert json.loads((tmp_path / GROUND_TRUTH).read_text()) == truth
    assert truth["starts"] == (3 if stop else 4) and truth["violations"] == []
    assert truth["complete"] is not stop
    assert check_directory(tmp_path, Truth.load(tmp_path)) == []
    some = next(iter(truth["messages"].values()))
    assert {"index", "state", "remaining", "delivered", "failed", "outcomes"} <= set(some)
