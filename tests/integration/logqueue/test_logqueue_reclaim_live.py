"""Reclamation planned and applied while the simulated MTA runs, as a real process: nothing its
restart needs is ever deleted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datasets.logqueue.simulate import Truth, observed, restart_view
from mqforensics import cli
from mqforensics.purge.journal import read_journal
from mqforensics.systems.logqueue import layout

pytestmark = pytest.mark.integration

ROUNDS = 4


def _simulator(directory: Path) -> list[str]:
    return [
        sys.executable, "-m", "datasets.logqueue.simulate", str(directory),
        "--seed", "5", "--messages", "300", "--segment-bytes", "2048", "--checkpoint-every", "3",
        "--no-delete-garbage", "--pace-ms", "4",
    ]  # fmt: skip


def _restart_view_matches_truth(directory: Path) -> None:
    view = restart_view(directory)
    assert view.orphans == []
    truth = Truth.load(directory).unfinished()
    live = {m: v for m, v in observed(view).items() if v["state"] != "finished"}
    assert sorted(live) == sorted(truth)
    for mid, seen in live.items():
        for key in ("state", "attempt", "remaining"):
            assert seen[key] == truth[mid][key], (mid, key)


def test_reclamation_during_a_running_simulator(tmp_path: Path) -> None:
    directory = tmp_path / "queue"
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\n[[rules]]\nid = "gc"\nkind = "garbage_segments"\n'
        'legal_basis = "storage hygiene"\n'
    )
    process = subprocess.Popen(_simulator(directory), stdout=subprocess.PIPE, text=True)
    deleted: list[int] = []
    try:
        for attempt in range(ROUNDS):
            time.sleep(2.5)
            plan = tmp_path / f"plan-{attempt}"
            assert cli.main(["plan", "logqueue", "--policy", str(policy), str(directory),
                             "--out", str(plan)]) == 0  # fmt: skip
            assert cli.main(["approve", str(plan), "--by", "ops"]) == 0
            assert cli.main(["purge", str(plan), "--apply"]) == 0  # verification ok
            done = [r for r in read_journal(plan / "journal.jsonl") if r["event"] == "done"]
            deleted += [r["seq"] for r in done]
            # What the running queue's restart would read is whole at every moment we look.
            saved = layout.saved_positions(directory)
            files = layout.segments(directory)
            assert saved is not None and all(
                n in files for n in range(saved.suffix[0], max(files) + 1)
            )
        assert process.poll() is None, "the simulator finished before the last round"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)  # a crash, then its own restart
        process.wait(timeout=60)
    assert deleted, "no round deleted a segment"
    _restart_view_matches_truth(directory)
    resumed = subprocess.run(
        _simulator(directory)[:-2], capture_output=True, text=True, timeout=600
    )  # no pacing: run to the end
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["complete"] and summary["violations"] == 0 and summary["messages"] == 300
