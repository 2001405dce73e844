"""What James's own browse, getSize and delete-by-condition return, computed with Spark joins.

James browses a queue slice by slice from browseStart to the slice holding "now", reads every
bucket of each slice, drops mails with a deletedMailsV2 marker and sorts each slice by
enqueuedTime (CassandraMailQueueBrowser). getSize is the count of that browse, which James
computes linearly (the reason its size metric is disabled by default); here it is one join for
every queue at once. Within one enqueuedTime, James keeps bucket order then Cassandra's
clustering order of enqueueId; we order ties by bucketid then enqueueid text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from mqforensics.errors import ConfigError

if TYPE_CHECKING:
    import datetime as dt

    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.sources.cassandra_connection import CassandraEndpoint
    from mqforensics.systems.james.frames import JamesState

# What getSize needs of a view row: its partition and its id (the order browse returns mails
# in does not change their count).
SIZE_COLUMNS = ("queuename", "timerangestart", "bucketid", "enqueueid")


def current_configuration(state: JamesState) -> tuple[int, int]:
    """(slice window seconds, bucket count) of the latest configuration event."""
    # A handful of rows, picked in Python: a sort in Spark would run a job for them.
    rows = state.config_history.select("eventid", "slice_window_seconds", "bucket_count").collect()
    if not rows:
        raise ConfigError("no configuration event: the slice window is unknown")
    row = max(rows, key=lambda r: r.eventid)
    return int(row.slice_window_seconds), int(row.bucket_count)


def browsable(state: JamesState) -> DataFrame:
    """Every mail James's browse returns, for all queues, with its browse `position` (1-based)."""
    order = Window.partitionBy("queuename").orderBy(
        "timerangestart", "enqueuedtime", "bucketid", "enqueueid"
    )
    return visible(state).withColumn("position", F.row_number().over(order))


def visible(state: JamesState) -> DataFrame:
    """The rows of `state.entries` James's browse returns, for all queues, in no order."""
    window, bucket_count = current_configuration(state)
    last_slice = (int(state.as_of.timestamp()) // window) * window
    markers = state.deleted.select("queuename", "enqueueid")  # an anti join needs no distinct
    epoch = F.col("timerangestart").cast("long")
    starts = state.browse_start.select("queuename", F.col("browsestart").cast("long").alias("b"))
    return (
        state.entries.join(starts, "queuename")
        # The slices browse visits: b, b + window, ..., up to the slice holding as_of, and in
        # each the buckets 0..bucketCount-1. Only whole-second starts on that grid are read.
        .where(
            F.col("bucketid").between(0, bucket_count - 1)
            & (F.unix_micros("timerangestart") % 1_000_000 == 0)
            & (epoch >= F.col("b"))
            & (epoch <= last_slice)
            & ((epoch - F.col("b")) % window == 0)
        )
        .join(markers, ["queuename", "enqueueid"], "left_anti")
        .drop("b")
    )


def sizes(state: JamesState) -> DataFrame:
    """`queuename, size`: getSize of every queue that has a browseStart (0 when empty)."""
    counts = visible(state).groupBy("queuename").agg(F.count(F.lit(1)).alias("size"))
    return (
        state.browse_start.select("queuename")
        .join(counts, "queuename", "left")
        .select("queuename", F.coalesce(F.col("size"), F.lit(0)).cast("long").alias("size"))
    )


def live_sizes(
    spark: SparkSession,
    endpoint: CassandraEndpoint,
    *,
    keyspace: str,
    as_of: dt.datetime | None = None,
    consistency: str = "LOCAL_QUORUM",
) -> DataFrame:
    """`sizes` of a live cluster, reading only what James's browse reads: the partitions from
    each browseStart to the slice holding `as_of`, key columns only, and every
    deletedMailsV2 marker in one token-range scan (James asks for them one row at a time)."""
    from mqforensics.systems.james.live import LiveOptions, read_live

    options = LiveOptions(
        keyspace=keyspace, consistency=consistency, columns=SIZE_COLUMNS, from_browse_start=True
    )
    return sizes(read_live(spark, endpoint, options, as_of=as_of))


def delete_selection(
    state: JamesState,
    queue: str,
    *,
    sender: str | None = None,
    name: str | None = None,
    recipient: str | None = None,
) -> DataFrame:
    """The mails James's ``DELETE /mailQueues/<queue>/mails[?sender=|name=|recipient=]`` removes.

    At most one condition, as the WebAdmin route requires; none means all (clear).
    """
    given = [c for c in (sender, name, recipient) if c is not None]
    if len(given) > 1:
        raise ConfigError("give at most one of sender, name, recipient (as James's WebAdmin)")
    mails = browsable(state).where(F.col("queuename") == queue)
    if sender is not None:
        mails = mails.where(F.col("sender") == sender)
    if name is not None:
        mails = mails.where(F.col("name") == name)
    if recipient is not None:
        mails = mails.where(F.array_contains("recipients", recipient))
    return mails
