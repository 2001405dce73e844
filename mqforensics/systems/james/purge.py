"""How the purger carries out a James plan: live re-verification and deletion, never the why.

Every destructive statement is named by an action of the reviewed plan and goes through
``Operations.destructive(label, check)``: the rate slot is taken first, then ``check`` re-reads
the live cluster or bucket for exactly that statement, and the statement is the executor's very
next call (docs/retention.md, "The last check is the last step before every delete"). What
each last check reads, what the system itself still catches after it, and the window that
remains:

* **partition delete**: browseStart still after the partition; every row now in it was planned
  and is still consumed; the write time of every cell it read (``writetime`` of the table's
  single-cell non-key columns; one INSERT writes all cells of a row at one timestamp). The
  delete is written ``USING TIMESTAMP T``, T the newest write time the check saw, so a mail
  enqueued into the partition after the check (a later timestamp) outlives the tombstone; the
  partition is re-read after the delete and such mail raises `TargetChanged`, before any marker
  goes. Remaining window: a write after the check stamped at or before T, i.e. by a client whose
  clock is behind the one that wrote the partition's newest row.
* **marker delete** (``deletedmailsv2``): the marker is still there and its mail row is gone
  from the partition. Nothing conditional: a marker has no cell but its key. Window: the call's
  latency, for a mail of that very enqueueid (a fresh UUID) to reappear.
* **row delete** (erasure): browseStart still after the partition, the row still there and
  consumed, its write time T; written ``USING TIMESTAMP T`` and re-read like a partition.
* **contentStart advance**: contentStart still ``from``, browseStart at or after ``to``, every
  partition of ``[from, to)`` empty; the update is a lightweight transaction
  ``IF contentstart = from``, so a change of contentStart after the check is refused
  (`TargetChanged`). Window: a row written into ``[from, to)`` (before browseStart, which James
  never does) or browseStart moved back, during the call.
* **blob delete**: HEAD size and ETag as planned, no enqueued row references the key but the
  planned consumed referrers, and those are still consumed. ``DeleteObject`` carries
  ``If-Match`` with the ETag that HEAD saw: an object overwritten after the check is refused
  (412, `TargetChanged`). A store that answers ``NotImplemented`` (no conditional deletes) gets
  a plain delete: its window is the call's latency. The references come from a full scan of the
  enqueued tables (as James's blob GC does), reused for at most REFERENCE_MAX_AGE_SECONDS (60 s)
  at the check, or ten times the duration of the last scan when that is longer, never more
  than REFERENCE_TTL_SECONDS (300 s): a mail enqueued with a reference to the key within that
  age before the check, or during the delete call, is not seen (James's passthrough blob ids are
  random UUIDs, so a new reference to an old key is not expected).

What the purge costs, measured (`measure`, docs/retention.md "Tombstones, measured"): the
plan's tombstones per table (`tombstones_by_table`), and Cassandra's tracing of James's own
browse reads (`browse_trace`), before the first action and after the verification.

The rules that keep Cassandra healthy (tombstone safety):

* the enqueued table only ever gets whole-partition deletes, except the budgeted erasure rows
  the plan names; nothing at or after the queue's browseStart is touched;
* a marker or object already absent is not deleted again (no tombstone for nothing);
* no statement ever binds a null (a null write is a tombstone too);
* inside a partition action the partition goes first and its ``deletedmailsv2`` markers after,
  so an interruption (or mail kept by the timestamped delete) can leave markers without rows
  (what James's own cleanup leaves when it fails) but never a consumed mail that looks live
  again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.purge.contract import Operations, TargetChanged, Verdict
from mqforensics.purge.s3_delete import delete_if_match
from mqforensics.sources.cassandra_connection import CassandraEndpoint, close_cluster
from mqforensics.sources.s3_endpoint import S3Endpoint, classify_s3_error
from mqforensics.systems.james import tombstones
from mqforensics.systems.james.options import DEFAULT_CONSISTENCY, PurgeOptions
from mqforensics.systems.james.schema import BROWSE_TRACE_QUERIES
from mqforensics.units import utc_millis_text

if TYPE_CHECKING:
    from mqforensics.retention.manifest import Action, Plan

DELETE_PARTITION = "james.delete_partition"
DELETE_ROW = "james.delete_row"
ADVANCE_CONTENT_START = "james.advance_content_start"
DELETE_BLOB = "james.delete_blob"
KINDS = (DELETE_PARTITION, DELETE_ROW, ADVANCE_CONTENT_START, DELETE_BLOB)

ENQUEUED_TABLES = ("enqueuedmailsv4", "enqueuedmailsv3")
# The blob reference scan is reused at a last check while younger than REFERENCE_MAX_AGE_SECONDS,
# or SCAN_SHARE times the last scan's duration when that is longer (the scan then takes at most
# about a tenth of the run), and never when older than REFERENCE_TTL_SECONDS.
REFERENCE_MAX_AGE_SECONDS = 60.0
SCAN_SHARE = 10.0
REFERENCE_TTL_SECONDS = 300.0
MAX_SLICES_TO_VERIFY = 2_000_000
FETCH_SIZE = 5000


def parse_instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def format_instant(value: dt.datetime | None) -> str | None:
    return None if value is None else utc_millis_text(value)


def _partition_name(target: dict[str, Any]) -> str:
    return f"{target['queue']}/{target['timerangestart']}/{target['bucketid']}"


def _multi_cell(cql_type: str, user_types: Iterable[str]) -> bool:
    """A non-frozen collection or user type: one cell per element, and no `writetime` of the
    whole before Cassandra 5.0."""
    return cql_type.startswith(("list<", "set<", "map<")) or cql_type in set(user_types)


def tombstones_by_table(action: Action) -> dict[str, int]:
    """The tombstones one action writes, per table (the plan's ``tombstones`` is their sum;
    tombstones.py says what each deletion writes)."""
    table = str(action.target.get("table", "enqueuedmailsv4"))
    if action.kind == DELETE_PARTITION:
        return tombstones.partition_delete(table, len(action.precondition["markers"]))
    if action.kind == DELETE_ROW:
        return tombstones.row_delete(table)
    return {}


def _digest(values: Iterable[Any]) -> tuple[int, str]:
    """(count, order-independent digest) of a multiset of values: a sum of SHA-256 prefixes."""
    count, total = 0, 0
    for value in values:
        count += 1
        total = (total + int(hashlib.sha256(repr(value).encode()).hexdigest()[:32], 16)) % (
            1 << 128
        )
    return count, f"{total:032x}"


class JamesExecutor:
    """Re-verifies and applies the four James action kinds on one keyspace and bucket."""

    kinds = KINDS

    def __init__(
        self,
        plan: Plan,
        cassandra: CassandraEndpoint,
        s3: S3Endpoint | None,
        *,
        consistency: str = "LOCAL_QUORUM",
        trace_queries: int = BROWSE_TRACE_QUERIES,
    ) -> None:
        self.plan = plan
        self.trace_queries = trace_queries
        self.keyspace = str(plan.header["inputs"]["keyspace"])
        self._index_plan(plan.actions())
        self.cassandra = cassandra
        self._cluster, self._session = cassandra.connect(schema_metadata=True)
        self._consistency = consistency
        self._prepared: dict[str, Any] = {}
        self.s3 = s3
        self._s3_client: Any = None
        if self.blob_buckets and s3 is None:
            raise ConfigError("the plan deletes blobs: give --s3-endpoint or MQF_S3_ENDPOINT")
        keyspaces = self._cluster.metadata.keyspaces
        if self.keyspace not in keyspaces:
            close_cluster(self._cluster)
            raise InputError(f"keyspace {self.keyspace!r} does not exist at {cassandra.where}")
        tables = set(keyspaces[self.keyspace].tables)
        self.enqueued_tables = [t for t in ENQUEUED_TABLES if t in tables]
        self._write_time_columns: dict[str, list[str]] = {}
        self._references: dict[str, list[tuple[str, str]]] | None = None
        self._references_at = 0.0  # monotonic time the scan started
        self._references_took = 0.0  # how long it ran

    # -- the plan --------------------------------------------------------------------------

    def _index_plan(self, actions: Iterator[Action]) -> None:
        """What the plan names (for the census of everything else) and its own consistency."""
        budget = int(self.plan.header["policy"].get("tombstone_budget_per_partition", 100))
        self.named_rows: set[tuple[str, str]] = set()
        self.named_markers: set[tuple[str, str]] = set()
        self.advanced_queues: set[str] = set()
        self.named_blobs: set[tuple[str, str]] = set()
        self.blob_buckets: set[str] = set()
        self.planned_blob_keys: set[str] = set()
        rows_per_partition: dict[str, int] = defaultdict(int)
        for action in actions:
            target = action.target
            if action.kind not in KINDS:
                raise ConfigError(f"action {action.seq}: unknown James action kind {action.kind}")
            if action.kind == DELETE_BLOB:
                self.named_blobs.add((target["bucket"], target["key"]))
                self.blob_buckets.add(target["bucket"])
                self.planned_blob_keys.add(target["key"])
                continue
            if target.get("keyspace") != self.keyspace:
                raise ConfigError(
                    f"action {action.seq} targets keyspace {target.get('keyspace')!r}, the plan "
                    f"keyspace {self.keyspace!r}"
                )
            if action.kind == DELETE_PARTITION:
                queue = target["queue"]
                self.named_rows.update((queue, e) for e in action.precondition["enqueueids"])
                self.named_markers.update((queue, e) for e in action.precondition["markers"])
            elif action.kind == DELETE_ROW:
                rows_per_partition[_partition_name(target)] += 1
                self.named_rows.add((target["queue"], target["enqueueid"]))
                self.named_markers.add((target["queue"], target["enqueueid"]))
            elif action.kind == ADVANCE_CONTENT_START:
                self.advanced_queues.add(target["queue"])
        over = {p: n for p, n in rows_per_partition.items() if n > budget}
        if over:
            first = sorted(over)[0]
            raise ConfigError(
                f"the plan deletes {over[first]} rows in partition {first}, over its tombstone "
                f"budget of {budget} per partition: refusing it"
            )

    # -- Cassandra helpers -----------------------------------------------------------------

    def _statement(self, cql: str) -> Any:
        from cassandra import ConsistencyLevel

        if cql not in self._prepared:
            prepared = self._session.prepare(cql)
            prepared.consistency_level = ConsistencyLevel.name_to_value[self._consistency]
            self._prepared[cql] = prepared
        return self._prepared[cql]

    def _run(self, cql: str, *values: Any) -> list[Any]:
        if any(v is None for v in values):
            # Never bind a null: in Cassandra a null value is a tombstone.
            raise InputError(f"refusing to run {cql.split()[0]} with a null value: {cql}")
        return list(self._session.execute(self._statement(cql), values))

    def _browse_start(self, queue: str) -> dt.datetime | None:
        rows = self._run(
            f"SELECT browsestart FROM {self.keyspace}.browsestart WHERE queuename = ?", queue
        )
        value = rows[0].browsestart if rows else None
        return None if value is None else value.replace(tzinfo=dt.UTC)

    def _content_start(self, queue: str) -> dt.datetime | None:
        rows = self._run(
            f"SELECT contentstart FROM {self.keyspace}.contentstart WHERE queuename = ?", queue
        )
        value = rows[0].contentstart if rows else None
        return None if value is None else value.replace(tzinfo=dt.UTC)

    def _partition_rows(self, target: dict[str, Any]) -> set[str]:
        table = self._table(target)
        rows = self._run(
            f"SELECT enqueueid FROM {self.keyspace}.{table} "
            "WHERE queuename = ? AND timerangestart = ? AND bucketid = ?",
            target["queue"], parse_instant(target["timerangestart"]), int(target["bucketid"]),
        )  # fmt: skip
        return {str(r.enqueueid) for r in rows}

    def _write_times(self, target: dict[str, Any], enqueueid: str | None = None) -> dict[str, Any]:
        """enqueueid -> the newest write time (microseconds) of the row's cells, for every row
        of the target's partition (or only `enqueueid`); None for a row with no readable cell."""
        import uuid

        table = self._table(target)
        columns = self._write_time_columns.get(table)
        if columns is None:
            meta = self._cluster.metadata.keyspaces[self.keyspace]
            key = {c.name for c in meta.tables[table].primary_key}
            columns = [
                c.name
                for c in meta.tables[table].columns.values()
                if c.name not in key and not _multi_cell(c.cql_type, meta.user_types)
            ]
            self._write_time_columns[table] = columns
        selected = ", ".join(["enqueueid", *(f"writetime({c})" for c in columns)])
        where = "queuename = ? AND timerangestart = ? AND bucketid = ?"
        values: list[Any] = [
            target["queue"], parse_instant(target["timerangestart"]), int(target["bucketid"])
        ]  # fmt: skip
        if enqueueid is not None:
            where += " AND enqueueid = ?"
            values.append(uuid.UUID(enqueueid))
        rows = self._run(f"SELECT {selected} FROM {self.keyspace}.{table} WHERE {where}", *values)
        result: dict[str, Any] = {}
        for row in rows:
            times = [t for t in row[1:] if t is not None]
            result[str(row[0])] = max(times) if times else None
        return result

    def _markers_present(self, queue: str, enqueueids: Iterable[str]) -> set[str]:
        import uuid

        from cassandra.concurrent import execute_concurrent_with_args

        ids = sorted(set(enqueueids))
        if not ids:
            return set()
        statement = self._statement(
            f"SELECT enqueueid FROM {self.keyspace}.deletedmailsv2 "
            "WHERE queuename = ? AND enqueueid = ?"
        )
        results = execute_concurrent_with_args(
            self._session, statement, [(queue, uuid.UUID(e)) for e in ids],
            concurrency=64, raise_on_first_error=True,
        )  # fmt: skip
        return {e for e, (_, rows) in zip(ids, results, strict=True) if list(rows)}

    def _table(self, target: dict[str, Any]) -> str:
        table = str(target.get("table", "enqueuedmailsv4"))
        if table not in ENQUEUED_TABLES:
            raise ConfigError(f"unexpected enqueued table {table!r} in the plan")
        return table

    # -- S3 helpers ------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._s3_client is None:
            assert self.s3 is not None
            self._s3_client = self.s3.client()
        return self._s3_client

    def _head(self, bucket: str, key: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return dict(self._client().head_object(Bucket=bucket, Key=key))
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def _blob_references(self) -> dict[str, list[tuple[str, str]]]:
        """Rows referencing the plan's blob keys, from a full scan (as James's blob GC does).

        Its age is measured from the start of the scan to the moment of the check, after the rate
        wait (so a long wait ages it like any other time); it is scanned again when older than
        REFERENCE_MAX_AGE_SECONDS, or SCAN_SHARE times the last scan's duration when that is
        longer, capped at REFERENCE_TTL_SECONDS."""
        max_age = min(
            REFERENCE_TTL_SECONDS,
            max(REFERENCE_MAX_AGE_SECONDS, SCAN_SHARE * self._references_took),
        )
        started = time.monotonic()
        if self._references is not None and started - self._references_at < max_age:
            return self._references
        from cassandra.query import SimpleStatement

        found: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for table in self.enqueued_tables:
            statement = SimpleStatement(
                "SELECT queuename, enqueueid, headerblobid, bodyblobid "
                f"FROM {self.keyspace}.{table}",
                fetch_size=FETCH_SIZE,
            )
            for row in self._session.execute(statement):
                for key in (row.headerblobid, row.bodyblobid):
                    if key in self.planned_blob_keys:
                        found[key].append((row.queuename, str(row.enqueueid)))
        self._references, self._references_at = dict(found), started
        self._references_took = time.monotonic() - started
        return self._references

    # -- Executor protocol -----------------------------------------------------------------

    def classify(self, exc: BaseException) -> str | None:
        return classify_error(exc)

    def verify(self, action: Action) -> Verdict:
        if action.kind == DELETE_PARTITION:
            return self._verify_partition(action)
        if action.kind == DELETE_ROW:
            return self._verify_row(action)
        if action.kind == ADVANCE_CONTENT_START:
            return self._verify_content_start(action)
        return self._verify_blob(action)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        if action.kind == DELETE_PARTITION:
            return self._apply_partition(action, ops)
        if action.kind == DELETE_ROW:
            return self._apply_row(action, ops)
        if action.kind == ADVANCE_CONTENT_START:
            return self._apply_content_start(action, ops)
        return self._apply_blob(action, ops)

    def verify_done(self, action: Action) -> str | None:
        target = action.target
        if action.kind == DELETE_PARTITION:
            rows = self._partition_rows(target)
            markers = self._markers_present(target["queue"], action.precondition["markers"])
            if rows or markers:
                return (
                    f"partition {_partition_name(target)} still holds {len(rows)} rows and "
                    f"{len(markers)} planned markers"
                )
        elif action.kind == DELETE_ROW:
            if self._row_exists(target, target["enqueueid"]) or self._markers_present(
                target["queue"], [target["enqueueid"]]
            ):
                return f"row {target['enqueueid']} or its marker is still present"
        elif action.kind == ADVANCE_CONTENT_START:
            current = format_instant(self._content_start(target["queue"]))
            if current != target["to"]:
                return f"contentStart of {target['queue']} is {current}, not {target['to']}"
        elif self._head(target["bucket"], target["key"]) is not None:
            return f"object s3://{target['bucket']}/{target['key']} still exists"
        return None

    def census(self) -> dict[str, Any]:
        """Counts and digests of every row and object the plan does not name, with their full
        content: equal before and after a purge means nothing else was touched."""
        from cassandra.query import SimpleStatement

        result: dict[str, Any] = {}

        def scan(cql: str) -> Iterator[Any]:
            return iter(self._session.execute(SimpleStatement(cql, fetch_size=FETCH_SIZE)))

        for table in self.enqueued_tables:
            rows = (
                tuple(r)
                for r in scan(f"SELECT * FROM {self.keyspace}.{table}")
                if (r.queuename, str(r.enqueueid)) not in self.named_rows
            )
            result[f"{table} rows outside the plan"] = _digest(rows)
        markers = (
            (r.queuename, str(r.enqueueid))
            for r in scan(f"SELECT queuename, enqueueid FROM {self.keyspace}.deletedmailsv2")
            if (r.queuename, str(r.enqueueid)) not in self.named_markers
        )
        result["deletedmailsv2 rows outside the plan"] = _digest(markers)
        result["browsestart rows"] = _digest(
            tuple(r) for r in scan(f"SELECT * FROM {self.keyspace}.browsestart")
        )
        if "contentstart" in self._cluster.metadata.keyspaces[self.keyspace].tables:
            result["contentstart rows outside the plan"] = _digest(
                tuple(r)
                for r in scan(f"SELECT * FROM {self.keyspace}.contentstart")
                if r.queuename not in self.advanced_queues
            )
        for bucket in sorted(self.blob_buckets):
            result[f"s3://{bucket} objects outside the plan"] = _digest(
                (obj["Key"], obj["Size"], obj.get("ETag"))
                for obj in self._list(bucket)
                if (bucket, obj["Key"]) not in self.named_blobs
            )
        return {k: list(v) for k, v in result.items()}

    def measure(self) -> dict[str, Any]:
        """The plan's predicted tombstones per table (`tombstones_by_table` of its actions),
        and what Cassandra's tracing reports that James's browse reads now (`trace_browse`):
        tombstone cells and live rows per table. Read-only."""
        from mqforensics.systems.james.browse_trace import trace_browse

        predicted: dict[str, int] = defaultdict(int)
        notes: list[str] = []
        for action in self.plan.actions():
            split = tombstones_by_table(action)
            for table, count in split.items():
                predicted[table] += count
            if sum(split.values()) != action.tombstones:
                notes.append(
                    f"action {action.seq} {action.kind}: the plan says {action.tombstones} "
                    f"tombstones, its tables {sum(split.values())}"
                )
        trace = trace_browse(
            self._session, self.keyspace, max_queries=self.trace_queries,
            consistency=self._consistency,
        )  # fmt: skip
        observed: dict[str, dict[str, int]] = {}
        for table, reads in trace.tables.items():
            observed[table] = {
                "tombstone cells read by browse": reads.tombstone_cells,
                "live rows read by browse": reads.live_rows,
                "browse queries traced": reads.queries,
            }
            if reads.tombstone_warnings:
                observed[table]["tombstone warnings"] = reads.tombstone_warnings
        observed["browse"] = {"mails returned": trace.mails_returned}
        return {
            "predicted": {t: {"tombstones written": n} for t, n in sorted(predicted.items())},
            "observed": observed,
            "notes": [*notes, trace.summary(), *trace.notes],
            "detail": {"browse_trace": trace.as_dict()},
        }

    def _list(self, bucket: str) -> Iterator[dict[str, Any]]:
        paginator = self._client().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket):
            yield from page.get("Contents", [])

    def close(self) -> None:
        close_cluster(self._cluster)

    # -- delete_partition ------------------------------------------------------------------

    def _before_browse_start(self, target: dict[str, Any]) -> str | None:
        """Why the partition may not be touched now, or None when it is before browseStart."""
        browse = self._browse_start(target["queue"])
        start = parse_instant(target["timerangestart"])
        if browse is None:
            return f"queue {target['queue']} has no browseStart row any more"
        if start >= browse:
            return (
                f"browseStart of {target['queue']} is {format_instant(browse)}, no longer after "
                f"the partition (refusing anything at or after browseStart)"
            )
        return None

    def _partition_drift(self, action: Action, rows: set[str]) -> str | None:
        """Why the partition's `rows` (non-empty, read live) may not be deleted, or None."""
        target = action.target
        refusal = self._before_browse_start(target)
        if refusal:
            return refusal
        new = rows - set(action.precondition["enqueueids"])
        if new:
            return (
                f"{len(new)} mail(s) enqueued into partition {_partition_name(target)} since "
                "planning"
            )
        live = rows - self._markers_present(target["queue"], rows)
        if live:
            return (
                f"{len(live)} mail(s) in partition {_partition_name(target)} are no longer consumed"
            )
        return None

    def _verify_partition(self, action: Action) -> Verdict:
        target, pre = action.target, action.precondition
        refusal = self._before_browse_start(target)
        if refusal:
            return Verdict(False, refusal)
        rows = self._partition_rows(target)
        if rows:
            drift = self._partition_drift(action, rows)
            return Verdict(False, drift) if drift else Verdict(True, detail={"rows": len(rows)})
        markers = self._markers_present(target["queue"], pre["markers"])
        if markers:
            return Verdict(True, detail={"rows": 0, "markers": len(markers)})
        return Verdict(False, already_done=True, reason="partition and markers already gone")

    def _check_partition_delete(self, action: Action, seen: dict[str, Any]) -> Verdict:
        """The last check of the partition delete; puts the rows and the timestamp to delete at
        (the newest write time read) into `seen`."""
        target = action.target
        times = self._write_times(target)
        if not times:
            return Verdict(False, already_done=True, reason="partition already empty")
        drift = self._partition_drift(action, set(times))
        if drift:
            return Verdict(False, drift)
        unknown = sorted(e for e, t in times.items() if t is None)
        if unknown:
            return Verdict(
                False,
                f"mail {target['queue']}/{unknown[0]} in partition {_partition_name(target)} has "
                "no cell to read a write time from: refusing a delete at a guessed timestamp",
            )
        seen["rows"], seen["timestamp"] = len(times), max(times.values())
        return Verdict(True)

    def _check_marker(self, target: dict[str, Any], enqueueid: str) -> Verdict:
        """The last check of a marker delete: the marker is there and its mail row is gone."""
        if not self._markers_present(target["queue"], [enqueueid]):
            return Verdict(False, already_done=True, reason="marker already gone")
        if self._row_exists(target, enqueueid):
            return Verdict(
                False,
                f"mail {target['queue']}/{enqueueid} is in partition {_partition_name(target)} "
                "again: its marker is kept",
            )
        return Verdict(True)

    def _delete_marker(self, target: dict[str, Any], enqueueid: str, ops: Operations) -> int:
        import uuid

        label = f"delete marker {target['queue']}/{enqueueid}"
        if not ops.destructive(label, partial(self._check_marker, target, enqueueid)):
            return 0
        self._run(
            f"DELETE FROM {self.keyspace}.deletedmailsv2 WHERE queuename = ? AND enqueueid = ?",
            target["queue"], uuid.UUID(enqueueid),
        )  # fmt: skip
        ops.completed(label)
        return 1

    def _apply_partition(self, action: Action, ops: Operations) -> dict[str, Any]:
        target = action.target
        name = _partition_name(target)
        table = self._table(target)
        rows = 0
        label = f"delete partition {name}"
        seen: dict[str, Any] = {}
        if ops.destructive(label, partial(self._check_partition_delete, action, seen)):
            # Timestamped at the check: cells written after it (a later timestamp) survive.
            self._run(
                f"DELETE FROM {self.keyspace}.{table} USING TIMESTAMP ? "
                "WHERE queuename = ? AND timerangestart = ? AND bucketid = ?",
                seen["timestamp"], target["queue"], parse_instant(target["timerangestart"]),
                int(target["bucketid"]),
            )  # fmt: skip
            ops.completed(label)
            kept = self._partition_rows(target)
            if kept:
                raise TargetChanged(
                    f"{len(kept)} mail(s) enqueued into partition {name} between the check and "
                    "the delete were kept (the delete was timestamped at the check)"
                )
            rows = seen["rows"]
        markers = 0
        for enqueueid in sorted(
            self._markers_present(target["queue"], action.precondition["markers"])
        ):
            markers += self._delete_marker(target, enqueueid, ops)
        return {"rows": rows, "markers": markers, "tombstones": int(bool(rows)) + markers}

    # -- delete_row ------------------------------------------------------------------------

    def _row_exists(self, target: dict[str, Any], enqueueid: str) -> bool:
        import uuid

        rows = self._run(
            f"SELECT enqueueid FROM {self.keyspace}.{self._table(target)} WHERE queuename = ? AND "
            "timerangestart = ? AND bucketid = ? AND enqueueid = ?",
            target["queue"], parse_instant(target["timerangestart"]), int(target["bucketid"]),
            uuid.UUID(enqueueid),
        )  # fmt: skip
        return bool(rows)

    def _verify_row(self, action: Action) -> Verdict:
        target = action.target
        refusal = self._before_browse_start(target)
        if refusal:
            return Verdict(False, refusal)
        exists = self._row_exists(target, target["enqueueid"])
        marked = bool(self._markers_present(target["queue"], [target["enqueueid"]]))
        if exists and not marked:
            return Verdict(False, f"mail {target['enqueueid']} is no longer consumed")
        if not exists and not marked:
            return Verdict(False, already_done=True, reason="row and marker already gone")
        return Verdict(True)

    def _check_row_delete(self, action: Action, seen: dict[str, Any]) -> Verdict:
        """The last check of an erasure row delete; puts its write time into `seen`."""
        target = action.target
        times = self._write_times(target, target["enqueueid"])
        if not times:
            return Verdict(False, already_done=True, reason="row already gone")
        refusal = self._before_browse_start(target)
        if refusal:
            return Verdict(False, refusal)
        if not self._markers_present(target["queue"], [target["enqueueid"]]):
            return Verdict(False, f"mail {target['enqueueid']} is no longer consumed")
        (timestamp,) = times.values()
        if timestamp is None:
            return Verdict(
                False,
                f"mail {target['queue']}/{target['enqueueid']} has no cell to read a write time "
                "from: refusing a delete at a guessed timestamp",
            )
        seen["timestamp"] = timestamp
        return Verdict(True)

    def _apply_row(self, action: Action, ops: Operations) -> dict[str, Any]:
        import uuid

        target = action.target
        enqueueid = target["enqueueid"]
        removed = {"rows": 0, "markers": 0}
        label = f"delete row {target['queue']}/{enqueueid}"
        seen: dict[str, Any] = {}
        if ops.destructive(label, partial(self._check_row_delete, action, seen)):
            self._run(
                f"DELETE FROM {self.keyspace}.{self._table(target)} USING TIMESTAMP ? "
                "WHERE queuename = ? AND timerangestart = ? AND bucketid = ? AND enqueueid = ?",
                seen["timestamp"], target["queue"], parse_instant(target["timerangestart"]),
                int(target["bucketid"]), uuid.UUID(enqueueid),
            )  # fmt: skip
            ops.completed(label)
            if self._row_exists(target, enqueueid):
                raise TargetChanged(
                    f"mail {target['queue']}/{enqueueid} was written again between the check and "
                    "the delete and was kept (the delete was timestamped at the check)"
                )
            removed["rows"] = 1
        if self._markers_present(target["queue"], [enqueueid]):
            removed["markers"] = self._delete_marker(target, enqueueid, ops)
        return removed

    # -- advance_content_start -------------------------------------------------------------

    def _verify_content_start(self, action: Action) -> Verdict:
        target, pre = action.target, action.precondition
        queue = target["queue"]
        current = self._content_start(queue)
        if format_instant(current) == target["to"]:
            return Verdict(False, already_done=True, reason="contentStart already advanced")
        if format_instant(current) != pre["from"]:
            return Verdict(
                False, f"contentStart of {queue} is {format_instant(current)}, not {pre['from']}"
            )
        to = parse_instant(target["to"])
        browse = self._browse_start(queue)
        if browse is None or browse < to:
            return Verdict(
                False, f"browseStart of {queue} ({format_instant(browse)}) is before {target['to']}"
            )
        remaining = self._first_nonempty_partition(queue, parse_instant(pre["from"]), to, pre)
        if remaining is not None:
            return Verdict(False, f"partition {remaining} before {target['to']} still holds rows")
        return Verdict(True)

    def _first_nonempty_partition(
        self, queue: str, start: dt.datetime, end: dt.datetime, pre: dict[str, Any]
    ) -> str | None:
        """The first partition of a slice in [start, end) that holds a row, as James enumerates
        them (current window, every bucket); None when all are empty."""
        from cassandra.concurrent import execute_concurrent_with_args

        window = int(pre["window_seconds"])
        buckets = int(pre["bucket_count"])
        first, last = int(start.timestamp()), int(end.timestamp())
        slices = range(first, last, window)
        if len(slices) * buckets > MAX_SLICES_TO_VERIFY:
            return f"{queue}: more than {MAX_SLICES_TO_VERIFY} partitions to check"
        keys = [
            (queue, dt.datetime.fromtimestamp(s, dt.UTC), b) for s in slices for b in range(buckets)
        ]
        for table in self.enqueued_tables:
            statement = self._statement(
                f"SELECT enqueueid FROM {self.keyspace}.{table} "
                "WHERE queuename = ? AND timerangestart = ? AND bucketid = ? LIMIT 1"
            )
            results = execute_concurrent_with_args(
                self._session, statement, keys, concurrency=64, raise_on_first_error=True
            )
            for key, (_, rows) in zip(keys, results, strict=True):
                if list(rows):
                    return f"{queue}/{format_instant(key[1])}/{key[2]}"
        return None

    def _apply_content_start(self, action: Action, ops: Operations) -> dict[str, Any]:
        target, pre = action.target, action.precondition
        queue = target["queue"]
        label = f"advance contentStart of {queue}"
        if not ops.destructive(label, partial(self._verify_content_start, action)):
            return {"content_start": target["to"], "updated": False}
        # Conditional: a James node advancing it meanwhile wins, and nothing goes backwards.
        result = self._run(
            f"UPDATE {self.keyspace}.contentstart SET contentstart = ? "
            "WHERE queuename = ? IF contentstart = ?",
            parse_instant(target["to"]), queue, parse_instant(pre["from"]),
        )  # fmt: skip
        if result and result[0][0]:
            ops.completed(label)
            return {"content_start": target["to"], "updated": True}
        current = format_instant(self._content_start(queue))
        if current != target["to"]:
            raise TargetChanged(
                f"contentStart of {queue} changed between the check and the update (it is "
                f"{current}, not {pre['from']}): the conditional update was not applied"
            )
        return {"content_start": target["to"], "updated": False}

    # -- delete_blob -----------------------------------------------------------------------

    def _verify_blob(self, action: Action, seen: dict[str, Any] | None = None) -> Verdict:
        """The blob's precondition; also its last check, which keeps the ETag HEAD saw in
        `seen` for the delete's If-Match."""
        target, pre = action.target, action.precondition
        head = self._head(target["bucket"], target["key"])
        if head is None:
            return Verdict(False, already_done=True, reason="object already gone")
        # Listings (mqf_blobs, S3 Inventory) keep the ETag without its quotes; HEAD has them.
        etag = str(head.get("ETag") or "").strip('"')
        if int(head.get("ContentLength", -1)) != int(pre["size"]) or (
            pre.get("etag") and etag != str(pre["etag"]).strip('"')
        ):
            return Verdict(False, "object changed since planning (size or ETag differs)")
        planned = {(r["queue"], r["enqueueid"]) for r in pre.get("referrers", [])}
        referrers = self._blob_references().get(target["key"], [])
        unknown = [r for r in referrers if r not in planned]
        if unknown:
            queue, enqueueid = unknown[0]
            what = "referenced again" if pre.get("orphan") else "referenced by another mail"
            return Verdict(False, f"{what}: mail {queue}/{enqueueid}")
        by_queue: dict[str, list[str]] = defaultdict(list)
        for queue, enqueueid in referrers:
            by_queue[queue].append(enqueueid)
        for queue, ids in by_queue.items():
            live = set(ids) - self._markers_present(queue, ids)
            if live:
                return Verdict(False, f"referencing mail {queue}/{sorted(live)[0]} is live again")
        if seen is not None:
            seen["etag"] = f'"{etag}"' if etag else None
        return Verdict(True)

    def _apply_blob(self, action: Action, ops: Operations) -> dict[str, Any]:
        """HEAD and references checked last, then ``DeleteObject`` with ``If-Match`` the ETag
        HEAD saw: an overwrite after the check is refused (412) and the action skipped. A store
        that answers ``NotImplemented`` to a conditional delete (none in the test harness:
        SeaweedFS honours If-Match) gets a plain delete, right after the refused one."""
        target = action.target
        where = f"s3://{target['bucket']}/{target['key']}"
        label = f"delete object {where}"
        seen: dict[str, Any] = {}
        if not ops.destructive(label, partial(self._verify_blob, action, seen)):
            return {"objects": 0, "bytes": 0}
        overwritten = (
            f"object {where} was overwritten between the check and the delete (If-Match refused)"
        )
        if not delete_if_match(
            self._client(), target["bucket"], target["key"], seen["etag"], overwritten
        ):
            return {"objects": 0, "bytes": 0}  # deleted by someone else meanwhile
        ops.completed(label)
        return {"objects": 1, "bytes": int(action.precondition["size"])}


def classify_error(exc: BaseException) -> str | None:
    """ "retry" for timeouts and unavailable servers, "auth" for refused credentials."""
    from cassandra import AuthenticationFailed as DriverAuthFailed
    from cassandra import OperationTimedOut, Timeout, Unauthorized, Unavailable
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionException

    if isinstance(exc, DriverAuthFailed | Unauthorized):
        return "auth"
    if isinstance(exc, NoHostAvailable):
        text = " ".join(f"{type(e).__name__} {e}" for e in exc.errors.values())
        return "auth" if "AuthenticationFailed" in text or "Bad credentials" in text else "retry"
    if isinstance(exc, OperationTimedOut | Timeout | Unavailable | ConnectionException):
        return "retry"
    return classify_s3_error(exc)


def build_executors(plan: Plan, options: PurgeOptions | None = None) -> list[JamesExecutor]:
    """The purger's executors for a James plan: the cluster from ``cassandra`` or the plan's
    inputs, credentials only from the environment."""
    options = options or PurgeOptions()
    inputs = plan.header.get("inputs", {})
    where = options.cassandra or inputs.get("cassandra")
    if not where:
        raise ConfigError(
            "the plan was made from a snapshot: give the live cluster with --cassandra HOST[:PORT]"
        )
    cassandra = CassandraEndpoint.parse(
        where,
        username=os.environ.get("MQF_CASSANDRA_USERNAME") or None,
        password=os.environ.get("MQF_CASSANDRA_PASSWORD") or None,
        local_dc=os.environ.get("MQF_CASSANDRA_LOCAL_DC") or None,
    )
    s3 = S3Endpoint.from_env()
    endpoint = options.s3_endpoint
    if endpoint:
        s3 = S3Endpoint(endpoint, s3.region, s3.access_key, s3.secret_key)
    consistency = options.consistency or DEFAULT_CONSISTENCY
    return [
        JamesExecutor(
            plan, cassandra, s3, consistency=consistency, trace_queries=options.trace_queries
        )
    ]
