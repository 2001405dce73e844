"""The canonical frames of a James mail queue state, and the facts of James's schema.

Column names are Cassandra's own, lower case (James creates the tables with unquoted camelCase
identifiers, which Cassandra folds to lower case: ``enqueuedmailsv4.timerangestart``). Every
reader (live Cassandra, cqlsh CSV exports, Parquet exports) produces exactly these schemas, so the
checks never know where a frame came from. Source: apache/james-project
``CassandraMailQueueViewDataDefinition.java`` (see docs/james.md).
"""

from __future__ import annotations

KEYSPACE = "apache_james"

# enqueuedMailsV4 since James 3.7.0 (JAMES-3629); enqueuedMailsV3 before, with the same columns
# but non-frozen collections. A state carries rows of exactly one of them (see `table_version`).
ENQUEUED_TABLES = ("enqueuedmailsv4", "enqueuedmailsv3")
DELETED_TABLE = "deletedmailsv2"
BROWSE_START_TABLE = "browsestart"
CONTENT_START_TABLE = "contentstart"
EVENT_STORE_TABLE = "eventstore"

# Enumerated enqueued partitions (a queue's slices x buckets) one live query reads with IN.
PARTITIONS_PER_QUERY = 20
# Traced queries of one measurement of James's browse by the purger (before and after a purge):
# each is a read plus Cassandra's writes of its trace to system_traces and the driver's reads of it.
BROWSE_TRACE_QUERIES = 2000
CONFIG_AGGREGATE = "CassandraMailQueueViewConfiguration"
STORAGE_STRATEGY_AGGREGATE = "BlobStoreStorageStrategyConfiguration"

# One row per enqueued mail. `table_version` is "v4" or "v3" (the table it was read from).
ENTRIES = (
    "queuename string, timerangestart timestamp, bucketid int, enqueueid string, "
    "enqueuedtime timestamp, name string, state string, headerblobid string, bodyblobid string, "
    "attributes map<string, binary>, errormessage string, sender string, "
    "recipients array<string>, remotehost string, remoteaddr string, lastupdated timestamp, "
    "perrecipientspecificheaders array<struct<_1: string, _2: string, _3: string>>, "
    "table_version string"
)

# Presence of (queuename, enqueueid) means the mail was dequeued or deleted.
DELETED = "queuename string, enqueueid string"

BROWSE_START = "queuename string, browsestart timestamp"
CONTENT_START = "queuename string, contentstart timestamp"

# The eventstore rows of aggregate CassandraMailQueueViewConfiguration, parsed: one row per
# ConfigurationChanged event, in eventid order. `slice_window_seconds` comes from the event's
# decimal-seconds Duration ("sliceWindow": 3600.000000000).
CONFIG_HISTORY = (
    "eventid int, slice_window_seconds bigint, bucket_count int, update_browse_start_pace int"
)

# Raw eventstore rows as Cassandra holds them.
EVENT_STORE = "aggregateid string, eventid int, snapshot int, event string"

# Objects of the default blob bucket, with the blob id parsed (see blob_ids.py):
# id_kind is one of "passthrough", "generation_aware", "minio_generation_aware", "legacy_hash",
# "unknown"; family/generation are set for the generation-aware kinds, 0/0 for legacy_hash (as
# James reads an id without family and generation), null otherwise.
BLOBS = (
    "bucket string, key string, size bigint, last_modified timestamp, etag string, "
    "storage_class string, id_kind string, family int, generation bigint, hash string"
)

# Column types of the tables as James creates them (CassandraMailQueueViewDataDefinition.java,
# CassandraEventStoreDataDefinition.scala), in the canonical column order above. V3 has the same
# columns with non-frozen collections.
_ENQUEUED_V4 = [
    ("queuename", "text"),
    ("timerangestart", "timestamp"),
    ("bucketid", "int"),
    ("enqueueid", "uuid"),
    ("enqueuedtime", "timestamp"),
    ("name", "text"),
    ("state", "text"),
    ("headerblobid", "text"),
    ("bodyblobid", "text"),
    ("attributes", "frozen<map<text, blob>>"),
    ("errormessage", "text"),
    ("sender", "text"),
    ("recipients", "frozen<list<text>>"),
    ("remotehost", "text"),
    ("remoteaddr", "text"),
    ("lastupdated", "timestamp"),
    ("perrecipientspecificheaders", "frozen<list<frozen<tuple<text, text, text>>>>"),
]
_V3_TYPES = {
    "attributes": "map<text, blob>",
    "recipients": "list<text>",
    "perrecipientspecificheaders": "list<frozen<tuple<text, text, text>>>",
}
TABLE_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "enqueuedmailsv4": _ENQUEUED_V4,
    "enqueuedmailsv3": [(n, _V3_TYPES.get(n, t)) for n, t in _ENQUEUED_V4],
    DELETED_TABLE: [("queuename", "text"), ("enqueueid", "uuid")],
    BROWSE_START_TABLE: [("queuename", "text"), ("browsestart", "timestamp")],
    CONTENT_START_TABLE: [("queuename", "text"), ("contentstart", "timestamp")],
    EVENT_STORE_TABLE: [
        ("aggregateid", "text"),
        ("eventid", "int"),
        ("snapshot", "int"),
        ("event", "text"),
    ],
}
