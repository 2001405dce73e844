"""`MQF_SPARK_MASTER` end to end: the CLI on a real standalone Spark master and worker.

The driver is the CLI process; every task runs in the worker's executor, so a Python data source
that could not be imported there (this package, pyarrow) fails the audit.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqforensics.services.spark_standalone import master_json

# The live James audit's fixtures: a generated state loaded into the session's Cassandra and
# SeaweedFS (`loaded`), and the client settings for them (`environment`).
from tests.integration.james.test_james_audit_live import (  # noqa: F401
    environment,
    expected_findings,
    loaded,
)
from tests.spark_options import TEST_SPARK_CONFS

BUNDLED = Path(__file__).resolve().parents[2] / "datasets" / "james" / "sample"

pytestmark = pytest.mark.integration


def run_cli(cluster: dict, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MQF_SPARK_MASTER": cluster["master"],
        # The suite's Spark options (tests/spark_options.py) for the driver and the executor alike.
        "PYSPARK_SUBMIT_ARGS": f"--conf spark.executor.memory=1g {TEST_SPARK_CONFS} pyspark-shell",
    }
    env.pop("SPARK_REMOTE", None)
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def applications(cluster: dict, name: str) -> dict[str, dict]:
    """The master's running and finished applications called `name`, by id."""
    state = master_json(int(cluster["webui_port"]))
    assert state is not None, f"the master's web UI does not answer ({cluster['webui']})"
    apps = [*state.get("activeapps", []), *state.get("completedapps", [])]
    return {app["id"]: app for app in apps if app["name"] == name}


def ran_on_the_worker(cluster: dict, name: str, before: dict[str, dict]) -> tuple[dict, str]:
    """The one new application `name` (granted the worker's cores and a 1 GiB executor) and the
    stderr of its executors, which the worker keeps under its work directory."""
    (app_id,) = set(applications(cluster, name)) - set(before)
    app = applications(cluster, name)[app_id]
    assert app["cores"] == cluster["worker_cores"], app
    assert app["memoryperexecutor"] == 1024, app
    logs = sorted((Path(cluster["work_dir"]) / app_id).glob("*/stderr"))
    assert logs, f"no executor of {app_id} ran in {cluster['work_dir']}"
    return app, "\n".join(log.read_text(errors="replace") for log in logs)


def test_demo_runs_on_a_standalone_cluster(spark_standalone, tmp_path):
    before = applications(spark_standalone, "mqforensics-demo")
    result = run_cli(spark_standalone, "demo", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"({spark_standalone['master']})" in result.stdout
    truth = json.loads((BUNDLED / "ground_truth.json").read_text())["findings"]
    rows = json.loads((tmp_path / "findings.json").read_text())
    assert sorted((r["check"], r["subject"]) for r in rows) == sorted(
        (f["check"], f["subject"]) for f in truth
    )
    _, executor_log = ran_on_the_worker(spark_standalone, "mqforensics-demo", before)
    assert "Finished task" in executor_log


@pytest.mark.parametrize("loaded", ["v4-passthrough"], indirect=True)
def test_live_james_audit_reads_cassandra_and_s3_in_the_executors(
    spark_standalone,
    loaded,  # noqa: F811 (the imported fixture)
    environment,  # noqa: F811 (the imported fixture)
    tmp_path,
):
    state, keyspace, bucket = loaded
    before = applications(spark_standalone, "mqforensics-audit-james")
    result = run_cli(
        spark_standalone,
        "audit", "james", "--cassandra", environment, "--keyspace", keyspace, "--scan",
        "--blobs", f"s3://{bucket}", "--out", str(tmp_path),
        "--as-of", state.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # errors (stuck, invisible, ...) were found
    assert f"keyspace {keyspace}" in result.stdout
    rows = json.loads((tmp_path / "findings.json").read_text())
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    expected = expected_findings(state)  # a token-range scan reads every row
    assert sorted(found - expected, key=str) == []
    assert sorted(expected - found, key=str) == []
    assert len(rows) == len(found)
    _, executor_log = ran_on_the_worker(spark_standalone, "mqforensics-audit-james", before)
    # Spark reads a Python data source's partitions through MapInBatchEvaluatorFactory (the
    # project has no mapInArrow/mapInPandas of its own): the Cassandra scan and the S3 listing
    # ran in the executor's Python workers.
    assert "MapInBatchEvaluator" in executor_log
