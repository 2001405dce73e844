"""`audit logqueue` on queues the simulated MTA wrote: the findings are exactly what its crashes
and the planted changes left, and a healthy queue has none."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from datasets.logqueue.simulate import (
    T0_US,
    FaultPlan,
    SimConfig,
    Truth,
    count_writes,
    run_simulation,
)
from mqforensics import cli
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.segment import read_segment


def _audit(tmp_path: Path, directory: Path, as_of: dt.datetime) -> tuple[int, list[dict]]:
    out = tmp_path / f"out-{directory.name}"
    argv = ["audit", "logqueue", str(directory), "--out", str(out), "--reveal-addresses"]
    code = cli.main([*argv, "--as-of", as_of.strftime("%Y-%m-%dT%H:%M:%SZ")])
    return code, json.loads((out / "findings.json").read_text())


def _sim_time(days: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0_US / 1e6, dt.UTC) + dt.timedelta(days=days)


def test_torn_crash_and_kept_garbage_are_exactly_the_findings(tmp_path: Path) -> None:
    config = SimConfig(seed=3, messages=25, delete_garbage=False)
    total = count_writes(config)
    directory = tmp_path / "torn"
    plan = FaultPlan({total // 3: 0.5, 2 * total // 3: 0.3})
    run_simulation(directory, config, faults=plan)
    truth = Truth.load(directory)
    assert truth.torn and not truth.violations and not truth.unfinished()
    files = layout.segments(directory)
    code, rows = _audit(tmp_path, directory, _sim_time(30))
    assert code == 0  # warnings only
    expected = {
        ("torn_tail", f"{fmt.segment_name(seg)}@{offset}", size)
        for (seg, offset), (kind, size) in truth.torn.items()
        if kind == "torn_tail"
    } | {
        ("unreclaimed_segment", path.name, path.stat().st_size)
        for number, path in files.items()
        if number < max(files)  # everything is finished: all but the newest is garbage
    }
    assert {(r["check"], r["subject"], r["bytes"]) for r in rows} == expected


def test_a_crashed_queue_with_a_lost_spool_file(tmp_path: Path) -> None:
    config = SimConfig(seed=8, messages=30)
    total = count_writes(config)
    directory = tmp_path / "stopped"
    run_simulation(directory, config, faults=FaultPlan({total // 2: None}), stop_after_crashes=1)
    unfinished = Truth.load(directory).unfinished()
    assert unfinished
    victim = sorted(unfinished)[0]
    spools = {p.name for p in (directory / layout.SPOOL_DIR).iterdir()}
    code, rows = _audit(tmp_path, directory, _sim_time(0))
    assert code == 0 and [r for r in rows if r["severity"] in ("error", "critical")] == []
    # Plant: the content of one unfinished message disappears.
    record = next(
        r
        for path in layout.segments(directory).values()
        for r in read_segment(path).records
        if r.type == fmt.ENVELOPE and str(r.message_id) == victim
    )
    spool = record.values["spool"]
    assert spool in spools
    (directory / layout.SPOOL_DIR / spool).unlink()
    code, rows = _audit(tmp_path, directory, _sim_time(30))
    assert code == 1
    errors = [(r["check"], r["subject"]) for r in rows if r["severity"] == "error"]
    assert errors == [("lost_envelope", victim)]
    stuck = {r["subject"] for r in rows if r["check"] == "stuck_message"}
    assert stuck == set(unfinished)  # 30 simulated days later nothing unfinished is on time


def test_spark_replay_equals_the_restart_procedure_on_crashed_queues(spark, tmp_path: Path) -> None:
    """Three queues stopped at a crash (some torn), read at once: the messages frame of each is
    what the restart procedure sees, and its unfinished messages are the simulator's truth."""
    from datasets.logqueue.simulate import observed, restart_view, write_dataset
    from mqforensics.systems.logqueue.frames import read_state

    dirs = []
    for seed in (21, 22, 23):
        directory = tmp_path / f"q{seed}"
        write_dataset(directory, seed=seed, messages=25, crashes=3, stop_at_last_crash=True)
        dirs.append(directory)
    state = read_state(spark, dirs)
    rows = state.messages.collect()
    for directory in dirs:
        queue = str(directory.resolve())
        got = {
            r.message_id: (r.state, sorted(r.recipients_remaining) if r.state != "finished" else [])
            for r in rows
            if r.queue == queue
        }
        want = {
            mid: (v["state"], v["remaining"])
            for mid, v in observed(restart_view(directory)).items()
        }
        assert got == want
        truth = Truth.load(directory).unfinished()
        assert {m: s for m, (s, _) in got.items() if s != "finished"} == {
            m: v["state"] for m, v in truth.items()
        }
