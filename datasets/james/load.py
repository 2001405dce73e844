"""Load a generated James state into a real Cassandra (James's exact DDL) and an S3 bucket.

DDL from apache/james-project ``CassandraMailQueueViewDataDefinition.java`` (enqueuedMailsV4,
browseStart, contentStart, deletedMailsV2; enqueuedMailsV3 before JAMES-3629, with non-frozen
collections and no contentStart before JAMES-3601) and ``CassandraEventStoreDataDefinition.scala``
(eventStore). Identifiers are unquoted, so Cassandra stores them lower case, as James's do.
"""

from __future__ import annotations

from typing import Any

from datasets.james.generate import GeneratedState
from mqforensics.sources.blobstore import S3Endpoint
from mqforensics.sources.cassandra_connection import CassandraEndpoint, close_cluster

_ENQUEUED_COMMENT = (
    "store enqueued mails, if a mail is enqueued into a mail queue, it also being stored in "
    "this table, when a mail is dequeued from a mail queue, the record associated with that mail "
    "still available in this table and will not be deleted immediately regarding to the "
    "performance impacts, but after some scheduled tasks"
)


def enqueued_ddl(table_version: str) -> str:
    """CREATE TABLE of enqueuedMailsV4 (frozen collections) or enqueuedMailsV3 (non-frozen)."""
    if table_version == "v4":
        attrs, rcpts, headers = (
            "frozen<map<text, blob>>",
            "frozen<list<text>>",
            "frozen<list<tuple<text, text, text>>>",
        )
    elif table_version == "v3":
        attrs, rcpts, headers = "map<text, blob>", "list<text>", "list<tuple<text, text, text>>"
    else:
        raise ValueError(f"table_version must be 'v4' or 'v3', not {table_version!r}")
    return (
        f"CREATE TABLE IF NOT EXISTS enqueuedMails{table_version.upper()} ("
        "queueName text, timeRangeStart timestamp, bucketId int, enqueueId uuid, "
        "enqueuedTime timestamp, name text, state text, headerBlobId text, bodyBlobId text, "
        f"attributes {attrs}, errorMessage text, sender text, recipients {rcpts}, "
        "remoteHost text, remoteAddr text, lastUpdated timestamp, "
        f"perRecipientSpecificHeaders {headers}, "
        "PRIMARY KEY ((queueName, timeRangeStart, bucketId), enqueueId)) "
        "WITH compaction = {'class': 'TimeWindowCompactionStrategy', "
        "'compaction_window_size': '1', 'compaction_window_unit': 'HOURS'} "
        f"AND comment = '{_ENQUEUED_COMMENT}'"
    )


def james_ddl(table_version: str) -> list[str]:
    """Every CREATE TABLE of the mail queue view and the event store (no contentStart for V3)."""
    statements = [
        enqueued_ddl(table_version),
        "CREATE TABLE IF NOT EXISTS browseStart (queueName text, browseStart timestamp, "
        "PRIMARY KEY (queueName)) WITH comment = 'this table allows to find the starting point "
        "of iteration from the table: enqueuedMailsV4 in order to make a browse operation through "
        "mail queues'",
        "CREATE TABLE IF NOT EXISTS deletedMailsV2 (queueName text, enqueueId uuid, "
        "PRIMARY KEY ((queueName, enqueueId))) "
        "WITH compaction = {'class': 'TimeWindowCompactionStrategy'} "
        "AND bloom_filter_fp_chance = 0.01",
        "CREATE TABLE IF NOT EXISTS eventStore (aggregateId text, eventId int, "
        "snapshot int static, event text, PRIMARY KEY ((aggregateId), eventId)) "
        "WITH compaction = {'class': 'LeveledCompactionStrategy'} "
        "AND caching = {'keys': 'ALL', 'rows_per_partition': '10'}",
    ]
    if table_version == "v4":
        statements.append(
            "CREATE TABLE IF NOT EXISTS contentStart (queueName text, contentStart timestamp, "
            "PRIMARY KEY (queueName)) WITH comment = 'this table allows to find the starting "
            "point of content from the table: enqueuedMailsV4. Strictly before browse start, it "
            "enables queue cleanup.'"
        )
    return statements


def _unset(value: Any) -> Any:
    from cassandra.query import UNSET_VALUE

    # James binds errorMessage, sender and lastUpdated only when present: leave them unset.
    return UNSET_VALUE if value is None else value


def load_into_cassandra(
    state: GeneratedState,
    endpoint: CassandraEndpoint,
    keyspace: str,
    *,
    replication: int = 1,
    concurrency: int = 64,
) -> dict[str, int]:
    """Create `keyspace` and James's tables, insert every row; returns rows written per table."""
    import uuid

    from cassandra.concurrent import execute_concurrent_with_args

    cluster, session = endpoint.connect()
    try:
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {replication}}}"
        )
        session.set_keyspace(keyspace)
        for statement in james_ddl(state.table_version):
            session.execute(statement, timeout=120)
        table = state.enqueued_table
        columns = [
            "queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name",
            "state", "headerblobid", "bodyblobid", "attributes", "errormessage", "sender",
            "recipients", "remotehost", "remoteaddr", "lastupdated", "perrecipientspecificheaders",
        ]  # fmt: skip
        written: dict[str, int] = {}

        def run(cql: str, rows: list[tuple[Any, ...]], name: str) -> None:
            prepared = session.prepare(cql)
            results = execute_concurrent_with_args(
                session, prepared, rows, concurrency=concurrency, raise_on_first_error=True
            )
            written[name] = sum(1 for ok, _ in results if ok)

        placeholders = ", ".join("?" for _ in columns)
        run(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})",
            [
                tuple(
                    uuid.UUID(row[c]) if c == "enqueueid" else _unset(row.get(c)) for c in columns
                )
                for row in state.entries
            ],
            table,
        )
        run(
            "INSERT INTO deletedmailsv2 (queuename, enqueueid) VALUES (?, ?)",
            [(d["queuename"], uuid.UUID(d["enqueueid"])) for d in state.deleted],
            "deletedmailsv2",
        )
        run(
            "INSERT INTO browsestart (queuename, browsestart) VALUES (?, ?)",
            [(b["queuename"], b["browsestart"]) for b in state.browse_start],
            "browsestart",
        )
        if state.table_version == "v4":
            run(
                "INSERT INTO contentstart (queuename, contentstart) VALUES (?, ?)",
                [(c["queuename"], c["contentstart"]) for c in state.content_start],
                "contentstart",
            )
        run(
            "INSERT INTO eventstore (aggregateid, eventid, snapshot, event) VALUES (?, ?, ?, ?)",
            [
                (e["aggregateid"], e["eventid"], _unset(e.get("snapshot")), e["event"])
                for e in state.event_store
            ],
            "eventstore",
        )
        return written
    finally:
        close_cluster(cluster)


def load_into_s3(state: GeneratedState, s3: S3Endpoint, bucket: str) -> int:
    """Create `bucket` if needed and upload every blob object (key = blob id); returns the count.

    S3 sets LastModified to the upload time, so ages planted for orphaned blobs only hold for
    the local-directory and Parquet inventories.
    """
    from concurrent.futures import ThreadPoolExecutor

    client = s3.client()
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)

    def put(item: tuple[str, bytes]) -> None:
        client.put_object(Bucket=bucket, Key=item[0], Body=item[1])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, sorted(state.blobs.items())))
    return len(state.blobs)


def unload(
    state: GeneratedState,
    cassandra: CassandraEndpoint,
    s3: S3Endpoint,
    keyspace: str,
    bucket: str,
) -> None:
    """Remove what `load_into_cassandra` and `load_into_s3` wrote: the keyspace, every blob of
    `state` and the bucket (which must then be empty)."""
    cluster, session = cassandra.connect()
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    finally:
        close_cluster(cluster)
    client = s3.client()
    for key in state.blobs:
        client.delete_object(Bucket=bucket, Key=key)
    client.delete_bucket(Bucket=bucket)
