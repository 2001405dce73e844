"""The twoskip reader at the speed of the format: a C kernel (`twoskip_kernel.c`) scans the
records into flat numpy arrays and walks level 0 in key order; keys, values and `Record`s are
cut from the file only when a caller iterates them, a batch at a time.

`read` gives what `twoskip.read` (the reference) gives: the same header, problems, live records,
history and `complete`. The kernel takes a record only when the reference would take it without a
problem; at anything else (a CRC mismatch, a truncated or unknown record, a bad pointer, keys out
of order, a file shorter than its header says) the whole file goes to the reference, which says
what is wrong and where. Without the kernel (no compiler, ``MQF_NATIVE=off``) it is the
reference too.

A path is mapped read-only (`mmap`) rather than read: the scan, the walk, the key-order check
and every iteration release the pages they are done with (``MADV_DONTNEED``), so the resident
part of the file stays within `columns.WINDOW` bytes; the columns take about 35 bytes a record,
and a large file keeps them in temporary files released the same way (`Buffer.spill_if_large`),
so memory does not grow with the file. A history past the last repack is replayed over keys
(`_replay`), which does hold every key.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import mmap
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mqforensics import native
from mqforensics.systems.cyrus import columns, twoskip
from mqforensics.systems.cyrus.columns import (
    Buffer,
    RecordsView,
    Rows,
    Spans,
)
from mqforensics.systems.cyrus.columns import FastFile as FastTwoskipFile
from mqforensics.systems.cyrus.columns import address as _addr
from mqforensics.systems.cyrus.problems import Problem
from mqforensics.systems.cyrus.twoskip import HEADER_SIZE, MAGIC, MAXLEVEL, Record, TwoskipFile

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
KERNEL = native.Kernel(
    "cyrus_twoskip",
    (Path(__file__).resolve().parent / "twoskip_kernel.c",),
    {
        "mqf_twoskip_scan": (_I64, [_PTR, _I64, _I64, _I64, _I64, *[_PTR] * 9]),
        "mqf_twoskip_walk": (
            _I64,
            [_PTR, _PTR, _PTR, _I64, ctypes.c_uint64, _PTR, _PTR, _PTR, _I64],
        ),
        "mqf_twoskip_ordered": (_I64, [_PTR, *[_PTR] * 5, _I64, _I64, _I64, _PTR]),
        "mqf_twoskip_spans": (_I64, [*[_PTR] * 6, _I64, _I64, _I64, _I64, _PTR, _PTR, _PTR]),
    },
)

# The kernel's type codes (low bits of `type`) and its flags for 64-bit length fields.
TYPE_NAMES = ("", "DUMMY", "RECORD", "DELETE", "COMMIT")
DUMMY, RECORD, DELETE, COMMIT = 1, 2, 3, 4
EXT_KEY, EXT_VALUE = 0x40, 0x80
_OK, _ANOMALY, _FULL = 0, 1, 2
_POINTERS = [struct.Struct(f">{n}Q") for n in range(1, MAXLEVEL + 2)]  # by level
MIN_RECORD = 24  # a level-0 record with an empty key and value: head, one pointer, two CRCs

WALK_STEPS = 1 << 20  # records walked between two releases of the pages touched
SPARE = 1024  # room for records beyond the header's count before the columns grow


class _Scan:
    """The records in file order as columns: offset, type code (with EXT flags), level, key and
    value lengths."""

    def __init__(
        self, off: np.ndarray, type_: np.ndarray, level: np.ndarray, klen: np.ndarray,
        vlen: np.ndarray,
    ) -> None:  # fmt: skip
        self.off, self.type, self.level, self.klen, self.vlen = off, type_, level, klen, vlen

    def __len__(self) -> int:
        return len(self.off)


_COLUMNS = (np.int64, np.uint8, np.uint8, np.uint32, np.uint32, np.uint64)


def _columns(buffer: Buffer, cap: int) -> tuple[np.ndarray, ...]:
    """Room for `cap` records: offset, type, level, key and value lengths, successor."""
    return tuple(buffer.column(cap, dtype) for dtype in _COLUMNS)


class _Tally:
    """What the scan counted: records, DUMMYs, RECORDs, DELETEs, and at the last COMMIT the
    RECORDs, the DELETEs and the records up to it."""

    def __init__(self) -> None:
        self.values = np.zeros(7, np.int64)

    def __getattr__(self, name: str) -> int:
        fields = ("count", "dummies", "records", "deletes", "committed_records",
                  "committed_deletes", "committed_below")  # fmt: skip
        if name not in fields:
            raise AttributeError(name)
        return int(self.values[fields.index(name)])


def _scan(
    lib: Any, buffer: Buffer, end: int, expected: int
) -> tuple[_Scan, np.ndarray, _Tally] | None:
    """Every record from offset 64 to `end` with its level-0 successor, a window of the file at
    a time; None when the reference would report a problem. Room is made for the `expected`
    records (the header's count) and more is added only when a file holds more; spilled
    columns get room for the most records the file can hold (pages never written cost
    nothing)."""
    most = (end - twoskip.DUMMY_OFFSET) // MIN_RECORD + 1
    cap = most if buffer.spill else min(most, max(expected, 0) + SPARE)
    chunks: list[tuple[np.ndarray, ...]] = []
    cols, filled = _columns(buffer, cap), 0
    tally = _Tally()
    at = twoskip.DUMMY_OFFSET
    next_at, status = ctypes.c_int64(), ctypes.c_int32()
    while at < end:
        if filled == len(cols[0]):
            chunks.append(cols)
            cols, filled = _columns(buffer, max(cap // 2, 1 << 16)), 0
        n = lib.mqf_twoskip_scan(
            buffer.address, end, at, min(end, at + columns.WINDOW), len(cols[0]) - filled,
            *(_addr(c) + filled * c.itemsize for c in cols), _addr(tally.values),
            ctypes.byref(next_at), ctypes.byref(status),
        )  # fmt: skip
        buffer.release()
        if status.value == _ANOMALY:
            return None
        filled += n
        at = next_at.value
    chunks.append(tuple(c[:filled] for c in cols))
    merged = chunks[0]
    if len(chunks) > 1:
        merged = tuple(np.concatenate(c) for c in zip(*chunks, strict=True))
    if not len(merged[0]):
        return None
    return _Scan(*merged[:5]), merged[5], tally


def _walk(
    lib: Any, buffer: Buffer, scan: _Scan, successor: np.ndarray, end: int
) -> tuple[np.ndarray, int] | None:
    """The live records' indices in key order and the highest of them; None when the walk or
    the key order is not what a clean file gives (the reference then says what). Both passes
    pause every `WALK_STEPS` records to release the pages they touched."""
    n = len(scan)
    seen = buffer.column(n, np.uint8)
    order = buffer.column(n, np.int64)
    state = np.array([0, 0, -1], np.int64)
    done = 1
    while done == 1:
        done = lib.mqf_twoskip_walk(
            _addr(scan.off), _addr(scan.type), _addr(successor), n, end, _addr(seen),
            _addr(order), _addr(state), WALK_STEPS,
        )  # fmt: skip
        buffer.release()
    if done < 0:
        return None
    count = int(state[1])
    order = order[:count]
    at, stopped = 1, ctypes.c_int64()
    while at < count:
        bad = lib.mqf_twoskip_ordered(
            buffer.address, _addr(scan.off), _addr(scan.type), _addr(scan.level),
            _addr(scan.klen), _addr(order), at, count, columns.WINDOW, ctypes.byref(stopped),
        )  # fmt: skip
        buffer.release()
        if bad >= 0:
            return None
        at = stopped.value
    return order, int(state[2])


class _Rows(Rows):
    """Records of the scan: `index` gives which, in which order (None: all, in file order)."""

    def __init__(
        self, lib: Any, buffer: Buffer, scan: _Scan, index: np.ndarray | None,
        deleted: dict[int, bytes] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(buffer, len(scan) if index is None else len(index))
        self.lib, self.scan, self.index = lib, scan, index
        self.deleted = deleted or {}  # a history's committed DELETEs: row -> the key removed

    def rows(self, start: int, stop: int) -> np.ndarray:
        if self.index is None:
            return np.arange(start, stop, dtype=np.int64)
        return self.index[start:stop]

    def spans(self, start: int = 0, stop: int | None = None) -> Iterator[Spans]:
        """A batch spans at most `columns.WINDOW` bytes of the file (the kernel counts)."""
        stop = len(self) if stop is None else stop
        scan, lib = self.scan, self.lib
        key, mid, end = (np.empty(columns.BATCH, np.int64) for _ in range(3))
        index = None if self.index is None else _addr(self.index)
        at = start
        while at < stop:
            n = lib.mqf_twoskip_spans(
                _addr(scan.off), _addr(scan.type), _addr(scan.level), _addr(scan.klen),
                _addr(scan.vlen), index, at, stop, columns.WINDOW, columns.BATCH, _addr(key),
                _addr(mid), _addr(end),
            )  # fmt: skip
            mids = mid[:n].tolist()  # a key ends where its value starts
            yield at, key[:n].tolist(), mids, mids, end[:n].tolist()
            at += n
            self.buffer.release()

    def records(self, spans: Spans, committed_below: int) -> list[Record]:
        start, keys, mids, _, ends = spans
        scan, data = self.scan, self.buffer.data
        rows = self.rows(start, start + len(keys))
        offs = scan.off[rows].tolist()
        types = [TYPE_NAMES[code & 15] for code in scan.type[rows].tolist()]
        levels = scan.level[rows].tolist()
        committed = [True] * max(0, min(len(keys), committed_below - start))
        committed += [False] * (len(keys) - len(committed))
        new, pointers = tuple.__new__, _POINTERS  # a Record without the named tuple's __new__
        out = [
            new(Record, (
                off, kind, level, data[k:m], data[m:e],
                pointers[level].unpack_from(data, k - 8 - 8 * (level + 1)),
                k + ((e - k + 7) & ~7) - off, done,
            ))
            for off, kind, level, k, m, e, done in zip(
                offs, types, levels, keys, mids, ends, committed, strict=True
            )
        ]  # fmt: skip
        if self.deleted:
            for i, row in enumerate(rows.tolist()):
                if row in self.deleted:
                    out[i] = out[i]._replace(key=self.deleted[row], value=b"")
        return out


def kernel_note() -> str | None:
    """None when the kernel is in use, else why the reference reads every twoskip file."""
    return native.note(KERNEL, "twoskip files read by the reference reader")


def read(
    source: bytes | str | Path | mmap.mmap, *, history: bool = False, name: str | None = None
) -> TwoskipFile:
    """`twoskip.read` through the kernel when it loads, else the reference itself."""
    return columns.read_through(KERNEL, _read, twoskip.read, source, history, name)


def _read(lib: Any, buffer: Buffer, label: str, history: bool) -> TwoskipFile | None:
    """The reference's `_read` over the kernel's columns; None where it would report more than
    the header's problems, a missing COMMIT or a count mismatch (the reference then reads)."""
    data = buffer.data
    if len(data) < HEADER_SIZE or data[:20] != MAGIC:
        return None
    problems: list[Problem] = []
    header = twoskip._header(data, label, problems)  # type: ignore[arg-type]
    if header is None or not HEADER_SIZE <= header.current_size <= len(data):
        return None
    end = header.current_size
    buffer.spill_if_large(header.num_records)
    scanned = _scan(lib, buffer, end, header.num_records)
    if scanned is None:
        return None
    scan, successor, tally = scanned
    del scanned  # the successors are needed by the walk only
    walked = _walk(lib, buffer, scan, successor, end)
    del successor
    if walked is None:
        return None
    order, highest = walked
    n = len(scan)
    if scan.type[n - 1] & 15 != COMMIT:
        problems.append(
            Problem("uncommitted", int(scan.off[n - 1]), "records after the last COMMIT")
        )
    quiet = {"dirty_header", "past_committed_size"}
    if len(order) != header.num_records and all(p.kind in quiet for p in problems):
        problems.append(
            Problem(
                "count_mismatch", 32, f"{len(order)} live records, header says {header.num_records}"
            )
        )
    live = RecordsView(_Rows(lib, buffer, scan, order))
    past: Sequence[Record] = []
    if history:
        past = _history(lib, buffer, scan, (len(order), highest), tally, live, data, problems)
    return FastTwoskipFile(label, header, live, problems, past)


def _history(
    lib: Any, buffer: Buffer, scan: _Scan, walked: tuple[int, int], tally: _Tally,
    live: RecordsView, data: Any, problems: list[Problem],
) -> Sequence[Record]:  # fmt: skip
    """The records in file order with their commit state. When every committed RECORD is live
    and nothing committed is a DELETE (a repacked file), the reference's replay is the file
    order itself and reaches the live records; otherwise the reference replays `Record`s.
    `walked` is how many records are live and the highest index among them."""
    count, highest = walked
    below = tally.committed_below
    rows = _Rows(lib, buffer, scan, None)
    all_live = tally.committed_records == count and highest < below
    if below and tally.dummies == 1 and all_live and not tally.committed_deletes:
        return RecordsView(rows, below)
    if tally.dummies == 1 and scan.off[0] == twoskip.DUMMY_OFFSET:
        deleted, reached = _replay(lib, buffer, scan, below, live)
        if not problems and not reached:
            problems.append(
                Problem("history_unresolved", 0, "commit replay differs from live records")
            )
        # The DUMMY is committed even when no COMMIT follows it (the reference emits it as met).
        return RecordsView(_Rows(lib, buffer, scan, None, deleted), max(below, 1))
    past, state = twoskip._history(data, list(RecordsView(rows)), len(data))
    if not problems and state != {r.key: r.value for r in live}:
        problems.append(Problem("history_unresolved", 0, "commit replay differs from live records"))
    return past


def _replay(
    lib: Any, buffer: Buffer, scan: _Scan, below: int, live: RecordsView
) -> tuple[dict[int, bytes], bool]:
    """`twoskip._history`'s commit replay over the columns, holding keys and row numbers
    rather than `Record`s: the key each committed DELETE removed (by row), and whether the
    replay reaches the live records. With one DUMMY, first, the reference's output is the file
    order, so only the DELETEs' keys differ from the records themselves."""
    data = buffer.data
    state: dict[bytes, int] = {}  # key -> the row holding its value
    deleted: dict[int, bytes] = {}
    rows = _Rows(lib, buffer, scan, None)
    keys, resume = _base(scan, data, rows, below)
    state.update(zip(keys, range(1, len(keys) + 1), strict=True))
    for start, starts, ends, _, _ in rows.spans(resume, below):
        codes = (scan.type[start : start + len(starts)] & 15).tolist()
        for i, (code, k, e) in enumerate(zip(codes, starts, ends, strict=True)):
            row = start + i
            if code == RECORD:
                key = data[k:e]
                if key not in state:
                    bisect.insort(keys, key)
                state[key] = row
            elif code == DELETE:
                removed = b""
                if keys:
                    successor = _key_at_offset(scan, data, _first_pointer(scan, data, row))
                    at = bisect.bisect_left(keys, successor) - 1 if successor is not None else -1
                    at = at if successor is not None else len(keys) - 1
                    if at >= 0:
                        removed = keys.pop(at)
                        del state[removed]
                deleted[row] = removed
    return deleted, _reaches(state, live, data, scan, rows)


def _base(scan: _Scan, data: Any, rows: _Rows, below: int) -> tuple[list[bytes], int]:
    """The keys of the first transaction's records (rows 1 on), and the row the replay goes on
    from, when that transaction holds RECORDs only with keys ascending (a repacked file's
    base): replaying it inserts each key in turn at the end. Else no keys, and row 0."""
    codes = scan.type[:below] & 15
    commits = np.flatnonzero(codes == COMMIT)
    if not len(commits) or not (codes[1 : commits[0]] == RECORD).all():
        return [], 0
    keys: list[bytes] = []
    for _, starts, ends, _, _ in rows.spans(1, int(commits[0])):
        keys += [data[k:e] for k, e in zip(starts, ends, strict=True)]
    if any(a >= b for a, b in itertools.pairwise(keys)):
        return [], 0
    return keys, int(commits[0])


def _first_pointer(scan: _Scan, data: Any, row: int) -> int:
    t = int(scan.type[row])
    at = int(scan.off[row]) + 8 + (8 if t & EXT_KEY else 0) + (8 if t & EXT_VALUE else 0)
    return int(_POINTERS[0].unpack_from(data, at)[0])


def _key_at_offset(scan: _Scan, data: Any, offset: int) -> bytes | None:
    """The key of the record at `offset` (any type), or None when no record starts there."""
    row = int(np.searchsorted(scan.off, offset))
    if row >= len(scan) or int(scan.off[row]) != offset:
        return None
    t, level = int(scan.type[row]), int(scan.level[row])
    ext = (8 if t & EXT_KEY else 0) + (8 if t & EXT_VALUE else 0)
    key = int(scan.off[row]) + 8 + ext + 8 * (level + 1) + 8
    return bytes(data[key : key + int(scan.klen[row])])


def _reaches(
    state: dict[bytes, int], live: RecordsView, data: Any, scan: _Scan, rows: _Rows
) -> bool:
    """Whether the replayed state holds exactly the live keys with their values (the same
    record, or another one whose value is equal)."""
    if len(state) != len(live):
        return False
    for start, starts, ends, values, value_ends in live.rows.spans():
        index = live.rows.rows(start, start + len(starts))  # type: ignore[attr-defined]
        for row, k, e, v, ve in zip(index.tolist(), starts, ends, values, value_ends, strict=True):
            held = state.get(data[k:e])
            if held is None:
                return False
            if held != row and _value(scan, data, held) != data[v:ve]:
                return False
    return True


def _value(scan: _Scan, data: Any, row: int) -> bytes:
    t, level = int(scan.type[row]), int(scan.level[row])
    ext = (8 if t & EXT_KEY else 0) + (8 if t & EXT_VALUE else 0)
    key = int(scan.off[row]) + 8 + ext + 8 * (level + 1) + 8
    value = key + int(scan.klen[row])
    return bytes(data[value : value + int(scan.vlen[row])])
