"""An erasure from audit to signed receipt on a copy of the bundled James sample in the real
Cassandra (James's DDL) and SeaweedFS (its blobs): audit the live keyspace and bucket with the
sample's policy (its erasure rule searching ``full``), plan, approve, purge --apply, audit
again, ``receipt make``, ``receipt verify`` (exit 0), one byte changed (exit 1).

The sample's browseStart is pinned (ANOMALIES.md), so most consumed mail of the subject is at or
after it and deferred, and one of its mails is live (deferred: James deletes it itself): the
after-purge audit still finds exactly those, and the receipt lists them as remaining, each
deferred with its reason. What is found, deleted and deferred is derived from the sample's
ground truth (its personal_data findings, rows, blobs, browseStart), not from the audit."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from datasets.james.load import load_into_cassandra
from mqforensics.retention.policy import subject_hash
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.subjects import keyed, read_key
from tests import receipt_support as receipts
from tests.integration.james import james_purge_support as support
from tests.integration.james.test_james_blobs_s3 import drop_bucket

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"
SUBJECT = "victor@example.com"  # the sample policy's erase_subject rule
RULE = "erasure-2026-017"
FIELD = re.compile(rb"[!-9;-~]+[ \t]*:")  # a header field's start (RFC 5322 2.2)


def _table(name: str) -> list[dict[str, Any]]:
    return pq.read_table(SAMPLE / f"{name}.parquet").to_pylist()


def _sample_state() -> SimpleNamespace:
    """The sample's rows as `load_into_cassandra` takes them, and its blobs."""
    entries = []
    for row in _table("enqueuedmailsv4"):
        row["attributes"] = dict(row["attributes"] or ())
        row["perrecipientspecificheaders"] = [
            (t["_1"], t["_2"], t["_3"]) for t in row["perrecipientspecificheaders"] or ()
        ]
        entries.append(row)
    return SimpleNamespace(
        table_version="v4", enqueued_table="enqueuedmailsv4", entries=entries,
        deleted=_table("deletedmailsv2"), browse_start=_table("browsestart"),
        content_start=_table("contentstart"), event_store=_table("eventstore"),
        blobs={p.name: p.read_bytes() for p in sorted((SAMPLE / "blobs").iterdir())},
    )  # fmt: skip


@pytest.fixture
def loaded(cassandra_endpoint, s3):
    """The sample in a fresh keyspace and bucket (the same name); dropped afterwards."""
    state = _sample_state()
    name = f"receipt_{uuid.uuid4().hex[:10]}"
    client = s3_endpoint(s3).client()
    load_into_cassandra(state, cassandra_endpoint, name)
    client.create_bucket(Bucket=support.bucket_for(name))
    try:
        for key, data in state.blobs.items():
            client.put_object(Bucket=support.bucket_for(name), Key=key, Body=data)
        yield name, state
    finally:
        drop_bucket(client, support.bucket_for(name))
        cluster, session = cassandra_endpoint.connect()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
        finally:
            cluster.shutdown()


def _policy(path: Path) -> Path:
    """The sample's policy, its erasure rule searching bodies and attachments too."""
    text = (SAMPLE / "policy.toml").read_text()
    rule = f'id = "{RULE}"\n'
    assert text.count(rule) == 1
    path.write_text(text.replace(rule, rule + 'search = "full"\n'))
    return path


def _where(state: SimpleNamespace, row: dict[str, Any]) -> set[str]:
    """Where the subject is in a row of the sample: its envelope (the ground truth's
    personal_data findings), and the header fields / body of its blobs naming it."""
    found = {"envelope"}
    head = state.blobs.get(row["headerblobid"], b"")
    field = ""
    for line in head.split(b"\r\n"):
        if FIELD.match(line):
            field = line.partition(b":")[0].decode().lower()
        if SUBJECT.encode() in line.lower():
            found.add(f"header:{field}")
    if SUBJECT.encode() in state.blobs.get(row["bodyblobid"], b"").lower():
        found.add("body")
    return found


def _unsearchable(state: SimpleNamespace, row: dict[str, Any]) -> bool:
    """A live row (depth full: both blobs) whose blob is missing or whose header blob does not
    start as a header section does."""
    head = state.blobs.get(row["headerblobid"])
    if head is None or row["bodyblobid"] not in state.blobs:
        return True
    return bool(head.lstrip(b"\r\n")) and FIELD.match(head.lstrip(b"\r\n")) is None


def test_james_sample_erasure_receipt(
    spark, loaded, cassandra, s3, tmp_path: Path, monkeypatch, capsys
) -> None:
    keyspace, state = loaded
    for name, value in support.environment(cassandra, s3).items():
        monkeypatch.setenv(name, value)
    policy = _policy(tmp_path / "policy.toml")
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    argv = ["audit", "james", "--cassandra", f"{cassandra['host']}:{cassandra['port']}",
            "--keyspace", keyspace, "--scan", "--blobs", f"s3://{support.bucket_for(keyspace)}",
            "--as-of", truth["as_of"], "--erasure-policy", str(policy)]  # fmt: skip
    # Both audits exit 1: the sample's anomalies are errors.
    erasure = receipts.erase(argv, policy, tmp_path, capsys, statuses=(1,))
    request = receipts.request(erasure.document, RULE)
    subject = keyed(subject_hash(SUBJECT), read_key(erasure.audit))
    assert request["subjects"] == [subject] and request["search"] == "full"

    consumed = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    browse = {b["queuename"]: b["browsestart"] for b in state.browse_start}
    rows = {r["enqueueid"]: r for r in state.entries}
    holding = {f["subject"] for f in truth["findings"] if f["check"] == "personal_data"}
    assert {f["object"]: {w["where"] for w in f["where"]} for f in request["found"]} == {
        e: _where(state, rows[e]) for e in holding
    }
    assert all(f["subjects"] == [subject] for f in request["found"])

    def key(e: str) -> tuple[str, str]:
        return (rows[e]["queuename"], e)

    # Live mail is deferred (James deletes it); consumed mail at or after browseStart too (a
    # tombstone there is read by every browse); consumed mail before it goes with its row, or
    # its partition when every row of it is consumed.
    partitions: dict[tuple[str, dt.datetime, int], list[str]] = defaultdict(list)
    for row in state.entries:
        partitions[(row["queuename"], row["timerangestart"], row["bucketid"])].append(
            row["enqueueid"]
        )
    live = {e for e in holding if key(e) not in consumed}
    late = {e for e in holding - live if rows[e]["timerangestart"] >= browse[rows[e]["queuename"]]}
    gone = holding - live - late
    deferred = {e: "live mail" for e in live} | {
        e: "partition at or after browseStart" for e in late
    }
    unsearchable = {
        r["enqueueid"] for r in state.entries
        if (r["queuename"], r["enqueueid"]) not in consumed and r["enqueueid"] not in holding
        and _unsearchable(state, r)
    }  # fmt: skip
    deferred |= dict.fromkeys(unsearchable, "content could not be searched")
    assert {d["target"]["enqueueid"]: d["reason"][: len(deferred.get(d["target"]["enqueueid"],
            ""))] for d in request["deferred"]} == deferred  # fmt: skip
    whole = {p for p, members in partitions.items()
             if all((p[0], e) in consumed for e in members) and set(members) & gone}  # fmt: skip
    single = {key(e) for e in gone if not any(e in partitions[p] for p in whole)}
    assert gone and all(d["outcome"] == "deleted" for d in request["deleted"])
    targets = [(d["kind"], d["target"]) for d in request["deleted"]]
    assert {(t["queue"], t["timerangestart"], t["bucketid"])
            for k, t in targets if k == "james.delete_partition"} == {
        (q, support._iso(start), b) for q, start, b in whole
    }  # fmt: skip
    assert {(t["queue"], t["enqueueid"]) for k, t in targets if k == "james.delete_row"} == single
    # contentStart moves past the deleted partitions (the partitions' queue only).
    assert {t["queue"] for k, t in targets if k == "james.advance_content_start"} <= {
        q for q, _, _ in whole
    }
    assert {k for k, _ in targets} <= {
        "james.delete_partition",
        "james.delete_row",
        "james.advance_content_start",
    }
    assert request["skipped"] == []
    assert {u["object"] for u in request["unreadable"]} == unsearchable
    # After: what was deferred holding the subject is exactly what is left of it.
    remaining = request["after"]["remaining"]
    assert {f["object"] for f in remaining} == live | late
    assert all(f["subjects"] == [subject] for f in remaining)
    assert {u["object"] for u in request["after"]["unreadable"]} == unsearchable
    assert request["after"]["clean"] is False
    assert request["after"]["result"] == (
        f"subject still found in {len(live | late)} object(s) of the stores (listed)"
    )
    assert request["counts"]["remaining"] == len(live | late)
    receipts.no_address(erasure.out, erasure.printed, [SUBJECT])
    receipts.one_byte_changed_fails(erasure.out, capsys, b'"reason": "l')
