"""The segment reader's fast path: one segment's whole records as column batches, decoded by a
C kernel (``segment_kernel.c``) without one Python object per record.

`segment.read_segment` stays the reference and defines every answer. The kernel walks the run
of whole records of known types from a given offset (header, CRC and payload checked as
`format.READING_RULES` say) and writes their header fields to numpy arrays and each payload as
the JSON text ``json.dumps(values, sort_keys=True)`` gives. At the first offset where it finds
anything else it stops, and the reference's own `segment.read_step` reads that one step (a
`Problem` and where reading goes on, found by exactly the reference's code), then the kernel
resumes. So records, problems, offsets and sizes are the reference's by construction wherever
the kernel stops; the tests compare the two on every bundled segment and on fuzzed files.

Without the kernel (no C compiler, ``MQF_NATIVE=off``: `native.unavailable` says why) every
step is the reference's, with the same batches as the answer. A segment given by its path is
mapped read-only and its pages released as the walk passes them (`ColumnarSegment`), so memory is
about `WINDOW` of the file and one batch (`BATCH_ROWS` records) at a time, whatever the
segment's size; the reference's steps read the same mapping, so offsets are the file's.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa

from mqforensics import native
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import Problem, Record, read_head, read_step

__all__ = [
    "BATCH_ROWS",
    "KERNEL",
    "RECORDS_ARROW",
    "WINDOW",
    "ColumnarSegment",
    "Columns",
    "columns_batch",
    "kernel_note",
    "map_file",
    "segment_batches",
]

BATCH_ROWS = 1 << 16
WINDOW = 16 << 20  # bytes of a mapped segment the kernel walks at most between two releases
BATCH_JSON = 8 << 20  # bytes of JSON text per batch (more for one record that needs more)
MAX_FIELDS = 8  # as segment_kernel.c
UUID_TEXT = 36
_KINDS = {"u8": 1, "u16": 2, "u32": 3, "u64": 4, "str": 5, "strs": 6, "outcomes": 7,
          "positions": 8}  # fmt: skip
_END, _FULL, _STOP, _PAUSE = 0, 1, 2, 3
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
KERNEL = native.Kernel(
    "logqueue_segment",
    (Path(__file__).resolve().parent / "segment_kernel.c",),
    # buffer, its length; the record types' six tables; batch rows; nine batch buffers; their
    # JSON space; the state (offset, rows, status, emit, space needed, offset to pause at).
    {"lq_scan": (None, [_P, _I64, *[_P] * 6, _I64, *[_P] * 9, _I64, _P])},
)


# `fleet.RECORDS` as the Arrow schema of the batches its `read()` yields (Spark's own mapping).
RECORDS_ARROW = pa.schema(
    [
        ("queue", pa.string()), ("file", pa.string()), ("segment", pa.int32()),
        ("offset", pa.int64()), ("type", pa.int32()), ("type_name", pa.string()),
        ("time_us", pa.int64()), ("message_id", pa.string()), ("ref_segment", pa.int32()),
        ("ref_offset", pa.int64()), ("size", pa.int64()), ("values", pa.string()),
    ]
)  # fmt: skip


def fits(value: int | None, limit: int) -> int | None:
    """`value` when a column holding up to `limit` holds it, else None (null)."""
    return value if value is not None and 0 <= value <= limit else None


def _spec() -> tuple[np.ndarray, ...]:
    """`format.RECORD_TYPES` as the kernel's tables: fields per type code (0xFF: unknown),
    their kinds in payload order, their order by key, and each key's JSON text."""
    nfields = np.full(256, 0xFF, dtype=np.uint8)
    kinds = np.zeros(256 * MAX_FIELDS, dtype=np.uint8)
    order = np.zeros(256 * MAX_FIELDS, dtype=np.uint8)
    key_start = np.zeros(256 * MAX_FIELDS, dtype=np.int32)
    key_len = np.zeros(256 * MAX_FIELDS, dtype=np.int32)
    keys = bytearray()
    for code, rtype in fmt.RECORD_TYPES.items():
        fields = rtype.fields
        assert len(fields) <= MAX_FIELDS
        nfields[code] = len(fields)
        for i, f in enumerate(fields):
            kinds[code * MAX_FIELDS + i] = _KINDS[f.kind]
        for j, i in enumerate(sorted(range(len(fields)), key=lambda i: fields[i].name)):
            text = ("{" if j == 0 else ", ") + json.dumps(fields[i].name) + ": "
            order[code * MAX_FIELDS + j] = i
            key_start[code * MAX_FIELDS + j] = len(keys)
            key_len[code * MAX_FIELDS + j] = len(text)
            keys += text.encode("ascii")
    return nfields, kinds, order, key_start, key_len, np.frombuffer(bytes(keys) or b"\0", np.uint8)


_SPEC = _spec()
_SPEC_POINTERS = tuple(a.ctypes.data for a in _SPEC)


def kernel_note() -> str | None:
    """None when the kernel is in use, else why the reference reads every record."""
    return native.note(KERNEL, "log-queue segments read by the reference")


@dataclass
class Columns:
    """One batch of whole records of one segment: header fields as numpy arrays (`time_us` and
    `ref_segment` unsigned, as the format stores them), the message id as UUID text and the
    payload as JSON text."""

    offset: np.ndarray  # int64
    type: np.ndarray  # int32
    time_us: np.ndarray  # uint64
    ref_segment: np.ndarray  # uint32
    ref_offset: np.ndarray  # int64
    size: np.ndarray  # int64
    message_id: pa.StringArray
    values: pa.StringArray

    def __len__(self) -> int:
        return len(self.offset)


class _Batch:
    """The buffers one batch is written into, by the kernel or by `put`."""

    def __init__(self, rows: int, json_bytes: int) -> None:
        self.cap, self.rows = rows, 0
        self.offset = np.empty(rows, np.int64)
        self.type = np.empty(rows, np.int32)
        self.time_us = np.empty(rows, np.uint64)
        self.ref_segment = np.empty(rows, np.uint32)
        self.ref_offset = np.empty(rows, np.int64)
        self.size = np.empty(rows, np.int64)
        self.mid = np.empty(rows * UUID_TEXT, np.uint8)
        self.json_offsets = np.empty(rows + 1, np.int32)
        self.json_offsets[0] = 0
        self.json = np.empty(json_bytes, np.uint8)

    def pointers(self) -> tuple[int, ...]:
        arrays = (self.offset, self.type, self.time_us, self.ref_segment, self.ref_offset,
                  self.size, self.mid, self.json_offsets, self.json)  # fmt: skip
        return tuple(a.ctypes.data for a in arrays)

    def room(self, json_bytes: int) -> bool:
        used = int(self.json_offsets[self.rows])
        return self.rows < self.cap and used + json_bytes <= len(self.json)

    def put(self, record: Record, text: bytes) -> None:
        """One record the reference read (`room` for `text` checked)."""
        i, used = self.rows, int(self.json_offsets[self.rows])
        self.offset[i], self.type[i], self.time_us[i] = record.offset, record.type, record.time_us
        self.ref_segment[i], self.ref_offset[i] = record.ref
        self.size[i] = record.size
        self.mid[i * UUID_TEXT : (i + 1) * UUID_TEXT] = np.frombuffer(
            str(record.message_id).encode("ascii"), np.uint8
        )
        self.json[used : used + len(text)] = np.frombuffer(text, np.uint8)
        self.json_offsets[i + 1] = used + len(text)
        self.rows += 1

    def columns(self) -> Columns:
        n = self.rows
        uuid_offsets = np.arange(0, UUID_TEXT * (n + 1), UUID_TEXT, dtype=np.int32)
        mid = pa.StringArray.from_buffers(
            n, pa.py_buffer(uuid_offsets), pa.py_buffer(self.mid[: UUID_TEXT * n])
        )
        values = pa.StringArray.from_buffers(
            n,
            pa.py_buffer(self.json_offsets[: n + 1]),
            pa.py_buffer(self.json[: int(self.json_offsets[n])]),
        )
        return Columns(self.offset[:n], self.type[:n], self.time_us[:n], self.ref_segment[:n],
                       self.ref_offset[:n], self.size[:n], mid, values)  # fmt: skip


class ColumnarSegment:
    """One segment read the fast way: `batches` (or `count`) walks it once; `records` and
    `problems` are complete once the walk is done. `source` and `size` as in
    `segment.SegmentFile`; `number` is the segment number its records' positions carry.

    `open` maps a path read-only (never reads it whole); the constructor takes the bytes (or a
    mapping) and the name. The kernel runs at most `window` bytes ahead of where it starts, and
    a mapped segment's pages are released (``MADV_DONTNEED``) as the walk passes them, every
    quarter window, so what is resident of the file stays within about 1.25 windows plus one
    record and the step the reference is reading (its resynchronisation may look ahead through
    a damaged stretch): memory does not grow with the segment. The mapping covers the file's
    size when opened (bytes appended later are not read, as with a read); the file must not be
    truncated while it is read (SIGBUS): segments are only ever appended to and unlinked, and an
    unlinked file stays mapped."""

    def __init__(
        self,
        data: bytes | bytearray | memoryview | mmap.mmap,
        source: str = "<bytes>",
        *,
        window: int = WINDOW,
    ) -> None:
        self.data = data if isinstance(data, mmap.mmap) else bytes(data)
        self.source = source
        self.window = max(mmap.PAGESIZE, window // mmap.PAGESIZE * mmap.PAGESIZE)
        self.records = 0
        self._released = 0
        self.header, self.number, self.problems = read_head(_as_read(self.data), self.source)

    @classmethod
    def open(
        cls,
        path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
        source: str | None = None,
        *,
        window: int = WINDOW,
    ) -> ColumnarSegment:
        """The segment file at `path` (bytes or text: `filenames`), mapped read-only; `source`
        defaults to the path as text (undecodable bytes as surrogates, as `os.fsdecode`)."""
        label = os.fsdecode(path) if source is None else source
        return cls(map_file(path), label, window=window)

    def __repr__(self) -> str:
        return f"ColumnarSegment(source={self.source!r}, size={self.size})"

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def mapped(self) -> bool:
        """Whether the bytes are a mapping of the file (not bytes in memory)."""
        return isinstance(self.data, mmap.mmap)

    def release(self, upto: int) -> None:
        """Drop the resident pages of the mapping below `upto` (whole pages, and the last one at
        the end; read again from the page cache if touched later). Nothing for bytes."""
        stop = self.size if upto >= self.size else upto // mmap.PAGESIZE * mmap.PAGESIZE
        if isinstance(self.data, mmap.mmap) and stop > self._released:
            self.data.madvise(mmap.MADV_DONTNEED, self._released, stop - self._released)
            self._released = stop

    def sha256(self) -> str:
        """The SHA-256 of the segment's bytes, a window at a time (pages released after each)."""
        digest = hashlib.sha256()
        with memoryview(self.data) as view:
            for start in range(0, len(view), self.window):
                digest.update(view[start : start + self.window])
                if isinstance(self.data, mmap.mmap):
                    stop = min(len(view), start + self.window)
                    self.data.madvise(mmap.MADV_DONTNEED, start, stop - start)
        return digest.hexdigest()

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[Columns]:
        """The whole records, at most `rows` per batch, in file order."""
        return self._walk(rows, emit=True)

    def count(self) -> ColumnarSegment:
        """Walk without building columns (records counted, problems found); self."""
        for _ in self._walk(1, emit=False):
            pass
        return self

    def _walk(self, rows: int, *, emit: bool) -> Iterator[Columns]:
        data, end = self.data, len(self.data)
        lib = native.load(KERNEL)
        # The kernel reads the bytes or the mapping in place: `buffer` only lends its address.
        buffer = np.frombuffer(data, np.uint8) if end else np.zeros(1, np.uint8)
        address = buffer.ctypes.data
        json_bytes = min(BATCH_JSON, 8 * end + 1024)
        # No more records than whole headers fit in the file: no larger arrays than that.
        rows = max(1, min(rows, end // fmt.RECORD_HEADER_SIZE + 1))
        batch = _Batch(rows, json_bytes) if emit else None
        state = np.zeros(6, np.int64)
        nothing = (None,) * 9
        pos = fmt.SEGMENT_HEADER_SIZE
        while pos < end:
            if pos - self._released >= self.window // 4:
                self.release(pos)
            status = _STOP
            if lib is not None:
                before = batch.rows if batch is not None else 0
                state[:] = (pos, before, 0, int(emit), 0, pos + self.window)
                buffers = batch.pointers() if batch is not None else nothing
                cap = json_bytes if batch is not None else 0
                lib.lq_scan(address, end, *_SPEC_POINTERS, rows, *buffers, cap, state.ctypes.data)
                pos, got, status = int(state[0]), int(state[1]), int(state[2])
                self.records += got - before
                if batch is not None:
                    batch.rows = got
            if status == _END:
                break
            if status == _PAUSE:
                continue
            if status == _FULL:
                assert batch is not None
                if batch.rows:
                    yield batch.columns()
                json_bytes = max(json_bytes, int(state[4]))
                batch = _Batch(rows, json_bytes)
                continue
            found, pos = read_step(_as_read(data), pos, self.number)
            if isinstance(found, Problem):
                self.problems.append(found)
                continue
            self.records += 1
            if batch is not None:
                text = json.dumps(found.values, sort_keys=True).encode("ascii")
                if not batch.room(len(text)):
                    if batch.rows:
                        yield batch.columns()
                    json_bytes = max(json_bytes, len(text))
                    batch = _Batch(rows, json_bytes)
                batch.put(found, text)
        del buffer
        self.release(end)
        if batch is not None and batch.rows:
            yield batch.columns()


def _as_read(data: bytes | mmap.mmap) -> bytes:
    """`data` for the reference's functions: a mapping offers every operation they use (length,
    slices, `find`, `struct.unpack_from`, `zlib.crc32` of a slice) on the same offsets."""
    return cast(bytes, data)


def map_file(path: str | os.PathLike[str] | os.PathLike[bytes] | bytes) -> bytes | mmap.mmap:
    """`path` mapped read-only; an empty file (which cannot be mapped) as empty bytes."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


# --- the records source's Arrow batches ----------------------------------------------------------


# Built from buffers, never with `pa.array`, which imports pandas (its memory would be the
# reader's in every process that runs it).
def _text(items: list[bytes]) -> pa.StringArray:
    offsets = np.cumsum([0, *map(len, items)], dtype=np.int32)
    return pa.StringArray.from_buffers(
        len(items), pa.py_buffer(offsets), pa.py_buffer(b"".join(items))
    )


_TYPE_NAMES = _text([fmt.type_name(code).encode("ascii") for code in range(256)])


def _same_text(text: str, rows: int) -> pa.Array:
    raw = text.encode("utf-8")
    offsets = np.arange(rows + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(raw * rows))


def _numbers(values: np.ndarray, kind: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    """`values` (contiguous, of `kind`'s width) as an Arrow array, null where `null` says."""
    validity = None
    if null is not None and null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(values)])


def columns_batch(queue: str, name: str, segment: int | None, cols: Columns) -> pa.RecordBatch:
    """One `RECORDS_ARROW` batch of one segment's `Columns`: `queue` and `name` (the file's) in
    every row. A ``u64`` time above 2^63-1 or a ``u32`` segment above 2^31-1 is null."""
    n = len(cols)
    number = fits(segment, INT32_MAX)
    kind = pa.int32()
    types = _numbers(cols.type, kind)
    arrays = [
        _same_text(queue, n),
        _same_text(name, n),
        pa.nulls(n, kind) if number is None else _numbers(np.full(n, number, np.int32), kind),
        _numbers(cols.offset, pa.int64()),
        types,
        _TYPE_NAMES.take(types),
        _numbers(cols.time_us.view(np.int64), pa.int64(), cols.time_us > INT64_MAX),
        cols.message_id,
        _numbers(cols.ref_segment.view(np.int32), kind, cols.ref_segment > INT32_MAX),
        _numbers(cols.ref_offset, pa.int64()),
        _numbers(cols.size, pa.int64()),
        cols.values,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=RECORDS_ARROW)


def segment_batches(
    queue: str, seg: ColumnarSegment, rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The `RECORDS` rows of one segment read by the columnar reader, as Arrow batches (its
    `problems` are complete once they are all taken)."""
    name = Path(seg.source).name
    for cols in seg.batches(rows):
        yield columns_batch(queue, name, seg.number, cols)
