"""`SPARK_REMOTE` end to end: the demo through a real Spark Connect server from the harness."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BUNDLED = Path(__file__).resolve().parents[2] / "datasets" / "james" / "sample"

pytestmark = pytest.mark.integration


def test_demo_runs_through_spark_connect_with_our_data_sources(spark_connect, tmp_path):
    env = {**os.environ, "SPARK_REMOTE": spark_connect["remote"]}
    result = subprocess.run(
        [sys.executable, "-m", "mqforensics", "demo", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"(Spark Connect {spark_connect['remote']})" in result.stdout
    truth = json.loads((BUNDLED / "ground_truth.json").read_text())["findings"]
    rows = json.loads((tmp_path / "findings.json").read_text())
    assert sorted((r["check"], r["subject"]) for r in rows) == sorted(
        (f["check"], f["subject"]) for f in truth
    )


def test_cyrus_fleet_audit_runs_through_spark_connect(spark_connect, tmp_path):
    from pathlib import Path

    from mqforensics.systems.cyrus import database, dbchecks

    data = Path(__file__).resolve().parents[1] / "data" / "cyrus"
    inputs = [
        data / "mailboxes_twoskip.db",
        data / "mailboxes_skiplist.db",
        data / "evil_twoskip.db",
    ]
    env = {**os.environ, "SPARK_REMOTE": spark_connect["remote"]}
    result = subprocess.run(
        [sys.executable, "-m", "mqforensics", "audit", "cyrus", *map(str, inputs),
         "--out", str(tmp_path), "--reveal-addresses"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the skiplist fixture lacks a RACL key
    rows = json.loads((tmp_path / "findings.json").read_text())
    expected = [f for path in inputs for f in dbchecks.run_checks(database.read_database(path))]
    assert sorted((r["check"], r["subject"], r["detail"]["file"]) for r in rows) == sorted(
        (f.check, f.subject, str(Path(f.detail["file"]).resolve())) for f in expected
    )
