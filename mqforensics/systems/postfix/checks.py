"""Checks of Postfix queue directories: pure functions from the frames (`frames.PostfixFrames`)
to findings (`findings.SCHEMA`, system ``postfix``).

A finding's ``queue`` is the Postfix queue the file is in (``deferred``, ``hold``, ... or the log
class ``defer``, ``bounce``, ``trace``), its ``scope`` ``message`` or ``log``, its ``subject``
the file's absolute path (unique across hosts) and its ``bytes`` the file's size. Every finding's
``detail`` carries what a plan records about the file (`_file_facts`): the host and queue
directory, the queue id, and the size, modification time, inode and SHA-256 the purger
re-checks right before it acts. Facts about Postfix's behaviour are in docs/postfix.md. Checks
never pseudonymise: the audit runner does, in one place.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqforensics.findings import empty, select_findings, union_all
from mqforensics.systems.postfix.files import SYSTEM
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CORRUPT_QUEUE = "corrupt"
DEFERRED, HOLD, DEFER_LOG = "deferred", "hold", "defer"


def _utc(instant: dt.datetime) -> dt.datetime:
    return instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant.astimezone(dt.UTC)


def _before(options: Settings, age: dt.timedelta) -> Column:
    return F.lit(_utc(options.as_of) - age).cast("timestamp")


def _file_facts() -> list[Column]:
    return [
        F.col("host"), F.col("queue_dir"), F.col("queue_id"), F.col("id_kind"), F.col("size"),
        F.col("digest"),
        F.date_format(F.col("modified"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX").alias("modified"),
        F.col("inode"), F.format_string("%04o", F.col("mode")).alias("mode"),
    ]  # fmt: skip


def _arrival() -> Column:
    return F.date_format(F.col("arrival"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX").alias("arrival")


def _age_start() -> Column:
    """When a message's age starts: its arrival (``T``), else its file's last change."""
    return F.coalesce(F.col("arrival"), F.col("modified"))


def _finding(
    frame: DataFrame, check: str, severity: str, options: Settings, *detail: Column
) -> DataFrame:
    return select_findings(
        frame, check=check, severity=severity, system=SYSTEM, queue=F.col("queue"),
        scope=F.col("kind"), subject=F.col("path"), observed_at=options.as_of,
        bytes=F.col("size"), detail=F.struct(*_file_facts(), *detail),
    )  # fmt: skip


def _messages(frames: PostfixFrames) -> DataFrame:
    return frames.files.where(F.col("kind") == "message")


def _pending() -> Column:
    return F.size(F.filter("recipients", lambda r: r["state"] == "pending"))


def _missing_records() -> Column:
    """The records a complete queue file lacks that the queue manager requires (arrival time
    ``T``, sender ``S``, size ``C``; qmgr_message.c "message rejected: missing ... record");
    postdrop's maildrop files have no ``C`` (only cleanup writes one)."""
    complete = F.coalesce(F.col("complete"), F.lit(False))
    names = [
        F.when(F.col("arrival").isNull(), F.lit("T (arrival time)")),
        F.when(F.col("sender").isNull(), F.lit("S (sender)")),
        F.when((F.col("queue") != "maildrop") & F.col("content_size").isNull(), F.lit("C (size)")),
    ]
    return F.when(complete, F.filter(F.array(*names), lambda n: n.isNotNull())).otherwise(
        F.array().cast("array<string>")
    )


def damaged_queue_file(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A queue file marked ready (outside ``corrupt``) whose records do not read to their end
    record: truncated, a length past the end, a broken pointer, a ``C`` or ``T`` record that is
    not numbers; one read to its end without a record the queue manager requires
    (``detail.missing``); or a file that cannot be read at all. ``detail.offset`` is where
    reading stopped."""
    ready = _messages(frames).where((F.col("queue") != CORRUPT_QUEUE) & F.col("ready"))
    broken = ready.withColumn("_missing", _missing_records()).where(
        F.col("read_error").isNotNull()
        | ~F.coalesce(F.col("complete"), F.lit(False))
        | (F.size(F.coalesce("problems", F.array().cast("array<string>"))) > 0)
        | (F.size("_missing") > 0)
    )
    return _finding(
        broken, "damaged_queue_file", "error", options,
        F.col("damage_offset").alias("offset"), F.col("damage").alias("damage"),
        F.col("_missing").alias("missing"), F.col("problems"), F.col("read_error"), _arrival(),
    )  # fmt: skip


def corrupt_queue_file(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A file in the ``corrupt`` queue: the queue manager moved it there because it could not
    read it; nothing delivers it any more."""
    found = _messages(frames).where(F.col("queue") == CORRUPT_QUEUE)
    return _finding(
        found, "corrupt_queue_file", "error", options,
        F.col("damage_offset").alias("offset"), F.col("damage"), F.col("complete"), _arrival(),
    )  # fmt: skip


def incomplete_queue_file(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A file in a message queue not marked ready (mode not 0700) and older than
    ``--incomplete-grace``: a writer (cleanup, postdrop) that died before it finished."""
    found = _messages(frames).where(
        (F.col("queue") != CORRUPT_QUEUE)
        & F.col("ready").isNotNull()
        & ~F.col("ready")
        & (F.col("modified") < _before(options, options.incomplete_grace))
    )
    return _finding(
        found, "incomplete_queue_file", "warning", options,
        F.col("complete"), F.col("damage_offset").alias("offset"), _arrival(),
    )  # fmt: skip


def orphan_log(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A defer, bounce or trace log whose message is in no message queue of its host."""
    ids = (
        _messages(frames)
        .select(F.col("host").alias("_host"), F.col("queue_id").alias("_id"))
        .distinct()
    )
    logs = frames.files.where(F.col("kind") == "log")
    found = logs.join(
        ids, (logs["host"] == ids["_host"]) & (logs["queue_id"] == ids["_id"]), "left_anti"
    )
    return _finding(
        found, "orphan_log", "warning", options,
        F.size(F.coalesce("log_entries", F.array())).alias("entries"),
    )  # fmt: skip


def deferred_without_log(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A complete message in ``deferred`` with recipients still pending and no defer log: the
    reason for the delay is lost, and ``postqueue`` shows none."""
    logs = frames.files.where((F.col("kind") == "log") & (F.col("queue") == DEFER_LOG)).select(
        F.col("host").alias("_host"), F.col("queue_id").alias("_id")
    )
    deferred = _messages(frames).where(
        (F.col("queue") == DEFERRED) & F.col("complete") & (_pending() > 0)
    )
    found = deferred.join(
        logs, (deferred["host"] == logs["_host"]) & (deferred["queue_id"] == logs["_id"]),
        "left_anti",
    )  # fmt: skip
    return _finding(
        found, "deferred_without_log", "warning", options,
        _pending().alias("pending_recipients"), _arrival(),
    )  # fmt: skip


def _expiry_start() -> Column:
    """When the queue manager's expiry clock started: cleanup's ``create_time`` attribute (reset
    by ``postsuper -r``), else the arrival time (qmgr_message.c)."""
    created = F.col("attributes")["create_time"]
    from_created = F.when(created.rlike("^[0-9]+$"), F.timestamp_seconds(created.cast("long")))
    return F.coalesce(from_created, F.col("arrival"))


def expired_in_queue(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A deferred message older than its lifetime (``bounce_queue_lifetime`` for a bounce, whose
    sender is empty; ``maximal_queue_lifetime`` otherwise) by more than ``--expiry-grace``,
    counted from when the queue manager's clock started (`_expiry_start`): it should have been
    returned; mail on hold never expires and is not counted."""
    life = options.lifetimes
    bounce = F.coalesce(F.col("sender"), F.lit("x")) == ""
    lifetime_seconds = F.when(bounce, F.lit(life.bounce_queue_lifetime.total_seconds())).otherwise(
        F.lit(life.maximal_queue_lifetime.total_seconds())
    )
    as_of = F.lit(_utc(options.as_of)).cast("timestamp")
    age = F.unix_timestamp(as_of) - F.unix_timestamp(_expiry_start())
    found = _messages(frames).where(
        (F.col("queue") == DEFERRED)
        & _expiry_start().isNotNull()
        & (age > lifetime_seconds + F.lit(options.expiry_grace.total_seconds()))
    )
    return _finding(
        found, "expired_in_queue", "warning", options,
        _arrival(), age.cast("long").alias("age_seconds"),
        lifetime_seconds.cast("long").alias("lifetime_seconds"),
        F.when(bounce, "bounce_queue_lifetime").otherwise("maximal_queue_lifetime").alias(
            "lifetime"
        ),
        F.col("forced_expire"), _pending().alias("pending_recipients"),
    )  # fmt: skip


def old_hold(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A message on hold that arrived longer ago than ``--hold-age``: held mail never expires,
    so it stays until someone releases or deletes it."""
    found = _messages(frames).where(
        (F.col("queue") == HOLD) & (_age_start() < _before(options, options.hold_age))
    )
    return _finding(found, "old_hold", "warning", options, _arrival())


def retention_exceeded(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A queue file (in any message queue) whose message arrived longer ago than
    ``--retention`` (its file's last change when it has no arrival time): personal data kept
    past its retention period."""
    found = _messages(frames).where(_age_start() < _before(options, options.retention))
    return _finding(
        found, "retention_exceeded", "warning", options,
        _arrival(), F.size(F.coalesce("recipients", F.array())).alias("recipients"),
    )  # fmt: skip


def _content(frames: PostfixFrames, options: Settings) -> DataFrame:
    """The queue files joined to where the subjects are in them (`content.CONTENT`): the
    loader's search (`frames.content`), else one made now (lazily, in the executors)."""
    from mqforensics.systems.postfix.content import search_files

    content = frames.content
    if content is None:
        content = search_files(frames.files, options.searched)
    content = content.select(
        F.col("path").alias("_path"), F.col("subjects").alias("_subjects"),
        F.col("found").alias("_found"), F.col("unreadable").alias("_unreadable"),
    )  # fmt: skip
    messages = _messages(frames)
    return messages.join(content, messages["path"] == content["_path"])


def personal_data(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A queue file holding a data subject searched for (``--erasure-policy``): in its envelope
    sender or recipients (current or original), in its message's header fields, and for the
    subjects searched in ``full`` in its decoded bodies and attachments (`content`).
    ``detail.subjects`` are the matching keyed hashes, never an address; ``detail.found`` each
    (subject, where) pair (``envelope``, ``header:<field>``, ``body``, ``attachment``);
    ``detail.depth`` the search's depth."""
    if not options.subjects:
        return empty(frames.files.sparkSession)
    found = _content(frames, options).where(F.size("_subjects") > 0)
    return _finding(
        found, "personal_data", "info", options, F.col("_subjects").alias("subjects"),
        F.col("_found").alias("found"), F.lit(options.searched.depth).alias("depth"), _arrival(),
    )  # fmt: skip


def unreadable_content(frames: PostfixFrames, options: Settings) -> DataFrame:
    """A queue file with places the search for data subjects could not look at, at the depth
    asked: an encrypted or undecodable part (bodies searched in ``full`` only), a damaged file's
    records after the damage, a file that cannot be read (``detail.unreadable``: where, why).
    Such a file is not known to be free of the subjects."""
    if not options.subjects:
        return empty(frames.files.sparkSession)
    found = _content(frames, options).where(F.size("_unreadable") > 0)
    return _finding(
        found, "unreadable_content", "warning", options,
        F.col("_unreadable").alias("unreadable"), F.lit(options.searched.depth).alias("depth"),
        _arrival(),
    )  # fmt: skip


CHECKS: dict[str, Callable[[PostfixFrames, Settings], DataFrame]] = {
    "damaged_queue_file": damaged_queue_file,
    "corrupt_queue_file": corrupt_queue_file,
    "incomplete_queue_file": incomplete_queue_file,
    "orphan_log": orphan_log,
    "deferred_without_log": deferred_without_log,
    "expired_in_queue": expired_in_queue,
    "old_hold": old_hold,
    "retention_exceeded": retention_exceeded,
    "personal_data": personal_data,
    "unreadable_content": unreadable_content,
}


def run_checks(frames: PostfixFrames, options: Settings | None = None) -> DataFrame:
    """Every check's findings, as one frame."""
    options = options or Settings()
    session = frames.files.sparkSession
    return union_all(session, [check(frames, options) for check in CHECKS.values()])
