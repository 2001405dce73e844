"""The skiplist reader through a C kernel (`skiplist_kernel.c`): the records scanned into numpy
columns and the level-0 walk in key order; keys, values and `Record`s are cut from the file only
when iterated (`columns`).

`read` gives what `skiplist.read` (the reference) gives. The kernel takes a file only when the
reference would report nothing past the header: at a truncated or unknown record, a bad
pointer or keys out of order the whole file goes to the reference, which says what and where.
Without the kernel (no compiler, ``MQF_NATIVE=off``) it is the reference.
"""

from __future__ import annotations

import ctypes
import mmap
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mqforensics import native
from mqforensics.systems.cyrus import columns, skiplist
from mqforensics.systems.cyrus.columns import (
    Buffer,
    RecordsView,
    Rows,
    Spans,
)
from mqforensics.systems.cyrus.columns import FastFile as FastSkiplistFile
from mqforensics.systems.cyrus.columns import address as _addr
from mqforensics.systems.cyrus.problems import Problem
from mqforensics.systems.cyrus.skiplist import DUMMY_OFFSET, HEADER_SIZE, MAGIC
from mqforensics.systems.cyrus.twoskip import Record, TwoskipFile

__all__ = ["KERNEL", "FastSkiplistFile", "kernel_note", "read"]

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
KERNEL = native.Kernel(
    "cyrus_skiplist",
    (Path(__file__).resolve().parent / "skiplist_kernel.c",),
    {
        "mqf_skiplist_scan": (_I64, [_PTR, _I64, _I64, _I64, _I64, *[_PTR] * 8]),
        "mqf_skiplist_walk": (_I64, [_PTR, *[_PTR] * 5, _I64, _PTR, _PTR]),
    },
)

# The kernel's type codes.
TYPE_NAMES = ("", "DUMMY", "INORDER", "ADD", "DELETE", "COMMIT")
DUMMY, INORDER, ADD, DELETE, COMMIT = 1, 2, 3, 4, 5
_ANOMALY = 1
MIN_RECORD = 4  # a COMMIT
_COLUMNS = (np.int64, np.uint8, np.uint8, np.uint32, np.uint32, np.uint32)
_POINTERS = [struct.Struct(f">{n}I") for n in range(21)]  # by count


class _Scan:
    """The records in file order: offset, type code, pointer count, key and value lengths and
    first pointer."""

    def __init__(self, cols: tuple[np.ndarray, ...]) -> None:
        self.off, self.type, self.nptr, self.klen, self.vlen, self.ptr0 = cols

    def __len__(self) -> int:
        return len(self.off)


def _scan(lib: Any, buffer: Buffer) -> _Scan | None:
    """Every record from offset 48 to the end of the file, a window at a time; None when the
    reference would report a problem."""
    end = len(buffer.data)
    chunks: list[tuple[np.ndarray, ...]] = []
    at = DUMMY_OFFSET
    next_at, status = ctypes.c_int64(), ctypes.c_int32()
    while at < end:
        limit = min(end, at + columns.WINDOW)
        cap = min((limit - at) // MIN_RECORD + 1, 1 << 20)
        cols = tuple(np.empty(cap, dtype) for dtype in _COLUMNS)
        n = lib.mqf_skiplist_scan(
            buffer.address, end, at, limit, cap, *(_addr(c) for c in cols),
            ctypes.byref(next_at), ctypes.byref(status),
        )  # fmt: skip
        buffer.release()
        if status.value == _ANOMALY:
            return None
        chunks.append(tuple(c[:n].copy() for c in cols))
        at = next_at.value
    if not chunks:
        return None
    merged = chunks[0]
    if len(chunks) > 1:
        merged = tuple(np.concatenate(c) for c in zip(*chunks, strict=True))
    return _Scan(merged)


class _Rows(Rows):
    """Records of the scan in `index` order (None: all, in file order); in a history each
    DELETE carries the key of the record its pointer names (`deleted`: that record's index)."""

    def __init__(
        self, buffer: Buffer, scan: _Scan, index: np.ndarray | None,
        deleted: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        super().__init__(buffer, len(scan) if index is None else len(index))
        self.scan, self.index, self.deleted = scan, index, deleted

    def _rows(self, start: int, stop: int) -> np.ndarray:
        if self.index is None:
            return np.arange(start, stop, dtype=np.int64)
        return self.index[start:stop]

    def spans(self, start: int = 0, stop: int | None = None) -> Iterator[Spans]:
        stop = len(self) if stop is None else stop
        scan = self.scan
        for at in range(start, stop, columns.BATCH):
            rows = self._rows(at, min(stop, at + columns.BATCH))
            key = scan.off[rows] + 8
            klen = scan.klen[rows].astype(np.int64)
            value = key + (klen + 3) // 4 * 4 + 4
            yield (
                at, key.tolist(), (key + klen).tolist(), value.tolist(),
                (value + scan.vlen[rows]).tolist(),
            )  # fmt: skip
            self.buffer.release()

    def records(self, spans: Spans, committed_below: int) -> list[Record]:
        start, keys, key_ends, values, value_ends = spans
        scan, data = self.scan, self.buffer.data
        rows = self._rows(start, start + len(keys))
        offs = scan.off[rows].tolist()
        codes = scan.type[rows].tolist()
        counts = scan.nptr[rows].tolist()
        out = []
        for row, off, code, count, k, ke, v, ve in zip(
            rows.tolist(), offs, codes, counts, keys, key_ends, values, value_ends, strict=True
        ):
            kind = TYPE_NAMES[code]
            if code == COMMIT:
                out.append(Record(off, kind, 0, b"", b"", (), 4))
            elif code == DELETE:
                pointers = (int(scan.ptr0[row]),)
                key = b""
                if self.deleted is not None and (target := int(self.deleted[row])) >= 0:
                    at = int(scan.off[target]) + 8
                    key = data[at : at + int(scan.klen[target])]
                out.append(Record(off, kind, 0, key, b"", pointers, 8))
            else:
                first = v + ((ve - v + 3) & ~3)
                pointers = _POINTERS[count].unpack_from(data, first)
                length = first + 4 * count + 4 - off
                out.append(Record(off, kind, count, data[k:ke], data[v:ve], pointers, length))
        return out


def kernel_note() -> str | None:
    """None when the kernel is in use, else why the reference reads every skiplist file."""
    return native.note(KERNEL, "skiplist files read by the reference reader")


def read(
    source: bytes | str | Path | mmap.mmap, *, history: bool = False, name: str | None = None
) -> TwoskipFile:
    """`skiplist.read` through the kernel when it loads, else the reference itself."""
    return columns.read_through(KERNEL, _read, skiplist.read, source, history, name)


def _read(lib: Any, buffer: Buffer, label: str, history: bool) -> TwoskipFile | None:
    """The reference's `read` over the kernel's columns; None where it would report more than
    the header's problems, a missing COMMIT or a count mismatch."""
    data = buffer.data
    if len(data) < HEADER_SIZE or data[: len(MAGIC)] != MAGIC:
        return None
    problems: list[Problem] = []
    header = skiplist._header(data, label, problems)  # type: ignore[arg-type]
    if header is None:
        return None
    scan = _scan(lib, buffer)
    if scan is None:
        return None
    n = len(scan)
    seen = np.zeros(n, np.uint8)
    order = np.empty(n, np.int64)
    count = lib.mqf_skiplist_walk(
        buffer.address, _addr(scan.off), _addr(scan.type), _addr(scan.nptr), _addr(scan.klen),
        _addr(scan.ptr0), n, _addr(seen), _addr(order),
    )  # fmt: skip
    buffer.release()
    if count < 0:
        return None
    order = order[:count]
    last = int(scan.off[n - 1])
    if last >= header.repack_size and scan.type[n - 1] != COMMIT:
        problems.append(Problem("uncommitted", last, "log records after the last COMMIT"))
    if count != header.num_records and not problems:
        problems.append(
            Problem("count_mismatch", 36, f"{count} live records, header says {header.num_records}")
        )
    live = RecordsView(_Rows(buffer, scan, order))
    past: Sequence[Record] = []
    if history:
        deleted = np.full(n, -1, np.int64)
        rows = np.flatnonzero(scan.type == DELETE)
        targets = np.searchsorted(scan.off, scan.ptr0[rows].astype(np.int64))
        found = targets < n
        found[found] = scan.off[targets[found]] == scan.ptr0[rows[found]]
        deleted[rows[found]] = targets[found]
        past = RecordsView(_Rows(buffer, scan, None, deleted))
    return FastSkiplistFile(label, header, live, problems, past)
