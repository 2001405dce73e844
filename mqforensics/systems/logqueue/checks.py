"""Checks of log-structured queue directories: pure functions from `frames.LogQueueState`
frames and `options.Settings` to findings (`findings.SCHEMA`, system ``logqueue``, ``queue`` =
the directory).

Positions are written ``<file>@<offset>`` (decimal), e.g. ``seg-00000003.lq@1042``. Checks
never pseudonymise: findings hold the addresses as stored (only `duplicate_delivery` shows one)
and the audit runner pseudonymises what it writes for people to read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqforensics import subjects
from mqforensics.content_search import ENVELOPE, Searched
from mqforensics.findings import empty, select_findings, union_all
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.content import spool_content
from mqforensics.systems.logqueue.frames import LogQueueState
from mqforensics.systems.logqueue.options import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SYSTEM = "logqueue"
# Reader problem kinds with a check of their own; every other kind is `corrupt_segment`.
TORN_TAIL, CRC_MISMATCH, MISSING_SEGMENT = "torn_tail", "crc_mismatch", "missing_segment"


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _utc(instant: dt.datetime) -> dt.datetime:
    """`instant` in UTC; a naive one is taken as UTC."""
    return instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant.astimezone(dt.UTC)


def _finding(
    frame: DataFrame,
    check: str,
    severity: str,
    scope: str,
    subject: Column,
    options: Settings,
    detail: Column,
    size: Column | None = None,
) -> DataFrame:
    return select_findings(
        frame, check=check, severity=severity, system=SYSTEM, queue=F.col("queue"),
        scope=scope, subject=subject, observed_at=_utc(options.as_of), bytes=size, detail=detail,
    )  # fmt: skip


def _at(file: Column, offset: Column) -> Column:
    """``<file>@<offset>``."""
    return F.concat(file, F.lit("@"), offset.cast("string"))


def _position(segment: str, offset: str) -> Column:
    """``seg-<n>.lq@<offset>`` of a segment/offset column pair (null when either is)."""
    seg, off = F.col(segment), F.col(offset)
    text = F.format_string("seg-%08d.lq@%d", seg, off)
    return F.when(seg.isNull() | off.isNull(), F.lit(None).cast("string")).otherwise(text)


# --- damage --------------------------------------------------------------------------------------


def damage(state: LogQueueState) -> DataFrame:
    """Every damaged place (queue, file, kind, offset, size, detail): the segment reader's
    problems, those of ``restart.lq``, and each range of working-suffix segments without a file
    (kind ``missing_segment``, at offset 0 of the first one)."""
    restart = state.queues.select("queue", F.explode("restart_problems").alias("p")).select(
        "queue",
        F.lit(layout.RESTART_FILE).alias("file"),
        "p.kind",
        "p.offset",
        "p.size",
        "p.detail",
    )
    gap = state.queues.select("queue", F.explode("missing_segments").alias("m"))
    first, last = F.col("m.first"), F.col("m.last")
    missing = gap.select(
        "queue",
        F.format_string("seg-%08d.lq", first).alias("file"),
        F.lit(MISSING_SEGMENT).alias("kind"),
        F.lit(0).cast("long").alias("offset"),
        F.lit(0).cast("long").alias("size"),
        F.when(
            first == last, F.format_string("segment %d of the working suffix has no file", first)
        )
        .otherwise(
            F.format_string("segments %d to %d of the working suffix have no file", first, last)
        )
        .alias("detail"),
    )
    columns = ("queue", "file", "kind", "offset", "size", "detail")
    return state.problems.select(*columns).unionByName(restart).unionByName(missing)


def _damage_findings(
    state: LogQueueState, options: Settings, check: str, severity: str, kinds: Column
) -> DataFrame:
    rows = damage(state).where(kinds)
    detail = F.struct("kind", "offset", "size", "detail")
    subject = _at(F.col("file"), F.col("offset"))
    return _finding(rows, check, severity, "segment", subject, options, detail, F.col("size"))


def torn_tail(state: LogQueueState, options: Settings) -> DataFrame:
    """A record cut off by the end of its file: the queue crashed during its last write. The
    restart procedure drops it (the write was never acknowledged), but if the file is not the
    newest segment, records were appended after a crash without truncating it first. ``bytes``:
    the bytes present from the record's start."""
    return _damage_findings(state, options, "torn_tail", "warning", F.col("kind") == TORN_TAIL)


def crc_mismatch(state: LogQueueState, options: Settings) -> DataFrame:
    """A whole record whose CRC does not match: its bytes changed after they were written (disk,
    copy, or a writer bug). The restart procedure skips it, so its effect (an envelope, a
    START, an outcome, a FINISH) is lost: a message may be delivered again or never."""
    return _damage_findings(state, options, "crc_mismatch", "error", F.col("kind") == CRC_MISMATCH)


def corrupt_segment(state: LogQueueState, options: Settings) -> DataFrame:
    """Any other damage: a bad segment header, bytes where no record decodes (``unreadable``), a
    whole record of a type the format does not define (``unknown_type``), a payload that does not
    decode (``bad_payload``), any damage to ``restart.lq`` (``bad_restart``, whatever the reader
    found in it: the restart procedure cannot trust its saved positions) or a segment of the
    working suffix that has no file (``missing_segment``): records the restart procedure needs
    are gone."""
    other = ~F.col("kind").isin(TORN_TAIL, CRC_MISMATCH)
    return _damage_findings(state, options, "corrupt_segment", "critical", other)


# --- replay --------------------------------------------------------------------------------------


def _orphans(
    state: LogQueueState, options: Settings, check: str, severity: str, which: Column
) -> DataFrame:
    rows = state.orphans.where(which)
    no_ref = (F.col("ref_segment") == 0) & (F.col("ref_offset") == 0)
    detail = F.struct(
        F.col("type_name").alias("type"),
        "message_id",
        F.when(no_ref, F.lit(None).cast("string"))
        .otherwise(_position("ref_segment", "ref_offset"))
        .alias("ref"),
        "reason",
    )
    subject = _at(F.col("file"), F.col("offset"))
    return _finding(rows, check, severity, "record", subject, options, detail, F.col("size"))


def orphan_delivery(state: LogQueueState, options: Settings) -> DataFrame:
    """A DELIVERY record (from the saved suffix on) whose START is not the message's live one:
    recipients were handed to a server by an attempt the queue does not know was running (a
    lost START or envelope, or a runner working from a stale copy), so the queue may deliver
    them again. ``bytes``: the record's size."""
    return _orphans(state, options, "orphan_delivery", "error", F.col("type_name") == "DELIVERY")


def orphan_record(state: LogQueueState, options: Settings) -> DataFrame:
    """Any other record replay cannot attach: a START of an envelope that is not live, a FINISH
    without its live START, an envelope of a finished message, or a record of a message with no
    envelope from the suffix on (its envelope was lost, or the saved suffix is past it)."""
    return _orphans(state, options, "orphan_record", "warning", F.col("type_name") != "DELIVERY")


def duplicate_delivery(state: LogQueueState, options: Settings) -> DataFrame:
    """A recipient with two or more DELIVERED outcomes for one message: the recipient got the
    message twice (a retry that did not know of the first delivery). Subject
    ``<message_id> <recipient>``; ``detail.positions`` lists the DELIVERY records."""
    rows = state.messages.select(
        "queue", "message_id", "state", F.explode("duplicate_deliveries").alias("d")
    ).withColumn("recipient", F.col("d.recipient"))
    detail = F.struct(
        "message_id",
        "recipient",
        F.size("d.positions").alias("deliveries"),
        F.col("d.positions").alias("positions"),
        "state",
    )
    subject = F.concat_ws(" ", "message_id", "recipient")
    return _finding(rows, "duplicate_delivery", "error", "message", subject, options, detail)


def stuck_message(state: LogQueueState, options: Settings) -> DataFrame:
    """A message not finished whose first envelope was written more than ``retry_horizon``
    before ``as_of``: a queue gives up (bounces) after its retry horizon, so the message is
    forgotten by its runners or the queue's expiry does not work. ``bytes``: its spool file."""
    cutoff_us = (_utc(options.as_of) - options.retry_horizon - _EPOCH) // _MICROSECOND
    rows = state.messages.where(
        (F.col("state") != "finished") & (F.col("first_enqueued_us") < F.lit(cutoff_us))
    )
    first = F.date_format(F.timestamp_micros("first_enqueued_us"), "yyyy-MM-dd'T'HH:mm:ss'Z'")
    detail = F.struct(
        "state",
        "attempts",
        first.alias("first_enqueued"),
        F.size("recipients_remaining").alias("recipients_remaining"),
        "spool",
        "runner",
    )
    return _finding(
        rows, "stuck_message", "warning", "message", F.col("message_id"), options, detail,
        F.col("spool_bytes"),
    )  # fmt: skip


# Where a queue's saved restart positions come from (`segment_facts`): a whole ``restart.lq``,
# none (the restart reads every segment), or a damaged one (nothing may be decided from it).
SAVED, NO_SAVED, DAMAGED_SAVED = layout.RESTART_FILE, "missing", "damaged"


def segment_facts(state: LogQueueState) -> DataFrame:
    """One row per segment file present, with what a plan needs to delete it safely: ``queue,
    segment, file, listed_size`` (the directory listing), ``path, size, sha256`` (of the bytes
    the reader parsed; null when the file was not read), ``garbage`` (every record is before
    the garbage end), ``below_saved_suffix`` (the saved restart positions no longer cover it),
    ``saved_positions`` (`SAVED`, `NO_SAVED` or `DAMAGED_SAVED`), ``saved_suffix_segment``, and
    the positions ``garbage_end`` and ``saved_suffix``."""
    listed = state.queues.select(
        "queue",
        "suffix_source",
        "saved_suffix_segment",
        "saved_suffix_offset",
        "garbage_end_segment",
        "garbage_end_offset",
        F.size("restart_problems").alias("restart_problems"),
        F.explode("segments").alias("s"),
    ).select("*", F.col("s.segment").alias("segment"), F.col("s.file").alias("file"))
    read = state.segment_files.select("queue", "file", "size", "sha256")
    rows = listed.join(read, ["queue", "file"], "left")
    saved = (
        F.when(F.col("restart_problems") > 0, F.lit(DAMAGED_SAVED))
        .when(F.col("suffix_source") != F.lit(layout.RESTART_FILE), F.lit(NO_SAVED))
        .otherwise(F.lit(SAVED))
    )
    return rows.select(
        "queue",
        "segment",
        "file",
        F.col("s.size").alias("listed_size"),
        F.concat_ws("/", "queue", "file").alias("path"),
        "size",
        "sha256",
        (F.col("segment") < F.col("garbage_end_segment")).alias("garbage"),
        (F.col("segment") < F.col("saved_suffix_segment")).alias("below_saved_suffix"),
        saved.alias("saved_positions"),
        "saved_suffix_segment",
        _position("garbage_end_segment", "garbage_end_offset").alias("garbage_end"),
        _position("saved_suffix_segment", "saved_suffix_offset").alias("saved_suffix"),
    )


_FACTS = (
    "segment", "path", "size", "sha256", "garbage_end", "saved_suffix", "saved_suffix_segment",
    "saved_positions", "below_saved_suffix",
)  # fmt: skip


def unreclaimed_segment(state: LogQueueState, options: Settings) -> DataFrame:
    """A segment file whose every record is garbage (its number is below the garbage end's
    segment) but which is still on disk: storage, and finished messages' addresses kept after
    they left the queue. ``detail.below_saved_suffix``: the saved restart positions no longer
    cover it (it can go now); else the queue must save newer positions first.
    ``detail.saved_positions``: ``restart.lq``, ``missing`` or ``damaged`` (nothing may be
    deleted on positions that cannot be read); ``path``, ``size`` and ``sha256`` are the file
    and the digest of the bytes the audit read (a plan's precondition)."""
    rows = segment_facts(state).where(F.col("garbage"))
    detail = F.struct(*_FACTS)
    return _finding(
        rows, "unreclaimed_segment", "warning", "segment", F.col("file"), options, detail,
        F.coalesce("size", "listed_size"),
    )  # fmt: skip


def record_addresses(records: DataFrame) -> DataFrame:
    """``queue, file, address``: each distinct mail address a segment's records hold (ENVELOPE
    sender and recipients, DELIVERY outcome recipients)."""
    envelope = F.from_json("values", "sender string, recipients array<string>")
    outcomes = F.from_json("values", "outcomes array<array<string>>")
    addresses = F.when(
        F.col("type") == F.lit(fmt.ENVELOPE),
        F.concat(
            F.array(envelope["sender"]),
            F.coalesce(envelope["recipients"], F.array().cast("array<string>")),
        ),
    ).otherwise(F.transform(outcomes["outcomes"], lambda outcome: outcome[0]))
    wanted = records.where(F.col("type").isin(fmt.ENVELOPE, fmt.DELIVERY))
    found = wanted.select("queue", "file", F.explode(addresses).alias("address"))
    return found.where(F.col("address").isNotNull() & (F.col("address") != "")).distinct()


def personal_data(state: LogQueueState, options: Settings) -> DataFrame:
    """Only when the audit looks for data subjects (``--erasure-policy``): a segment file whose
    records hold one of them (an envelope's sender or recipients, a delivery's recipients), and
    a spool file whose message holds one (its header fields; its decoded parts for subjects of
    ``search = "full"`` rules: `content.spool_content`). ``detail.subjects``: the matching
    keyed hashes, never an address; ``detail.found``: each with where (``envelope`` in a
    segment; ``header:<field>``, ``body``, ``attachment`` in a spool file); ``detail.depth``.
    A segment's finding has its facts (`segment_facts`): whether it is garbage, below the saved
    suffix, its path, size and SHA-256; a spool file's (scope ``spool``, subject
    ``spool/<name>``) its path, size, SHA-256 and the message naming it (``message_id``,
    ``state``: waiting, in_flight, finished, or null: none). ``bytes``: the file's size."""
    if not options.subjects:
        return empty(state.queues.sparkSession)
    hashed = subjects.keyed_column(
        subjects.address_hash_column(F.col("address")), options.subject_key
    )
    found = (
        record_addresses(state.records)
        .select("queue", "file", hashed.alias("keyed"))
        .where(F.col("keyed").isin(sorted(options.subjects)))
        .groupBy("queue", "file")
        .agg(F.array_sort(F.collect_set("keyed")).alias("subjects"))
    )
    rows = segment_facts(state).join(found, ["queue", "file"])
    where = F.transform(
        "subjects", lambda s: F.struct(s.alias("subject"), F.lit(ENVELOPE).alias("where"))
    )
    depth = F.lit(_searched(options).depth).alias("depth")
    detail = F.struct(*_FACTS[:1], "subjects", where.alias("found"), depth, "garbage", *_FACTS[1:])
    segments = _finding(
        rows, "personal_data", "info", "segment", F.col("file"), options, detail,
        F.coalesce("size", "listed_size"),
    )  # fmt: skip
    spool = _spool_rows(state, options).where(F.size("subjects") > 0)
    spool_detail = _spool_detail(options, "subjects", "found")
    spool_files = _finding(
        spool, "personal_data", "info", "spool", _spool_subject(), options, spool_detail,
        F.col("bytes"),
    )  # fmt: skip
    return segments.unionByName(spool_files)


def unreadable_content(state: LogQueueState, options: Settings) -> DataFrame:
    """Only when the audit looks for data subjects: a spool file with a place that could not be
    searched at the depth asked (an encrypted part, a damaged transfer encoding, a file that
    cannot be read). ``detail.unreadable``: each place with the reason; it is not known to be
    free of the subjects, so an erasure defers it rather than call it clean."""
    if not options.subjects:
        return empty(state.queues.sparkSession)
    rows = _spool_rows(state, options).where(F.size("unreadable") > 0)
    return _finding(
        rows, "unreadable_content", "warning", "spool", _spool_subject(), options,
        _spool_detail(options, "unreadable"), F.col("bytes"),
    )  # fmt: skip


def _searched(options: Settings) -> Searched:
    return Searched(options.subject_key, options.subjects, options.full_subjects)


def _spool_rows(state: LogQueueState, options: Settings) -> DataFrame:
    """Every spool file searched (`content.spool_content`), with the message that names it."""
    searched = spool_content(state.spool, _searched(options))
    naming = state.messages.select(
        "queue", F.col("spool").alias("name"), "message_id", "state"
    ).dropDuplicates(["queue", "name"])
    listed = state.spool.select("queue", "name", F.col("size").alias("listed_size"))
    return (
        searched.join(listed, ["queue", "name"], "left")
        .join(naming, ["queue", "name"], "left")
        .withColumn("bytes", F.coalesce("read_size", "listed_size"))
    )


def _spool_subject() -> Column:
    return F.concat(F.lit(layout.SPOOL_DIR + "/"), F.col("name"))


def _spool_detail(options: Settings, *columns: str) -> Column:
    return F.struct(
        F.col("name").alias("spool"), "path", F.col("read_size").alias("size"), "sha256",
        "message_id", "state", *columns, F.lit(_searched(options).depth).alias("depth"),
    )  # fmt: skip


def restart_lag(state: LogQueueState, options: Settings) -> DataFrame:
    """The saved restart suffix is more than ``restart_lag_bytes`` of segment bytes behind the
    true garbage end: a crash now makes the restart rescan all of it, and none of those
    segments can be reclaimed until the queue saves newer positions. ``bytes``: the lag."""
    rows = state.queues.where(F.col("bytes_behind") > F.lit(options.restart_lag_bytes))
    detail = F.struct(
        _position("saved_suffix_segment", "saved_suffix_offset").alias("saved"),
        _position("garbage_end_segment", "garbage_end_offset").alias("actual"),
        "bytes_behind",
    )
    subject = F.lit(layout.RESTART_FILE)
    return _finding(
        rows, "restart_lag", "warning", "queue", subject, options, detail,
        F.col("bytes_behind"),
    )  # fmt: skip


def lost_envelope(state: LogQueueState, options: Settings) -> DataFrame:
    """Spool and envelopes disagree. ``spool_without_envelope``: a spool file no live message
    refers to (its message finished, or is unknown from the suffix on): content, often with
    addresses, kept forever, or a message whose envelope was lost and will never be delivered.
    Subject ``spool/<name>``, ``bytes`` its size. ``envelope_without_spool``: a message not
    finished whose spool file is missing: it cannot be delivered. Subject the message id."""
    messages = state.messages
    live = messages.where(F.col("state") != "finished")
    known = (
        messages.where(F.col("state") == "finished")
        .groupBy("queue", F.col("spool").alias("name"))
        .agg(F.min("message_id").alias("message_id"))
    )
    orphaned = (
        state.spool.join(
            live.select("queue", F.col("spool").alias("name")), ["queue", "name"], "left_anti"
        )
        .join(known, ["queue", "name"], "left")
        .select(
            "queue",
            F.lit("spool_without_envelope").alias("direction"),
            F.col("name").alias("spool"),
            "message_id",
            F.when(F.col("message_id").isNotNull(), F.lit("finished")).alias("state"),
            F.concat(F.lit(layout.SPOOL_DIR + "/"), "name").alias("subject"),
            F.col("size").alias("bytes"),
        )
    )
    missing = live.where(F.col("spool_bytes").isNull()).select(
        "queue",
        F.lit("envelope_without_spool").alias("direction"),
        "spool",
        "message_id",
        "state",
        F.col("message_id").alias("subject"),
        F.lit(None).cast("long").alias("bytes"),
    )
    rows = orphaned.unionByName(missing)
    detail = F.struct("direction", "spool", "message_id", "state")
    return _finding(
        rows, "lost_envelope", "error", "spool", F.col("subject"), options, detail, F.col("bytes")
    )


CHECKS: dict[str, Callable[[LogQueueState, Settings], DataFrame]] = {
    check.__name__: check
    for check in (
        torn_tail,
        crc_mismatch,
        corrupt_segment,
        orphan_delivery,
        orphan_record,
        duplicate_delivery,
        stuck_message,
        unreclaimed_segment,
        restart_lag,
        lost_envelope,
        personal_data,
        unreadable_content,
    )
}


def run_checks(state: LogQueueState, options: Settings | None = None) -> DataFrame:
    """Every check's findings, one frame (lazy over the state's computed frames)."""
    options = options or Settings()
    spark = state.queues.sparkSession
    return union_all(spark, (check(state, options) for check in CHECKS.values()))
