"""The simulated MTA as a real process, SIGKILLed at random moments and restarted each time."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datasets.logqueue.simulate import (
    GROUND_TRUTH,
    JOURNAL,
    Truth,
    check_directory,
    full_view,
    observed,
    restart_view,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
KILLS = 20


def _started(directory: Path) -> int:
    """How many times the simulator has started on this directory (its journal's start lines)."""
    try:
        raw = (directory / JOURNAL).read_bytes()
    except FileNotFoundError:
        return 0
    return sum(1 for line in raw.split(b"\n") if line.startswith(b'{"start":'))


def _wait_until_started(proc: subprocess.Popen[bytes], directory: Path, starts: int) -> None:
    """Returns once the simulator journalled start number `starts + 1`: a kill then hits its work.

    Sleeping a fixed time after Popen instead would, on a loaded machine, kill most runs while
    the interpreter still imports, and test nothing.
    """
    deadline = time.monotonic() + 60
    while _started(directory) <= starts:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the simulator exited {proc.returncode}: {err.decode()[-2000:]}")
        assert time.monotonic() < deadline, "the simulator did not start within 60 s"
        time.sleep(0.005)


def test_sigkill_at_random_moments_then_finish(tmp_path: Path) -> None:
    directory = tmp_path / "queue"
    command = [
        sys.executable, "-m", "datasets.logqueue.simulate", str(directory),
        "--seed", "11", "--messages", "400", "--segment-bytes", "4096", "--keep-deleted",
        "--pace-ms", "1",
    ]  # fmt: skip
    rng = random.Random(11)
    kills = starts = 0
    for _ in range(KILLS):
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_until_started(proc, directory, starts)
        time.sleep(rng.uniform(0.0, 0.45))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err.decode()[-2000:])
        truth = Truth.load(directory)
        assert truth.starts == starts + 1
        kills, starts = kills + 1, truth.starts
        # At the kill: the files hold exactly what the journal says reached them.
        assert truth.violations == []
        assert check_directory(directory, truth) == []
        assert not truth.complete, "the run finished before it was killed enough times"
    assert kills >= KILLS

    final = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=600)
    assert final.returncode == 0, final.stderr.decode()[-2000:]
    truth = Truth.load(directory)
    assert truth.starts == starts + 1
    assert truth.complete and truth.violations == [] and truth.final_problems() == []
    assert check_directory(directory, truth) == []
    assert json.loads((directory / GROUND_TRUTH).read_text()) == truth.ground_truth()
    assert observed(full_view(directory)) == truth.expected()
    assert all(m["state"] == "finished" for m in truth.expected().values())
    assert len(truth.messages) == 400
    assert restart_view(directory).working_set() == {}
