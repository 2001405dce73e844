"""What Cassandra itself reports about James's browse reads: the exact queries, traced.

James's browse and getSize (CassandraMailQueueBrowser) read, per queue, its ``browsestart``
row, then every partition of every slice from browseStart to the slice holding now (the current
slice window, buckets ``0..bucketCount-1``) with ``SELECT * FROM enqueuedmailsv4 WHERE
queuename=? AND timerangestart=? AND bucketid=?``, and for each row found ``SELECT * FROM
deletedmailsv2 WHERE queuename=? AND enqueueid=?``. `trace_browse` runs exactly those reads
with CQL tracing on and sums, per table, what each replica's trace says it read: ``Read N live
rows and M tombstone cells`` (and ``(see tombstone_warn_threshold)``, or a client warning,
when Cassandra warned). It is read-only (tracing writes only Cassandra's own
``system_traces``) and uses nothing but CQL, so it runs against a production cluster.

What a trace counts (measured on Cassandra 5.0.9, docs/retention.md "Tombstones, measured"): a
row deleted inside a partition is 1 tombstone cell for every read of that partition; a deleted
partition (``DELETE ... WHERE`` the partition key: a whole enqueued partition, or a
``deletedmailsv2`` marker, whose table has no clustering column) reads as 0 live rows and 0
tombstone cells: the partition deletion shadows its rows and is not counted as a cell.

Bounds: a queue whose browseStart lags far behind now has many partitions to read (a week of
15-minute slices with 4 buckets is 2,688), most of them empty. Every partition is first read
without tracing, 20 at a time (``IN``, as the audit's enumeration reads), which finds the
partitions holding rows; those are traced with the marker reads of all their rows, then the
empty partitions in James's order from browseStart while `max_queries` traced queries allow.
The result says how many partitions were enumerated, held rows and were traced; an empty
partition read without tracing has no row, but a tombstone in it would not be counted.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from mqforensics.errors import InputError
from mqforensics.systems.james import schema
from mqforensics.systems.james.config_history import DEFAULT, history_rows
from mqforensics.units import utc_millis_text

DEFAULT_MAX_QUERIES = schema.BROWSE_TRACE_QUERIES
TRACE_WAIT_SECONDS = 10.0
CONCURRENCY = 16

_EXECUTING = re.compile(r"Executing single-partition query on (\w+)")
_READ = re.compile(r"Read (\d+) live rows? and (\d+) tombstone cells?")
_WARNED = "tombstone_warn_threshold"


@dataclass
class TableReads:
    """What the traces of one table's queries reported (per query: its most-read replica)."""

    queries: int = 0
    live_rows: int = 0
    tombstone_cells: int = 0
    tombstone_warnings: int = 0
    untraced: int = 0  # queries whose trace was unavailable or named no read of the table

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class BrowseTrace:
    """The traced browse of every queue of a keyspace (`as_dict` is JSON)."""

    keyspace: str
    until: dt.datetime
    slice_window_seconds: int
    bucket_count: int
    tables: dict[str, TableReads]
    queues: int = 0
    partitions: int = 0  # enumerated, as James's browse reads them
    partitions_with_rows: int = 0
    partitions_traced: int = 0
    mails_returned: int = 0  # rows whose traced marker read found none: what browse returns
    complete: bool = True  # every partition holding rows traced, with all its marker reads
    queries_allowed: int = DEFAULT_MAX_QUERIES
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "keyspace": self.keyspace,
            "until": utc_millis_text(self.until),
            "slice_window_seconds": self.slice_window_seconds,
            "bucket_count": self.bucket_count,
            "queues": self.queues,
            "partitions": self.partitions,
            "partitions_with_rows": self.partitions_with_rows,
            "partitions_traced": self.partitions_traced,
            "mails_returned": self.mails_returned,
            "complete": self.complete,
            "queries_allowed": self.queries_allowed,
            "tables": {name: reads.as_dict() for name, reads in self.tables.items()},
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """One line saying what was traced."""
        empty = self.partitions - self.partitions_with_rows
        traced_empty = max(self.partitions_traced - self.partitions_with_rows, 0)
        text = (
            f"traced James's browse of {self.queues} queue(s) up to {utc_millis_text(self.until)} "
            f"(window {self.slice_window_seconds} s, {self.bucket_count} bucket(s)): "
            f"{self.partitions_traced} of {self.partitions} partitions, "
            f"{self.partitions_with_rows} holding rows"
        )
        if empty > traced_empty:
            text += f"; {empty - traced_empty} empty partitions read without tracing"
        if not self.complete:
            text += (
                f"; INCOMPLETE: partitions holding rows left untraced ({self.queries_allowed} "
                "traced queries allowed: --trace-queries)"
            )
        return text


def parse_trace(events: Iterable[Any], table: str) -> tuple[int, int, int, bool]:
    """(live rows, tombstone cells, warnings, found) that the trace `events` of one query
    report for `table`: per replica (event source), the reads its threads made after
    ``Executing single-partition query on <table>`` (reads of other tables in the same trace,
    such as an authentication cache refresh of system_auth.roles, are left out); the replica
    that read most counts (a quorum read asks two or more replicas the same)."""
    current: dict[tuple[str, str], str] = {}
    per_source: dict[str, list[int]] = {}
    for event in events:
        description = str(getattr(event, "description", ""))
        key = (str(getattr(event, "source", "")), str(getattr(event, "thread_name", "")))
        executing = _EXECUTING.search(description)
        if executing:
            current[key] = executing.group(1).lower()
            continue
        read = _READ.search(description)
        if read and current.get(key) == table:
            totals = per_source.setdefault(key[0], [0, 0, 0])
            totals[0] += int(read.group(1))
            totals[1] += int(read.group(2))
            totals[2] += int(_WARNED in description)
    if not per_source:
        return 0, 0, 0, False
    live, tombstones, warnings = max(per_source.values(), key=lambda t: (t[1], t[0], t[2]))
    return live, tombstones, warnings, True


class _Tracer:
    """Runs one statement with tracing and adds its trace's figures to its table."""

    def __init__(self, session: Any, keyspace: str, consistency: str) -> None:
        from cassandra import ConsistencyLevel

        self.session = session
        self.keyspace = keyspace
        self.level = ConsistencyLevel.name_to_value[consistency]
        self.prepared: dict[str, Any] = {}

    def statement(self, cql: str) -> Any:
        if cql not in self.prepared:
            prepared = self.session.prepare(cql)
            prepared.consistency_level = self.level
            self.prepared[cql] = prepared
        return self.prepared[cql]

    def run(self, table: str, cql: str, values: tuple[Any, ...]) -> tuple[list[Any], tuple]:
        """(rows, (live rows, tombstone cells, warnings, traced)) of one traced query."""
        from cassandra.query import TraceUnavailable

        future = self.session.execute_async(self.statement(cql), values, trace=True)
        rows = list(future.result())
        warned = sum(1 for w in (future.warnings or []) if "tombstone" in str(w).lower())
        try:
            trace = future.get_query_trace(max_wait=TRACE_WAIT_SECONDS)
        except TraceUnavailable:
            return rows, (0, 0, warned, False)
        live, tombstones, warnings, found = parse_trace(trace.events if trace else [], table)
        return rows, (live, tombstones, max(warnings, warned), found)


def current_configuration(session: Any, keyspace: str) -> tuple[int, int, str | None]:
    """(slice window seconds, bucket count, a note) of the newest configuration event of the
    keyspace's event store (James's defaults, with a note, when there is none)."""
    from mqforensics.systems.james.live import configuration_events

    events = configuration_events(session, keyspace)
    history = history_rows(events, f"{keyspace}.{schema.EVENT_STORE_TABLE}")
    if not history:
        window, buckets, _pace = DEFAULT
        note = f"no {schema.CONFIG_AGGREGATE} event: James's defaults"
        return window, buckets, f"{note} ({window} s, {buckets} bucket)"
    _eventid, window, buckets, _pace = history[-1]
    return window, buckets, None


def trace_browse(
    session: Any,
    keyspace: str,
    *,
    until: dt.datetime | None = None,
    queues: Iterable[str] | None = None,
    max_queries: int = DEFAULT_MAX_QUERIES,
    consistency: str = "LOCAL_QUORUM",
) -> BrowseTrace:
    """James's browse of every queue of `keyspace` (or of `queues`) from its browseStart to the
    slice holding `until` (default now), each read traced; see the module docstring for what is
    traced when `max_queries` does not cover every read. `session` is a connected
    cassandra-driver session; nothing is written."""
    from mqforensics.systems.james.live import enumerate_partitions, view_tables

    if max_queries < 1:
        raise ValueError("max_queries must be at least 1")
    until = until or dt.datetime.now(dt.UTC)
    tables = view_tables(session, keyspace)
    enqueued = next((t for t in schema.ENQUEUED_TABLES if t in tables), None)
    if enqueued is None or schema.BROWSE_START_TABLE not in tables:
        raise InputError(f"keyspace {keyspace!r} is not a James mail queue view")
    window, buckets, note = (
        current_configuration(session, keyspace)
        if schema.EVENT_STORE_TABLE in tables
        else (*DEFAULT[:2], "no event store: James's default configuration")
    )
    names = (schema.BROWSE_START_TABLE, enqueued, schema.DELETED_TABLE)
    result = BrowseTrace(
        keyspace, until, window, buckets, {t: TableReads() for t in names},
        queries_allowed=max_queries,
    )  # fmt: skip
    if note:
        result.notes.append(note)
    tracer = _Tracer(session, keyspace, consistency)
    wanted = None if queues is None else set(queues)
    listed = sorted(
        r.queuename
        for r in session.execute(f"SELECT queuename FROM {keyspace}.{schema.BROWSE_START_TABLE}")
        if wanted is None or r.queuename in wanted
    )
    budget = max_queries

    def add(table: str, figures: tuple[int, int, int, bool]) -> None:
        reads = result.tables[table]
        live, tombstones, warnings, found = figures
        reads.queries += 1
        reads.live_rows += live
        reads.tombstone_cells += tombstones
        reads.tombstone_warnings += warnings
        reads.untraced += int(not found)

    # browseStart, as James reads it first, per queue.
    ranges: dict[str, tuple[int, int]] = {}
    for queue in listed:
        rows, figures = tracer.run(
            schema.BROWSE_START_TABLE,
            f"SELECT * FROM {keyspace}.{schema.BROWSE_START_TABLE} WHERE queuename = ?",
            (queue,),
        )
        budget -= 1
        add(schema.BROWSE_START_TABLE, figures)
        start = rows[0].browsestart if rows else None
        if start is None:
            result.notes.append(f"queue {queue} has no browseStart: James browses nothing")
            continue
        first = int(start.replace(tzinfo=dt.UTC).timestamp())
        if first % window:
            result.notes.append(
                f"browseStart of {queue} is not on the {window} s slice grid: traced from the "
                "slice holding it"
            )
        ranges[queue] = (first, int(until.timestamp()))
    result.queues = len(ranges)
    keys = enumerate_partitions(ranges, window, buckets)
    result.partitions = len(keys)
    holding = _partitions_with_rows(tracer, enqueued, keys)
    result.partitions_with_rows = len(holding)

    select = (
        f"SELECT * FROM {keyspace}.{enqueued} "
        "WHERE queuename = ? AND timerangestart = ? AND bucketid = ?"
    )
    marker = (
        f"SELECT * FROM {keyspace}.{schema.DELETED_TABLE} WHERE queuename = ? AND enqueueid = ?"
    )

    def partition(key: tuple[str, int, int]) -> tuple[tuple, list[tuple[list[Any], tuple]]]:
        queue, start, bucket = key
        rows, figures = tracer.run(
            enqueued, select, (queue, dt.datetime.fromtimestamp(start, dt.UTC), bucket)
        )
        return figures, [
            tracer.run(schema.DELETED_TABLE, marker, (queue, _uuid(r.enqueueid))) for r in rows
        ]

    ordered = [k for k in keys if k in holding] + [k for k in keys if k not in holding]
    chosen: list[tuple[str, int, int]] = []
    for key in ordered:
        cost = 1 + holding.get(key, 0)
        if cost > budget:
            break
        chosen.append(key)
        budget -= cost
    picked = set(chosen)
    result.complete = all(k in picked for k in holding)
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for figures, markers in pool.map(partition, chosen):
            add(enqueued, figures)
            for marker_rows, marker_figures in markers:
                add(schema.DELETED_TABLE, marker_figures)
                result.mails_returned += int(not marker_rows)
    result.partitions_traced = len(chosen)
    untraced = sum(r.untraced for r in result.tables.values())
    if untraced:
        result.notes.append(
            f"{untraced} quer(ies) had no trace of their read within {TRACE_WAIT_SECONDS:.0f} s "
            "(counted as 0)"
        )
    return result


def _partitions_with_rows(
    tracer: _Tracer, table: str, keys: list[tuple[str, int, int]]
) -> dict[tuple[str, int, int], int]:
    """{partition: rows} of the `keys` that hold rows, read untraced, 20 partitions a query."""
    from cassandra.concurrent import execute_concurrent_with_args

    from mqforensics.systems.james.live import partition_queries

    queries = partition_queries(keys, schema.PARTITIONS_PER_QUERY)
    statement = tracer.statement(
        f"SELECT queuename, timerangestart, bucketid FROM {tracer.keyspace}.{table} "
        "WHERE queuename = ? AND timerangestart IN ? AND bucketid IN ?"
    )
    arguments = [
        (queue, [dt.datetime.fromtimestamp(s, dt.UTC) for s in starts], list(buckets))
        for queue, starts, buckets in queries
    ]
    found: dict[tuple[str, int, int], int] = {}
    results = execute_concurrent_with_args(
        tracer.session, statement, arguments, concurrency=CONCURRENCY, raise_on_first_error=True
    )
    for _success, rows in results:
        for row in rows:
            start = int(row.timerangestart.replace(tzinfo=dt.UTC).timestamp())
            key = (row.queuename, start, row.bucketid)
            found[key] = found.get(key, 0) + 1
    return found


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
