"""Forensic checks of a James mail queue state: pure functions from the frames
(`frames.JamesState`) and the settings (`options.Settings`) to findings (`findings.SCHEMA`,
built by `finding.finding`); the facts several checks read are prepared once per audit
(`context.prepared`).

Each check's exact condition is specified in docs/james.md; the docstrings say why it matters.
Checks never read or write anything outside the frames they are given; the only driver-side
collects are of the tiny configuration history and of per-queue aggregates, and the counts that
decide whether a set of keys is small enough to send to every task (`context.BROADCAST_BYTES`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from mqforensics import findings
from mqforensics.errors import InputError
from mqforensics.systems.james.blob_ids import PASSTHROUGH
from mqforensics.systems.james.broker_checks import (
    broker_count_mismatch,
    broker_missing_mail,
    broker_orphan_message,
    dead_lettered_mail,
    queue_without_consumer,
)
from mqforensics.systems.james.context import (
    BLOB_IDS,
    PARTITION,
    STARTS,
    Context,
    james_bucket,
    metadata_bytes,
    on_a_slice_start,
    prepare,
    prepared,
)
from mqforensics.systems.james.finding import SYSTEM, finding, older_than
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.options import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

BROWSE_START_HEALTH_GRACE = dt.timedelta(days=7)  # BrowseStartHealthCheck.GRACE_PERIOD
MAILS_PER_SLICE_TARGET = 10_000  # ADR 31: "a slice holds about 10,000 emails"
MAX_PINNING_LISTED = 20


# A row without an enqueue time cannot be shown old enough: it compares as the far future.
_FAR_FUTURE = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)


def _addresses() -> Column:
    """A view row's sender and recipients (nulls dropped)."""
    return F.array_compact(F.concat(F.array("sender"), F.coalesce("recipients", F.array())))


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


def unreclaimed_slice(frames: JamesState, settings: Settings) -> DataFrame:
    """Partitions James should have deleted but still holds: storage, tombstone load, and
    personal data (addresses, headers) kept long after the mail left the queue.

    Each finding also carries what a cleanup plan needs to delete the partition and what the
    purger re-checks: its rows' enqueue ids and those consumed (``markers``), its newest
    enqueue time, the table, the queue's starts at exact milliseconds, the start of the
    queue's first partition at or after contentStart that this check does not flag
    (``first_kept_slice``: how far contentStart may move once flagged ones are gone) and the
    slice window and largest bucket count James enumerates with."""
    ctx = prepared(frames, settings)
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
        counts = rows.groupBy(*partition, *STARTS).agg(
            F.count(F.lit(1)).alias("rows"), F.count_if(_live_flag(rows)).alias("live_rows")
        )
        rows = rows.join(_flagged(counts).select(*partition), partition, "left_semi")
        flagged = _flagged(_partition_contents(ctx, rows, [*partition, *STARTS]))
    else:
        counts = ctx.rollup.groupBy(*partition, *STARTS).agg(F.sum("rows").alias("rows"))
        live = ctx.live.groupBy(*partition).agg(F.count(F.lit(1)).alias("live_rows"))
        flagged = _flagged(counts.join(live, partition, "left"))
        keys = F.broadcast(flagged.select(*partition))
        rows = ctx.state.entries.join(keys, partition, "left_semi").select(
            *partition, *BLOB_IDS, "sender", "recipients", "enqueueid", "enqueuedtime",
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
    return finding(
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
    blob_ids = F.array(*[_item("blob", F.col(c)) for c in BLOB_IDS])
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


def stale_browse_start(frames: JamesState, settings: Settings) -> DataFrame:
    """A browseStart that does not advance makes every browse, getSize and delete re-read old
    slices (and their tombstones), and blocks the cleanup of everything after it."""
    ctx = prepared(frames, settings)
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
    return finding(
        flagged, "stale_browse_start", "warning", "queue", F.col("queuename"), ctx.as_of, detail
    )


def invisible_mail(frames: JamesState, settings: Settings) -> DataFrame:
    """Live mails before browseStart: James can no longer browse, count, delete or republish
    them, yet their data and blobs are kept."""
    ctx = prepared(frames, settings)
    mails = ctx.live.where(F.col("timerangestart") < F.col("browsestart"))
    detail = F.struct(
        _iso("timerangestart").alias("slice"),
        _iso("browsestart").alias("browse_start"),
        _iso("enqueuedtime").alias("enqueued_time"),
        "name",
    )
    return finding(mails, "invisible_mail", "error", "mail", F.col("enqueueid"), ctx.as_of, detail)


def stuck_mail(frames: JamesState, settings: Settings) -> DataFrame:
    """Live mails older than the threshold: most likely lost from RabbitMQ (never delivered)."""
    ctx = prepared(frames, settings)
    cutoff = ctx.as_of - ctx.settings.stuck_after
    wait = older_than(ctx.settings.stuck_after)
    mails = ctx.live.where(F.col("enqueuedtime") < F.lit(cutoff).cast("timestamp"))
    republish = F.concat(
        F.lit("POST /mailQueues/"),
        F.col("queuename"),
        F.lit(f"?action=RepublishNotProcessedMails&olderThan={wait}"),
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
    return finding(mails, "stuck_mail", "error", "mail", F.col("enqueueid"), ctx.as_of, detail)


def orphaned_blob(frames: JamesState, settings: Settings) -> DataFrame:
    """Blobs no queue row references: cost, and mail content kept with nothing pointing at it
    (a privacy liability). Deletable only when every referrer is known and the id is not
    deduplicated (a deduplicated blob may be shared with mailbox messages)."""
    ctx = prepared(frames, settings)
    blobs = ctx.state.blobs
    if blobs is None:
        return findings.empty(ctx.state.entries.sparkSession)
    cutoff = F.lit(ctx.as_of - ctx.settings.blob_grace).cast("timestamp")
    complete = ctx.settings.references_complete
    candidates = blobs.where(F.col("last_modified") < cutoff)
    # Among the listed keys no live row names (`unnamed_blobs`, few), those no row read names
    # (`referenced_blobs`); when every reference of the view was scanned apart (a live
    # enumeration reads only some partitions), those none of them names.
    unnamed = ctx.unnamed_blobs.where(F.col("old")).select("key")
    if ctx.state.blob_references is not None:
        known = ctx.state.blob_references.select("key").where(F.col("key").isNotNull())
        referenced = known.join(ctx.sent_if_few_unnamed(unnamed), "key", "left_semi")
    else:
        referenced = ctx.referenced_blobs.select("key")
    orphan_keys = ctx.sent_if_few_unnamed(unnamed.join(referenced, "key", "left_anti"))
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
    return finding(
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


def consumed_blob(frames: JamesState, settings: Settings) -> DataFrame:
    """Blobs (passthrough ids) that only consumed mails reference: James deletes a consumed
    mail's passthrough blobs when it is dequeued, so these are content it failed to delete,
    kept with no live mail needing it (cost, and personal data past its use)."""
    ctx = prepared(frames, settings)
    spark = ctx.state.entries.sparkSession
    blobs = ctx.state.blobs
    if blobs is None or ctx.passthrough_referenced == 0:
        # None (a healthy passthrough store): no pass over the view for their referrers.
        return findings.empty(spark)
    keys = ctx.referenced_blobs.where(F.col("passthrough")).select("key")
    ids = ctx.rows.select(
        "queuename", "enqueueid", "enqueuedtime", F.explode(F.array(*BLOB_IDS)).alias("key")
    )
    rows = ids.where(F.col("key").isNotNull()).join(ctx.sent_if_few_unnamed(keys), "key")
    referrer = F.struct(
        F.col("queuename").alias("queue"),
        F.lower(F.col("enqueueid")).alias("enqueueid"),
        _iso_micros("enqueuedtime").alias("enqueued_time"),
    )
    by_key = rows.groupBy("key").agg(
        F.sort_array(F.collect_set(referrer)).alias("referrers"),
        F.array_sort(F.collect_set("queuename")).alias("queues"),
    )
    kept = blobs.where(F.col("id_kind") == PASSTHROUGH).join(ctx.sent_if_few_unnamed(by_key), "key")
    detail = F.struct(
        "bucket",
        "id_kind",
        _iso_millis("last_modified").alias("last_modified"),
        "etag",
        "referrers",
    )
    one_queue = F.when(F.size("queues") == 1, F.col("queues")[0])
    return finding(
        kept, "consumed_blob", "warning", "blob", F.col("key"), ctx.as_of, detail,
        F.col("size"), queue=one_queue,
    )  # fmt: skip


def personal_data(frames: JamesState, settings: Settings) -> DataFrame:
    """View rows holding a data subject the audit was asked to look for (an erasure policy's),
    in their envelope (sender, recipients, per-recipient headers) or their content (the header
    blob; at depth ``full`` the body blob too, `content`): each is personal data an erasure
    request covers, and each finding says where the subjects were found and what deleting the
    row takes (its partition, whether it is consumed, its queue's browseStart). Subjects
    appear as keyed hashes only (`mqforensics.subjects`); none searched, no finding."""
    ctx = prepared(frames, settings)
    if not ctx.settings.subjects:
        return findings.empty(ctx.state.entries.sparkSession)
    rows = _searched_rows(ctx, F.size("found") > 0)
    detail = F.struct(
        "subjects",
        *_searched_row_facts(ctx),
        "found",
        F.lit(ctx.settings.searched.depth).alias("depth"),
    )
    return finding(
        rows, "personal_data", "info", "mail", F.col("enqueueid"), ctx.as_of, detail,
        F.col("bytes"),
    )  # fmt: skip


def unreadable_content(frames: JamesState, settings: Settings) -> DataFrame:
    """View rows whose content could not be searched at the depth asked: a header or body
    blob missing or undecodable, an encrypted (AES) header blob, an encrypted or damaged MIME
    part (`content_search`). Such a row is not known to be free of the subjects searched: an
    erasure cannot be said complete while it stays (the planner defers it, never deletes it
    blindly)."""
    ctx = prepared(frames, settings)
    if not ctx.settings.subjects or ctx.state.content is None:
        return findings.empty(ctx.state.entries.sparkSession)
    rows = _searched_rows(ctx, F.size("unreadable") > 0)
    detail = F.struct(
        *_searched_row_facts(ctx),
        "unreadable",
        F.lit(ctx.settings.searched.depth).alias("depth"),
    )
    return finding(
        rows, "unreadable_content", "warning", "mail", F.col("enqueueid"), ctx.as_of, detail,
        F.col("bytes"),
    )  # fmt: skip


def _searched_rows(ctx: Context, condition: Column) -> DataFrame:
    """The searched rows (`Context.searched_rows`) meeting `condition`, each with its liveness,
    its partition's live rows and its queue's browseStart."""
    rows = ctx.searched_rows.where(condition).withColumn("row_key", _row_key())
    # Few rows: each meets the kept live rows (its own liveness, its partition's live rows).
    live_keys = ctx.live.select(*PARTITION, _row_key().alias("row_key")).distinct()
    live_rows = ctx.live.groupBy(*PARTITION).agg(F.count(F.lit(1)).alias("partition_live_rows"))
    return (
        rows.join(live_keys.withColumn("live", F.lit(True)), [*PARTITION, "row_key"], "left")
        .join(live_rows, PARTITION, "left")
        .join(F.broadcast(ctx.state.browse_start), "queuename", "left")
    )


def _searched_row_facts(ctx: Context) -> list[Column]:
    """What identifies a searched row and what deleting it takes (`_searched_rows`)."""
    return [
        F.lit(ctx.table).alias("table"),
        partition_subject().alias("partition"),
        _iso_millis("timerangestart").alias("timerangestart"),
        F.col("bucketid"),
        F.lower(F.col("enqueueid")).alias("enqueueid"),
        (~F.coalesce(F.col("live"), F.lit(False))).alias("consumed"),
        F.coalesce(F.col("partition_live_rows"), F.lit(0))
        .cast("long")
        .alias("partition_live_rows"),
        _iso_millis("browsestart").alias("browse_start"),
    ]


def dangling_blob_ref(frames: JamesState, settings: Settings) -> DataFrame:
    """Live mails whose header or body blob is gone: James cannot deliver or browse them
    (ObjectNotFoundException, the message is dead-lettered)."""
    ctx = prepared(frames, settings)
    blobs = ctx.state.blobs
    if blobs is None:
        return findings.empty(ctx.state.entries.sparkSession)
    # Each live row's blob ids (header first), those the listing lacks, gathered per row.
    row = ["queuename", "timerangestart", "bucketid", "enqueueid", "name"]
    ids = ctx.live.select(*row, F.posexplode(F.array(*BLOB_IDS)).alias("position", "key"))
    listed = ids.where(F.col("key").isNotNull()).join(ctx.listed_sizes(), "key", "left")
    gone = listed.where(F.col("listed_size").isNull())
    dangling = gone.groupBy(*row).agg(
        F.array_sort(F.collect_list(F.struct("position", "key")))["key"].alias("missing")
    )
    return finding(
        dangling,
        "dangling_blob_ref",
        "error",
        "mail",
        F.col("enqueueid"),
        ctx.as_of,
        F.struct("missing", "name"),
    )


def bucket_mismatch(frames: JamesState, settings: Settings) -> DataFrame:
    """Rows in a bucket James would never compute for their name: browse still finds them,
    but they reveal a foreign writer, corruption or a bucket-count history we do not know."""
    ctx = prepared(frames, settings)
    counts = sorted({e.bucket_count for e in ctx.history})
    rows = ctx.marked.where(F.col("wrong_bucket"))
    detail = F.struct(
        "bucketid",
        james_bucket(F.col("name"), counts[-1]).alias("expected_bucket"),
        F.lit(counts[-1]).alias("bucket_count"),
        "name",
    )
    return finding(rows, "bucket_mismatch", "warning", "mail", F.col("enqueueid"), ctx.as_of,
                    detail)  # fmt: skip


def slice_mismatch(frames: JamesState, settings: Settings) -> DataFrame:
    """Rows whose slice start is not one James computes: browse may never visit them."""
    ctx = prepared(frames, settings)
    windows = sorted({e.window for e in ctx.history})
    rows = ctx.marked.where(F.col("wrong_slice"))
    detail = F.struct(
        _iso("timerangestart").alias("slice"),
        _iso("enqueuedtime").alias("enqueued_time"),
        on_a_slice_start(windows).alias("aligned"),
        F.array(*[F.lit(w) for w in windows]).alias("windows"),
    )
    return finding(rows, "slice_mismatch", "warning", "mail", F.col("enqueueid"), ctx.as_of,
                    detail)  # fmt: skip


def config_violation(frames: JamesState, settings: Settings) -> DataFrame:
    """Configuration changes James forbids (its start-up check fails on them): slices or buckets
    written under them cannot be enumerated correctly."""
    ctx = prepared(frames, settings)
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


def config_advice(frames: JamesState, settings: Settings) -> DataFrame:
    """Settings that fit the observed traffic: slices of about 10,000 mails (ADR 31), and a
    browse-start update about once per slice (rabbitmq.properties guidance)."""
    ctx = prepared(frames, settings)
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


CheckFunction = Callable[[JamesState, Settings], "DataFrame"]

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
    "unreadable_content": unreadable_content,
    "broker_missing_mail": broker_missing_mail,
    "broker_orphan_message": broker_orphan_message,
    "dead_lettered_mail": dead_lettered_mail,
    "queue_without_consumer": queue_without_consumer,
    "broker_count_mismatch": broker_count_mismatch,
}


def run_checks(
    state: JamesState, settings: Settings | None = None, only: list[str] | None = None
) -> DataFrame:
    """Every check (or `only` those named) on `state`, as one findings frame."""
    unknown = sorted(set(only or []) - set(CHECKS))
    if unknown:
        raise InputError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    state.persist()
    settings = settings or Settings()
    prepare(state, settings)
    selected = [CHECKS[name] for name in (only or CHECKS)]
    return findings.union_all(
        state.entries.sparkSession, (check(state, settings) for check in selected)
    )
