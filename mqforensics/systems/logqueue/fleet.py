"""Spark readers over log-structured queue directories: one partition per segment file.

Two Python data sources, each planning one partition per ``seg-<n>.lq`` file of every queue
directory of the ``dirs`` option (a JSON list; ``restart.lq`` and the spool are no segments) and
reading it with the columnar reader (`columnar.ColumnarSegment`: a C kernel for the runs of
whole records, `segment.read_segment`'s own steps for everything else, the reference alone when
the kernel is unavailable), so a damaged file never fails the task:

- ``logqueue_records`` (`read_records`): one row per whole, CRC-valid record, `RECORDS`, yielded
  as `pyarrow.RecordBatch`es of up to `columnar.BATCH_ROWS` rows (`record_batches`):
  ``queue`` is the directory (resolved, absolute, as escaped text: `filenames.shown`), ``file``
  the segment's file name, ``segment``/``offset`` its position (the number in the file's
  name: the format's reading rule 3), ``values`` the decoded payload as a JSON object (lists
  for tuples; exactly ``json.dumps(values, sort_keys=True)``), ``message_id`` the UUID text
  (zeros for RESTART). A number that does not fit its column (a ``u32`` reference above
  2^31-1, a ``u64`` time above 2^63-1) is null.
- ``logqueue_segments`` (`read_segments`): one row per segment file, `SEGMENTS`: its size and
  SHA-256 (of the very bytes parsed: what a plan records and the purger checks again), the
  number of whole records, and its problems (`segment.Problem`). `read_problems` is those
  problems, one row each (`PROBLEMS`).

A missing or unreadable directory or segment file is an InputError on the driver naming it,
before any job; a directory without any segment gives no rows. A file that vanishes after
planning fails its task with an InputError naming it (`errors.explain` recovers the line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import fs_path, shown
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.columnar import (
    BATCH_ROWS,
    INT32_MAX,
    INT64_MAX,
    ColumnarSegment,
    fits,
    segment_batches,
)
from mqforensics.systems.logqueue.segment import SegmentFile, segment_number_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RECORDS = (
    "queue string, file string, segment int, offset bigint, type int, type_name string, "
    "time_us bigint, message_id string, ref_segment int, ref_offset bigint, size bigint, "
    "values string"
)
PROBLEMS = "queue string, file string, kind string, offset bigint, size bigint, detail string"
SEGMENTS = (
    "queue string, file string, segment int, size bigint, sha256 string, records bigint, "
    "problems array<struct<kind: string, offset: bigint, size: bigint, detail: string>>"
)


@dataclass
class SegmentPartition(InputPartition):
    """One segment file of one queue directory, read whole by one Spark task: `queue` as
    escaped text, `path` as the file system names it."""

    queue: str
    path: str


def parse_dirs(options: Any) -> list[str]:
    """The queue directories of the ``dirs`` option (a JSON list of paths), in order."""
    raw = options.get("dirs")
    if not raw:
        raise ConfigError("option 'dirs' (JSON list of queue directories) is required")
    try:
        dirs = json.loads(raw)
    except ValueError:
        dirs = None
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError("option 'dirs' must be a JSON list of queue directories")
    return dirs


def segment_partitions(dirs: Sequence[str]) -> list[SegmentPartition]:
    """One partition per segment file, by directory (escaped text) and segment number."""
    return [
        SegmentPartition(queue, str(path))
        for queue in dirs
        for path in layout.segments(Path(fs_path(queue))).values()
    ]


def open_segment(path: str) -> ColumnarSegment:
    """`path` opened by the columnar reader (mapped, not read); an OS error (the file vanished)
    is an InputError naming it."""
    try:
        return ColumnarSegment.open(path)
    except OSError as exc:
        raise InputError(f"{shown(path)}: {exc.strerror or exc}") from None


def read_file(path: str) -> ColumnarSegment:
    """`path` read by the columnar reader, counted (records, problems) without columns."""
    return read_file_digest(path)[0]


def read_file_digest(path: str) -> tuple[ColumnarSegment, str]:
    """`read_file` of `path` and the SHA-256 of the bytes it parsed (both from one mapping)."""
    seg = open_segment(path)
    sha256 = seg.sha256()
    return seg.count(), sha256


def record_rows(queue: str, seg: SegmentFile) -> Iterator[tuple]:
    """The `RECORDS` rows of a segment the reference read (what `record_batches` must equal)."""
    name = Path(seg.source).name
    for r in seg.records:
        yield (
            queue,
            name,
            fits(r.segment, INT32_MAX),
            r.offset,
            r.type,
            r.type_name,
            fits(r.time_us, INT64_MAX),
            str(r.message_id),
            fits(r.ref[0], INT32_MAX),
            r.ref[1],
            r.size,
            json.dumps(r.values, sort_keys=True),
        )


def record_batches(queue: str, path: str, rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The `RECORDS` rows of the segment at `path`, as Arrow batches
    (`columnar.segment_batches`)."""
    return segment_batches(queue, open_segment(path), rows)


def segment_row(queue: str, seg: ColumnarSegment, sha256: str) -> tuple:
    """The `SEGMENTS` row of one read segment."""
    name = Path(seg.source).name
    problems = [(p.kind, p.offset, p.size, p.detail) for p in seg.problems]
    number = fits(segment_number_of(name), INT32_MAX)
    return (queue, name, number, seg.size, sha256, seg.records, problems)


class _SegmentsReader(DataSourceReader):
    """One partition per segment file; `rows` turns one read file into rows."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[SegmentPartition]:  # type: ignore[override]
        return segment_partitions(parse_dirs(self.options))

    def read(  # type: ignore[override]
        self, partition: SegmentPartition | None
    ) -> Iterator[tuple | pa.RecordBatch]:
        if partition is None:  # no segment anywhere: Spark plans one empty partition
            return
        yield from self.rows(partition.queue, partition.path)

    def rows(self, queue: str, path: str) -> Iterator[tuple | pa.RecordBatch]:
        raise NotImplementedError


class LogqueueRecordsReader(_SegmentsReader):
    def rows(self, queue: str, path: str) -> Iterator[pa.RecordBatch]:
        return record_batches(queue, path)


class LogqueueSegmentsReader(_SegmentsReader):
    def rows(self, queue: str, path: str) -> Iterator[tuple]:
        seg, sha256 = read_file_digest(path)
        yield segment_row(queue, seg, sha256)


class LogqueueRecordsSource(DataSource):
    """``spark.read.format("logqueue_records")``: the whole records of every segment."""

    @classmethod
    def name(cls) -> str:
        return "logqueue_records"

    def schema(self) -> str:
        return RECORDS

    def reader(self, schema: Any) -> LogqueueRecordsReader:
        return LogqueueRecordsReader(dict(self.options))


class LogqueueSegmentsSource(DataSource):
    """``spark.read.format("logqueue_segments")``: each segment file's size, SHA-256, record
    count and the damage the reader found in it."""

    @classmethod
    def name(cls) -> str:
        return "logqueue_segments"

    def schema(self) -> str:
        return SEGMENTS

    def reader(self, schema: Any) -> LogqueueSegmentsReader:
        return LogqueueSegmentsReader(dict(self.options))


SOURCES = (LogqueueRecordsSource, LogqueueSegmentsSource)


# ---------------------------------------------------------------------------------------------


def checked_dirs(dirs: Sequence[str | Path]) -> list[str]:
    """`dirs` resolved, each a readable directory given once whose segment files are readable
    (as the file system names them; every frame names a queue as its `filenames.shown` text);
    InputError (naming the path) or ConfigError if not."""
    if isinstance(dirs, str | Path):
        dirs = [dirs]
    out: list[str] = []
    for given in dirs:
        path = Path(given).resolve()
        if not path.is_dir():
            raise InputError(f"{shown(path)}: no such queue directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{shown(path)}: not readable")
        for segment in layout.segments(path).values():
            if not os.access(segment, os.R_OK):
                raise InputError(f"{shown(segment)}: not readable")
        if str(path) in out:
            raise ConfigError(f"{shown(path)} is given twice")
        out.append(str(path))
    if not out:
        raise ConfigError("no queue directory given")
    return out


def register(spark: SparkSession) -> None:
    """Register this module's data sources on `spark` (registration is per session)."""
    for each in SOURCES:
        spark.dataSource.register(each)


def _load(spark: SparkSession, source: type[DataSource], dirs: Sequence[str | Path]) -> DataFrame:
    options = {"dirs": json.dumps([shown(d) for d in checked_dirs(dirs)])}
    register(spark)
    return spark.read.format(source.name()).options(**options).load()


def read_records(spark: SparkSession, dirs: Sequence[str | Path]) -> DataFrame:
    """Every whole record of every segment of `dirs` (`RECORDS`), one partition per segment
    file; lazy."""
    return _load(spark, LogqueueRecordsSource, dirs)


def read_segments(spark: SparkSession, dirs: Sequence[str | Path]) -> DataFrame:
    """One row per segment file of `dirs` (`SEGMENTS`), one partition per segment file; lazy."""
    return _load(spark, LogqueueSegmentsSource, dirs)


def problems_of_segments(segments: DataFrame) -> DataFrame:
    """The problems of a `SEGMENTS` frame, one row each (`PROBLEMS`)."""
    from pyspark.sql import functions as F

    exploded = segments.select("queue", "file", F.explode("problems").alias("p"))
    return exploded.select("queue", "file", "p.kind", "p.offset", "p.size", "p.detail")


def read_problems(spark: SparkSession, dirs: Sequence[str | Path]) -> DataFrame:
    """Every problem the reader found in the segments of `dirs` (`PROBLEMS`); lazy."""
    return problems_of_segments(read_segments(spark, dirs))
