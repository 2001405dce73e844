"""A generated James state loaded into the real Cassandra and SeaweedFS, and read back."""

from __future__ import annotations

import uuid

import pytest

from datasets.james import generate as gen
from datasets.james.load import load_into_cassandra, load_into_s3
from mqforensics.services import seaweedfs

pytestmark = pytest.mark.integration

ANOMALIES = gen.AnomalyCounts(
    pinned_browse_start=1,
    empty_queue_old_browse_start=1,
    invisible_mails=2,
    stuck_mails=1,
    orphaned_blobs=2,
    dangling_blob_refs=2,
    bucket_mismatches=1,
    slice_mismatches=1,
    config_violations=1,
)

# James's column types as system_schema.columns shows them (CQL tuples are always frozen).
COMMON = {
    "queuename": "text", "timerangestart": "timestamp", "bucketid": "int", "enqueueid": "uuid",
    "enqueuedtime": "timestamp", "name": "text", "state": "text", "headerblobid": "text",
    "bodyblobid": "text", "errormessage": "text", "sender": "text", "remotehost": "text",
    "remoteaddr": "text", "lastupdated": "timestamp",
}  # fmt: skip
TYPES = {
    "v4": {
        **COMMON,
        "attributes": "frozen<map<text, blob>>",
        "recipients": "frozen<list<text>>",
        "perrecipientspecificheaders": "frozen<list<frozen<tuple<text, text, text>>>>",
    },
    "v3": {
        **COMMON,
        "attributes": "map<text, blob>",
        "recipients": "list<text>",
        "perrecipientspecificheaders": "list<frozen<tuple<text, text, text>>>",
    },
}


@pytest.fixture
def keyspace(cassandra_endpoint):
    name = f"james_it_{uuid.uuid4().hex[:10]}"
    yield name
    cluster, session = cassandra_endpoint.connect()
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    finally:
        cluster.shutdown()


def _spec(version: str) -> gen.GenerationSpec:
    anomalies = ANOMALIES
    if version == "v4":
        anomalies = gen.AnomalyCounts(
            **{**vars(ANOMALIES), "unreclaimed_partitions": 1, "cleanup_pending_partitions": 1}
        )
    else:
        anomalies = gen.AnomalyCounts(**{**vars(ANOMALIES), "never_cleaned_partitions": 2})
    return gen.GenerationSpec(seed=42, table_version=version, normal_mails=250, anomalies=anomalies)


def _columns(session, keyspace: str, table: str) -> dict[str, tuple[str, str]]:
    rows = session.execute(
        "SELECT column_name, type, kind FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    )
    return {r.column_name: (r.type, r.kind) for r in rows}


@pytest.mark.parametrize("version", ["v4", "v3"])
def test_load_and_read_back(cassandra_endpoint, keyspace, version):
    state = gen.generate(_spec(version))
    written = load_into_cassandra(state, cassandra_endpoint, keyspace)
    table = state.enqueued_table
    assert written[table] == len(state.entries)
    cluster, session = cassandra_endpoint.connect(keyspace)
    try:
        tables = {
            r.table_name
            for r in session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
            )
        }
        expected_tables = {table, "deletedmailsv2", "browsestart", "eventstore"}
        if version == "v4":
            expected_tables.add("contentstart")
        assert tables == expected_tables

        columns = _columns(session, keyspace, table)
        assert {c: t for c, (t, _) in columns.items()} == TYPES[version]
        assert columns["queuename"][1] == columns["timerangestart"][1] == "partition_key"
        assert columns["bucketid"][1] == "partition_key"
        assert columns["enqueueid"][1] == "clustering"
        events = _columns(session, keyspace, "eventstore")
        assert events == {
            "aggregateid": ("text", "partition_key"),
            "eventid": ("int", "clustering"),
            "snapshot": ("int", "static"),
            "event": ("text", "regular"),
        }
        assert _columns(session, keyspace, "deletedmailsv2") == {
            "queuename": ("text", "partition_key"),
            "enqueueid": ("uuid", "partition_key"),
        }
        options = session.execute(
            "SELECT compaction, bloom_filter_fp_chance FROM system_schema.tables "
            "WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        ).one()
        assert options.compaction["class"].endswith("TimeWindowCompactionStrategy")
        assert options.compaction["compaction_window_unit"] == "HOURS"
        assert options.compaction["compaction_window_size"] == "1"

        def count(t: str) -> int:
            return session.execute(f"SELECT count(*) FROM {t}").one()[0]

        assert count(table) == len(state.entries)
        assert count("deletedmailsv2") == len(state.deleted)
        assert count("browsestart") == len(state.browse_start)
        assert count("eventstore") == len(state.event_store)
        if version == "v4":
            assert count("contentstart") == len(state.content_start)
            got = {
                r.queuename: r.contentstart for r in session.execute("SELECT * FROM contentstart")
            }
            assert got == {
                c["queuename"]: c["contentstart"].replace(tzinfo=None) for c in state.content_start
            }
        got = {r.queuename: r.browsestart for r in session.execute("SELECT * FROM browsestart")}
        assert got == {b["queuename"]: b["browsestart"].replace(tzinfo=None)
                       for b in state.browse_start}  # fmt: skip

        select = session.prepare(
            f"SELECT * FROM {table} WHERE queuename = ? AND timerangestart = ? AND bucketid = ? "
            "AND enqueueid = ?"
        )
        sample = state.entries[:: max(1, len(state.entries) // 40)]
        for row in sample:
            back = session.execute(
                select,
                (row["queuename"], row["timerangestart"], row["bucketid"],
                 uuid.UUID(row["enqueueid"])),
            ).one()  # fmt: skip
            assert back is not None
            for column in ("name", "state", "headerblobid", "bodyblobid", "errormessage",
                           "sender", "remotehost", "remoteaddr"):  # fmt: skip
                assert getattr(back, column) == row[column], column
            for column in ("enqueuedtime", "lastupdated"):
                assert getattr(back, column) == row[column].replace(tzinfo=None)
            assert list(back.recipients) == row["recipients"]
            assert dict(back.attributes or {}) == row["attributes"]
            assert [tuple(t) for t in back.perrecipientspecificheaders or []] == row[
                "perrecipientspecificheaders"
            ]
        events = list(session.execute(
            "SELECT eventid, event, snapshot FROM eventstore WHERE aggregateid = %s",
            ("CassandraMailQueueViewConfiguration",),
        ))  # fmt: skip
        assert [e.event for e in events] == [
            e["event"] for e in state.event_store
            if e["aggregateid"] == "CassandraMailQueueViewConfiguration"
        ]  # fmt: skip
        assert all(e.snapshot is None for e in events)
        nulls = session.execute(
            f"SELECT sender, errormessage FROM {table} WHERE queuename = 'bounces' ALLOW FILTERING"
        ).all()
        assert nulls and all(r.sender is None for r in nulls)
    finally:
        cluster.shutdown()


def test_blobs_uploaded_to_s3(s3):
    state = gen.generate(_spec("v4"))
    s3_endpoint = seaweedfs.s3_endpoint(s3)
    bucket = f"james-it-{uuid.uuid4().hex[:8]}"
    assert load_into_s3(state, s3_endpoint, bucket) == len(state.blobs)
    client = s3_endpoint.client()
    keys = {
        o["Key"]: o["Size"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    }
    assert keys == {k: len(v) for k, v in state.blobs.items()}
    for key in sorted(state.blobs)[:5]:
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == state.blobs[key]
