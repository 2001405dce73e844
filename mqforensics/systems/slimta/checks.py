"""Checks of slimta queue stores: pure functions from the items frame (`frames.SlimtaFrames`,
`items.ITEMS`) and the `options.Settings` to findings
(`findings.SCHEMA`, system ``slimta``, ``queue`` = the store: env_dir, ``HOST:PORT/DB`` or
``s3://BUCKET/PREFIX``).

A finding's ``subject`` is the first stored part of the item: the ``.env`` path (the ``.meta``
path when there is no ``.env``), the Redis key, the S3 key, or the SQS message. Facts about
slimta's behaviour come from python-slimta 5.0.5 (see docs/slimta.md). Checks never
pseudonymise: the audit runner does, in one place.

The findings a cleanup plan acts on (`plan`) also carry, in ``detail``, what the plan records
about the item (`_plan_facts`): its stored ``parts`` (name, size and digest: a file's SHA-256, a
hash's fields digest, an object's ETag), the ``files`` a DiskStorage message or tmp file is made
of, an object's ``metadata``, a queue entry's ``entry_hex``, the queue entries naming a message
(``queued_by``) and the times its age is judged from (``arrival``, ``modified``,
``next_attempt``). A plan is made from these alone: the store is read once, by the audit.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqforensics.findings import empty, select_findings, union_all
from mqforensics.systems.slimta.frames import SlimtaFrames
from mqforensics.systems.slimta.items import MESSAGE, OK, OTHER_KEY, QUEUE_ENTRY, SYSTEM, TMP_FILE
from mqforensics.systems.slimta.options import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# slimta renames the .meta into place right after the .env: younger pairs may be mid-write.
TORN_WRITE_GRACE = dt.timedelta(minutes=1)
UNSAFE = "unsafe_pickle"
BROKEN_STATES = ("corrupt_pickle", "wrong_type")
UNREADABLE = "unreadable"


def _utc(instant: dt.datetime) -> dt.datetime:
    return instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant.astimezone(dt.UTC)


def _before(settings: Settings, age: dt.timedelta) -> Column:
    return F.lit(_utc(settings.as_of) - age).cast("timestamp")


def _subject() -> Column:
    return F.col("parts")[0]["name"]


def _finding(
    frame: DataFrame, check: str, severity: str | Column, settings: Settings, detail: Column
) -> DataFrame:
    return select_findings(
        frame, check=check, severity=severity, system=SYSTEM, queue=F.col("store"),
        scope=F.col("kind"), subject=_subject(), observed_at=settings.as_of,
        bytes=F.col("stored_bytes"), detail=detail,
    )  # fmt: skip


def _messages(items: DataFrame) -> DataFrame:
    return items.where(F.col("kind") == MESSAGE)


def _joined(directory: str) -> str:
    return os.path.join(directory, "")


def _files(settings: Settings) -> Column:
    """The files a DiskStorage item is made of, present or not: a message's ``<id>.env`` and
    ``<id>.meta`` (in that order: the purger removes the ``.env`` first), a tmp file itself."""
    none = F.lit(None).cast("array<string>")
    if settings.env_dir is None:
        return none
    disk = F.col("backend") == "disk"
    meta_dir = _joined(settings.meta_dir or settings.env_dir)
    message = F.array(
        F.concat(F.lit(_joined(settings.env_dir)), F.col("id"), F.lit(".env")),
        F.concat(F.lit(meta_dir), F.col("id"), F.lit(".meta")),
    )
    tmp = (
        F.array(F.concat(F.lit(_joined(settings.tmp_dir)), F.col("id")))
        if settings.tmp_dir is not None
        else none
    )
    return (
        F.when(disk & (F.col("kind") == MESSAGE), message)
        .when(disk & (F.col("kind") == TMP_FILE), tmp)
        .otherwise(none)
    )


def with_queue_entries(items: DataFrame, frame: DataFrame | None = None) -> DataFrame:
    """`frame` (default: `items`) with ``queued_by``: for a message, the distinct notifications
    naming it (``name``: the Redis list or the SQS message; ``entry_hex``: the Redis list item),
    sorted; null when none does."""
    entries = (
        items.where((F.col("kind") == QUEUE_ENTRY) & F.col("id").isNotNull())
        .groupBy(F.col("store").alias("_entry_store"), F.col("id").alias("_entry_id"))
        .agg(
            F.array_sort(
                F.collect_set(F.struct(_subject().alias("name"), F.col("entry_hex")))
            ).alias("queued_by")
        )
    )
    base = items if frame is None else frame
    condition = (
        (F.col("kind") == MESSAGE)
        & (F.col("store") == F.col("_entry_store"))
        & (F.col("id") == F.col("_entry_id"))
    )
    return base.join(entries, condition, "left").drop("_entry_store", "_entry_id")


def _plan_facts(settings: Settings, *, queued: bool = False) -> list[Column]:
    """What a plan records about the item a finding names (see the module docstring);
    `queued`: the frame went through `with_queue_entries`."""
    parts = F.transform(
        "parts",
        lambda p: F.struct(
            p["name"].alias("name"), p["size"].alias("size"), p["digest"].alias("digest")
        ),
    )
    metadata = F.when(
        F.col("backend") == "s3", F.from_json(F.col("metadata"), "map<string,string>")
    )
    queued_by = (
        F.col("queued_by")
        if queued
        else F.lit(None).cast("array<struct<name:string,entry_hex:string>>")
    )
    return [
        parts.alias("parts"),
        _files(settings).alias("files"),
        metadata.alias("metadata"),
        F.col("entry_hex"),
        queued_by.alias("queued_by"),
        F.col("arrival"),
        F.col("modified"),
        F.col("next_attempt"),
    ]


def torn_write(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message with only one of its halves. Disk: an ``.env`` without ``.meta`` (slimta's
    load raises FileNotFoundError, logs it and never retries or removes the message: mail
    silently never delivered) or a ``.meta`` without ``.env`` (never listed: an invisible
    leftover). Redis (warnings): a hash without ``envelope`` (``get`` raises KeyError: a
    leftover) or without ``timestamp``/``attempts`` (the write stopped after HSETNX; the next
    restart loads it anyway, as due now with 0 attempts). S3, when an SQS export
    was read: an object no SQS message names (``queue_message`` failed after the upload, which
    slimta only logs, so the object is never delivered). Disk pairs younger than a minute may
    still be mid-write and are left out."""
    items = frames.items
    rows = with_queue_entries(items, _messages(items)).where(
        F.col("backend").isin("disk", "redis")
        & ((F.col("envelope_state") == "missing") != (F.col("meta_state") == "missing"))
        & (F.col("modified").isNull() | (F.col("modified") < _before(settings, TORN_WRITE_GRACE)))
    )
    missing = F.when(F.col("envelope_state") == "missing", "envelope").otherwise("meta")
    found = [
        _finding(
            rows,
            "torn_write",
            F.when((missing == "meta") & (F.col("backend") == "disk"), "error").otherwise(
                "warning"
            ),
            settings,
            F.struct(
                F.col("backend"),
                F.col("id"),
                missing.alias("missing"),
                *_plan_facts(settings, queued=True),
            ),
        )
    ]
    if settings.sqs_export:
        entries = items.where((F.col("kind") == QUEUE_ENTRY) & (F.col("backend") == "s3")).select(
            "store", F.col("id").alias("queued_id")
        )
        unqueued = (
            _messages(items)
            .where(F.col("backend") == "s3")
            .join(
                entries,
                (items.store == entries.store) & (items.id == entries.queued_id),
                "left_anti",
            )
        )
        detail = F.struct(
            F.col("backend"), F.col("id"), F.lit("queue_message").alias("missing"),
            *_plan_facts(settings),
        )  # fmt: skip
        found.append(_finding(unqueued, "torn_write", "error", settings, detail))
    return union_all(items.sparkSession, found)


def stale_tmp(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A file in DiskStorage's ``tmp_dir`` older than `stale_tmp`: slimta's write renames its
    mkstemp file into place at once, and a failed write leaves it behind forever (never
    unlinked). It may hold a whole envelope: ``detail.holds`` says what it decodes to."""
    items = frames.items
    rows = items.where(
        (F.col("kind") == TMP_FILE) & (F.col("modified") < _before(settings, settings.stale_tmp))
    )
    holds = (
        F.when(F.col("envelope_state") == OK, "envelope")
        .when(F.col("meta_state") == OK, "meta")
        .otherwise("unknown")
    )
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("id").alias("file"), holds.alias("holds"),
        *_plan_facts(settings),
    )  # fmt: skip
    return _finding(rows, "stale_tmp", "warning", settings, detail)


def corrupt_meta(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message whose meta does not decode, or lacks the timestamp. slimta's load catches only
    OSError, so it stops at this message: every message listed after it is not loaded
    (``detail.blocks_later``: how many ``.env`` files follow it in ``os.listdir`` order, for
    disk). Redis: a non-hash key under the prefix fails the same way (WRONGTYPE)."""
    items = frames.items
    rows = items.where(
        (F.col("kind") == OTHER_KEY)
        | (F.col("kind") == MESSAGE) & (
            F.col("meta_state").isin(*BROKEN_STATES)
            | ((F.col("meta_state") == OK) & F.col("next_attempt").isNull()
               & (F.col("backend") == "disk"))
        )
    )  # fmt: skip
    later = F.when(
        F.col("load_position").isNotNull(),
        F.col("listed") - F.col("load_position") - F.lit(1),
    )
    listed = (
        _messages(items)
        .where(F.col("load_position").isNotNull())
        .groupBy("store")
        .agg(F.count("*").alias("listed"))
    )
    counted = rows.join(listed, "store", "left")
    reason = F.coalesce(F.col("meta_error"), F.lit("no timestamp"))
    detail = F.struct(
        F.col("backend"), F.col("id"), reason.alias("reason"), later.alias("blocks_later"),
        *_plan_facts(settings),
    )  # fmt: skip
    return _finding(counted, "corrupt_meta", "error", settings, detail)


def unreadable_envelope(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message whose envelope does not decode (truncated, not a pickle, not an Envelope) or
    cannot be read: slimta's ``get`` fails on every attempt, so it is never delivered."""
    items = frames.items
    rows = _messages(items).where(F.col("envelope_state").isin(*BROKEN_STATES, UNREADABLE))
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("envelope_state").alias("state"),
        F.col("envelope_error").alias("reason"),
    )  # fmt: skip
    return _finding(rows, "unreadable_envelope", "error", settings, detail)


def unsafe_pickle(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A stored pickle that names a global outside the allow-list (a command, an import):
    slimta unpickles it with plain ``pickle.loads`` and would run it. It was not loaded here.
    Evidence of tampering with the store: never planned for deletion automatically."""
    items = frames.items
    rows = items.where((F.col("envelope_state") == UNSAFE) | (F.col("meta_state") == UNSAFE))
    which = F.when(F.col("envelope_state") == UNSAFE, "envelope").otherwise("meta")
    reason = F.when(which == "envelope", F.col("envelope_error")).otherwise(F.col("meta_error"))
    detail = F.struct(F.col("backend"), F.col("id"), which.alias("pickle"),
                      reason.alias("reason"))  # fmt: skip
    return _finding(rows, "unsafe_pickle", "critical", settings, detail)


def retry_exhausted(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message with more attempts than the backoff allows (``attempts > retry_maximum``):
    slimta's backoff gave up on it, so it should have been bounced and removed; it still holds
    the mail (a failed remove, or a queue that changed its retry settings)."""
    items = frames.items
    messages = _messages(items).where(F.col("attempts") > F.lit(settings.retry_maximum))
    rows = with_queue_entries(items, messages)
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("attempts"),
        F.lit(settings.retry_maximum).alias("retry_maximum"),
        *_plan_facts(settings, queued=True),
    )  # fmt: skip
    return _finding(rows, "retry_exhausted", "warning", settings, detail)


def delivered_indexes_unreliable(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message with ``delivered_indexes``. slimta removes those indexes from the recipient
    list on every ``get``, but `Queue` computes them against the already-reduced list, so after
    two partial deliveries they name the wrong recipients; a pickled *set* (what `Queue`
    passes, stored as is by RedisStorage) makes the next partial delivery fail (``list + set``
    or ``set + set``: TypeError); a repeated index removes a recipient never delivered; an index
    out of range makes every ``get`` fail (IndexError). ``detail.reasons`` lists what applies;
    out of range is an error, the rest warnings."""
    items = frames.items
    rows = _messages(items).where(F.col("delivered_indexes").isNotNull())
    count = F.size(F.coalesce(F.col("recipients"), F.array().cast("array<string>")))
    out_of_range = F.exists("delivered_indexes", lambda i: (i < 0) | (i >= count))
    repeated = F.size(F.array_distinct("delivered_indexes")) < F.size("delivered_indexes")
    reasons = F.array_compact(
        F.array(
            F.when(F.col("delivered_indexes_type") == "set", F.lit("stored_as_set")),
            F.when(out_of_range & F.col("recipients").isNotNull(), F.lit("out_of_range")),
            F.when(repeated, F.lit("repeated_index")),
            F.lit("relative_to_reduced_recipients"),
        )
    )
    severity = F.when(out_of_range & F.col("recipients").isNotNull(), "error").otherwise("warning")
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("delivered_indexes"),
        F.col("delivered_indexes_type").alias("stored_as"), count.alias("recipients"),
        reasons.alias("reasons"),
    )  # fmt: skip
    return _finding(rows, "delivered_indexes_unreliable", severity, settings, detail)


def retention_exceeded(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """Personal data held beyond `retention`: a queued message (or a ``tmp_dir`` file holding an
    envelope) that arrived longer ago than that. Age is the envelope's arrival ``timestamp``;
    when the envelope does not decode, the file's modification time, else (Redis, S3) the next
    attempt, which slimta sets at enqueue or later (``detail.age_from``)."""
    items = frames.items
    arrived = F.coalesce(F.col("arrival"), F.col("modified"), F.col("next_attempt"))
    holds_mail = (F.col("kind") == MESSAGE) | (
        (F.col("kind") == TMP_FILE) & (F.col("envelope_state") == OK)
    )
    selected = items.where(holds_mail & (arrived < _before(settings, settings.retention)))
    rows = with_queue_entries(items, selected)
    age_from = (
        F.when(F.col("arrival").isNotNull(), "arrival")
        .when(F.col("modified").isNotNull(), "modified")
        .otherwise("next_attempt")
    )
    detail = F.struct(
        F.col("backend"), F.col("id"), age_from.alias("age_from"), arrived.alias("since"),
        F.floor(
            (F.lit(_utc(settings.as_of)).cast("timestamp").cast("long") - arrived.cast("long"))
            / 86400
        ).alias("age_days"),
        F.col("sender"),
        F.size(F.coalesce(F.col("recipients"), F.array())).alias("recipients"),
        *_plan_facts(settings, queued=True),
    )  # fmt: skip
    return _finding(rows, "retention_exceeded", "warning", settings, detail)


def dangling_queue_entry(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A notification (Redis ``<prefix>queue`` item, exported SQS message) naming a message the
    store does not hold: slimta pops it and fails ``get`` (KeyError, or a missing object). One
    that does not decode at all (``detail.reason``) stops slimta's ``wait`` loop: an error."""
    items = frames.items
    entries = items.where(F.col("kind") == QUEUE_ENTRY)
    held = _messages(items).select("store", F.col("id").alias("held_id"))
    dangling = entries.where(F.col("envelope_state") == OK).join(
        held, (entries.store == held.store) & (entries.id == held.held_id), "left_anti"
    )
    broken = entries.where(F.col("envelope_state").isin(*BROKEN_STATES))
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("envelope_error").alias("reason"),
        *_plan_facts(settings),
    )  # fmt: skip
    return union_all(
        items.sparkSession,
        [
            _finding(dangling, "dangling_queue_entry", "warning", settings, detail),
            _finding(broken, "dangling_queue_entry", "error", settings, detail),
        ],
    )


def queue_list_blocks_load(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A non-empty RedisStorage notification list (``<prefix>queue``). slimta 5.0.5's ``load``
    skips the list by comparing each ``KEYS`` answer (bytes) with the list's name (str), which
    never matches: it reads the list as a message hash and fails with WRONGTYPE, so a restart
    loads nothing at all while the list holds entries (the running queue drains it; a crash or
    a stopped queue leaves it full). Verified with python-slimta 5.0.5 and Redis 7."""
    items = frames.items
    lists = (
        items.where((F.col("kind") == QUEUE_ENTRY) & (F.col("backend") == "redis"))
        .groupBy("store", _subject().alias("list"))
        .agg(F.count("*").alias("entries"), F.sum("stored_bytes").alias("stored_bytes"))
        .select(
            "store",
            "entries",
            "stored_bytes",
            F.lit("queue_list").alias("kind"),
            F.array(F.struct(F.col("list").alias("name"))).alias("parts"),
        )
    )
    detail = F.struct(F.lit("redis").alias("backend"), F.col("entries"))
    return _finding(lists, "queue_list_blocks_load", "error", settings, detail)


def _holds_mail() -> Column:
    """A message, or a ``tmp_dir`` file, that was searched (`items.Item.search`)."""
    return F.col("kind").isin(MESSAGE, TMP_FILE) & F.col("subjects").isNotNull()


def personal_data(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A queued message, or a ``tmp_dir`` file holding an envelope, holding a data subject
    searched for (``--erasure-policy``): in its envelope sender or recipients, its header
    fields, and (rules with ``search = "full"``) its body and attachments, as the reader found
    them in the executors (`items.Item.search`). One finding per item: ``detail.subjects`` the
    keyed hashes found anywhere (`mqforensics.subjects`, never an address), ``detail.found``
    each (subject, where) pair (``envelope``, ``header:<field>``, ``body``, ``attachment``),
    ``detail.depth`` how deep it was searched. Nothing when no subject is searched."""
    items = frames.items
    if not settings.subjects:
        return empty(items.sparkSession)
    found = items.where(_holds_mail() & (F.size("subjects") > 0))
    rows = with_queue_entries(items, found)
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("subjects"), F.col("found"),
        F.lit(settings.depth).alias("depth"), *_plan_facts(settings, queued=True),
    )  # fmt: skip
    return _finding(rows, "personal_data", "info", settings, detail)


def unreadable_content(frames: SlimtaFrames, settings: Settings) -> DataFrame:
    """A message, or a ``tmp_dir`` file, with places that could not be searched at the depth
    asked: an envelope that does not decode, and (``search = "full"``) encrypted or damaged
    parts (`content_search`). It may hold a subject: never taken as clean. One finding per
    item, ``detail.unreadable`` each place and why, ``detail.depth``. Nothing when no subject
    is searched."""
    items = frames.items
    if not settings.subjects:
        return empty(items.sparkSession)
    rows = with_queue_entries(items, items.where(_holds_mail() & (F.size("unreadable") > 0)))
    detail = F.struct(
        F.col("backend"), F.col("id"), F.col("unreadable"), F.lit(settings.depth).alias("depth"),
        *_plan_facts(settings, queued=True),
    )  # fmt: skip
    return _finding(rows, "unreadable_content", "warning", settings, detail)


CHECKS: dict[str, Callable[[SlimtaFrames, Settings], DataFrame]] = {
    "torn_write": torn_write,
    "stale_tmp": stale_tmp,
    "corrupt_meta": corrupt_meta,
    "unreadable_envelope": unreadable_envelope,
    "unsafe_pickle": unsafe_pickle,
    "retry_exhausted": retry_exhausted,
    "delivered_indexes_unreliable": delivered_indexes_unreliable,
    "retention_exceeded": retention_exceeded,
    "dangling_queue_entry": dangling_queue_entry,
    "queue_list_blocks_load": queue_list_blocks_load,
    "personal_data": personal_data,
    "unreadable_content": unreadable_content,
}


def run_checks(frames: SlimtaFrames, settings: Settings | None = None) -> DataFrame:
    """Every check's findings over `frames`, as one frame (what the audit runner computes)."""
    settings = settings or Settings()
    spark = frames.items.sparkSession
    return union_all(spark, [check(frames, settings) for check in CHECKS.values()])
