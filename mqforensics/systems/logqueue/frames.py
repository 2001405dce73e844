"""The canonical frames of a log queue audit (`LogQueueState`, every check reads them): per
queue directory, what its restart procedure sees, computed in Spark (`read_state`).

The records frame (`fleet.read_records`, one task per segment file) is grouped by queue and each
group is replayed in an executor (`groupBy("queue").applyInArrow`, local mode and Spark Connect):
the executor reads the queue's saved restart positions (``restart.lq``), lists its segments and
spool, and runs `replay.replay` from the saved suffix on (`queue_view`, plain Python). A queue
directory without any record still gets its group (one placeholder row per directory).

``restart.lq`` is read without ever failing: missing, the suffix is (lowest segment present, 32)
(``suffix_source`` = ``default``); damaged (a reader problem, a header not numbered 0, another
record type, or not exactly one RESTART record: kind ``bad_restart``), its problems are in
``restart_problems`` and the suffix is its one RESTART record's if it has exactly one, else the
default. The end of the log is (highest segment number present, that file's size), as the
reclamation planner has it; the garbage end is `Replay.garbage_end` of it.

Frames of `LogQueueState` (positions are segment/offset column pairs; a position in a list is
``<file>@<offset>``):

- ``messages`` (`MESSAGES`): one row per message replay knows (from the suffix on), finished ones
  too. ``recipients_remaining`` = `Message.remaining`; ``delivered`` = recipients with a
  DELIVERED outcome, in order; ``duplicate_deliveries`` = recipients with two or more, with the
  DELIVERY records; ``envelope_*`` the live (or last) envelope, ``start_*``/``runner`` the
  in-flight START; ``first_enqueued_us`` the earliest ENVELOPE of the message in any segment
  present (garbage ones too: a retry's original envelope may be before the suffix); ``spool`` the
  envelope's spool name and ``spool_bytes`` its file's size (null: no such file).

Every frame names its queue directory, and the spool frame and ``spool`` each spool file, as
escaped text (`filenames.shown`, docs/filenames.md): a spool file whose name is not valid UTF-8 is
listed like any other (no envelope can name it: its name is a string of the format).
- ``queues`` (`QUEUES`): one row per directory: the saved suffix and where it came from, the
  garbage end, the end of the log, ``bytes_behind`` (segment bytes from the saved suffix to the
  garbage end), ``segments`` present with their sizes, ``missing_segments`` (ranges of numbers
  from the saved suffix's segment to the last one that have no file), ``restart_problems``, and
  counts.
- ``orphans`` (`ORPHANS`): `Replay.orphans`, with the record's file and the reason.
- ``spool`` (`SPOOL`): the files of ``<dir>/spool``.
- ``segment_files`` (`fleet.SEGMENTS`): one row per segment file read: size, SHA-256, record
  count and problems (`fleet.read_segments`); ``problems``: those problems, one row each.
- ``records``: `fleet.read_records` (lazy: every segment is read again when it is used).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from mqforensics.errors import InputError
from mqforensics.filenames import fs_path, shown
from mqforensics.spark import computed
from mqforensics.systems.logqueue import fleet, layout
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.replay import Position, Replay, replay
from mqforensics.systems.logqueue.segment import Problem, Record, read_segment

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields])


_S, _I, _L = StringType(), IntegerType(), LongType()
_INT32 = (1 << 31) - 1
BAD_RESTART = "bad_restart"  # every problem of restart.lq (reading rule 13)

MESSAGES = _struct(
    ("queue", _S),
    ("message_id", _S),
    ("state", _S),
    ("attempts", _I),
    ("runner", _S),
    ("recipients_remaining", ArrayType(_S)),
    ("delivered", ArrayType(_S)),
    (
        "duplicate_deliveries",
        ArrayType(_struct(("recipient", _S), ("positions", ArrayType(_S)))),
    ),
    ("envelope_segment", _I),
    ("envelope_offset", _L),
    ("start_segment", _I),
    ("start_offset", _L),
    ("first_enqueued_us", _L),
    ("spool", _S),
    ("spool_bytes", _L),
)
QUEUES = _struct(
    ("queue", _S),
    ("suffix_source", _S),
    ("saved_suffix_segment", _I),
    ("saved_suffix_offset", _L),
    ("garbage_end_segment", _I),
    ("garbage_end_offset", _L),
    ("end_of_log_segment", _I),
    ("end_of_log_offset", _L),
    ("bytes_behind", _L),
    ("segments", ArrayType(_struct(("segment", _I), ("file", _S), ("size", _L)))),
    ("missing_segments", ArrayType(_struct(("first", _I), ("last", _I)))),
    (
        "restart_problems",
        ArrayType(_struct(("kind", _S), ("offset", _L), ("size", _L), ("detail", _S))),
    ),
    ("waiting", _I),
    ("in_flight", _I),
    ("finished", _I),
    ("orphans", _I),
    ("spool_files", _I),
)
ORPHANS = _struct(
    ("queue", _S),
    ("file", _S),
    ("segment", _I),
    ("offset", _L),
    ("type_name", _S),
    ("message_id", _S),
    ("ref_segment", _I),
    ("ref_offset", _L),
    ("size", _L),
    ("time_us", _L),
    ("reason", _S),
)
SPOOL = _struct(("queue", _S), ("name", _S), ("size", _L))

# The one output of the per-queue replay: each row carries one frame's row in its struct column.
_COLUMNS = {"message": MESSAGES, "queue_row": QUEUES, "orphan": ORPHANS, "spool": SPOOL}
OUTPUT = _struct(
    ("queue", _S),
    ("kind", _S),
    *((c, _struct(*((f.name, f.dataType) for f in s.fields[1:]))) for c, s in _COLUMNS.items()),
)
_INPUT = ("queue", "file", "segment", "offset", "type", "time_us", "message_id", "ref_segment")
INPUT_COLUMNS = (*_INPUT, "ref_offset", "size", "values")


# --- one queue, plain Python ---------------------------------------------------------------------


def read_restart(directory: Path) -> tuple[Position | None, list[Problem]]:
    """The saved suffix of ``restart.lq`` (None: missing or unusable) and its problems, every
    one of kind ``bad_restart`` (reading rule 13: the reader's own kind leads its detail)."""
    path = directory / layout.RESTART_FILE
    if not path.exists():
        return None, []
    try:
        parsed = read_segment(path)
    except OSError as exc:
        return None, [Problem(BAD_RESTART, 0, 0, f"cannot be read: {exc.strerror or exc}")]
    problems = [Problem(BAD_RESTART, p.offset, p.size, f"{p.kind}: {p.detail}")
                for p in parsed.problems]  # fmt: skip
    if parsed.header is not None and parsed.header.segment != 0:
        detail = f"segment number {parsed.header.segment} in the header, expected 0"
        problems.append(Problem(BAD_RESTART, 0, fmt.SEGMENT_HEADER_SIZE, detail))
    restarts = [r for r in parsed.records if r.type == fmt.RESTART]
    for r in parsed.records:
        if r.type != fmt.RESTART:
            problems.append(Problem(BAD_RESTART, r.offset, r.size, f"a {r.type_name} record"))
    if len(restarts) > 1:
        extra = restarts[1]
        detail = f"{len(restarts)} RESTART records, expected 1"
        problems.append(Problem(BAD_RESTART, extra.offset, extra.size, detail))
    elif not restarts and not problems:
        problems.append(Problem(BAD_RESTART, fmt.SEGMENT_HEADER_SIZE, 0, "no RESTART record"))
    if len(restarts) != 1:
        return None, problems
    suffix = (restarts[0].values["suffix_segment"], restarts[0].values["suffix_offset"])
    if not 0 < suffix[0] <= fmt.MAX_SEGMENT:
        detail = f"suffix segment {suffix[0]} is no segment number"
        problems.append(Problem(BAD_RESTART, restarts[0].offset, restarts[0].size, detail))
        return None, problems
    return suffix, problems


def list_spool(directory: Path) -> dict[str, int]:
    """Spool file name (as the file system gives it) → size, for the files of ``<dir>/spool``
    (none when it is missing)."""
    spool = directory / layout.SPOOL_DIR
    if not spool.is_dir():
        return {}
    return {p.name: p.stat().st_size for p in sorted(spool.iterdir()) if p.is_file()}


def bytes_between(sizes: dict[int, int], start: Position, end: Position) -> int:
    """Segment bytes from `start` to `end` (present segments only; 0 when `end` is not after)."""
    if end <= start:
        return 0
    if start[0] == end[0]:
        return end[1] - start[1]
    between = sum(size for n, size in sizes.items() if start[0] < n < end[0])
    return max(sizes.get(start[0], start[1]) - start[1], 0) + between + end[1]


def missing_ranges(present: Sequence[int], suffix_segment: int) -> list[dict[str, int]]:
    """Ranges of segment numbers from `suffix_segment` to the last present without a file."""
    last = max([*present, suffix_segment])
    wanted = sorted({n for n in present if n >= suffix_segment} | {last + 1})
    out, expected = [], suffix_segment
    for n in wanted:
        if n > expected:
            out.append({"first": expected, "last": n - 1})
        expected = n + 1
    return out


def _where(files: dict[Position, str], position: Position) -> str:
    return f"{files.get(position, fmt.segment_name(position[0]))}@{position[1]}"


@dataclass
class QueueView:
    """The rows of one queue for each frame of `LogQueueState` (without the ``queue`` column)."""

    queue: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    orphans: list[dict[str, Any]] = field(default_factory=list)
    spool: list[dict[str, Any]] = field(default_factory=list)


def _message_row(
    result: Replay, mid: uuid.UUID, files: dict[Position, str], first: dict[uuid.UUID, int]
) -> dict[str, Any]:
    msg = result.messages[mid]
    delivered: dict[str, list[str]] = {}
    for recipient, position in msg.deliveries:
        delivered.setdefault(recipient, []).append(_where(files, position))
    envelope, start = msg.envelope, msg.start
    return {
        "message_id": str(mid),
        "state": msg.state,
        "attempts": msg.attempts,
        "runner": start.values["runner"] if start else None,
        "recipients_remaining": msg.remaining(),
        "delivered": list(delivered),
        "duplicate_deliveries": [
            {"recipient": r, "positions": p} for r, p in delivered.items() if len(p) > 1
        ],
        "envelope_segment": envelope.segment if envelope else None,
        "envelope_offset": envelope.offset if envelope else None,
        "start_segment": start.segment if start else None,
        "start_offset": start.offset if start else None,
        "first_enqueued_us": first.get(mid),
        "spool": shown(envelope.values["spool"]) if envelope else None,
    }


def queue_view(directory: Path, records: list[Record], files: dict[Position, str]) -> QueueView:
    """The restart procedure's view of one queue directory from its `records` (any order;
    `files` maps each record's position to its file name)."""
    segments = {n: p.stat().st_size for n, p in layout.segments(directory).items()}
    names = {n: fmt.segment_name(n) for n in segments}
    saved, restart_problems = read_restart(directory)
    suffix = saved or ((min(segments), fmt.SEGMENT_HEADER_SIZE) if segments else None)
    end_of_log = (max(segments), segments[max(segments)]) if segments else None
    spool = {shown(name): size for name, size in list_spool(directory).items()}
    first: dict[uuid.UUID, int] = {}
    for r in records:
        if r.type == fmt.ENVELOPE and r.time_us is not None:
            first[r.message_id] = min(first.get(r.message_id, r.time_us), r.time_us)
    result = replay(records, suffix) if suffix else Replay({}, [], (0, 0))
    garbage_end = result.garbage_end(end_of_log) if end_of_log else None
    view = QueueView({})
    for mid in sorted(result.messages, key=str):
        row = _message_row(result, mid, files, first)
        row["spool_bytes"] = spool.get(row["spool"]) if row["spool"] is not None else None
        view.messages.append(row)
    for record, reason in result.orphans:
        view.orphans.append(
            {
                "file": files.get(record.position, fmt.segment_name(record.segment)),
                "segment": record.segment,
                "offset": record.offset,
                "type_name": record.type_name,
                "message_id": str(record.message_id),
                "ref_segment": record.ref[0] if record.ref[0] >= 0 else None,
                "ref_offset": record.ref[1],
                "size": record.size,
                "time_us": record.time_us,
                "reason": reason,
            }
        )
    view.spool = [{"name": name, "size": size} for name, size in spool.items()]
    states = [m["state"] for m in view.messages]
    view.queue = {
        "suffix_source": layout.RESTART_FILE if saved else "default",
        "saved_suffix_segment": suffix[0] if suffix else None,
        "saved_suffix_offset": suffix[1] if suffix else None,
        "garbage_end_segment": garbage_end[0] if garbage_end else None,
        "garbage_end_offset": garbage_end[1] if garbage_end else None,
        "end_of_log_segment": end_of_log[0] if end_of_log else None,
        "end_of_log_offset": end_of_log[1] if end_of_log else None,
        "bytes_behind": bytes_between(segments, suffix, garbage_end)
        if suffix and garbage_end
        else None,
        "segments": [{"segment": n, "file": names[n], "size": s} for n, s in segments.items()],
        "missing_segments": missing_ranges(list(segments), suffix[0]) if suffix else [],
        "restart_problems": [
            {"kind": p.kind, "offset": p.offset, "size": p.size, "detail": p.detail}
            for p in restart_problems
        ],
        "waiting": states.count("waiting"),
        "in_flight": states.count("in_flight"),
        "finished": states.count("finished"),
        "orphans": len(view.orphans),
        "spool_files": len(spool),
    }
    return view


# --- in the executors ----------------------------------------------------------------------------


def _record(row: dict[str, Any]) -> Record:
    ref_segment = row["ref_segment"]
    return Record(
        row["segment"],
        row["offset"],
        row["type"],
        row["time_us"],
        uuid.UUID(row["message_id"]),
        (ref_segment if ref_segment is not None else -1, row["ref_offset"]),
        json.loads(row["values"]),
        row["size"],
    )


def replay_group(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
    """`queue_view` of one queue's group of `INPUT_COLUMNS` rows, as `OUTPUT` rows."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    queue = key[0].as_py() if hasattr(key[0], "as_py") else key[0]
    rows = [r for r in table.to_pylist() if r["type"] is not None and r["segment"] is not None]
    records = [_record(r) for r in rows]
    files = {(r["segment"], r["offset"]): r["file"] for r in rows}
    try:
        view = queue_view(Path(fs_path(queue)), records, files)
    except OSError as exc:
        raise InputError(f"{queue}: {exc.strerror or exc}") from None
    out: list[dict[str, Any]] = [{"queue": queue, "kind": "queue_row", "queue_row": view.queue}]
    out += [{"queue": queue, "kind": "message", "message": m} for m in view.messages]
    out += [{"queue": queue, "kind": "orphan", "orphan": o} for o in view.orphans]
    out += [{"queue": queue, "kind": "spool", "spool": s} for s in view.spool]
    return pa.Table.from_pylist(out, schema=to_arrow_schema(OUTPUT))


# --- on the driver -------------------------------------------------------------------------------


@dataclass
class LogQueueState:
    """The frames of a set of queue directories (see the module docstring); `dirs` as their
    escaped text, as every frame's ``queue`` names them."""

    dirs: list[str]
    records: DataFrame
    problems: DataFrame
    messages: DataFrame
    queues: DataFrame
    orphans: DataFrame
    spool: DataFrame
    segment_files: DataFrame


def read_state(spark: SparkSession, dirs: Sequence[str | Path]) -> LogQueueState:
    """Every frame of `dirs`: the segment files (with their problems) and the replay are
    computed at once (an InputError of an executor is re-raised here); ``records`` stays lazy."""
    from pyspark.sql import functions as F

    checked = fleet.checked_dirs(dirs)
    records = fleet.read_records(spark, checked)
    segment_files = computed(fleet.read_segments(spark, checked))
    queues = [shown(d) for d in checked]
    placeholders = spark.createDataFrame([(q,) for q in queues], "queue string")
    grouped = records.select(*INPUT_COLUMNS).unionByName(placeholders, allowMissingColumns=True)
    out = computed(grouped.groupBy("queue").applyInArrow(replay_group, OUTPUT))

    def part(column: str) -> DataFrame:
        return out.where(F.col("kind") == column).select("queue", f"{column}.*")

    return LogQueueState(
        queues,
        records,
        fleet.problems_of_segments(segment_files),
        part("message"),
        part("queue_row"),
        part("orphan"),
        part("spool"),
        segment_files,
    )
