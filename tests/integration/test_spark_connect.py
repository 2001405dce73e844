"""`SPARK_REMOTE` end to end: the demo through a real Spark Connect server from the harness."""

import json
import os
import subprocess
import sys

import pytest

from mqforensics.demo import BUNDLED

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
