"""Spark's log of a failed command (issue 45): without ``--debug`` nothing is left in the temp
directory, with it the log is kept and named before the error line.

The real CLI in a subprocess whose ``TMPDIR`` is a fresh directory, on an input only the read
finds broken (a Cyrus dump cut mid-line: Spark starts, its reader fails), so the JVM really
starts and writes its log there. No server is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CYRUS_SHOW = ROOT / "tests" / "data" / "cyrus" / "mailboxes_twoskip.show"


def run_cli(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "TMPDIR": str(tmp),
        "MQF_PROGRESS": "0",
    }
    env.pop("MQF_SPARK_LOG", None)
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", *argv],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_failed_command_leaves_nothing_in_tmpdir_and_keeps_its_log_with_debug(tmp_path):
    dump = tmp_path / "mailboxes.show"
    data = CYRUS_SHOW.read_bytes()
    cut = data[: data.index(b"\n", len(data) // 2) + 5]
    dump.write_bytes(cut)
    lines = cut.count(b"\n") + 1
    line = (
        f"mqforensics: error: InputError: {dump}: line {lines}: no final newline (truncated dump?)"
    )
    out = tmp_path / "out"

    quiet = tmp_path / "tmp-quiet"
    quiet.mkdir()
    done = run_cli(["audit", "cyrus", str(dump), "--out", str(out)], quiet)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip() == line
    assert sorted(p.name for p in quiet.iterdir()) == []
    assert not out.exists()

    debug = tmp_path / "tmp-debug"
    debug.mkdir()
    done = run_cli(["--debug", "audit", "cyrus", str(dump), "--out", str(out)], debug)
    assert done.returncode == 2, done.stderr[-3000:]
    *_, named, last = done.stderr.strip().splitlines()
    assert last == line
    log = Path(named.removeprefix("mqforensics: Spark log: "))
    assert log.parent == debug and log.name.startswith("mqforensics-spark-") and log.is_file()
    assert [p.name for p in debug.iterdir()] == [log.name]
    assert not out.exists()
