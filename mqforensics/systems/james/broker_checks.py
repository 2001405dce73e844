"""Checks of the view against RabbitMQ (broker.py): pure functions from the frames and the
settings (with the audit's `context.Context`) to findings, empty when no broker was read.

Where the messages of a James queue's work queue and dead-letter queue were both read (an
export), mails are reconciled one by one: a visible live mail enqueued before the grace with
no broker message (`broker_missing_mail`, what RepublishNotProcessedMails republishes), a
work-queue message whose view row is consumed or absent (`broker_orphan_message`), every
dead-lettered message with its view row and blobs (`dead_lettered_mail`). Where they were not
(a live read: counts only), the counts are reconciled per queue (`broker_count_mismatch`) and
a non-empty dead-letter queue is one finding. `queue_without_consumer` needs counts only.
Exact conditions: docs/james.md, "Checks against the broker".
"""

from __future__ import annotations

import datetime as dt
import math
import urllib.parse
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqforensics import findings
from mqforensics.systems.james.broker import DEAD_LETTER, WORK
from mqforensics.systems.james.context import Context, prepared
from mqforensics.systems.james.finding import finding, older_than
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.options import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# The WebAdmin calls a finding names (reference §4).
REPUBLISH = "POST /mailQueues/{queue}?action=RepublishNotProcessedMails&olderThan={older_than}"
DELETE_BY_NAME = "DELETE /mailQueues/{queue}/mails?name={name}"


def _empty(ctx: Context) -> DataFrame:
    return findings.empty(ctx.state.entries.sparkSession)


def _finding(ctx: Context, frame: DataFrame, check: str, severity: str, scope: str,
             subject: Column, detail: Column) -> DataFrame:  # fmt: skip
    return finding(frame, check, severity, scope, subject, ctx.as_of, detail)


def _read_queues(ctx: Context) -> DataFrame:
    """James queues whose work and dead-letter queues' messages were both read."""
    queues = ctx.state.broker_queues
    assert queues is not None
    both = F.sum(F.col("messages_read").cast("int")) == 2
    return queues.groupBy("queuename").agg(both.alias("read")).where("read").select("queuename")


def _view_state(ctx: Context, messages: DataFrame) -> DataFrame:
    """`messages` with ``view``: live, deleted (a deletedmailsv2 marker), absent (no row read),
    or unreadable (the body is no MailReferenceDTO); and the view row's enqueue time."""
    rows = ctx.rows.select(
        "queuename", F.lower("enqueueid").alias("enqueueid"), "enqueuedtime", "headerblobid",
        "bodyblobid",
    ).dropDuplicates(["queuename", "enqueueid"])  # fmt: skip
    markers = (
        ctx.state.deleted.select("queuename", F.lower("enqueueid").alias("enqueueid"))
        .distinct()
        .withColumn("marker", F.lit(True))
    )
    joined = messages.join(rows, ["queuename", "enqueueid"], "left").join(
        markers, ["queuename", "enqueueid"], "left"
    )
    view = (
        F.when(F.col("problem").isNotNull(), F.lit("unreadable"))
        .when(F.col("marker"), F.lit("deleted"))
        .when(F.col("enqueuedtime").isNull(), F.lit("absent"))
        .otherwise(F.lit("live"))
    )
    return joined.withColumn("view", view)


def _message_subject() -> Column:
    """A message's enqueueId; for an unreadable body, ``<broker queue>#<position>``."""
    return F.coalesce(
        F.col("enqueueid"),
        F.concat_ws("#", F.col("broker_queue"), F.col("position").cast("string")),
    )


def broker_missing_mail(frames: JamesState, settings: Settings) -> DataFrame:
    """Visible live mails (at or after browseStart) enqueued before the grace that neither the
    work queue nor the dead-letter queue holds: RabbitMQ will never deliver them. Each names the
    one RepublishNotProcessedMails call (per queue) that republishes every such mail."""
    ctx = prepared(frames, settings)
    if ctx.state.broker_messages is None:
        return _empty(ctx)
    missing = _missing(ctx)
    calls = republish_calls(ctx, missing)
    if not calls:
        return _empty(ctx)
    call = F.create_map(*[x for q, c in sorted(calls.items()) for x in (F.lit(q), F.lit(c))])
    detail = F.struct(
        F.date_format("enqueuedtime", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("enqueued_time"),
        "name",
        call[F.col("queuename")].alias("republish"),
    )
    return _finding(ctx, missing, "broker_missing_mail", "error", "mail", F.col("enqueueid"),
                    detail)  # fmt: skip


def _missing(ctx: Context) -> DataFrame:
    messages = ctx.state.broker_messages
    assert messages is not None
    cutoff = F.lit(ctx.as_of - ctx.settings.broker_grace).cast("timestamp")
    visible = F.col("browsestart").isNull() | (F.col("timerangestart") >= F.col("browsestart"))
    live = ctx.live.where(visible).withColumn("enqueueid", F.lower("enqueueid"))
    live = live.join(F.broadcast(_read_queues(ctx)), "queuename", "left_semi")
    held = messages.where(F.col("enqueueid").isNotNull()).select("queuename", "enqueueid")
    absent = live.join(F.broadcast(held.distinct()), ["queuename", "enqueueid"], "left_anti")
    return absent.where(F.col("enqueuedtime") < cutoff)


def republish_calls(ctx: Context, missing: DataFrame) -> dict[str, str]:
    """Per queue, the RepublishNotProcessedMails call whose ``olderThan``, counted back from
    the audit's as-of, republishes every missing mail: whole seconds, strictly less than the
    age of the newest one (James republishes the view items enqueued before now - olderThan),
    written as every olderThan of an audit (`finding.older_than`). Run later, the same
    olderThan reaches newer mails; the plan says until when it is exact."""
    newest = missing.groupBy("queuename").agg(F.max("enqueuedtime").alias("newest")).collect()
    calls = {}
    for row in newest:
        newest_time = row.newest.replace(tzinfo=dt.UTC) if row.newest.tzinfo is None else row.newest
        age = (ctx.as_of - newest_time).total_seconds()
        seconds = max(math.ceil(age) - 1, 0)
        calls[row.queuename] = REPUBLISH.format(
            queue=urllib.parse.quote(row.queuename, safe=""),
            older_than=older_than(dt.timedelta(seconds=seconds)),
        )
    return calls


def broker_orphan_message(frames: JamesState, settings: Settings) -> DataFrame:
    """Work-queue messages whose view row is consumed (James's Dequeuer drops them: wasted
    deliveries), absent (no row read: delivered with no way to browse, count or delete it), or
    whose body is no MailReferenceDTO (James discards it to the dead-letter queue)."""
    ctx = prepared(frames, settings)
    messages = ctx.state.broker_messages
    if messages is None:
        return _empty(ctx)
    work = _view_state(ctx, messages.where(F.col("role") == WORK))
    # James writes the row and publishes at once (Enqueuer): a message may precede its row.
    recent = F.col("last_updated") >= F.lit(ctx.as_of - ctx.settings.broker_grace).cast("timestamp")
    unsure = (F.col("view") == "absent") & F.coalesce(recent, F.lit(False))
    orphans = work.where((F.col("view") != "live") & ~unsure)
    detail = F.struct(
        "broker_queue", "position", "view", "name",
        F.date_format("last_updated", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("last_updated"),
        "problem",
        F.lit(ctx.state.references_complete).alias("view_read_complete"),
    )  # fmt: skip
    return _finding(ctx, orphans, "broker_orphan_message", "warning", "message",
                    _message_subject(), detail)  # fmt: skip


def dead_lettered_mail(frames: JamesState, settings: Settings) -> DataFrame:
    """Messages in a dead-letter queue, with their view row and whether their blobs are listed;
    for a dead-letter queue whose messages were not read, one finding with its count. James's
    own health check (RabbitMQMailQueueDeadLetterQueueHealthCheck) is degraded meanwhile."""
    ctx = prepared(frames, settings)
    queues = ctx.state.broker_queues
    if queues is None:
        return _empty(ctx)
    counted = queues.where(
        (F.col("role") == DEAD_LETTER) & ~F.col("messages_read")
        & ((F.coalesce("ready", F.lit(0)) + F.coalesce("unacked", F.lit(0))) > 0)
    )  # fmt: skip
    per_queue = _finding(
        ctx, counted, "dead_lettered_mail", "error", "queue", F.col("broker_queue"),
        F.struct("broker_queue", "ready", "unacked"),
    )  # fmt: skip
    messages = ctx.state.broker_messages
    if messages is None:
        return per_queue
    letters = _view_state(ctx, messages.where(F.col("role") == DEAD_LETTER))
    blobs = _blob_presence(ctx, letters)
    delete = F.when(
        (F.col("view") == "live") & (F.col("blobs") == "missing") & F.col("name").isNotNull(),
        F.format_string(
            DELETE_BY_NAME.replace("{queue}", "%s").replace("{name}", "%s"),
            F.col("queuename"), _url_quoted("name"),
        ),
    )  # fmt: skip
    detail = F.struct(
        "broker_queue", "position", "view", "blobs", "name",
        F.date_format("enqueuedtime", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("enqueued_time"),
        "problem", delete.alias("delete"),
    )  # fmt: skip
    per_message = _finding(ctx, blobs, "dead_lettered_mail", "error", "message",
                           _message_subject(), detail)  # fmt: skip
    return per_queue.unionByName(per_message)


def _url_quoted(column: str) -> Column:
    """A query parameter's value, percent-encoded (``+`` for a space, as WebAdmin decodes)."""
    return F.expr(f"reflect('java.net.URLEncoder', 'encode', `{column}`, 'UTF-8')")


def _blob_presence(ctx: Context, rows: DataFrame) -> DataFrame:
    """`rows` with ``blobs``: present (both listed), missing (one is not), unknown (no listing
    read, or no view row)."""
    listing = ctx.state.blobs
    if listing is None:
        return rows.withColumn("blobs", F.lit("unknown"))
    keys = listing.select(F.col("key"))
    header = keys.select(F.col("key").alias("headerblobid"), F.lit(True).alias("header_listed"))
    body = keys.select(F.col("key").alias("bodyblobid"), F.lit(True).alias("body_listed"))
    joined = rows.join(header, "headerblobid", "left").join(body, "bodyblobid", "left")
    state = (
        F.when(F.col("headerblobid").isNull() & F.col("bodyblobid").isNull(), F.lit("unknown"))
        .when(F.col("header_listed") & F.col("body_listed"), F.lit("present"))
        .otherwise(F.lit("missing"))
    )
    return joined.withColumn("blobs", state)


def queue_without_consumer(frames: JamesState, settings: Settings) -> DataFrame:
    """Work queues with no consumer: nothing delivers their mail (James's MailQueueConsumers
    health check, "No consumers")."""
    ctx = prepared(frames, settings)
    queues = ctx.state.broker_queues
    if queues is None:
        return _empty(ctx)
    idle = queues.where((F.col("role") == WORK) & (F.col("consumers") == 0))
    return _finding(ctx, idle, "queue_without_consumer", "error", "queue", F.col("broker_queue"),
                    F.struct("broker_queue", "ready", "unacked"))  # fmt: skip


def broker_count_mismatch(frames: JamesState, settings: Settings) -> DataFrame:
    """Per James queue whose messages were not read: live view mails against the broker's
    messages (work queue ready + unacknowledged, plus the dead-letter queue, whose mails stay
    live in the view). A difference is mail one side has that the other lacks; the sign says
    which (details: docs/james.md)."""
    ctx = prepared(frames, settings)
    queues = ctx.state.broker_queues
    if queues is None:
        return _empty(ctx)
    total = F.coalesce("ready", F.lit(0)) + F.coalesce("unacked", F.lit(0))
    broker = queues.groupBy("queuename").agg(
        F.sum(F.when(F.col("role") == WORK, total)).alias("work_messages"),
        F.sum(F.when(F.col("role") == DEAD_LETTER, total)).alias("dead_letter_messages"),
        F.max(F.when(F.col("role") == WORK, F.col("broker_queue"))).alias("work_queue"),
        F.min(F.col("messages_read").cast("int")).alias("read"),
    )
    view = ctx.live.groupBy("queuename").agg(F.count(F.lit(1)).alias("view_live"))
    names = ctx.state.browse_start.select("queuename").unionByName(view.select("queuename"))
    joined = (
        names.unionByName(broker.select("queuename")).distinct()
        .join(broker, "queuename", "left").join(view, "queuename", "left")
        .where(F.coalesce(F.col("read"), F.lit(0)) == 0)
        .fillna(0, ["work_messages", "dead_letter_messages", "view_live"])
    )  # fmt: skip
    difference = F.col("view_live") - F.col("work_messages") - F.col("dead_letter_messages")
    mismatched = joined.withColumn("difference", difference).where(F.col("difference") != 0)
    detail = F.struct(
        "view_live", "work_messages", "dead_letter_messages", "difference",
        F.col("work_queue").isNotNull().alias("declared"),
    )  # fmt: skip
    return _finding(ctx, mismatched, "broker_count_mismatch", "warning", "queue",
                    F.col("queuename"), detail)  # fmt: skip


CHECKS = {
    "broker_missing_mail": broker_missing_mail,
    "broker_orphan_message": broker_orphan_message,
    "dead_lettered_mail": dead_lettered_mail,
    "queue_without_consumer": queue_without_consumer,
    "broker_count_mismatch": broker_count_mismatch,
}
