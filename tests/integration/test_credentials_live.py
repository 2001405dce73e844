"""Logins the real servers accept, planted in the credential variables, never reach an output.

A Cassandra role and a Redis ACL user are made with distinctive passwords for this test, and the
SeaweedFS keys are the harness's; the James audit (live read and S3 listing), validation, plan,
approval, dry-run purge and HTML report, the slimta Redis audit and the James notebook audit all
run with them in one Spark session that writes event logs (`tests/credential_runs.py`). The
passwords must appear in no output, plan, journal, report or event log, although the data
source options of the Spark jobs carried them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from pathlib import Path

import pytest

from datasets.james import generate as gen
from datasets.james.load import load_into_cassandra, load_into_s3, unload
from mqforensics.services import seaweedfs
from tests.credential_runs import assert_nowhere, files_under, run_in_one_spark

pytestmark = pytest.mark.integration

TAG = uuid.uuid4().hex[:8]
CASSANDRA_SECRET = f"S3cr3tPlant3d-cql-{TAG}"
REDIS_SECRET = f"S3cr3tPlant3d-redis-{TAG}"
JAMES_POLICY = Path(__file__).resolve().parents[2] / "datasets" / "james" / "sample" / "policy.toml"


@pytest.fixture(scope="module")
def james_store(cassandra_endpoint, s3):
    """A small generated James state in its own keyspace and bucket, and a login role whose
    password is planted."""
    as_of = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).replace(minute=0, second=0,
                                                                      microsecond=0)  # fmt: skip
    anomalies = dataclasses.replace(
        gen.AnomalyCounts(), unreclaimed_partitions=1, orphaned_blobs=2, stuck_mails=1
    )
    spec = gen.GenerationSpec(seed=11, queues=("spool",), as_of=as_of, normal_mails=40,
                              anomalies=anomalies)  # fmt: skip
    state = gen.generate(spec)
    keyspace, bucket, role = f"james_secrets_{TAG}", f"james-secrets-{TAG}", f"planted_{TAG}"
    s3_endpoint = seaweedfs.s3_endpoint(s3)
    load_into_cassandra(state, cassandra_endpoint, keyspace)
    load_into_s3(state, s3_endpoint, bucket)
    cluster, session = cassandra_endpoint.connect()
    try:
        session.execute(f"CREATE ROLE {role} WITH PASSWORD = '{CASSANDRA_SECRET}' AND LOGIN = true")
        # The harness's Cassandra allows every logged-in role everything (AllowAllAuthorizer).
    finally:
        cluster.shutdown()
    yield keyspace, bucket, role, as_of.strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster, session = cassandra_endpoint.connect()
    try:
        session.execute(f"DROP ROLE IF EXISTS {role}")
    finally:
        cluster.shutdown()
    unload(state, cassandra_endpoint, s3_endpoint, keyspace, bucket)


@pytest.fixture(scope="module")
def redis_user(redis):
    """A Redis ACL user with a planted password."""
    import redis as redis_py

    name = f"planted-{TAG}"
    admin = redis_py.Redis(host=redis["host"], port=redis["port"], password=redis["password"])
    admin.acl_setuser(name, enabled=True, passwords=[f"+{REDIS_SECRET}"], keys=["*"],
                      commands=["+@all"])  # fmt: skip
    yield name
    admin.acl_deluser(name)
    admin.close()


def test_real_logins_never_reach_outputs_journals_or_spark_event_logs(
    cassandra, s3, redis, james_store, redis_user, tmp_path
) -> None:
    keyspace, bucket, role, as_of = james_store
    where = f"{cassandra['host']}:{cassandra['port']}"
    # Judged a day ahead: the orphans uploaded now are past the policy's hour then (planned).
    live = ["--cassandra", where, "--keyspace", keyspace, "--as-of", as_of]
    out = tmp_path / "out"
    plan = str(out / "plan")
    env = {
        "MQF_CASSANDRA_USERNAME": role,
        "MQF_CASSANDRA_PASSWORD": CASSANDRA_SECRET,
        "MQF_S3_ENDPOINT": s3["endpoint"],
        "AWS_ACCESS_KEY_ID": s3["access_key"],
        "AWS_SECRET_ACCESS_KEY": s3["secret_key"],
        "AWS_DEFAULT_REGION": s3["region"],
        "MQF_REDIS_USERNAME": redis_user,
        "MQF_REDIS_PASSWORD": REDIS_SECRET,
        "MQF_PROGRESS": "1",
    }
    # None: the command's own verdict (findings, failed expectations) is not what is tested.
    argvs = [
        (None, ["audit", "james", *live, "--blobs", f"s3://{bucket}", "--out",
                str(out / "audit")]),
        (None, ["audit", "james", *live, "--scan", "--out", str(out / "audit-scan")]),
        (None, ["validate", "james", *live, "--out", str(out / "validate")]),
        (0, ["plan", "james", "--policy", str(JAMES_POLICY), *live, "--blobs", f"s3://{bucket}",
             "--out", plan]),
        (0, ["approve", plan, "--by", "DPO"]),
        (None, ["purge", plan]),  # dry run: reads the live cluster and bucket, changes nothing
        (0, ["report", "html", str(out / "audit"), plan, "--out", str(out / "report.html")]),
        # An empty prefix: read through Spark with the real login, then nothing to audit (2).
        (2, ["audit", "slimta", "--redis", f"redis://{redis['host']}:{redis['port']}/0",
             "--redis-prefix", f"secrets-{TAG}:", "--out", str(out / "slimta")]),
    ]  # fmt: skip
    steps: list[dict] = [{"argv": argv, "expect": expect} for expect, argv in argvs]
    steps.append({
        "notebook": "james", "out": str(out / "notebook"),
        "env": {"MQF_JAMES_ARGS": f"--cassandra {where} --keyspace {keyspace} --blobs s3://{bucket}"},
    })  # fmt: skip
    results, printed = run_in_one_spark(steps, tmp_path, env)
    for step, result in zip(steps, results, strict=True):
        expected = (0, 1) if step.get("expect") is None else (step["expect"],)
        assert result["rc"] in expected or "notebook" in step, (step, result)
    assert results[-1]["error"] is None, results[-1]
    shown = [printed] + [r["out"] + r["err"] + (r["error"] or "") for r in results]
    for secret in (CASSANDRA_SECRET, REDIS_SECRET, s3["secret_key"]):
        assert_nowhere(secret, shown, tmp_path)
    assert (out / "audit" / "findings.json").is_file() and (out / "report.html").is_file()
    assert "would apply" in results[5]["out"] and " 0 would apply" not in results[5]["out"]
    # The secrets travelled as data source options of the jobs Spark logged.
    logs = b"".join(p.read_bytes() for p in files_under(tmp_path / "eventlog"))
    assert b"SparkListenerSQLExecutionStart" in logs
    assert b"mqf_blobs" in logs and b"mqf_cassandra" in logs and b"slimta_items" in logs
