"""slimta's cloud storage on a real S3 (SeaweedFS): objects laid out as slimta's
``SimpleStorageService`` writes them (its boto 2 client does not run on Python 3.11, so the
objects are uploaded with boto3; the bodies are envelopes pickled by the real python-slimta),
an SQS export, exact findings, and a plan the purger applies deleting exactly what it names."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.purge.journal import read_journal
from mqforensics.services.seaweedfs import s3_client
from mqforensics.units import utc_text
from tests.integration.slimta.slimta_support import (
    MARKER,
    audit,
    plan_both_ways,
    triples,
    write_envelope_pickles,
)

pytestmark = pytest.mark.integration

PREFIX = "queue-"


@pytest.fixture
def login(s3, monkeypatch) -> None:
    monkeypatch.setenv("MQF_S3_ENDPOINT", s3["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3["region"])


def _upload(s3, tmp_path: Path, bucket: str) -> tuple[dict[str, str], dict]:
    """The bucket as slimta leaves it: role -> key, and the real pickles' report."""
    made = write_envelope_pickles(tmp_path / "pickles")
    body = {role: Path(p["path"]).read_bytes() for role, p in made["pickles"].items()}
    now = made["now"]
    client = s3_client(s3["endpoint"], s3["access_key"], s3["secret_key"])
    client.create_bucket(Bucket=bucket)
    # slimta: timestamp = json.dumps(next attempt); attempts and delivered_indexes "" at first.
    fresh_meta = {"timestamp": json.dumps(now), "attempts": "", "delivered_indexes": ""}
    objects = {
        "fresh": (body["fresh"], fresh_meta),
        "old": (
            body["old"],
            {"timestamp": json.dumps(now), "attempts": json.dumps(2), "delivered_indexes": ""},
        ),
        "hostile": (body["hostile"], fresh_meta),
        "corrupt": (body["fresh"][:40], fresh_meta),
        "badmeta": (body["fresh"], {"timestamp": "yesterday", "attempts": ""}),
        "unqueued": (body["fresh"], fresh_meta),
    }
    keys = {}
    for role, (data, metadata) in objects.items():
        keys[role] = PREFIX + str(uuid.uuid4())
        client.put_object(Bucket=bucket, Key=keys[role], Body=data, Metadata=metadata)
    return keys, made


def _sqs_export(path: Path, keys: dict[str, str], now: float) -> Path:
    """What `aws sqs receive-message --max-number-of-messages 10` prints for the queue."""
    names = ["fresh", "old", "hostile", "corrupt", "badmeta"]
    storage = [keys[n] for n in names] + [PREFIX + "00000000-0000-4000-8000-000000000000"]
    messages = [
        {"MessageId": f"msg-{i}", "ReceiptHandle": f"handle-{i}",
         "Body": json.dumps({"timestamp": now, "storage_id": sid})}
        for i, sid in enumerate(storage)
    ]  # fmt: skip
    path.write_text(json.dumps({"Messages": messages}, indent=1))
    return path


def test_every_check_and_a_plan_applied_by_the_purger(s3, login, slimta_python, tmp_path: Path):
    bucket = "slimta-" + uuid.uuid4().hex[:8]
    MARKER.unlink(missing_ok=True)
    keys, made = _upload(s3, tmp_path, bucket)
    export = _sqs_export(tmp_path / "sqs.json", keys, made["now"])
    stores = ["--s3", f"s3://{bucket}/{PREFIX}", "--sqs-export", str(export)]
    status, rows = audit(stores, tmp_path / "audit")
    assert status == 1
    assert triples(rows) == {
        ("retention_exceeded", "warning", keys["old"]),
        ("retry_exhausted", "warning", keys["old"]),
        ("unsafe_pickle", "critical", keys["hostile"]),
        ("unreadable_envelope", "error", keys["corrupt"]),
        ("corrupt_meta", "error", keys["badmeta"]),
        ("torn_write", "error", keys["unqueued"]),
        ("dangling_queue_entry", "warning", "sqs:msg-5"),
    }
    assert not MARKER.exists()

    policy = tmp_path / "policy.toml"
    policy.write_text(
        "version = 1\n"
        '[[rules]]\nid = "retention"\nkind = "queued_mail"\nolder_than = "7d"\n'
        'legal_basis = "queue retention 7 days"\n'
        '[[rules]]\nid = "erasure"\nkind = "erase_subject"\naddresses = ["alice@example.com"]\n'
        'legal_basis = "GDPR art. 17"\n'
    )
    as_of = utc_text(dt.datetime.fromtimestamp(int(made["now"]) + 60, dt.UTC))
    plan = plan_both_ways(stores, policy, tmp_path / "planned", as_of)
    actions = [json.loads(line) for line in (plan / "actions.jsonl").read_text().splitlines()]
    assert {(a["kind"], a["target"]["key"], tuple(a["rules"])) for a in actions} == {
        ("slimta.delete_object", keys["old"], ("retention",)),
        ("slimta.delete_object", keys["fresh"], ("erasure",)),
        ("slimta.delete_object", keys["badmeta"], ("erasure",)),
        ("slimta.delete_object", keys["unqueued"], ("erasure",)),
    }
    every_deferred = [json.loads(x) for x in (plan / "deferred.jsonl").read_text().splitlines()]
    # The objects whose envelope does not decode could not be searched: deferred under the
    # erasure (the hostile one as evidence), never deleted blindly.
    unsearched = [d for d in every_deferred if d["kind"] == "slimta.delete_object"]
    assert sorted((d["target"]["key"], d["rules"], d["reason"].split(":")[0])
                  for d in unsearched) == sorted([
        (keys["corrupt"], ["erasure"], "content could not be searched"),
        (keys["hostile"], ["erasure"], "holds an unsafe pickle (unsafe_pickle)"),
    ])  # fmt: skip
    deferred = [d for d in every_deferred if d["kind"] != "slimta.delete_object"]
    assert sorted(d["target"]["message"] for d in deferred) == ["sqs:msg-0", "sqs:msg-1",
                                                                "sqs:msg-4"]  # fmt: skip
    assert all("SQS API" in d["reason"] for d in deferred)
    # Each SQS message cites the findings of the object it names; the objects theirs.
    findings = json.loads((tmp_path / "planned" / "audit" / "findings.json").read_text())
    checks = {f["id"]: (f["check"], f["subject"]) for f in findings}
    assert {d["target"]["message"]: sorted(checks[i][1] for i in d["findings"])
            for d in deferred} == {
        "sqs:msg-0": [keys["fresh"]], "sqs:msg-1": [keys["old"]], "sqs:msg-4": [keys["badmeta"]],
    }  # fmt: skip
    assert sorted(checks[i][0] for a in actions for i in a["findings"]) == [
        "personal_data", "personal_data", "personal_data", "retention_exceeded",
    ]  # fmt: skip

    client = s3_client(s3["endpoint"], s3["access_key"], s3["secret_key"])
    client.put_object(Bucket=bucket, Key=keys["fresh"], Body=b"rewritten after the plan")
    # slimta counts an attempt of `unqueued`: a metadata rewrite, which keeps the ETag.
    client.copy_object(
        Bucket=bucket, Key=keys["unqueued"], CopySource={"Bucket": bucket, "Key": keys["unqueued"]},
        Metadata={"timestamp": json.dumps(made["now"] + 300), "attempts": "1"},
        MetadataDirective="REPLACE",
    )  # fmt: skip
    assert cli.main(["approve", str(plan), "--by", "dpo"]) == 0
    assert cli.main(["purge", str(plan), "--apply"]) == 0
    left = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert left == {keys[r] for r in ("fresh", "unqueued", "hostile", "corrupt")}
    skipped = [r for r in read_journal(plan / "journal.jsonl") if r["event"] == "skipped"]
    assert [r["kind"] for r in skipped] == ["slimta.delete_object"] * 2
