"""Benchmark: our log-structured queue segment parser against a raw read of the same files.

Data: one queue directory of about `target_bytes` of segment files (1 MiB segments, the writer's
default), written by the project's own `QueueWriter` driven by the simulator's world
(`simulate.sender_of`, `recipients_of`, `outcome`, `runner_for`, ...): messages are enqueued,
started, delivered one or two recipients per DELIVERY, retried with a replacement ENVELOPE or
finished, with up to `WINDOW` messages interleaved, and the restart positions saved now and
then. Only durability is skipped while generating (``os.fsync`` and the directory fsync are
no-ops): the bytes are the writer's, and ten million fsyncs would take hours. Generation stops
at the first operation that takes the segments past `target_bytes`, leaving a live queue
(messages waiting and in flight). Cached in ``~/.cache/mqforensics/bench/`` by size and
`DATA_VERSION`.

Subjects, each in a fresh process (`measure.run_subject`), on the same files:

- ``ours``: the columnar reader of every segment file (`layout.segments`), exactly what the
  audit's Spark source (`fleet.record_batches`) runs once per segment: the file mapped,
  every record's header decoded, its CRC checked and its payload decoded to JSON text by the C
  kernel (`columnar`), the reference's own steps at damage, the Arrow record batches Spark
  receives built. Streams one file and one batch at a time. Counts records, bytes, problems and
  batches; its peak memory is the process's high-water mark, as for every subject.
- ``ours-reference``: `segment.read_segment` of every segment file, the pure-Python reference
  that defines the answers (one `Record` per record), for the ratio reference / fast path.
- ``ours-spark`` (optional): the audit's actual path, ``fleet.read_records`` (one Spark task
  per segment, rows with the payload as JSON) aggregated to a record count and byte sum, with
  the SparkSession started before the clock starts. Shows what Spark adds around the parser.
- ``baseline``: a raw read of every segment file in 1 MiB chunks, counting bytes: the I/O floor
  (the files are in the page cache, for every subject alike).
- ``baseline-walk``: a pure-Python walk over the record headers' length fields (no CRC, no
  payload decoding): the least any Python reader must do to count records.

The parent asserts that every subject saw the same bytes and every counting subject the same
number of records, equal to what the writer wrote.

``run --one-segment`` measures ``ours`` and ``baseline`` on one segment file instead: the records
of every segment of the cached queue after a single header (what a writer that never rotates
would leave), written into `workdir` for the run and removed after it. Its peak memory shows that
one segment of any size is read with flat memory (`columnar.WINDOW`); the reference and the
walk, which hold the whole file, are not run on it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from bench import measure
from datasets.logqueue import simulate
from datasets.logqueue import writer as writer_module
from datasets.logqueue.writer import QueueWriter, Write
from mqforensics.services.cache import cache_dir
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.segment import read_segment

BENCHMARK = "logqueue_segments"
DATA_VERSION = "1"  # bump when the generated content changes: the cache key includes it
SEED = 9
WINDOW = 16  # messages in progress at once (their records interleave)
MAX_ATTEMPTS = 4
SAVE_EVERY = 5000  # operations between saves of the restart positions
CHUNK = 1 << 20
TICK_US = 1000
_LENGTH = struct.Struct(">I")


# --- the generator ---------------------------------------------------------------------------


@dataclass
class Written:
    """What the writer wrote into segment files: records and bytes (headers included)."""

    records: int = 0
    record_bytes: int = 0
    segments: int = 0
    segment_bytes: int = 0

    def hook(self, write: Write) -> None:
        """`QueueWriter`'s write hook: count, never interfere (returns None)."""
        if write.kind == "record":
            self.records += 1
            self.record_bytes += len(write.data)
            self.segment_bytes += len(write.data)
        elif write.kind == "segment_header":
            self.segments += 1
            self.segment_bytes += len(write.data)


class _Clock:
    def __init__(self) -> None:
        self.now_us = simulate.T0_US

    def __call__(self) -> int:
        self.now_us += TICK_US
        return self.now_us


def _step(
    queue: QueueWriter, mid: Any, clock: _Clock, positions: dict[str, Any], rng: random.Random
) -> bool:
    """One operation on message `mid` by the simulator's rules; True when it is finished."""
    msg = queue.message(mid)
    if msg.state == "waiting":
        assert msg.envelope is not None
        runner = simulate.runner_for(msg.attempts)
        positions[runner] = msg.envelope.position
        queue.start(mid, runner)
        return False
    assert msg.start is not None and msg.envelope is not None
    attempt, start = msg.attempts, msg.start.position
    untried = [
        r
        for r in msg.envelope.values["recipients"]
        if r not in msg.outcomes or msg.outcomes[r][2] < start
    ]
    if untried:
        chunk = untried[: rng.randint(1, 2)]
        statuses = [(r, simulate.outcome(SEED, mid, r, attempt)) for r in chunk]
        queue.deliver(mid, [(r, s, simulate.REPLIES[s]) for r, s in statuses])
        return False
    if msg.remaining() and attempt + 1 < MAX_ATTEMPTS:
        interval = simulate.RUNNERS[simulate.runner_for(attempt)] * simulate.SECOND
        queue.retry(mid, clock.now_us + interval)
        return False
    queue.finish(mid)
    return True


def write_queue(directory: Path, target_bytes: int) -> Written:
    """Run the writer on `directory` until its segments hold at least `target_bytes`."""
    written = Written()
    clock = _Clock()
    rng = random.Random(f"mqforensics-bench-logqueue-{SEED}")
    positions: dict[str, Any] = {}
    no_sync = mock.patch.object(writer_module.os, "fsync", lambda fd: None)
    no_dir_sync = mock.patch.object(writer_module, "fsync_directory", lambda path: None)
    with no_sync, no_dir_sync:
        queue = QueueWriter(directory, clock=clock, hook=written.hook)
        queue.recover()
        active: deque[Any] = deque()
        index = ops = 0
        try:
            while written.segment_bytes < target_bytes:
                if len(active) < WINDOW:
                    mid = queue.enqueue(
                        simulate.sender_of(SEED, index),
                        simulate.recipients_of(SEED, index),
                        simulate.content_of(SEED, index),
                        message_id=simulate.message_id(SEED, index),
                        not_before_us=clock.now_us,
                    )
                    active.append(mid)
                    index += 1
                else:
                    active.rotate(-rng.randrange(len(active)))
                    if _step(queue, active[0], clock, positions, rng):
                        active.popleft()
                ops += 1
                if ops % SAVE_EVERY == 0:
                    queue.save_positions(positions)
        finally:
            queue.close()
    return written


def cached_queue(target_bytes: int) -> Path:
    return cache_dir("bench") / f"logqueue-{target_bytes}-v{DATA_VERSION}"


def _meta_path(queue: Path) -> Path:
    return queue.with_name(queue.name + ".json")


def generate(target_bytes: int) -> dict[str, Any]:
    """Write the queue next to the cache entry, then rename it into place; its metadata."""
    target = cached_queue(target_bytes)
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.perf_counter()
    written = write_queue(tmp, target_bytes)
    seconds = time.perf_counter() - started
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    meta = {
        "records": written.records,
        "segment_bytes": written.segment_bytes,
        "segments": written.segments,
        "generate_seconds": round(seconds, 3),
        "data_version": DATA_VERSION,
    }
    _meta_path(target).write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def ensure_queue(target_bytes: int) -> tuple[Path, dict[str, Any], bool]:
    """The cached queue directory (generated when missing), its metadata, and whether it was
    generated now."""
    queue = cached_queue(target_bytes)
    if queue.is_dir() and _meta_path(queue).exists():
        return queue, json.loads(_meta_path(queue).read_text()), False
    return queue, generate(target_bytes), True


# --- the subjects (children) -----------------------------------------------------------------


def segment_paths(queue: Path) -> list[Path]:
    return list(layout.segments(queue).values())


def measure_ours(queue: Path) -> dict[str, Any]:
    """The audit's per-segment reader: each file's Arrow batches (`columnar.segment_batches`;
    imported by `main` before the clock starts, and only for this subject, so that numpy's and
    pyarrow's memory shows in this subject's peak alone)."""
    from mqforensics.systems.logqueue import columnar

    note = columnar.kernel_note()
    if note is not None:  # the benchmark measures the fast path, never a silent fallback
        raise RuntimeError(note)
    records = size = problems = batches = 0
    shown = str(queue)
    for path in segment_paths(queue):
        seg = columnar.ColumnarSegment.open(path)
        for batch in columnar.segment_batches(shown, seg):
            records += batch.num_rows
            batches += 1
        size += seg.size
        problems += len(seg.problems)
    return {"records": records, "bytes": size, "problems": problems, "batches": batches}


def measure_reference(queue: Path) -> dict[str, Any]:
    """`read_segment` (the reference) of every segment file: one Python object per record."""
    records = size = problems = 0
    for path in segment_paths(queue):
        parsed = read_segment(path)
        records += len(parsed.records)
        size += parsed.size
        problems += len(parsed.problems)
    return {"records": records, "bytes": size, "problems": problems}


def measure_spark(queue: Path) -> None:
    """The audit's Spark source over the queue, aggregated on the executors; reports itself
    (`measure.timed`) because the session is started before the clock."""
    from pyspark.sql import functions as F

    from mqforensics import systems
    from mqforensics.spark import session
    from mqforensics.systems.logqueue import fleet

    started = time.perf_counter()
    spark = session("mqforensics-bench-logqueue", ui=False, data_sources=systems.data_sources())
    spark.range(1).count()  # the JVM and a Python worker are up before the clock starts
    ready = time.perf_counter() - started

    def work() -> dict[str, Any]:
        frame = fleet.read_records(spark, [queue])
        row = frame.agg(F.count("*").alias("n"), F.sum("size").alias("b")).collect()[0]
        headers = len(segment_paths(queue)) * fmt.SEGMENT_HEADER_SIZE
        return {"records": row["n"], "bytes": row["b"] + headers, "session_seconds": ready}

    measure.timed(work)


def measure_raw(queue: Path) -> dict[str, Any]:
    """Every byte of every segment file read in 1 MiB chunks, counted."""
    size = 0
    for path in segment_paths(queue):
        with path.open("rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                size += len(chunk)
    return {"bytes": size, "files": len(segment_paths(queue))}


def measure_walk(queue: Path) -> dict[str, Any]:
    """Each file read whole and its records counted by their length fields alone."""
    records = size = 0
    header, skip = fmt.RECORD_HEADER_SIZE, fmt.SEGMENT_HEADER_SIZE
    for path in segment_paths(queue):
        data = path.read_bytes()
        size += len(data)
        pos, end = skip, len(data)
        while pos + header <= end:
            pos += header + _LENGTH.unpack_from(data, pos + 4)[0]
            records += 1
    return {"records": records, "bytes": size}


# --- the parent ------------------------------------------------------------------------------


SUBJECTS = {  # name → (subject, role)
    "ours": (
        "mqforensics read_segment columnar (C kernel, Arrow batches) of every segment",
        "ours",
    ),
    "ours-reference": ("mqforensics reference read_segment (pure Python) of every segment", "ours"),
    "ours-spark": ("mqforensics fleet.read_records (Spark) count+sum", "ours"),
    "baseline": ("raw read, 1 MiB chunks", "baseline"),
    "baseline-walk": ("Python walk of record lengths", "baseline"),
}
WORK = {
    "ours": measure_ours,
    "ours-reference": measure_reference,
    "baseline": measure_raw,
    "baseline-walk": measure_walk,
}


def one_segment(queue: Path, target: Path) -> int:
    """Write into the directory `target` one segment holding every record of `queue`'s segments
    in order after the first segment's header; its size."""
    target.mkdir(parents=True)
    paths = segment_paths(queue)
    with (target / fmt.segment_name(1)).open("wb") as out:
        for i, path in enumerate(paths):
            with path.open("rb") as handle:
                if i:
                    handle.seek(fmt.SEGMENT_HEADER_SIZE)
                shutil.copyfileobj(handle, out, CHUNK)
        return out.tell()


def run(
    target_bytes: int,
    workdir: Path,
    *,
    with_spark: bool = False,
    with_walk: bool = True,
    single: bool = False,
) -> list[measure.Measurement]:
    """Generate (or reuse) the queue and measure each subject in a fresh process; the
    generation metadata is in each measurement's ``output["data"]``. Fails unless every
    subject read every segment byte and every counting subject every record. The queue is
    read in place, read-only; `workdir` is created and, with `single` (``--one-segment``),
    holds the one segment measured instead."""
    workdir.mkdir(parents=True, exist_ok=True)
    queue, meta, generated = ensure_queue(target_bytes)
    names = ["ours", "ours-reference", *(["ours-spark"] if with_spark else []), "baseline"]
    names += ["baseline-walk"] if with_walk else []
    label = f"{meta['segment_bytes'] / 1e6:,.0f} MB, {meta['records']:,} records"
    if single:
        target = Path(tempfile.mkdtemp(prefix="logqueue-one-segment-", dir=workdir))
        target.rmdir()
        try:
            size = one_segment(queue, target)
            meta = {**meta, "segment_bytes": size, "segments": 1}
            label = f"one segment of {size / 1e6:,.0f} MB, {meta['records']:,} records"
            return _measure_all(target, meta, generated, ["ours", "baseline"], label)
        finally:
            shutil.rmtree(target, ignore_errors=True)
    return _measure_all(queue, meta, generated, names, label)


def _measure_all(
    queue: Path, meta: dict[str, Any], generated: bool, names: list[str], label: str
) -> list[measure.Measurement]:
    results = []
    for name in names:
        subject, role = SUBJECTS[name]
        argv = ["-m", "bench.logqueue_segments", "measure", name, "--queue", str(queue)]
        m = measure.run_subject(BENCHMARK, subject, role, label, argv)
        m.output["data"] = {**meta, "generated_now": generated}
        results.append(m)
    sizes = {m.subject: m.output["bytes"] for m in results}
    counts = {m.subject: m.output["records"] for m in results if "records" in m.output}
    if set(sizes.values()) != {meta["segment_bytes"]}:
        raise AssertionError(f"bytes read differ: {sizes}, written {meta['segment_bytes']}")
    if set(counts.values()) != {meta["records"]}:
        raise AssertionError(f"record counts differ: {counts}, written {meta['records']}")
    problems = {m.subject: m.output["problems"] for m in results if "problems" in m.output}
    if len(set(problems.values())) != 1:
        raise AssertionError(f"problem counts differ: {problems}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser, child, parent = measure.command_line(
        "logqueue_segments", __doc__, SUBJECTS, "the queue"
    )
    child.add_argument("--queue", type=Path, required=True)
    parent.add_argument("--size", type=int, default=1 << 30, help="target segment bytes")
    parent.add_argument("--spark", action="store_true", help="also measure the Spark path")
    parent.add_argument(
        "--one-segment", action="store_true", help="ours and baseline on one segment of --size"
    )
    args = parser.parse_args(argv)
    if args.command == "run":
        return measure.print_all(
            run(args.size, args.workdir, with_spark=args.spark, single=args.one_segment)
        )
    if args.subject == "ours":  # imported and the kernel loaded (built once) before the clock
        from mqforensics.systems.logqueue import columnar

        columnar.kernel_note()
    if args.subject == "ours-spark":
        measure_spark(args.queue)  # starts Spark first, then times only the read
    else:
        work = WORK[args.subject]
        measure.timed(lambda: work(args.queue))
    return 0


if __name__ == "__main__":
    sys.exit(main())
