"""What a log queue operator trends (`measure`), per queue directory, from the frames of
`frames.LogQueueState` at ``loaded.as_of`` (docs/history.md). Every figure's ``queue`` is the
directory as the frames name it (its absolute path as escaped text, `filenames.shown`); every
directory read gets its figures, zeros included, whether or not it holds a segment.

- ``rows`` (count): the whole records its segment files hold (damaged bytes are no record).
- ``live_mails`` (count): the messages replay finds not finished (waiting or in flight), as
  `checks.stuck_message` counts them.
- ``mails_by_age`` (count; ``item`` = the band of `metrics.AGE_BANDS`): those live messages by
  the age of their first envelope (``first_enqueued_us``, the time `stuck_message` judges) at
  ``as_of``; all four bands, zeros included. A live message whose envelope time does not fit
  its column is in ``live_mails`` and in no band.
- ``oldest_live_age`` (seconds): the oldest of those ages, only when a live message has one.
- ``queue_bytes`` (bytes): the spool files of the live messages (the content still queued),
  each file once; the envelopes themselves are in ``segment_bytes``.
- ``segments`` (count) and ``segment_bytes`` (bytes): the segment files ``seg-<n>.lq`` in the
  directory and their sizes (headers and damage included).
- ``segment_garbage_ratio`` (ratio): the bytes of whole records no longer live over the bytes
  of every whole record of the directory's segments (44-byte record header and payload each,
  docs/logqueue-format.md; segment headers and damaged bytes are in neither). A record is live
  when the restart procedure still needs it for a message not finished (`replay`): the live
  ENVELOPE of a waiting message; for a message in flight its START, every DELIVERY referring
  to that START and the ENVELOPE the START refers to (the format calls that envelope garbage
  once started, but the restart rewrites the remaining recipients from it:
  `Replay.garbage_end` keeps it too). Every other record is garbage: records before the
  working suffix, those of finished messages (FINISH makes all of a message's records garbage),
  replaced envelopes, earlier attempts, orphans and RESTART records in a segment. Only for a
  directory whose segments hold at least one whole record (no ratio of nothing).
- ``spool_files`` (count): the files of ``<dir>/spool``, live or not (a leftover one is a
  `lost_envelope` finding).

One Spark job: the queues frame joined with the messages and the records aggregated per
directory, one row each. The records frame is lazy, so the garbage ratio reads every segment
once more (one task per segment file), as the loader does for records dated after ``as_of``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqforensics.metrics import Metric, age_metrics, band_counts, epoch_seconds
from mqforensics.systems.logqueue import format as fmt

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.spec import Loaded
    from mqforensics.systems.logqueue.frames import LogQueueState

__all__ = ["measure"]

_LIVE = ("waiting", "in_flight")


def _live_messages(state: LogQueueState, as_of_us: int) -> DataFrame:
    """Per queue: live mails, their age bands, the oldest age and their spool bytes."""
    from pyspark.sql import functions as F

    live = state.messages.where(F.col("state").isin(*_LIVE))
    age = (F.lit(as_of_us) - F.col("first_enqueued_us")).cast("double") / F.lit(1_000_000.0)
    by_mail = live.select("queue", age.alias("age"))
    counted = by_mail.groupBy("queue").agg(
        F.count("*").alias("live_mails"), F.max("age").alias("oldest"), *band_counts(F.col("age"))
    )
    spools = (
        live.where(F.col("spool").isNotNull() & F.col("spool_bytes").isNotNull())
        .select("queue", "spool", "spool_bytes")
        .distinct()
        .groupBy("queue")
        .agg(F.sum("spool_bytes").alias("queue_bytes"))
    )
    return counted.join(spools, "queue", "full")


def _record_bytes(state: LogQueueState) -> DataFrame:
    """Per queue: its whole records, their bytes and the bytes of the live ones (see the
    module docstring)."""
    from pyspark.sql import functions as F

    live = state.messages.where(F.col("state").isin(*_LIVE))
    envelopes = live.select(
        "queue", F.col("envelope_segment").alias("_seg"), F.col("envelope_offset").alias("_off")
    )
    starts = live.select(
        "queue", F.col("start_segment").alias("_seg"), F.col("start_offset").alias("_off")
    )
    at = (
        envelopes.unionByName(starts)
        .where(F.col("_seg").isNotNull() & F.col("_off").isNotNull())
        .distinct()
        .withColumn("_at", F.lit(True))
    )
    started = (
        live.where(F.col("start_segment").isNotNull())
        .select(
            "queue",
            "message_id",
            F.col("start_segment").alias("ref_segment"),
            F.col("start_offset").alias("ref_offset"),
        )
        .distinct()
        .withColumn("_delivery", F.lit(True))
    )
    records = state.records.select(
        "queue", "segment", "offset", "type", "message_id", "ref_segment", "ref_offset", "size"
    )
    marked = records.join(
        at,
        (records["queue"] == at["queue"])
        & (records["segment"] == at["_seg"])
        & (records["offset"] == at["_off"]),
        "left",
    ).drop(at["queue"])
    marked = marked.join(started, ["queue", "message_id", "ref_segment", "ref_offset"], "left")
    is_live = F.coalesce(F.col("_at"), F.lit(False)) | (
        (F.col("type") == F.lit(fmt.DELIVERY)) & F.coalesce(F.col("_delivery"), F.lit(False))
    )
    return marked.groupBy("queue").agg(
        F.count("*").alias("rows"),
        F.sum("size").alias("record_bytes"),
        F.sum(F.when(is_live, F.col("size")).otherwise(0)).alias("live_bytes"),
    )


def measure(loaded: Loaded[LogQueueState]) -> list[Metric]:
    """The figures of every queue directory (see the module docstring), in directory order."""
    from pyspark.sql import functions as F

    state = loaded.frames
    as_of_us = round(epoch_seconds(loaded.as_of) * 1_000_000)
    queues = state.queues.select(
        "queue",
        F.size("segments").alias("segments"),
        F.aggregate(
            F.transform("segments", lambda s: s["size"]), F.lit(0).cast("long"), lambda a, b: a + b
        ).alias("segment_bytes"),
        F.col("spool_files"),
    )
    rows = (
        queues.join(_live_messages(state, as_of_us), "queue", "left")
        .join(_record_bytes(state), "queue", "left")
        .collect()
    )
    by_queue = {row["queue"]: row for row in rows}
    found: list[Metric] = []
    for queue in [q for q in state.dirs if q in by_queue] + sorted(set(by_queue) - set(state.dirs)):
        row = by_queue[queue]
        record_bytes = row["record_bytes"] or 0
        found += [
            Metric("rows", row["rows"] or 0, "count", queue=queue),
            Metric("live_mails", row["live_mails"] or 0, "count", queue=queue),
            *age_metrics(row.asDict(), queue),
        ]
        found += [
            Metric("queue_bytes", row["queue_bytes"] or 0, "bytes", queue=queue),
            Metric("segments", row["segments"], "count", queue=queue),
            Metric("segment_bytes", row["segment_bytes"], "bytes", queue=queue),
        ]
        if record_bytes > 0:
            garbage = record_bytes - (row["live_bytes"] or 0)
            ratio = garbage / record_bytes
            found.append(Metric("segment_garbage_ratio", ratio, "ratio", queue=queue))
        found.append(Metric("spool_files", row["spool_files"] or 0, "count", queue=queue))
    return found
