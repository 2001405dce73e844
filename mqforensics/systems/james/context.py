"""The facts every James check needs, computed once per audit (`Context`), and the marking of
the view rows they read: the configuration history, the live rows, the rows some check reads one
by one, the partitions' row counts.

`prepared(frames, settings)` is the one way a check gets them: made by `read.settings`
(`prepare`) before the checks run and kept on the frames (`JamesState.context`), so that each
check reads the kept rows and no check computes them again (bench/versus.py measures the
audit).
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

from mqforensics.errors import InputError
from mqforensics.spark import broadcast_limit, memory_settings, shuffle_partitions
from mqforensics.systems.james.blob_ids import PASSTHROUGH
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.options import ConfigEvent, Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SLICE_EARLY_TOLERANCE_SECONDS = 60


@dataclass
class Context:
    """Facts every check needs, computed once per audit (`prepared`): of the frames `state`
    judged with `settings`; `history` is the settings' configuration history (read from the
    frames when they have none)."""

    state: JamesState
    settings: Settings
    history: list[ConfigEvent] = field(init=False)
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
    # Bytes of the keys this audit sends to every task (`broadcast_rows`).
    _sent_bytes: int = field(init=False, default=0)
    # How many `unnamed_blobs` keys there are (counted while they are kept).
    _unnamed_rows: int = field(init=False, default=0)
    # The (queue, slice) of live rows from contentStart to browseStart, observed (`first_kept`).
    _holding: Observation = field(init=False)

    def __post_init__(self) -> None:
        given = self.settings.history
        self.history = list(given) if given is not None else config_events(self.state)
        if not self.history:
            raise InputError(
                "no CassandraMailQueueViewConfiguration event in the eventstore: cannot know the "
                "slice window and bucket count"
            )
        self.rows = self.state.entries.select(*AUDIT_COLUMNS)
        keep = self.state.keep
        # What the passes after each one need to know of its (small) output is counted while
        # it is kept (an observation), not by a job of its own.
        early, counted = Observation("early rows"), Observation("live keys")
        rollup = with_starts(self.state, partition_rollup(self.state))
        every_row = F.sum("rows").alias("all")
        self.rollup = keep(rollup.observe(early, _early_rows().alias("rows"), every_row))
        early_rows = _observed(early, "rows", lambda: _first(self.rollup.select(_early_rows())))
        self.early_kept = early_rows <= KEPT_EARLY_ROWS
        view_rows = _observed(early, "all", lambda: _first(self.rollup.select(every_row)))
        partitions = shuffle_partitions(self.state.entries.sparkSession, view_rows * KEY_BYTES)
        live_keys = _live_keys(self.state, partitions)
        live_keys = keep(live_keys.observe(counted, F.count(F.lit(1)).alias("keys")))
        few_keys = self.broadcast_rows(LIVE_KEY_BYTES)
        keys = _observed(counted, "keys", lambda: live_keys.limit(few_keys + 1).count())
        if keys <= few_keys:
            live_keys = F.broadcast(live_keys)
            self._sent_bytes += keys * LIVE_KEY_BYTES
        # The slices of live rows from a queue's contentStart to its browseStart (invisible
        # mail, few) are gathered while the marked rows are kept: where contentStart may move.
        self._holding = Observation("live slices before browseStart")
        marked = marked_rows(self.state, self.history, live_keys, self.early_kept)
        marked = keep(marked.observe(self._holding, _holding_slices().alias("slices")))
        # A name the marking pass could not hash (not ASCII) is judged here, among few rows.
        judged = F.coalesce(F.col("wrong_bucket"), wrong_bucket(self.history), F.lit(False))
        self.marked = marked.withColumn("wrong_bucket", judged)
        self.live = self.marked.where(F.col("live")).select(*AUDIT_COLUMNS, *STARTS)

    def broadcast_rows(self, row_bytes: int) -> int:
        """How many keys of `row_bytes` each may still be sent to every task: what is left of
        `BROADCAST_BYTES` (the session's `spark.broadcast_limit` when that is None) beside the
        keys this audit already sends (they may be held at the same time)."""
        limit = BROADCAST_BYTES
        if limit is None:
            limit = broadcast_limit(memory_settings(self.state.entries.sparkSession))
        return max(0, limit - self._sent_bytes) // row_bytes

    @functools.cached_property
    def searched_rows(self) -> DataFrame:
        """The view rows holding a searched data subject in their envelope or content, or
        content that could not be searched (`content.search_rows`, in the executors, the blobs
        read once per audit): kept, for `personal_data` and `unreadable_content`."""
        from mqforensics.systems.james.content import INPUT_COLUMNS, search_rows

        rows = self.state.entries.select(*INPUT_COLUMNS, metadata_bytes().alias("bytes"))
        if self.state.content is not None:
            # A consumed mail's blobs James deleted are no content left: said by each row's
            # liveness (`content.search_rows`).
            key = F.coalesce(F.col("enqueueid"), F.lit("\u0000"))
            live = self.live.select(*PARTITION, key.alias("row_key")).distinct()
            rows = rows.withColumn("row_key", key).join(
                live.withColumn("live", F.lit(True)), [*PARTITION, "row_key"], "left"
            )
            rows = rows.withColumn("live", F.coalesce(F.col("live"), F.lit(False)))
        return self.state.keep(search_rows(rows, self.state.content, self.settings.searched))

    @functools.cached_property
    def few_blobs(self) -> bool:
        """Whether the blob listing is small enough to send to every task."""
        blobs = self.state.blobs
        if blobs is None:
            return False
        few = self.broadcast_rows(LISTED_BLOB_BYTES)
        rows = self.state.blob_rows
        if rows is None:
            return at_most(blobs, few)
        if rows <= few:
            self._sent_bytes += rows * LISTED_BLOB_BYTES
        return rows <= few

    @functools.cached_property
    def few_unnamed(self) -> bool:
        """Whether the `unnamed_blobs` keys are few enough to send to every task: when the
        listing is (`few_blobs`), or when they fit beside what this audit already sends (a
        listing too large to send is mostly a live mail's blobs, which drop out there)."""
        if self.few_blobs:
            return True
        self.unnamed_blobs  # noqa: B018 (counted while they are kept)
        rows = self._unnamed_rows
        if rows <= self.broadcast_rows(LISTED_BLOB_BYTES):
            self._sent_bytes += rows * LISTED_BLOB_BYTES
            return True
        return False

    def sent_if_few_unnamed(self, frame: DataFrame) -> DataFrame:
        """`frame` (at most a row per `unnamed_blobs` key) sent to every task when those keys
        are few (`few_unnamed`), so the references it is joined with are not shuffled."""
        return F.broadcast(frame) if self.few_unnamed else frame

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
            when = aware(start)
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
        cutoff = F.lit(self.as_of - self.settings.blob_grace).cast("timestamp")
        named = self.live.select(F.explode(F.array(*BLOB_IDS)).alias("key"))
        keys = self.state.blobs.groupBy("key").agg(
            F.max(F.col("id_kind") == PASSTHROUGH).alias("passthrough"),
            F.max(F.col("last_modified") < cutoff).alias("old"),
        )
        counted = Observation("unnamed blobs")
        unnamed = keys.join(named, "key", "left_anti")
        kept = self.state.keep(unnamed.observe(counted, F.count(F.lit(1)).alias("keys")))
        self._unnamed_rows = _observed(counted, "keys", kept.count)
        return kept

    @functools.cached_property
    def referenced_blobs(self) -> DataFrame:
        """The `unnamed_blobs` keys some view row read names (consumed rows only: no live row
        names them), ``key`` and ``passthrough``, kept; how many are passthrough ones is
        counted while they are kept (`passthrough_referenced`). Only these few keys are looked
        up among every reference (sent to every task when they are few, `few_unnamed`, so the
        references, two per view row, are not shuffled)."""
        unnamed = self.sent_if_few_unnamed(self.unnamed_blobs.select("key", "passthrough"))
        ids = self.rows.select(F.explode(F.array(*BLOB_IDS)).alias("key"))
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
    markers = state.deleted.select(*KEY).distinct().withColumn("consumed", F.lit(True))
    consumed = F.coalesce(F.col("consumed"), F.lit(False)).alias("consumed")
    return (
        state.entries.join(markers, KEY, "left")
        .select(*state.entries.columns, consumed)
        .join(state.browse_start, "queuename", "left")
        .join(state.content_start, "queuename", "left")
    )


# What the checks read of a view row (the wide columns are read once, for the bytes it stores).
AUDIT_COLUMNS = (
    *("queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name"),
    *("headerblobid", "bodyblobid"),
)
KEY = ["queuename", "enqueueid"]
BLOB_IDS = ("headerblobid", "bodyblobid")
PARTITION = ["queuename", "timerangestart", "bucketid"]
# Keys (live mails, listed blobs) are sent to every task rather than shuffled against the view
# when their hash relation fits the session's `spark.broadcast_limit` (None), or this many bytes.
BROADCAST_BYTES: int | None = None
# Bytes a key takes in that relation (Spark's "data size" of the broadcast, bench/ James audits
# at 10M and 100M entries): a live key's fingerprint (433k: 48 MiB; 4.3M: 576 MiB), a listed
# blob's key and size (867k: 160 MiB). With a 3 GiB heap 6.2M live keys, or 4.3M listed blobs,
# are sent; with Spark's default 1 GiB 1.6M or 1.1M (the fixed bound was a million each).
LIVE_KEY_BYTES = 140
LISTED_BLOB_BYTES = 200


FLAGS = ("live", "wrong_bucket", "wrong_slice", "early")
STARTS = ("browsestart", "contentstart")
# Rows of partitions before their queue's browse or content start up to this many are kept
# with their addresses (a healthy queue has a few slices there; a never-cleaned one has most of
# its view there, and is read again instead).
KEPT_EARLY_ROWS = 1_000_000


def _live_keys(state: JamesState, partitions: int | None = None) -> DataFrame:
    """The distinct `_key_fingerprint`s (``live_key_hash``, ``live_key_hash_2``) of the view
    rows without a deletedmailsv2 marker, with ``live`` true: only the fingerprints of the
    keys are shuffled, and the output (a queue's live mails) is small. A row with a null key
    part is live without a lookup (`marked_rows`), so its key is not among them. Both sides are
    shuffled into `partitions` when more than the session's (`spark.shuffle_partitions`)."""
    fingerprint = [h.alias(c) for h, c in zip(_key_fingerprint(), _FINGERPRINT, strict=True)]
    view_keys = state.entries.where(_whole_key()).select(*fingerprint)
    markers = state.deleted.where(_whole_key()).select(*fingerprint)
    default = int(state.entries.sparkSession.conf.get("spark.sql.shuffle.partitions") or 8)
    if partitions is not None and partitions > default:
        view_keys = view_keys.repartition(partitions, *_FINGERPRINT)
        markers = markers.repartition(partitions, *_FINGERPRINT)
    keys = view_keys.join(markers, list(_FINGERPRINT), "left_anti")
    # Distinct: one view row must meet at most one live key (the same key in two partitions
    # is two live rows).
    return keys.distinct().select(
        *[F.col(c).alias(f"live_{c}") for c in _FINGERPRINT], F.lit(True).alias("live")
    )


# A key's fingerprint: (queuename, enqueueid) hashed twice, by xxhash64 with two seeds.
_FINGERPRINT = ("key_hash", "key_hash_2")
# Bytes a fingerprint takes shuffled (a row of two longs), by which the keys' anti join is
# split: 100M view keys into 44 partitions, where 8 were sorted and spilled 5.4 GB (bench/).
KEY_BYTES = 24
_SECOND_SEED = 0x6D71_6621  # any constant: it makes the second hash's seed differ


def _key_fingerprint() -> list[Column]:
    """The 128-bit fingerprint (`_FINGERPRINT`) of a row's whole key, by which liveness is
    decided: 16 fixed bytes are shuffled and compared where the key's text is about fifty
    (bench/: the anti join of 10M view keys with 9.5M markers 8.5 s -> 6 s). Two different
    keys share a fingerprint with odds of about 2^-128 per pair (under 10^-24 for ten
    million keys); the purger re-checks every partition's rows against the live markers by
    their keys before deleting it (docs/james.md)."""
    return [F.xxhash64(*KEY), F.xxhash64(F.lit(_SECOND_SEED), *KEY)]


def _whole_key() -> Column:
    return functools.reduce(operator.and_, [F.col(k).isNotNull() for k in KEY])


def _early() -> Column:
    """A row's partition starts before its queue's browse start, or before its content start:
    the partitions `unreclaimed_slice` may flag (null starts are skipped by `greatest`)."""
    return F.col("timerangestart") < F.greatest(*[F.col(c) for c in STARTS])


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


def aware(value: Any) -> dt.datetime:
    """A timestamp collected from Spark (UTC; naive when Arrow gives no zone) as UTC."""
    assert isinstance(value, dt.datetime)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def marked_rows(
    state: JamesState,
    history: list[ConfigEvent],
    live: DataFrame,
    early: bool = False,
) -> DataFrame:
    """The view rows some check reads one by one (`AUDIT_COLUMNS` and their queue's starts),
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
    rows = with_starts(state, state.entries).join(live, same_key, "left")
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
        *AUDIT_COLUMNS,
        *STARTS,
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


def at_most(frame: DataFrame, limit: int) -> bool:
    """Whether `frame` has at most `limit` rows (counting no further than that)."""
    return frame.limit(limit + 1).count() <= limit


def with_starts(state: JamesState, frame: DataFrame) -> DataFrame:
    # One row per queue each: sent to every task instead of shuffling `frame`.
    return frame.join(F.broadcast(state.browse_start), "queuename", "left").join(
        F.broadcast(state.content_start), "queuename", "left"
    )


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


def wrong_bucket(history: list[ConfigEvent], hashcode: Column | None = None) -> Column:
    """A view row's bucket is none James computes for its name under any bucket count of the
    configuration history (or its name or bucket is null). `hashcode` is the names' Java
    hashCode (`java_hashcode` when not given); where it is null, so is the answer, unless the
    bucket is 0 and one bucket count is 1."""
    name, bucket = F.col("name"), F.col("bucketid")
    hashcode = java_hashcode(name) if hashcode is None else hashcode
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
    return F.when(name.isNotNull(), F.abs(java_hashcode(name) % F.lit(bucket_count)))


def _ascii_hashcode(name: Column, spark: SparkSession) -> Column | None:
    """Java's ``String.hashCode`` of ASCII names (valid UTF-8, one byte per character), null
    for the others, by generated code: Spark's HiveHash of a string is the same recurrence,
    ``h = 31 * h + c``, over its UTF-8 bytes, which are its UTF-16 chars when it is ASCII.
    None where HiveHash cannot be built (Spark Connect): `java_hashcode` is then used."""
    from mqforensics.sources import jvm_columns

    hashed = jvm_columns.hive_hash(name, spark)
    if hashed is None:
        return None
    ascii_only = F.is_valid_utf8(name) & (F.length(name) == F.octet_length(name))
    return F.when(ascii_only, hashed)


def java_hashcode(name: Column) -> Column:
    return F.reflect(F.lit("java.util.Objects"), F.lit("hashCode"), name).cast("int")


def wrong_slice(history: list[ConfigEvent]) -> Column:
    """A view row's slice start is not a multiple of any slice window of the configuration
    history, or its mail was enqueued outside that slice (a minute early is tolerated)."""
    windows = sorted({e.window for e in history})
    enqueued = F.unix_micros(F.col("enqueuedtime"))
    start = F.unix_micros(F.col("timerangestart"))
    in_range = (enqueued >= start - SLICE_EARLY_TOLERANCE_SECONDS * 1_000_000) & (
        enqueued < start + windows[-1] * 1_000_000
    )
    return ~on_a_slice_start(windows) | ~in_range


def on_a_slice_start(windows: list[int]) -> Column:
    epoch = F.col("timerangestart").cast("long")
    # Whole seconds only: a fractional timestamp is never a slice start.
    whole = F.unix_micros(F.col("timerangestart")) % 1_000_000 == 0
    # One comparison per window (code-generated; a lambda over an array is interpreted per row).
    return whole & functools.reduce(operator.or_, [epoch % w == 0 for w in windows])


def prepare(frames: JamesState, settings: Settings) -> Context:
    """A new `Context` of `frames` judged with `settings`, kept on the frames for the checks
    (`read.settings` makes it before they run)."""
    made = Context(frames, settings)
    frames.context = made
    return made


def prepared(frames: JamesState, settings: Settings) -> Context:
    """The `Context` of `frames` judged with `settings`: the one kept on the frames when it is
    theirs and of these settings, else one made now (`prepare`) and kept for the next check."""
    kept = frames.context
    if isinstance(kept, Context) and kept.state is frames and kept.settings == settings:
        return kept
    return prepare(frames, settings)
