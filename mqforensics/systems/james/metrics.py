"""What a James operator trends (`measure`), per mail queue, from the frames of
`frames.JamesState` at ``loaded.as_of`` (docs/history.md), with zeros: every queue the view,
its browseStart table or the broker names gets its figures, so that a drained queue is a 0, not
a gap in its series.

``queue`` is the James mail queue (``spool``, ``outgoing``, ...), or for ``broker_messages`` the
RabbitMQ queue of one (``JamesMailQueue-workqueue-spool``). ``item`` holds an age band.

- ``rows`` (count): the rows the ``enqueuedmailsv4`` view holds for the queue, consumed ones
  too (what James's own ``mailQueueSize`` does not show: the view never shrinks by itself).
- ``live_mails`` (count): the rows without a ``deletedmailsv2`` marker, as the checks count them
  (`context.Context.live`): what James's browse would still hand out (or hides, before a stale
  browseStart).
- ``consumed_rows`` (count): ``rows`` less ``live_mails``: dequeued mail whose rows the view
  still keeps until its slice is cleaned up.
- ``mails_by_age`` (count; ``item`` = the band of `metrics.AGE_BANDS`): the live mails by the
  age of their ``enqueuedtime`` at ``as_of``; all four bands, zeros included.
- ``oldest_live_age`` (seconds): the oldest of those ages, when the queue holds a dated live
  mail.
- ``browse_start``, ``content_start`` (instant): the queue's browseStart and contentStart, when
  the table has one for it; ``browse_start_lag``, ``content_start_lag`` (seconds): ``as_of``
  less each. A browseStart that stops moving (the same instant run after run, its lag growing by
  the time between runs) is the stuck browseStart James's ``BrowseStart`` health check sees only
  after seven days.
- ``broker_messages`` (count; ``queue`` = the broker queue): ready plus unacknowledged messages
  of each RabbitMQ queue of a James queue, when a broker was read and gave both counts.
- ``blobs``, ``blob_bytes`` (count, bytes): the objects and bytes of the blob listing, when one
  was read (an orphan's bytes are in ``reclaimable_bytes`` of ``orphan_blob``).

An audit reuses what its checks kept (the live rows, the partitions' row counts: one small job
over kept rows); a validation, which runs no check, counts the live rows with one anti-join of
the view against the markers. Tombstones are not counted by an audit: Cassandra reports them
only when the purger deletes (its journal, docs/retention.md).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from mqforensics.metrics import Metric, age_metrics, band_counts, epoch_seconds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.spec import Loaded
    from mqforensics.systems.james.frames import JamesState

__all__ = ["measure"]

_KEY = ["queuename", "enqueueid"]


def measure(loaded: Loaded[JamesState]) -> list[Metric]:
    """The figures of every queue (see the module docstring)."""
    state = loaded.frames
    as_of = epoch_seconds(loaded.as_of)
    rows, live = _counted(state, as_of)
    starts = {name: _starts(getattr(state, name), column) for name, column in
              (("browse_start", "browsestart"), ("content_start", "contentstart"))}  # fmt: skip
    queues = sorted({*rows, *live, *starts["browse_start"], *starts["content_start"]})
    found: list[Metric] = []
    for queue in queues:
        figures = live.get(queue, {})
        count = int(figures.get("live", 0) or 0)
        found += [
            Metric("rows", rows.get(queue, 0), "count", queue=queue),
            Metric("live_mails", count, "count", queue=queue),
            Metric("consumed_rows", max(rows.get(queue, 0) - count, 0), "count", queue=queue),
        ]
        found += age_metrics(figures, queue)
        for name, kept in starts.items():
            instant = kept.get(queue)
            if instant is not None:
                found.append(Metric(name, instant, "instant", queue=queue))
                found.append(Metric(f"{name}_lag", as_of - instant, "seconds", queue=queue))
    found += _broker(state) + _blobs(state)
    return found


def _counted(state: JamesState, as_of: float) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """Rows per queue, and per queue its live mails' count, age bands and oldest age."""
    from pyspark.sql import functions as F

    context = state.context
    if context is not None and getattr(context, "state", None) is state:
        rolled = context.rollup_rows  # already on the driver: no job
        totals: Counter[str] = Counter()
        for queue, count in zip(rolled["queuename"], rolled["rows"], strict=True):
            totals[queue] += int(count)
        rows = dict(totals)
        live_rows: DataFrame = context.live
    else:
        counted = state.entries.groupBy("queuename").count().collect()
        rows = {row["queuename"]: int(row["count"]) for row in counted}
        markers = state.deleted.select(*_KEY).distinct()
        live_rows = state.entries.join(markers, _KEY, "left_anti")
    age = F.lit(as_of) - F.col("enqueuedtime").cast("double")
    aggregated = (
        live_rows.groupBy("queuename")
        .agg(F.count(F.lit(1)).alias("live"), F.max(age).alias("oldest"), *band_counts(age))
        .collect()
    )
    live = {row["queuename"]: row.asDict() for row in aggregated}
    return {k: v for k, v in rows.items() if k is not None}, {
        k: v for k, v in live.items() if k is not None
    }


def _starts(frame: DataFrame, column: str) -> dict[str, float]:
    """Queue -> its start (seconds since 1970), from a one-row-per-queue table."""
    from pyspark.sql import functions as F

    rows = frame.select("queuename", F.col(column).cast("double").alias("at")).collect()
    return {
        r["queuename"]: r["at"] for r in rows if r["queuename"] is not None and r["at"] is not None
    }


def _broker(state: JamesState) -> list[Metric]:
    if state.broker_queues is None:
        return []
    found = []
    for row in state.broker_queues.collect():
        if row["ready"] is None or row["unacked"] is None:
            continue  # the broker gave no count: no point rather than a false 0
        depth = row["ready"] + row["unacked"]
        found.append(Metric("broker_messages", depth, "count", queue=row["broker_queue"]))
    return sorted(found, key=lambda m: m.queue)


def _blobs(state: JamesState) -> list[Metric]:
    from pyspark.sql import functions as F

    if state.blobs is None:
        return []
    row = state.blobs.agg(F.count(F.lit(1)).alias("n"), F.sum("size").alias("bytes")).first()
    count = int(row["n"]) if row is not None else 0
    size = int(row["bytes"] or 0) if row is not None else 0
    return [Metric("blobs", count, "count"), Metric("blob_bytes", size, "bytes")]
