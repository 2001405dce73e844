"""Read a James mail queue state from a live Cassandra cluster.

Two ways to read the enqueued table:

* **enumerate** (default): the Cassandra partitions ``(queuename, timerangestart, bucketid)`` are
  enumerated the way James itself does (slices stepping by the window, buckets ``0..n-1``), from
  a start per queue to the slice holding `as_of`, so a read touches only the partitions it needs.
  A query reads up to 20 of a queue's partitions at once (IN on slices and buckets): most
  enumerated partitions are empty, and one query per partition spent the read in round trips.
  Every window the configuration history names is walked, each on its own epoch-aligned grid
  (the union of their slice starts): James only lets the window shrink to a divisor, whose grid
  holds every start of the larger one, but a history that broke that rule (a `config_violation`,
  e.g. 3600 s then 2400 s) wrote slices on both grids, and the smallest window's grid alone
  missed the larger one's. Bucket ids go up to the largest bucket count of the history.
  Partitions outside the enumerated range, or on no grid of the history (what a scan's
  `slice_mismatch` finds), are not seen.
* **scan**: a token-range full scan of the table (``mqf_cassandra``), which also finds partitions
  no enumeration can predict (misaligned slices, buckets beyond the count, unknown queues).

`deletedmailsv2` is always token-scanned (one partition per marker); the small tables
(`browsestart`, `contentstart`, `eventstore`) are read on the driver.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError, ServerUnavailable
from mqforensics.sources.cassandra_connection import CassandraEndpoint, close_cluster
from mqforensics.sources.cassandra_scan import positive_count, read_table
from mqforensics.spark import local_frame
from mqforensics.systems.james import schema
from mqforensics.systems.james.config_history import history_rows
from mqforensics.systems.james.frames import JamesState

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pyspark.sql import DataFrame, SparkSession

# The enqueued table's columns with their CQL types (V3's non-frozen collections read the same).
ENQUEUED_COLUMNS = schema.TABLE_COLUMNS["enqueuedmailsv4"]
# Enumerated Cassandra partitions per Spark task: a task costs a fixed setup, and James's
# partitions are small (one slice of one bucket).
DEFAULT_CHUNK = 1024
DEFAULT_LOOKBACK = dt.timedelta(days=7)
# Markers are two short strings (a page is a few megabytes): Cassandra spends less per marker
# in fewer, larger pages of its token-range scan.
MARKER_PAGE_ROWS = 50_000


@dataclass
class SliceChunk(InputPartition):
    """Cassandra partitions (queue, slice start epoch seconds, bucket) read by one Spark task."""

    keys: list[tuple[str, int, int]]


DISTINCT_PAGE_ROWS = 5000
DISTINCT_SECONDS = 120.0


def enumerate_partitions(
    ranges: dict[str, tuple[int, int]], windows: int | Sequence[int], bucket_count: int
) -> list[tuple[str, int, int]]:
    """Every (queue, slice start, bucket) with start in [first, last] aligned to any of
    `windows` (each slice start once, in order; the first slice holds `first`)."""
    steps = sorted({windows} if isinstance(windows, int) else set(windows))
    keys: list[tuple[str, int, int]] = []
    for queue, (first, last) in sorted(ranges.items()):
        starts: set[int] = set()
        for window in steps:
            starts.update(range((first // window) * window, last + 1, window))
        for slice_start in sorted(starts):
            keys.extend((queue, slice_start, bucket) for bucket in range(bucket_count))
    return keys


def slice_windows(options: Any) -> list[int]:
    """The ``windows`` option (comma-separated seconds), or the older single ``window``."""
    text = options.get("windows") or options["window"]
    windows = [int(part) for part in str(text).split(",")]
    if not windows or min(windows) <= 0:
        raise ValueError(f"windows must be positive seconds, not {text!r}")
    return windows


class JamesEnqueuedSource(DataSource):
    """``mqf_james_enqueued``: the enqueued table read partition by enumerated partition.

    Options: the CassandraEndpoint options, ``keyspace``, ``table``, ``ranges`` (JSON object
    queue -> [first slice epoch, last slice epoch]), ``windows`` (slice windows in seconds,
    comma-separated: each one's grid is walked; ``window``: one), ``bucket_count``, ``chunk``
    (Cassandra partitions per Spark partition, default 1024), ``consistency``, ``concurrency``,
    ``page_size`` (rows per page of a query, default 5000), ``partitions_per_query`` (the
    Cassandra partitions one query reads with IN, default 20), ``columns``
    (comma-separated enqueued columns to read, default all; `table_version` is always added).
    """

    @classmethod
    def name(cls) -> str:
        return "mqf_james_enqueued"

    def schema(self) -> str:
        if not self.options.get("columns"):
            return schema.ENTRIES
        from mqforensics.sources import cql_types

        chosen = selected_columns(self.options.get("columns"))
        typed = [f"{n} {cql_types.spark_type(cql_types.parse(t))}" for n, t in chosen]
        return ", ".join([*typed, "table_version string"])

    def reader(self, schema: Any) -> JamesEnqueuedReader:  # Spark passes it by this name
        return JamesEnqueuedReader(dict(self.options))


def selected_columns(wanted: str | None) -> list[tuple[str, str]]:
    """The enqueued (name, CQL type) pairs named by a ``columns`` option (all when empty)."""
    if not wanted:
        return ENQUEUED_COLUMNS
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    known = dict(ENQUEUED_COLUMNS)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"no enqueued column(s) {', '.join(unknown)}; columns: {', '.join(known)}"
        )
    return [(n, known[n]) for n in names]


class JamesEnqueuedReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[SliceChunk]:
        try:
            ranges = {
                q: (int(a), int(b)) for q, (a, b) in json.loads(self.options["ranges"]).items()
            }
            windows, buckets = slice_windows(self.options), int(self.options["bucket_count"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"bad mqf_james_enqueued options: {exc}") from None
        keys = enumerate_partitions(ranges, windows, buckets)
        chunk = positive_count(self.options.get("chunk", str(DEFAULT_CHUNK)), "chunk")
        # read() uses them in the executors; a bad value fails here, on the driver, first.
        positive_count(self.options.get("concurrency", "16"), "concurrency")
        positive_count(self.options.get("page_size", "5000"), "page_size")
        positive_count(
            self.options.get("partitions_per_query", str(schema.PARTITIONS_PER_QUERY)),
            "partitions_per_query",
        )
        return [SliceChunk(keys[i : i + chunk]) for i in range(0, len(keys), chunk)] or [
            SliceChunk([])
        ]

    def read(self, partition: SliceChunk) -> Iterator[Any]:  # type: ignore[override]
        from cassandra import ConsistencyLevel, InvalidRequest
        from cassandra.concurrent import execute_concurrent_with_args

        from mqforensics.sources.cassandra_scan import worker_session
        from mqforensics.sources.cql_arrow import BATCH_ROWS, BatchMaker, selector

        if not partition.keys:
            return
        table = self.options["table"]
        version = "v4" if table.endswith("v4") else "v3"
        chosen = selected_columns(self.options.get("columns"))
        # One query reads a queue's partitions (slices x buckets) with IN: every row's queue is
        # the one its query asked for, so that column alone is not read but put back in front.
        fetched = [(n, t) for n, t in chosen if n != "queuename"]
        reads = [selector(n, t) for n, t in fetched]
        combined = ["queuename", *(n for n, _ in fetched)]
        order = [combined.index(n) for n, _ in chosen]
        types = dict(chosen) | {n: t for (n, _), (_, t) in zip(fetched, reads, strict=True)}
        maker = BatchMaker(
            [(n, types[n]) for n, _ in chosen], constants=[("table_version", version)]
        )
        endpoint = CassandraEndpoint.from_options(self.options)
        session = worker_session(endpoint)
        statement = session.prepare(
            f"SELECT {', '.join(expression for expression, _ in reads) or 'queuename'} "
            f"FROM {self.options['keyspace']}.{table} "
            "WHERE queuename = ? AND timerangestart IN ? AND bucketid IN ?"
        )
        statement.consistency_level = getattr(
            ConsistencyLevel, self.options.get("consistency", "LOCAL_QUORUM").upper()
        )
        statement.fetch_size = positive_count(self.options.get("page_size", "5000"), "page_size")
        per_query = positive_count(
            self.options.get("partitions_per_query", str(schema.PARTITIONS_PER_QUERY)),
            "partitions_per_query",
        )
        queries = partition_queries(partition.keys, per_query)
        arguments = [
            (queue, [dt.datetime.fromtimestamp(e, tz=dt.UTC) for e in slices], list(buckets))
            for queue, slices, buckets in queries
        ]
        results = execute_concurrent_with_args(
            session, statement, arguments,
            concurrency=positive_count(self.options.get("concurrency", "16"), "concurrency"),
            raise_on_first_error=False, results_generator=True,
        )  # fmt: skip
        # Built column by column, a page at a time: the queue is repeated for the page's rows,
        # the fetched values transposed (no tuple per row in Python).
        pending: list[list[Any]] = [[] for _ in chosen]
        held = 0
        for (success, result), query in zip(results, queries, strict=True):
            where = _partitions_text(table, query)
            if not success:
                reason = f": {result}" if isinstance(result, InvalidRequest) else ""
                hint = (
                    " (fewer partitions per query: option partitions_per_query, "
                    "--partitions-per-query)"
                    if reason
                    else ""
                )
                raise ServerUnavailable(
                    f"Cassandra at {endpoint.where} failed reading {where}: "
                    f"{type(result).__name__}{reason}{hint}"
                )
            for page in _pages(result, endpoint.where, where):
                if not page:
                    continue
                count = len(page)
                values = [[query[0]] * count]
                if fetched:
                    values += [list(column) for column in zip(*page, strict=True)]
                for target, source in zip(pending, order, strict=True):
                    target.extend(values[source])
                held += count
                if held >= BATCH_ROWS:
                    yield maker.columns_batch(pending)
                    pending, held = [[] for _ in chosen], 0
        if held:
            yield maker.columns_batch(pending)


def partition_queries(
    keys: list[tuple[str, int, int]], per_query: int
) -> list[tuple[str, list[int], tuple[int, ...]]]:
    """(queue, slice starts, bucket ids) queries whose products hold each of `keys` once.

    A query's partitions are the product of its slices and buckets (Cassandra's IN on the
    partition key), at most `per_query` of them: coordinators refuse or strain under larger
    products (ScyllaDB refuses over 100 by default, managed clusters' guardrails fewer). Slices of a
    queue with the same buckets share queries, in slice order.
    """
    buckets_of: dict[tuple[str, int], set[int]] = {}
    for queue, start, bucket in keys:
        buckets_of.setdefault((queue, start), set()).add(bucket)
    runs: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for (queue, start), found in sorted(buckets_of.items()):
        runs.setdefault((queue, tuple(sorted(found))), []).append(start)
    queries: list[tuple[str, list[int], tuple[int, ...]]] = []
    for (queue, shape), starts in runs.items():
        for b in range(0, len(shape), per_query):
            buckets = shape[b : b + per_query]
            step = max(1, per_query // len(buckets))
            queries += [(queue, starts[i : i + step], buckets) for i in range(0, len(starts), step)]
    return queries


def _partitions_text(table: str, query: tuple[str, list[int], tuple[int, ...]]) -> str:
    """`table` partitions of one query, as an operator finds them again (UTC slice starts)."""
    queue, starts, buckets = query

    def utc(epoch: int) -> str:
        return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    span = utc(starts[0]) if len(starts) == 1 else f"{utc(starts[0])}..{utc(starts[-1])}"
    kept = f"{buckets[0]}" if len(buckets) == 1 else f"{buckets[0]}..{buckets[-1]}"
    return f"{table} partitions {queue}/{span}/{kept}"


def _pages(result: Any, where: str, partitions: str) -> Iterator[Any]:
    """The pages of rows of one query's result, fetched one after another."""
    from cassandra import OperationTimedOut, ReadTimeout, Unavailable

    while True:
        yield result.current_rows
        if not result.has_more_pages:
            return
        try:
            result.fetch_next_page()
        except (OperationTimedOut, ReadTimeout, Unavailable) as exc:
            raise ServerUnavailable(
                f"Cassandra at {where} stopped answering while reading {partitions}: "
                f"{type(exc).__name__}"
            ) from None


@dataclass(frozen=True)
class LiveOptions:
    keyspace: str = schema.KEYSPACE
    mode: str = "enumerate"  # or "scan"
    queues: tuple[str, ...] = ()
    since: dt.datetime | None = None  # enumerate from here (default: per queue, see read_live)
    consistency: str = "LOCAL_QUORUM"
    splits: int | None = None  # token ranges per scan (default: from Cassandra's size estimate)
    # Enqueued columns to read (default all). A narrow read is for callers that need only
    # these (getSize reads the keys); the checks need every column.
    columns: tuple[str, ...] = ()
    # Enumerate only the partitions James's browse reads: each queue from its browseStart, on
    # the latest configuration's slice window and buckets (the audit's default: a lookback
    # before contentStart, on every window and bucket of the history).
    from_browse_start: bool = False
    # Enumerated partitions one query reads (IN on slices and buckets); lower it for a cluster
    # whose guardrail refuses larger IN products.
    partitions_per_query: int = schema.PARTITIONS_PER_QUERY


def _small_table(session: Any, keyspace: str, table: str, columns: str) -> list[Any]:
    return list(session.execute(f"SELECT {columns} FROM {keyspace}.{table}"))


def read_live(
    spark: SparkSession,
    endpoint: CassandraEndpoint,
    options: LiveOptions | None = None,
    as_of: dt.datetime | None = None,
) -> JamesState:
    """The James state of `endpoint`'s keyspace, judged at `as_of` (default: now)."""
    options = options or LiveOptions()
    if options.mode not in ("enumerate", "scan"):
        raise ConfigError(f"mode must be 'enumerate' or 'scan', not {options.mode!r}")
    as_of = as_of or dt.datetime.now(dt.UTC)
    keyspace = options.keyspace
    cluster, session = endpoint.connect(keyspace, schema_metadata=False)
    try:
        tables = view_tables(session, keyspace)
        table = next((t for t in schema.ENQUEUED_TABLES if t in tables), None)
        missing = [t for t in (schema.DELETED_TABLE, schema.BROWSE_START_TABLE) if t not in tables]
        if table is None or missing:
            absent = ([] if table else ["enqueuedmailsv4 or enqueuedmailsv3"]) + missing
            raise InputError(
                f"keyspace {keyspace!r} at {endpoint.where} is not a James mail queue view: "
                f"no table {', '.join(absent)}"
            )
        browse = _small_table(session, keyspace, "browsestart", "queuename, browsestart")
        content = (
            _small_table(session, keyspace, "contentstart", "queuename, contentstart")
            if schema.CONTENT_START_TABLE in tables
            else []
        )
        events = (
            configuration_events(session, keyspace) if schema.EVENT_STORE_TABLE in tables else []
        )
    finally:
        close_cluster(cluster)

    utc = _utc
    browse_rows = [(r.queuename, utc(r.browsestart)) for r in browse]
    content_rows = [(r.queuename, utc(r.contentstart)) for r in content]
    history = history_rows(events, f"{keyspace}.{schema.EVENT_STORE_TABLE}")
    deleted = read_table(
        spark, endpoint, keyspace, schema.DELETED_TABLE, schema.DELETED,
        splits=options.splits, consistency=options.consistency, columns="queuename,enqueueid",
        page_size=MARKER_PAGE_ROWS,
    )  # fmt: skip
    blob_references = None
    notes: list[str] = []
    chosen = selected_columns(",".join(options.columns))
    if options.mode == "scan":
        entries = read_table(
            spark, endpoint, keyspace, table,
            splits=options.splits, consistency=options.consistency,
            columns=",".join(name for name, _ in chosen),
        ).withColumn("table_version", F.lit(table[-2:]))  # fmt: skip
    else:
        if not history:
            raise InputError(
                f"{keyspace}.eventstore has no {schema.CONFIG_AGGREGATE} event: cannot enumerate "
                "slices (use mode 'scan')"
            )
        if options.from_browse_start:  # history is in eventid order: the last is current
            _eventid, window, buckets, _pace = history[-1]
            windows = [window]
        else:
            windows = sorted({h[1] for h in history}, reverse=True)
            buckets = max(h[2] for h in history)
            notes.append(enumeration_note(windows, buckets))
        entries = _enumerated_entries(
            spark, endpoint, options, table, browse_rows, content_rows, windows, buckets, as_of
        )
    table_partitions = None
    if options.mode == "enumerate" and not options.from_browse_start:
        table_partitions = distinct_partitions(endpoint, keyspace, table, options.queues)
    if options.mode == "enumerate" and not options.from_browse_start:
        # Orphan detection needs every reference, not only the enumerated partitions' (a
        # browse-only read is for the browse's own answers: getSize, delete selections).
        blob_references = (
            read_table(
                spark, endpoint, keyspace, table, splits=options.splits,
                consistency=options.consistency, columns="headerblobid,bodyblobid",
            )
            .select(F.explode(F.array("headerblobid", "bodyblobid")).alias("key"))
            .distinct()
        )  # fmt: skip
    if options.queues:
        wanted = list(options.queues)
        entries = entries.where(F.col("queuename").isin(wanted))
        deleted = deleted.where(F.col("queuename").isin(wanted))
        browse_rows = [r for r in browse_rows if r[0] in wanted]
        content_rows = [r for r in content_rows if r[0] in wanted]
    return JamesState(
        entries=entries,
        deleted=deleted,
        browse_start=local_frame(spark, browse_rows, schema.BROWSE_START),
        content_start=local_frame(spark, content_rows, schema.CONTENT_START),
        config_history=local_frame(spark, history, schema.CONFIG_HISTORY),
        as_of=as_of,
        blob_references=blob_references,
        # A scan of every queue reads every reference; an enumerated read has them read apart
        # (not a browse-only read: its partitions are only the browse's).
        references_complete=blob_references is not None
        or (options.mode == "scan" and not options.queues),
        source=f"cassandra {endpoint.where} keyspace {keyspace} ({options.mode}, {table})",
        notes=notes,
        table=table,
        table_partitions=table_partitions,
    )


def view_tables(session: Any, keyspace: str) -> set[str]:
    """The names of `keyspace`'s tables (system_schema)."""
    return {
        r.table_name
        for r in session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
    }


def configuration_events(session: Any, keyspace: str) -> list[dict[str, Any]]:
    """The event store's rows of the view's configuration aggregate, as `history_rows` reads
    them (``aggregateid``, ``eventid``, ``event``)."""
    rows = session.execute(
        f"SELECT aggregateid, eventid, event FROM {keyspace}.{schema.EVENT_STORE_TABLE} "
        "WHERE aggregateid = %s",
        (schema.CONFIG_AGGREGATE,),
    )
    return [{"aggregateid": r.aggregateid, "eventid": r.eventid, "event": r.event} for r in rows]


def distinct_partitions(
    endpoint: CassandraEndpoint, keyspace: str, table: str, queues: tuple[str, ...] = ()
) -> list[tuple[str, int, int]]:
    """Every partition key of the enqueued table (queue, slice start in epoch milliseconds,
    bucket): ``SELECT DISTINCT`` reads partition keys only, no row, paged by the driver."""
    from cassandra.query import SimpleStatement

    cluster, session = endpoint.connect(keyspace, schema_metadata=False)
    try:
        statement = SimpleStatement(
            f"SELECT DISTINCT queuename, timerangestart, bucketid FROM {keyspace}.{table}",
            fetch_size=DISTINCT_PAGE_ROWS,
        )
        keys = [
            (r.queuename, int(r.timerangestart.replace(tzinfo=dt.UTC).timestamp() * 1000),
             r.bucketid)
            for r in session.execute(statement, timeout=DISTINCT_SECONDS)
            if r.timerangestart is not None and (not queues or r.queuename in queues)
        ]  # fmt: skip
    finally:
        close_cluster(cluster)
    return keys


def enumeration_note(windows: list[int], buckets: int) -> str:
    """What an enumerated read walked: every slice grid of the history, and why several."""
    grids = " and ".join(f"{w} s" for w in windows)
    text = f"enumerated the slice grids of {grids}, buckets 0..{buckets - 1}"
    smallest = min(windows)
    undivided = [w for w in windows if w % smallest]
    if undivided:
        text += (
            f" ({smallest} s does not divide {', '.join(str(w) for w in undivided)} s, against "
            "James's rule: the smallest grid alone would miss their slices)"
        )
    return text


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else value.replace(tzinfo=dt.UTC)


def _enumerated_entries(
    spark: SparkSession,
    endpoint: CassandraEndpoint,
    options: LiveOptions,
    table: str,
    browse_rows: list[tuple[str, Any]],
    content_rows: list[tuple[str, Any]],
    windows: list[int],
    buckets: int,
    as_of: dt.datetime,
) -> DataFrame:
    starts: dict[str, dt.datetime] = {}
    for queue, value in [*browse_rows, *([] if options.from_browse_start else content_rows)]:
        if value is not None and (queue not in starts or value < starts[queue]):
            starts[queue] = value
    queues = set(options.queues) or set(starts)
    end = int(as_of.timestamp())
    ranges = {}
    for queue in sorted(queues):
        if options.since is not None:
            first = options.since
        elif queue in starts:
            lookback = dt.timedelta(0) if options.from_browse_start else DEFAULT_LOOKBACK
            first = starts[queue] - lookback
        else:
            raise InputError(f"queue {queue!r} has no browseStart: give a start time (since)")
        ranges[queue] = [int(first.timestamp()), end]
    reader = spark.read.format(JamesEnqueuedSource.name())
    settings = {
        **endpoint.to_options(),
        "keyspace": options.keyspace,
        "table": table,
        "ranges": json.dumps(ranges),
        "windows": ",".join(str(w) for w in windows),
        "bucket_count": str(buckets),
        "consistency": options.consistency,
        "columns": ",".join(options.columns),
        "partitions_per_query": str(options.partitions_per_query),
    }
    for key, value in settings.items():
        reader = reader.option(key, value)
    return reader.load()
