"""Forensic checks of a James mail queue state: pure functions from JamesState to findings.

Each check's exact condition is specified in docs/james.md; the docstrings say why it matters.
Checks never read or write anything outside the frames they are given; the only driver-side
collects are of the tiny configuration history and of per-queue aggregates, and the counts that
decide whether a set of keys is small enough to send to every task (`BROADCAST_ROWS`).
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, Observation
from pyspark.sql import functions as F

from mqforensics import findings
from mqforensics.errors import InputError
from mqforensics.systems.james import broker_checks
from mqforensics.systems.james.blob_ids import PASSTHROUGH

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.systems.james.state import JamesState

SYSTEM = "james"
BROWSE_START_HEALTH_GRACE = dt.timedelta(days=7)  # BrowseStartHealthCheck.GRACE_PERIOD
SLICE_EARLY_TOLERANCE_SECONDS = 60
MAILS_PER_SLICE_TARGET = 10_000  # ADR 31: "a slice holds about 10,000 emails"
MAX_PINNING_LISTED = 20


@dataclass(frozen=True)
class AuditOptions:
    """What an audit is told about its context."""

    stuck_after: dt.timedelta = dt.timedelta(days=1)
    blob_grace: dt.timedelta = dt.timedelta(hours=1)
    # Whether the blob reference sources given (the mail queue view) are all of James's
    # referrers of the default bucket. Mailbox messages share it, so by default they are not.
    references_complete: bool = False
    # The data subjects searched (keyed hashes, `mqforensics.subjects`) and their key: every
    # view row holding one is a `personal_data` finding. None searched: no such finding.
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    # A live mail enqueued this recently may not be in the broker read yet (broker_checks.py).
    broker_grace: dt.timedelta = dt.timedelta(hours=1)


@dataclass(frozen=True)
class ConfigEvent:
    eventid: int
    window: int
    bucket_count: int
    pace: int


@dataclass
class Context:
    """Facts every check needs, computed once per audit."""

    state: JamesState
    options: AuditOptions
    history: list[ConfigEvent]
    # Every view row, narrowed to what the checks read: lazy, read again when a check looks at
    # every row (the orphan check's references, when no separate reference scan was read).
    rows: DataFrame = field(init=False)
    # Rows per partition and hour of enqueue (`partition_rollup`), with the partition's queue
    # starts: kept.
    rollup: DataFrame = field(init=False)
    # Whether `marked` holds every row of a partition before its queue's browse or content
    # start (the only partitions `unreclaimed_slice` flags), with its addresses and
    # `metadata_bytes`: when they are at most `KEPT_EARLY_ROWS`, so the view need not be read
    # again for them.
    early_kept: bool = field(init=False)
    # The view rows some check reads one by one, with their `FLAGS` and their queue's browse
    # and content starts: kept.
    marked: DataFrame = field(init=False)
    # The live rows (no marker in deletedmailsv2), with their queue's browse and content starts.
    live: DataFrame = field(init=False)
    # How many `referenced_blobs` keys are passthrough ones (counted while they are kept).
    _passthrough_referenced: int = field(init=False, default=0)
    # The (queue, slice) of live rows from contentStart to browseStart, observed (`first_kept`).
    _holding: Observation = field(init=False)

    def __post_init__(self) -> None:
        if not self.history:
            raise InputError(
                "no CassandraMailQueueViewConfiguration event in the eventstore: cannot know the "
                "slice window and bucket count"
            )
        self.rows = self.state.entries.select(*_AUDIT_COLUMNS)
        keep = self.state.keep
        # What the passes after each one need to know of its (small) output is counted while
        # it is kept (an observation), not by a job of its own.
        early, counted = Observation("early rows"), Observation("live keys")
        rollup = _with_starts(self.state, partition_rollup(self.state))
        self.rollup = keep(rollup.observe(early, _early_rows().alias("rows")))
        early_rows = _observed(early, "rows", lambda: _first(self.rollup.select(_early_rows())))
        self.early_kept = early_rows <= KEPT_EARLY_ROWS
        live_keys = _live_keys(self.state)
        live_keys = keep(live_keys.observe(counted, F.count(F.lit(1)).alias("keys")))
        keys = _observed(counted, "keys", lambda: live_keys.limit(BROADCAST_ROWS + 1).count())
        if keys <= BROADCAST_ROWS:
            live_keys = F.broadcast(live_keys)
        # The slices of live rows from a queue's contentStart to its browseStart (invisible
        # mail, few) are gathered while the marked rows are kept: where contentStart may move.
        self._holding = Observation("live slices before browseStart")
        marked = marked_rows(self.state, self.history, live_keys, self.early_kept)
        marked = keep(marked.observe(self._holding, _holding_slices().alias("slices")))
        # A name the marking pass could not hash (not ASCII) is judged here, among few rows.
        judged = F.coalesce(F.col("wrong_bucket"), wrong_bucket(self.history), F.lit(False))
        self.marked = marked.withColumn("wrong_bucket", judged)
        self.live = self.marked.where(F.col("live")).select(*_AUDIT_COLUMNS, *_STARTS)

    @functools.cached_property
    def few_blobs(self) -> bool:
        """Whether the blob listing is small enough to send to every task."""
        blobs = self.state.blobs
        if blobs is None:
            return False
        if self.state.blob_rows is not None:
            return self.state.blob_rows <= BROADCAST_ROWS
        return _at_most(blobs, BROADCAST_ROWS)

    def listed_sizes(self) -> DataFrame:
        """Every listed blob's ``key`` and ``listed_size`` (0 for none), `sent_if_few_blobs`:
        the one frame `unreclaimed_slice` and `dangling_blob_ref` join with, so that in one
        query the listing is sent to every task once (Spark reuses an identical exchange)."""
        assert self.state.blobs is not None
        size = F.coalesce(F.col("size"), F.lit(0)).cast("long").alias("listed_size")
        return self.sent_if_few_blobs(self.state.blobs.select("key", size))

    def sent_if_few_blobs(self, frame: DataFrame) -> DataFrame:
        """`frame` (at most a row per listed blob) sent to every task when the listing is small
        (`few_blobs`), so the frame it is joined with is not shuffled; as it is otherwise."""
        return F.broadcast(frame) if self.few_blobs else frame

    @functools.cached_property
    def table(self) -> str:
        """The enqueued table the view was read from (``enqueuedmailsv4`` or ``...v3``): what a
        plan's partition and row deletions target."""
        if self.state.table:
            return self.state.table
        # A state built by hand (tests) says no table: its rows do.
        row = self.state.entries.select("table_version").first()
        return f"enqueuedmails{(row[0] if row is not None else None) or 'v4'}"

    @functools.cached_property
    def rollup_rows(self) -> dict[str, list[Any]]:
        """The kept rollup's rows on the driver, column by column (one job): a few per
        partition. `config_advice` adds them up per queue and hour; `first_kept` looks at the
        partitions at or after the queue's starts."""
        from mqforensics.spark import collected

        columns = ("queuename", "timerangestart", "hour", "rows", "browsestart", "contentstart")
        table = collected(self.rollup.select(*columns))
        return {c: table.column(c).to_pylist() for c in columns}

    @functools.cached_property
    def first_kept(self) -> dict[str, dt.datetime]:
        """Per queue with a contentStart, the start of its first partition at or after it that
        `unreclaimed_slice` does not flag: one at or after browseStart (from the rollup), or
        before it holding live mail (observed while the marked rows were kept)."""
        found: dict[str, dt.datetime] = {}

        def first(queue: str | None, start: Any) -> None:
            if queue is None:  # no queue of its own: no contentStart either
                return
            when = _aware(start)
            if queue not in found or when < found[queue]:
                found[queue] = when

        r = self.rollup_rows
        starts = zip(r["queuename"], r["timerangestart"], r["browsestart"], r["contentstart"],
                     strict=True)  # fmt: skip
        for queue, trs, browse, content in starts:
            if content is not None and trs >= max(x for x in (browse, content) if x is not None):
                first(queue, trs)
        holding = self._holding.get.get("slices")
        if holding is None:  # Spark Connect reports no observation for a checkpoint
            row = self.marked.select(_holding_slices().alias("slices")).first()
            holding = (row[0] if row is not None else None) or []
        for row in holding:
            first(row["queuename"], row["timerangestart"])
        return found

    @functools.cached_property
    def unnamed_blobs(self) -> DataFrame:
        """The listed keys no live row names (``key``; ``passthrough``: a listed object of
        that key has a passthrough id; ``old``: one is older than the blob grace), kept: a
        live mail's blobs, most of a listing, drop out here, against the few kept live rows.
        Orphans, and the content consumed mails still hold, are among these."""
        assert self.state.blobs is not None
        cutoff = F.lit(self.as_of - self.options.blob_grace).cast("timestamp")
        named = self.live.select(F.explode(F.array(*_BLOB_IDS)).alias("key"))
        keys = self.state.blobs.groupBy("key").agg(
            F.max(F.col("id_kind") == PASSTHROUGH).alias("passthrough"),
            F.max(F.col("last_modified") < cutoff).alias("old"),
        )
        return self.state.keep(keys.join(named, "key", "left_anti"))

    @functools.cached_property
    def referenced_blobs(self) -> DataFrame:
        """The `unnamed_blobs` keys some view row read names (consumed rows only: no live row
        names them), ``key`` and ``passthrough``, kept; how many are passthrough ones is
        counted while they are kept (`passthrough_referenced`). Only these few keys are looked
        up among every reference (sent to every task when the listing is small, so the
        references, two per view row, are not shuffled)."""
        unnamed = self.sent_if_few_blobs(self.unnamed_blobs.select("key", "passthrough"))
        ids = self.rows.select(F.explode(F.array(*_BLOB_IDS)).alias("key"))
        named = ids.where(F.col("key").isNotNull()).join(unnamed, "key")
        counted = Observation("referenced passthrough blobs")
        named = named.select("key", "passthrough").distinct()
        kept = self.state.keep(
            named.observe(counted, F.count_if(F.col("passthrough")).alias("keys"))
        )
        self._passthrough_referenced = _observed(
            counted, "keys", lambda: kept.where(F.col("passthrough")).count()
        )
        return kept

    @property
    def passthrough_referenced(self) -> int:
        """How many `referenced_blobs` keys have passthrough ids: `consumed_blob` candidates,
        none in a healthy store (James deletes a consumed mail's passthrough blobs)."""
        self.referenced_blobs  # noqa: B018 (counted while they are kept)
        return self._passthrough_referenced

    @property
    def window(self) -> int:
        return self.history[-1].window

    @property
    def as_of(self) -> dt.datetime:
        return self.state.as_of


def config_events(state: JamesState) -> list[ConfigEvent]:
    # Sorted here: a handful of rows, and a sort in Spark would run jobs to sample them.
    rows = sorted(state.config_history.collect(), key=lambda r: r.eventid)
    return [
        ConfigEvent(r.eventid, r.slice_window_seconds, r.bucket_count, r.update_browse_start_pace)
        for r in rows
    ]


def classify(state: JamesState) -> DataFrame:
    """Every view row with `consumed` (a deletedmailsv2 marker exists) and its browse/content
    starts (the planner and the plots need every row; the audit only the live ones)."""
    # Markers made distinct, so a duplicated marker cannot duplicate the row (an EXISTS subquery
    # would do the same, but Spark's optimizer fails on it when the view is a union of frames).
    markers = state.deleted.select(*_KEY).distinct().withColumn("consumed", F.lit(True))
    consumed = F.coalesce(F.col("consumed"), F.lit(False)).alias("consumed")
    return (
        state.entries.join(markers, _KEY, "left")
        .select(*state.entries.columns, consumed)
        .join(state.browse_start, "queuename", "left")
        .join(state.content_start, "queuename", "left")
    )


# What the checks read of a view row (the wide columns are read once, for the bytes it stores).
_AUDIT_COLUMNS = (
    *("queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name"),
    *("headerblobid", "bodyblobid"),
)
_KEY = ["queuename", "enqueueid"]
_BLOB_IDS = ("headerblobid", "bodyblobid")
# A row without an enqueue time cannot be shown old enough: it compares as the far future.
_FAR_FUTURE = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
PARTITION = ["queuename", "timerangestart", "bucketid"]
# Keys (live mails, listed blobs) up to this many are sent to every task rather than shuffled
# against the view: tens of megabytes at most.
BROADCAST_ROWS = 1_000_000


FLAGS = ("live", "wrong_bucket", "wrong_slice", "early")
_STARTS = ("browsestart", "contentstart")
# Rows of partitions before their queue's browse or content start up to this many are kept
# with their addresses (a healthy queue has a few slices there; a never-cleaned one has most of
# its view there, and is read again instead).
KEPT_EARLY_ROWS = 1_000_000


def _live_keys(state: JamesState) -> DataFrame:
    """The distinct `_key_fingerprint`s (``live_key_hash``, ``live_key_hash_2``) of the view
    rows without a deletedmailsv2 marker, with ``live`` true: only the fingerprints of the
    keys are shuffled, and the output (a queue's live mails) is small. A row with a null key
    part is live without a lookup (`marked_rows`), so its key is not among them."""
    fingerprint = [h.alias(c) for h, c in zip(_key_fingerprint(), _FINGERPRINT, strict=True)]
    view_keys = state.entries.where(_whole_key()).select(*fingerprint)
    markers = state.deleted.where(_whole_key()).select(*fingerprint)
    keys = view_keys.join(markers, list(_FINGERPRINT), "left_anti")
    # Distinct: one view row must meet at most one live key (the same key in two partitions
    # is two live rows).
    return keys.distinct().select(
        *[F.col(c).alias(f"live_{c}") for c in _FINGERPRINT], F.lit(True).alias("live")
    )


# A key's fingerprint: (queuename, enqueueid) hashed twice, by xxhash64 with two seeds.
_FINGERPRINT = ("key_hash", "key_hash_2")
_SECOND_SEED = 0x6D71_6621  # any constant: it makes the second hash's seed differ


def _key_fingerprint() -> list[Column]:
    """The 128-bit fingerprint (`_FINGERPRINT`) of a row's whole key, by which liveness is
    decided: 16 fixed bytes are shuffled and compared where the key's text is about fifty
    (bench/: the anti join of 10M view keys with 9.5M markers 8.5 s -> 6 s). Two different
    keys share a fingerprint with odds of about 2^-128 per pair (under 10^-24 for ten
    million keys); the purger re-checks every partition's rows against the live markers by
    their keys before deleting it (docs/james.md)."""
    return [F.xxhash64(*_KEY), F.xxhash64(F.lit(_SECOND_SEED), *_KEY)]


def _whole_key() -> Column:
    return functools.reduce(operator.and_, [F.col(k).isNotNull() for k in _KEY])


def _early() -> Column:
    """A row's partition starts before its queue's browse start, or before its content start:
    the partitions `unreclaimed_slice` may flag (null starts are skipped by `greatest`)."""
    return F.col("timerangestart") < F.greatest(*[F.col(c) for c in _STARTS])


def _observed(observation: Observation, name: str, count: Callable[[], int]) -> int:
    """The number `observation` holds under `name`, or `count()`'s when it holds none: Spark
    Connect reports no observation for a checkpoint, and a sum of no rows is null."""
    value = observation.get.get(name)
    return int(value) if value is not None else count()


def _first(frame: DataFrame) -> int:
    """The single value of a one-row, one-column frame, 0 when null."""
    row = frame.first()
    return int(row[0] or 0) if row is not None else 0


def _early_rows() -> Column:
    """How many view rows are in partitions `_early`, from the rollup (with its queue starts)."""
    return F.sum(F.when(_early(), F.col("rows")))


def _holding_slices() -> Column:
    """The distinct (``queuename``, ``timerangestart``) of marked live rows from their queue's
    contentStart to its browseStart: the partitions there `unreclaimed_slice` never flags."""
    trs, b, c = F.col("timerangestart"), F.col("browsestart"), F.col("contentstart")
    holding = F.col("live") & c.isNotNull() & (trs >= c) & (trs < b)
    return F.collect_set(F.when(holding, F.struct("queuename", "timerangestart")))


def _aware(value: Any) -> dt.datetime:
    """A timestamp collected from Spark (UTC; naive when Arrow gives no zone) as UTC."""
    assert isinstance(value, dt.datetime)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def marked_rows(
    state: JamesState,
    history: list[ConfigEvent],
    live: DataFrame,
    early: bool = False,
) -> DataFrame:
    """The view rows some check reads one by one (`_AUDIT_COLUMNS` and their queue's starts),
    with `FLAGS`: ``live`` (its key is among the `_live_keys` `live`: what `classify` calls not
    ``consumed``), ``wrong_bucket`` (null, undecided, for a name that is not ASCII: `Context`
    judges those), ``wrong_slice``, ``early`` (in a partition `_early`, with its ``sender`` and
    ``recipients`` and its ``metadata_bytes``; only when `early`, else false); only rows with
    some flag set or undecided. The view is read once, each row's key looked up among the live
    keys (sent to every task when few enough, so the view rows are never shuffled)."""
    # A row with a null key part has no marker, and is live: told by the flag, so the lookup
    # is a plain equality of two fingerprints (null-safe keys hash four values per row).
    same_key = functools.reduce(
        operator.and_,
        [h == F.col(f"live_{c}") for h, c in zip(_key_fingerprint(), _FINGERPRINT, strict=True)],
    )
    keyless = ~_whole_key()
    rows = _with_starts(state, state.entries).join(live, same_key, "left")
    # Names hashed by generated code when they are ASCII (nearly all: James names its mails);
    # the other names are left undecided (null) and their rows kept, to be judged by Java's
    # own hash on the kept rows (`Context`): `reflect` on every row halved the pass's speed.
    hashcode = _ascii_hashcode(F.col("name"), state.entries.sparkSession)
    in_wrong_bucket = wrong_bucket(history, hashcode)
    if hashcode is None:
        in_wrong_bucket = F.coalesce(in_wrong_bucket, F.lit(False))
    flags = {
        "live": F.coalesce(F.col("live"), F.lit(False)) | keyless,
        "wrong_bucket": in_wrong_bucket,
        "wrong_slice": F.coalesce(wrong_slice(history), F.lit(False)),
        "early": F.coalesce(_early(), F.lit(False)) if early else F.lit(False),
    }
    # Addresses and bytes only for the rows `unreclaimed_slice` may count them for: the bytes
    # are computed here, for these few rows, rather than by the rollup for every row (its
    # collections' strings joined per row took most of a pass over the view: bench/).
    counted = [F.when(flags["early"], F.col(c)).alias(c) for c in ("sender", "recipients")]
    counted.append(F.when(flags["early"], metadata_bytes()).alias("metadata_bytes"))
    return rows.select(
        *_AUDIT_COLUMNS,
        *_STARTS,
        *[flag.alias(name) for name, flag in flags.items()],
        *(counted if early else []),
    ).where(functools.reduce(operator.or_, [F.coalesce(F.col(n), F.lit(True)) for n in flags]))


def partition_rollup(state: JamesState) -> DataFrame:
    """Every partition's ``rows`` per ``hour`` of enqueue, in one pass over the view's narrow
    columns: the partitions' row counts and the queues' hourly peaks add these up. The bytes
    a row stores are summed only for the partitions `unreclaimed_slice` may flag, from their
    rows (`marked_rows`)."""
    hour = F.date_trunc("hour", "enqueuedtime").alias("hour")
    return state.entries.groupBy(*PARTITION, hour).agg(F.count(F.lit(1)).alias("rows"))


def _at_most(frame: DataFrame, limit: int) -> bool:
    """Whether `frame` has at most `limit` rows (counting no further than that)."""
    return frame.limit(limit + 1).count() <= limit


def _with_starts(state: JamesState, frame: DataFrame) -> DataFrame:
    # One row per queue each: sent to every task instead of shuffling `frame`.
    return frame.join(F.broadcast(state.browse_start), "queuename", "left").join(
        F.broadcast(state.content_start), "queuename", "left"
    )


def _addresses() -> Column:
    """A view row's sender and recipients (nulls dropped)."""
    return F.array_compact(F.concat(F.array("sender"), F.coalesce("recipients", F.array())))


def _octets(column: str) -> Column:
    return F.coalesce(F.octet_length(F.col(column)), F.lit(0)).cast("long")


def metadata_bytes() -> Column:
    """The bytes a view row stores about a mail (definition in docs/james.md)."""
    strings = [
        "name", "state", "sender", "errormessage", "remotehost", "remoteaddr",
        "headerblobid", "bodyblobid",
    ]  # fmt: skip
    total = sum((_octets(c) for c in strings), F.lit(16).cast("long"))
    # Collections are measured by joining their strings (nulls are skipped, as they store no
    # bytes): plain expressions, code-generated, where a per-element lambda is interpreted.
    headers = F.col("perrecipientspecificheaders")
    attributes = F.col("attributes")
    parts = [
        F.col("recipients"),
        headers["_1"],
        headers["_2"],
        headers["_3"],
        F.map_keys(attributes),
        # binary -> string keeps the bytes as they are; only their number is used
        F.map_values(attributes).cast("array<string>"),
    ]
    return total + sum((_joined_octets(p) for p in parts), F.lit(0).cast("long"))


def _joined_octets(strings: Column) -> Column:
    return F.coalesce(F.octet_length(F.array_join(strings, "")), F.lit(0)).cast("long")


def _iso(column: str) -> Column:
    return F.date_format(F.col(column), "yyyy-MM-dd'T'HH:mm:ss'Z'")


def _iso_millis(column: str | Column) -> Column:
    """ISO-8601 UTC with milliseconds (``2026-11-03T10:00:00.000Z``), the one format of a
    plan's instants: the purger compares them with what it reads live (the session time zone
    is UTC, see spark.py)."""
    value = F.col(column) if isinstance(column, str) else column
    return F.date_format(value, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def _iso_micros(column: str) -> Column:
    """ISO-8601 UTC with microseconds: an instant a plan compares with a cutoff, exactly."""
    return F.date_format(F.col(column), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")


def partition_subject() -> Column:
    return F.concat_ws("/", F.col("queuename"), _iso("timerangestart"), F.col("bucketid"))


def _finding(
    frame: DataFrame,
    check: str,
    severity: Column | str,
    scope: str,
    subject: Column,
    as_of: dt.datetime,
    detail: Column,
    size: Column | None = None,
    queue: Column | None = None,
) -> DataFrame:
    return frame.select(
        F.lit(check).alias("check"),
        (F.lit(severity) if isinstance(severity, str) else severity).alias("severity"),
        F.lit(SYSTEM).alias("system"),
        (queue if queue is not None else F.col("queuename")).cast("string").alias("queue"),
        F.lit(scope).alias("scope"),
        subject.cast("string").alias("subject"),
        F.lit(as_of).cast("timestamp").alias("observed_at"),
        (size if size is not None else F.lit(None)).cast("long").alias("bytes"),
        # Null facts stay in the JSON (as null), so every finding of a check has the same keys.
        F.to_json(detail, {"ignoreNullFields": "false"}).alias("detail"),
    )


def unreclaimed_slice(ctx: Context) -> DataFrame:
    """Partitions James should have deleted but still holds: storage, tombstone load, and
    personal data (addresses, headers) kept long after the mail left the queue.

    Each finding also carries what a cleanup plan needs to delete the partition and what the
    purger re-checks: its rows' enqueue ids and those consumed (``markers``), its newest
    enqueue time, the table, the queue's starts at exact milliseconds, the start of the
    queue's first partition at or after contentStart that this check does not flag
    (``first_kept_slice``: how far contentStart may move once flagged ones are gone) and the
    slice window and largest bucket count James enumerates with."""
    partition = PARTITION
    # Only partitions before a queue's browse or content start are flagged. When their rows
    # are kept (all of them, with their live flags), the partitions are counted, flagged and
    # measured from those rows alone, in one aggregation. Otherwise (a never-cleaned queue)
    # the partitions are flagged from the rollup's row counts and the live rows, and the rows
    # of the flagged ones read again from the view, filtered by them sent to every task.
    if ctx.early_kept:
        rows = ctx.marked.where(F.col("early"))
        # Flagged from their row counts first, so what a finding carries of each row (enqueue
        # ids, markers, addresses, blobs) is gathered for the flagged partitions alone.
        counts = rows.groupBy(*partition, *_STARTS).agg(
            F.count(F.lit(1)).alias("rows"), F.count_if(_live_flag(rows)).alias("live_rows")
        )
        rows = rows.join(_flagged(counts).select(*partition), partition, "left_semi")
        flagged = _flagged(_partition_contents(ctx, rows, [*partition, *_STARTS]))
    else:
        counts = ctx.rollup.groupBy(*partition, *_STARTS).agg(F.sum("rows").alias("rows"))
        live = ctx.live.groupBy(*partition).agg(F.count(F.lit(1)).alias("live_rows"))
        flagged = _flagged(counts.join(live, partition, "left"))
        keys = F.broadcast(flagged.select(*partition))
        rows = ctx.state.entries.join(keys, partition, "left_semi").select(
            *partition, *_BLOB_IDS, "sender", "recipients", "enqueueid", "enqueuedtime",
            metadata_bytes().alias("metadata_bytes"),
        )  # fmt: skip
        # Each row's live flag, from the kept live rows (made distinct: one match per row).
        live_keys = ctx.live.select(*partition, _row_key().alias("row_key")).distinct()
        rows = rows.withColumn("row_key", _row_key()).join(
            live_keys.withColumn("live", F.lit(True)), [*partition, "row_key"], "left"
        )
        rows = rows.withColumn("live", F.coalesce(F.col("live"), F.lit(False)))
        contents = _partition_contents(ctx, rows, partition).drop("rows", "live_rows")
        flagged = flagged.join(contents, partition)
    bucket_counts = sorted({e.bucket_count for e in ctx.history})
    detail = F.struct(
        "reason",
        "rows",
        "live_rows",
        "metadata_bytes",
        "blob_bytes",
        "addresses",
        _iso_millis("browsestart").alias("browse_start"),
        _iso_millis("contentstart").alias("content_start"),
        F.lit(ctx.table).alias("table"),
        _iso_millis("timerangestart").alias("timerangestart"),
        "bucketid",
        "enqueueids",
        "markers",
        F.when(F.col("newest") < F.lit(_FAR_FUTURE).cast("timestamp"), _iso_micros("newest")).alias(
            "newest_enqueued_time"
        ),
        _iso_millis(_by_queue(ctx.first_kept)).alias("first_kept_slice"),
        F.lit(ctx.window).cast("long").alias("window_seconds"),
        F.lit(bucket_counts[-1]).alias("bucket_count"),
    )
    return _finding(
        flagged,
        "unreclaimed_slice",
        F.when(F.col("reason") == "cleanup_pending", "info").otherwise("warning"),
        "partition",
        partition_subject(),
        ctx.as_of,
        detail,
        F.col("metadata_bytes") + F.coalesce(F.col("blob_bytes"), F.lit(0)),
    )


def _row_key() -> Column:
    """A row's enqueue id, with a null one as a text no id is (a keyless row is live)."""
    return F.coalesce(F.col("enqueueid"), F.lit("\u0000"))


def _by_queue(values: dict[str, dt.datetime]) -> Column:
    """The instant of each row's queue in `values` (null for a queue it lacks), as a literal
    map: a few queues, looked up with no join."""
    if not values:
        return F.lit(None).cast("timestamp")
    pairs = [item for queue in sorted(values) for item in (F.lit(queue), F.lit(values[queue]))]
    return F.element_at(F.create_map(*pairs), F.col("queuename"))


def _flagged(partitions: DataFrame) -> DataFrame:
    """`partitions` (with ``rows``, ``live_rows`` and their queue's starts) that
    `unreclaimed_slice` flags, with their ``reason``."""
    trs, b, c = F.col("timerangestart"), F.col("browsestart"), F.col("contentstart")
    all_consumed = F.col("live_rows") == 0
    reason = (
        F.when(c.isNotNull() & (trs < c), "before_content_start")
        .when(c.isNotNull() & (trs >= c) & (trs < b) & all_consumed, "cleanup_pending")
        .when(c.isNull() & (trs < b) & all_consumed, "never_cleaned")
    )
    counted = partitions.withColumn(
        "live_rows", F.coalesce(F.col("live_rows"), F.lit(0)).cast("long")
    )
    return counted.withColumn("reason", reason).where(F.col("reason").isNotNull())


def _live_flag(rows: DataFrame) -> Column:
    """A row's ``live`` flag where `rows` have one; null (counted as not live) otherwise."""
    return F.col("live") if "live" in rows.columns else F.lit(None)


def _partition_contents(ctx: Context, rows: DataFrame, keys: list[str]) -> DataFrame:
    """Per partition (grouped by `keys`) of `rows`: its ``rows``, ``live_rows`` (of rows with a
    ``live`` column), ``metadata_bytes`` (summed), ``addresses`` (distinct senders and
    recipients), ``blob_bytes`` (the listed sizes of its distinct blob ids, null without a
    listing), ``enqueueids`` (lower case, sorted), ``markers`` (those of rows not live) and
    ``newest`` (the latest enqueue time, `_FAR_FUTURE` when a row has none). Every row gives
    items, made distinct per partition, then counted and summed: its addresses, its blob ids,
    and one item of its own with its id, bytes, live flag and enqueue time."""
    live = _live_flag(rows)
    enqueued = F.coalesce(F.col("enqueuedtime"), F.lit(_FAR_FUTURE).cast("timestamp"))
    row = _item("row", F.lower(F.col("enqueueid")), F.col("metadata_bytes"), live, enqueued)
    addresses = F.transform(_addresses(), lambda a: _item("address", a))
    blob_ids = F.array(*[_item("blob", F.col(c)) for c in _BLOB_IDS])
    items = rows.select(*keys, F.inline(F.concat(F.array(row), addresses, blob_ids))).where(
        F.col("value").isNotNull() | (F.col("kind") == "row")
    )
    blobs = ctx.state.blobs
    if blobs is not None:
        # A listed blob's size (the largest, should a key be listed twice); blobs already gone
        # have none and count for nothing.
        is_blob = (F.col("kind") == "blob") & (F.col("value") == F.col("key"))
        items = items.join(ctx.listed_sizes(), is_blob, "left")
    size = F.max("listed_size" if blobs is not None else F.lit(0))
    distinct = items.groupBy(*keys, "kind", "value").agg(
        size.alias("blob_size"),
        F.sum("row_bytes").alias("row_bytes"),
        F.count_if(F.col("kind") == "row").alias("rows"),
        F.count_if(F.col("row_live")).alias("live_rows"),
        F.max("row_time").alias("row_time"),
    )
    is_row = F.col("kind") == "row"
    return distinct.groupBy(*keys).agg(
        F.sum("rows").alias("rows"),
        F.sum("live_rows").alias("live_rows"),
        F.sum("row_bytes").alias("metadata_bytes"),
        F.count_if(F.col("kind") == "address").alias("addresses"),
        (F.coalesce(F.sum("blob_size"), F.lit(0)) if blobs is not None else F.lit(None))
        .cast("long")
        .alias("blob_bytes"),
        F.sort_array(F.collect_list(F.when(is_row, F.col("value")))).alias("enqueueids"),
        F.sort_array(
            F.collect_list(F.when(is_row & (F.col("live_rows") == 0), F.col("value")))
        ).alias("markers"),
        F.max("row_time").alias("newest"),
    )


def _item(
    kind: str,
    value: Column,
    row_bytes: Column | None = None,
    row_live: Column | None = None,
    row_time: Column | None = None,
) -> Column:
    """One item `_partition_contents` counts: an address, a blob id, or a row's own."""
    return F.struct(
        F.lit(kind).alias("kind"),
        value.cast("string").alias("value"),
        (F.lit(None) if row_bytes is None else row_bytes).cast("long").alias("row_bytes"),
        (F.lit(None) if row_live is None else row_live).cast("boolean").alias("row_live"),
        (F.lit(None) if row_time is None else row_time).cast("timestamp").alias("row_time"),
    )


def stale_browse_start(ctx: Context) -> DataFrame:
    """A browseStart that does not advance makes every browse, getSize and delete re-read old
    slices (and their tombstones), and blocks the cleanup of everything after it."""
    # One aggregation per queue: its oldest live slice, its oldest visible one (at or after
    # browseStart), and the mails in the browseStart slice itself, oldest first.
    trs, start = F.col("timerangestart"), F.col("browsestart")
    pinned = F.collect_list(F.when(trs == start, F.struct("enqueuedtime", "enqueueid")))
    live = ctx.live.groupBy("queuename").agg(
        F.min(trs).alias("oldest_live_slice"),
        F.min(F.when(trs >= start, trs)).alias("oldest_visible_slice"),
        pinned.alias("pinned"),
    )
    listed = F.slice(F.transform(F.array_sort("pinned"), lambda s: s["enqueueid"]), 1,
                     MAX_PINNING_LISTED)  # fmt: skip
    pinning = F.when(F.size("pinned") > 0, listed).alias("pinning")
    as_of = F.lit(ctx.as_of).cast("timestamp")
    age = as_of.cast("long") - F.col("browsestart").cast("long")
    # Every queue with a browseStart (the one-row-per-queue side sent to every task).
    queues = live.join(F.broadcast(ctx.state.browse_start), "queuename", "right").select(
        "queuename", "browsestart", "oldest_live_slice", "oldest_visible_slice", pinning
    )
    too_old = age > int(BROWSE_START_HEALTH_GRACE.total_seconds())
    lagging = F.col("oldest_live_slice").isNotNull() & (
        F.col("browsestart").cast("long") < F.col("oldest_live_slice").cast("long") - ctx.window
    )
    reason = (
        F.when(F.col("oldest_visible_slice").isNull(), "queue_empty")
        .when(F.col("pinning").isNotNull(), "pinned")
        .otherwise("lagging")
    )
    flagged = queues.where(too_old | lagging).withColumn("reason", reason)
    detail = F.struct(
        "reason",
        _iso("browsestart").alias("browse_start"),
        _iso("oldest_live_slice").alias("oldest_live_slice"),
        age.alias("age_seconds"),
        F.coalesce(F.col("pinning"), F.array().cast("array<string>")).alias("pinning"),
    )
    return _finding(
        flagged, "stale_browse_start", "warning", "queue", F.col("queuename"), ctx.as_of, detail
    )


def invisible_mail(ctx: Context) -> DataFrame:
    """Live mails before browseStart: James can no longer browse, count, delete or republish
    them, yet their data and blobs are kept."""
    mails = ctx.live.where(F.col("timerangestart") < F.col("browsestart"))
    detail = F.struct(
        _iso("timerangestart").alias("slice"),
        _iso("browsestart").alias("browse_start"),
        _iso("enqueuedtime").alias("enqueued_time"),
        "name",
    )
    return _finding(mails, "invisible_mail", "error", "mail", F.col("enqueueid"), ctx.as_of, detail)


def _duration_text(value: dt.timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def stuck_mail(ctx: Context) -> DataFrame:
    """Live mails older than the threshold: most likely lost from RabbitMQ (never delivered)."""
    cutoff = ctx.as_of - ctx.options.stuck_after
    older_than = _duration_text(ctx.options.stuck_after)
    mails = ctx.live.where(F.col("enqueuedtime") < F.lit(cutoff).cast("timestamp"))
    republish = F.concat(
        F.lit("POST /mailQueues/"),
        F.col("queuename"),
        F.lit(f"?action=RepublishNotProcessedMails&olderThan={older_than}"),
    )
    visible = F.col("browsestart").isNull() | (F.col("timerangestart") >= F.col("browsestart"))
    detail = F.struct(
        _iso("enqueuedtime").alias("enqueued_time"),
        (
            F.lit(ctx.as_of).cast("timestamp").cast("long") - F.col("enqueuedtime").cast("long")
        ).alias("age_seconds"),
        republish.alias("republish"),
        visible.alias("visible"),
        "name",
    )
    return _finding(mails, "stuck_mail", "error", "mail", F.col("enqueueid"), ctx.as_of, detail)


def orphaned_blob(ctx: Context) -> DataFrame:
    """Blobs no queue row references: cost, and mail content kept with nothing pointing at it
    (a privacy liability). Deletable only when every referrer is known and the id is not
    deduplicated (a deduplicated blob may be shared with mailbox messages)."""
    blobs = ctx.state.blobs
    if blobs is None:
        return findings.empty(ctx.state.entries.sparkSession)
    cutoff = F.lit(ctx.as_of - ctx.options.blob_grace).cast("timestamp")
    complete = ctx.options.references_complete
    candidates = blobs.where(F.col("last_modified") < cutoff)
    # Among the listed keys no live row names (`unnamed_blobs`, few), those no row read names
    # (`referenced_blobs`); when every reference of the view was scanned apart (a live
    # enumeration reads only some partitions), those none of them names.
    unnamed = ctx.unnamed_blobs.where(F.col("old")).select("key")
    if ctx.state.blob_references is not None:
        known = ctx.state.blob_references.select("key").where(F.col("key").isNotNull())
        referenced = known.join(ctx.sent_if_few_blobs(unnamed), "key", "left_semi")
    else:
        referenced = ctx.referenced_blobs.select("key")
    orphan_keys = ctx.sent_if_few_blobs(unnamed.join(referenced, "key", "left_anti"))
    orphans = candidates.join(orphan_keys, "key", "left_semi")
    detail = F.struct(
        "bucket",
        "id_kind",
        F.lit(complete).alias("references_complete"),
        (F.lit(complete) & (F.col("id_kind") == PASSTHROUGH)).alias("deletable"),
        F.lit(ctx.state.references_complete).alias("all_references_read"),
        _iso_millis("last_modified").alias("last_modified"),
        "etag",
    )
    return _finding(
        orphans,
        "orphaned_blob",
        "warning" if complete else "info",
        "blob",
        F.col("key"),
        ctx.as_of,
        detail,
        F.col("size"),
        queue=F.lit(None),
    )


def consumed_blob(ctx: Context) -> DataFrame:
    """Blobs (passthrough ids) that only consumed mails reference: James deletes a consumed
    mail's passthrough blobs when it is dequeued, so these are content it failed to delete,
    kept with no live mail needing it (cost, and personal data past its use)."""
    spark = ctx.state.entries.sparkSession
    blobs = ctx.state.blobs
    if blobs is None or ctx.passthrough_referenced == 0:
        # None (a healthy passthrough store): no pass over the view for their referrers.
        return findings.empty(spark)
    keys = ctx.referenced_blobs.where(F.col("passthrough")).select("key")
    ids = ctx.rows.select(
        "queuename", "enqueueid", "enqueuedtime", F.explode(F.array(*_BLOB_IDS)).alias("key")
    )
    rows = ids.where(F.col("key").isNotNull()).join(ctx.sent_if_few_blobs(keys), "key")
    referrer = F.struct(
        F.col("queuename").alias("queue"),
        F.lower(F.col("enqueueid")).alias("enqueueid"),
        _iso_micros("enqueuedtime").alias("enqueued_time"),
    )
    by_key = rows.groupBy("key").agg(
        F.sort_array(F.collect_set(referrer)).alias("referrers"),
        F.array_sort(F.collect_set("queuename")).alias("queues"),
    )
    kept = blobs.where(F.col("id_kind") == PASSTHROUGH).join(ctx.sent_if_few_blobs(by_key), "key")
    detail = F.struct(
        "bucket",
        "id_kind",
        _iso_millis("last_modified").alias("last_modified"),
        "etag",
        "referrers",
    )
    one_queue = F.when(F.size("queues") == 1, F.col("queues")[0])
    return _finding(
        kept, "consumed_blob", "warning", "blob", F.col("key"), ctx.as_of, detail,
        F.col("size"), queue=one_queue,
    )  # fmt: skip


def personal_data(ctx: Context) -> DataFrame:
    """View rows holding a data subject the audit was asked to look for (an erasure policy's):
    each is personal data an erasure request covers, and each finding says what deleting it
    takes (its partition, whether it is consumed, its queue's browseStart). Subjects appear as
    keyed hashes only (`mqforensics.subjects`); none searched, no finding."""
    spark = ctx.state.entries.sparkSession
    options = ctx.options
    if not options.subjects:
        return findings.empty(spark)
    from mqforensics import subjects

    headers = F.coalesce(
        F.col("perrecipientspecificheaders"),
        F.array().cast("array<struct<_1:string,_2:string,_3:string>>"),
    )
    addresses = F.concat(
        F.array(F.col("sender")),
        F.coalesce(F.col("recipients"), F.array().cast("array<string>")),
        F.transform(headers, lambda t: t["_1"]),
    )
    searched = F.array(*[F.lit(s) for s in sorted(options.subjects)])
    held = F.array_sort(
        F.array_intersect(subjects.keyed_addresses(addresses, options.subject_key), searched)
    )
    rows = (
        ctx.state.entries.select(
            *PARTITION, "enqueueid", held.alias("subjects"), metadata_bytes().alias("bytes")
        )
        .where(F.size("subjects") > 0)
        .withColumn("row_key", _row_key())
    )
    # Few rows: each meets the kept live rows (its own liveness, its partition's live rows).
    live_keys = ctx.live.select(*PARTITION, _row_key().alias("row_key")).distinct()
    live_rows = ctx.live.groupBy(*PARTITION).agg(F.count(F.lit(1)).alias("partition_live_rows"))
    rows = (
        rows.join(live_keys.withColumn("live", F.lit(True)), [*PARTITION, "row_key"], "left")
        .join(live_rows, PARTITION, "left")
        .join(F.broadcast(ctx.state.browse_start), "queuename", "left")
    )
    detail = F.struct(
        "subjects",
        F.lit(ctx.table).alias("table"),
        partition_subject().alias("partition"),
        _iso_millis("timerangestart").alias("timerangestart"),
        "bucketid",
        F.lower(F.col("enqueueid")).alias("enqueueid"),
        (~F.coalesce(F.col("live"), F.lit(False))).alias("consumed"),
        F.coalesce(F.col("partition_live_rows"), F.lit(0))
        .cast("long")
        .alias("partition_live_rows"),
        _iso_millis("browsestart").alias("browse_start"),
    )
    return _finding(
        rows, "personal_data", "info", "mail", F.col("enqueueid"), ctx.as_of, detail,
        F.col("bytes"),
    )  # fmt: skip


def dangling_blob_ref(ctx: Context) -> DataFrame:
    """Live mails whose header or body blob is gone: James cannot deliver or browse them
    (ObjectNotFoundException, the message is dead-lettered)."""
    blobs = ctx.state.blobs
    if blobs is None:
        return findings.empty(ctx.state.entries.sparkSession)
    # Each live row's blob ids (header first), those the listing lacks, gathered per row.
    row = ["queuename", "timerangestart", "bucketid", "enqueueid", "name"]
    ids = ctx.live.select(*row, F.posexplode(F.array(*_BLOB_IDS)).alias("position", "key"))
    listed = ids.where(F.col("key").isNotNull()).join(ctx.listed_sizes(), "key", "left")
    gone = listed.where(F.col("listed_size").isNull())
    dangling = gone.groupBy(*row).agg(
        F.array_sort(F.collect_list(F.struct("position", "key")))["key"].alias("missing")
    )
    return _finding(
        dangling,
        "dangling_blob_ref",
        "error",
        "mail",
        F.col("enqueueid"),
        ctx.as_of,
        F.struct("missing", "name"),
    )


def bucket_mismatch(ctx: Context) -> DataFrame:
    """Rows in a bucket James would never compute for their name: browse still finds them,
    but they reveal a foreign writer, corruption or a bucket-count history we do not know."""
    counts = sorted({e.bucket_count for e in ctx.history})
    rows = ctx.marked.where(F.col("wrong_bucket"))
    detail = F.struct(
        "bucketid",
        james_bucket(F.col("name"), counts[-1]).alias("expected_bucket"),
        F.lit(counts[-1]).alias("bucket_count"),
        "name",
    )
    return _finding(rows, "bucket_mismatch", "warning", "mail", F.col("enqueueid"), ctx.as_of,
                    detail)  # fmt: skip


def wrong_bucket(history: list[ConfigEvent], hashcode: Column | None = None) -> Column:
    """A view row's bucket is none James computes for its name under any bucket count of the
    configuration history (or its name or bucket is null). `hashcode` is the names' Java
    hashCode (`_java_hashcode` when not given); where it is null, so is the answer, unless the
    bucket is 0 and one bucket count is 1."""
    name, bucket = F.col("name"), F.col("bucketid")
    hashcode = _java_hashcode(name) if hashcode is None else hashcode
    # Fewest buckets first: with one bucket every name is in bucket 0, no hash needed, and the
    # first comparison that holds spares the rest.
    fits = [
        bucket == 0 if count == 1 else F.abs(hashcode % F.lit(count)) == bucket
        for count in sorted({e.bucket_count for e in history})
    ]
    return name.isNull() | bucket.isNull() | ~functools.reduce(operator.or_, fits)


def james_bucket(name: Column, bucket_count: int) -> Column:
    """James's bucket of a mail name, ``Math.abs(name.hashCode() % bucketCount)``, computed by
    the JVM's own ``String.hashCode`` (through ``reflect``: no Python worker, and the same
    UTF-16 arithmetic as James by construction); null for a null name."""
    return F.when(name.isNotNull(), F.abs(_java_hashcode(name) % F.lit(bucket_count)))


def _ascii_hashcode(name: Column, spark: SparkSession) -> Column | None:
    """Java's ``String.hashCode`` of ASCII names (valid UTF-8, one byte per character), null
    for the others, by generated code: Spark's HiveHash of a string is the same recurrence,
    ``h = 31 * h + c``, over its UTF-8 bytes, which are its UTF-16 chars when it is ASCII.
    None where HiveHash cannot be built (Spark Connect): `_java_hashcode` is then used."""
    from mqforensics.sources import jvm_columns

    hashed = jvm_columns.hive_hash(name, spark)
    if hashed is None:
        return None
    ascii_only = F.is_valid_utf8(name) & (F.length(name) == F.octet_length(name))
    return F.when(ascii_only, hashed)


def _java_hashcode(name: Column) -> Column:
    return F.reflect(F.lit("java.util.Objects"), F.lit("hashCode"), name).cast("int")


def slice_mismatch(ctx: Context) -> DataFrame:
    """Rows whose slice start is not one James computes: browse may never visit them."""
    windows = sorted({e.window for e in ctx.history})
    rows = ctx.marked.where(F.col("wrong_slice"))
    detail = F.struct(
        _iso("timerangestart").alias("slice"),
        _iso("enqueuedtime").alias("enqueued_time"),
        _on_a_slice_start(windows).alias("aligned"),
        F.array(*[F.lit(w) for w in windows]).alias("windows"),
    )
    return _finding(rows, "slice_mismatch", "warning", "mail", F.col("enqueueid"), ctx.as_of,
                    detail)  # fmt: skip


def wrong_slice(history: list[ConfigEvent]) -> Column:
    """A view row's slice start is not a multiple of any slice window of the configuration
    history, or its mail was enqueued outside that slice (a minute early is tolerated)."""
    windows = sorted({e.window for e in history})
    enqueued = F.unix_micros(F.col("enqueuedtime"))
    start = F.unix_micros(F.col("timerangestart"))
    in_range = (enqueued >= start - SLICE_EARLY_TOLERANCE_SECONDS * 1_000_000) & (
        enqueued < start + windows[-1] * 1_000_000
    )
    return ~_on_a_slice_start(windows) | ~in_range


def _on_a_slice_start(windows: list[int]) -> Column:
    epoch = F.col("timerangestart").cast("long")
    # Whole seconds only: a fractional timestamp is never a slice start.
    whole = F.unix_micros(F.col("timerangestart")) % 1_000_000 == 0
    # One comparison per window (code-generated; a lambda over an array is interpreted per row).
    return whole & functools.reduce(operator.or_, [epoch % w == 0 for w in windows])


def config_violation(ctx: Context) -> DataFrame:
    """Configuration changes James forbids (its start-up check fails on them): slices or buckets
    written under them cannot be enumerated correctly."""
    rows = []
    for previous, event in zip(ctx.history, ctx.history[1:], strict=False):
        problems = []
        if event.window > previous.window or previous.window % event.window != 0:
            problems.append(
                f"sliceWindow {previous.window}s -> {event.window}s: may only shrink to a divisor"
            )
        if event.bucket_count < previous.bucket_count:
            problems.append(
                f"bucketCount {previous.bucket_count} -> {event.bucket_count}: may only grow"
            )
        if problems:
            rows.append(
                findings.Finding(
                    "config_violation", "error", SYSTEM, None, "config",
                    f"eventid {event.eventid}", ctx.as_of, None,
                    {"problems": problems, "previous_eventid": previous.eventid},
                )
            )  # fmt: skip
    return findings.to_frame(ctx.state.entries.sparkSession, rows)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def config_advice(ctx: Context) -> DataFrame:
    """Settings that fit the observed traffic: slices of about 10,000 mails (ADR 31), and a
    browse-start update about once per slice (rabbitmq.properties guidance)."""
    current = ctx.history[-1]
    rows = []
    peaks = _hourly_peaks(ctx.rollup_rows)
    for queue in sorted(peaks, key=lambda q: (q is not None, q or "")):
        peak = peaks[queue]
        fits = [d for d in _divisors(current.window) if peak * d / 3600 <= MAILS_PER_SLICE_TARGET]
        window = max(fits) if fits else 1
        buckets = current.bucket_count
        while peak * window / 3600 / buckets > MAILS_PER_SLICE_TARGET:
            buckets *= 2
        pace = max(1, round(peak * window / 3600))
        rows.append(
            findings.Finding(
                "config_advice", "info", SYSTEM, queue, "queue", queue,
                ctx.as_of, None,
                {
                    "peak_mails_per_hour": peak,
                    "slice_window_seconds": current.window,
                    "recommended_slice_window_seconds": window,
                    "bucket_count": current.bucket_count,
                    "recommended_bucket_count": buckets,
                    "update_browse_start_pace": current.pace,
                    "recommended_update_browse_start_pace": pace,
                },
            )
        )  # fmt: skip
    return findings.to_frame(ctx.state.entries.sparkSession, rows)


def _hourly_peaks(rollup: dict[str, list[Any]]) -> dict[str, int]:
    """Each queue's most mails enqueued in one hour, from the kept rollup's rows on the driver
    (`Context.rollup_rows`: a few per partition, fetched by one job and added up here, rather
    than by two shuffles)."""
    hourly: dict[tuple[str, object], int] = {}
    for queue, hour, count in zip(rollup["queuename"], rollup["hour"], rollup["rows"], strict=True):
        hourly[(queue, hour)] = hourly.get((queue, hour), 0) + count
    peaks: dict[str, int] = {}
    for (queue, _), count in hourly.items():
        peaks[queue] = max(peaks.get(queue, 0), count)
    return peaks


CheckFunction = Callable[[Context], "DataFrame"]

CHECKS: dict[str, CheckFunction] = {
    "unreclaimed_slice": unreclaimed_slice,
    "stale_browse_start": stale_browse_start,
    "invisible_mail": invisible_mail,
    "stuck_mail": stuck_mail,
    "orphaned_blob": orphaned_blob,
    "consumed_blob": consumed_blob,
    "dangling_blob_ref": dangling_blob_ref,
    "bucket_mismatch": bucket_mismatch,
    "slice_mismatch": slice_mismatch,
    "config_violation": config_violation,
    "config_advice": config_advice,
    "personal_data": personal_data,
    **broker_checks.CHECKS,
}


def run_checks(
    state: JamesState, options: AuditOptions | None = None, only: list[str] | None = None
) -> DataFrame:
    """Every check (or `only` those named) on `state`, as one findings frame."""
    unknown = sorted(set(only or []) - set(CHECKS))
    if unknown:
        raise InputError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    state.persist()
    ctx = Context(state, options or AuditOptions(), config_events(state))
    selected = [CHECKS[name] for name in (only or CHECKS)]
    return findings.union_all(state.entries.sparkSession, (check(ctx) for check in selected))
