"""Reclamation planned (from the audit's findings) and applied while the simulated MTA runs, as a
real process: nothing its restart needs is ever deleted."""

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
from mqforensics.retention.manifest import read_plan
from mqforensics.systems.logqueue import layout

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ROUNDS = 4


def _simulator(directory: Path) -> list[str]:
    """The simulator paced (200 ms per operation: about ten minutes for the run) so that it
    outlives the rounds, each of which audits the queue in Spark; it is SIGKILLed after them."""
    return [
        sys.executable, "-m", "datasets.logqueue.simulate", str(directory),
        "--seed", "5", "--messages", "300", "--segment-bytes", "2048", "--checkpoint-every", "3",
        "--no-delete-garbage", "--pace-ms", "200",
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
    process = subprocess.Popen(_simulator(directory), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    deleted: list[int] = []
    try:
        for attempt in range(ROUNDS):
            time.sleep(2.5)
            plan = tmp_path / f"plan-{attempt}"
            assert cli.main(["plan", "logqueue", "--policy", str(policy), str(directory),
                             "--out", str(plan)]) == 0  # fmt: skip
            # Every action cites findings of the audit it was planned from, and planning those
            # findings again (`plan --findings`) gives the same plan.
            audit = plan.with_name(plan.name + ".audit")
            found = {f["id"]: f for f in json.loads((audit / "findings.json").read_text())}
            for action in read_plan(plan).actions():
                assert action.findings and all(
                    found[i]["check"] == "unreclaimed_segment" for i in action.findings
                )
            again = tmp_path / f"again-{attempt}"
            assert cli.main(["plan", "--findings", str(audit), "--policy", str(policy),
                             "--out", str(again)]) == 0  # fmt: skip
            for name in ("actions.jsonl", "deferred.jsonl"):
                assert (again / name).read_bytes() == (plan / name).read_bytes()
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
        _simulator(directory)[:-2], cwd=ROOT, capture_output=True, text=True, timeout=600
    )  # no pacing: run to the end
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["complete"] and summary["violations"] == 0 and summary["messages"] == 300
