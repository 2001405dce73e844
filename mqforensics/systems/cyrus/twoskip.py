"""Read-only parser of Cyrus twoskip files (`lib/cyrusdb_twoskip.c`), e.g. `mailboxes.db`.

The file is read whole and never opened for writing. `read()` checks the header (magic,
version, header CRC, dirty flag, committed size), scans every record from offset 64 with its head
and tail CRC, and walks the live records in key order from the DUMMY record along level 0
(`_getloc`: two slots, the higher one below `current_size` wins; a pointer landing on a DELETE is
followed through it). Corrupt data never raises: it is listed in `problems` and makes
`complete` false. Only a file that is not twoskip at all raises `InputError`.

With ``history=True`` the result also holds every physical record below `current_size` in file
order (superseded and deleted records survive until the next repack), and each committed DELETE
is given the key it removed (§8.4: the greatest live key below its successor's key).
"""

from __future__ import annotations

import bisect
import gc
import struct
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mqforensics.errors import InputError
from mqforensics.systems.cyrus.problems import Problem, load

MAGIC = b"\xa1\x02\x8b\x0dtwoskip file\x00\x00\x00\x00"
SKIPLIST_MAGIC = b"\xa1\x02\x8b\x0dskiplist file\x00\x00\x00"
HEADER_SIZE = 64
DUMMY_OFFSET = 64
MAXLEVEL = 31
BLANK = b" BLANK\x07\xa0"
DIRTY = 1

TYPES = {b"=": "DUMMY", b"+": "RECORD", b"-": "DELETE", b"$": "COMMIT"}
_HEAD = struct.Struct(">cBHI")  # type, level, key length, value length
_CRCS = struct.Struct(">II")  # head CRC, key/value CRC
_POINTERS = [struct.Struct(f">{n}Q") for n in range(1, MAXLEVEL + 2)]


@dataclass(frozen=True)
class Header:
    version: int
    generation: int
    num_records: int
    repack_size: int
    current_size: int
    flags: int
    crc: int

    @property
    def dirty(self) -> bool:
        return bool(self.flags & DIRTY)


class Record(NamedTuple):
    """One physical record; in history a DELETE's `key` is the key it removed (b"" if unknown).

    A named tuple: a 1M-record file makes a million of them, and a tuple is built in C.
    """

    offset: int
    type: str
    level: int
    key: bytes
    value: bytes
    pointers: tuple[int, ...]
    length: int
    committed: bool = True


@dataclass(frozen=True)
class TwoskipFile:
    """Live `records` in key order, every problem found, and whether nothing is missing."""

    source: str
    header: Header | None
    records: Sequence[Record]
    problems: list[Problem]
    history: Sequence[Record] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems

    def items(self) -> Sequence[tuple[bytes, bytes]]:
        with no_cycle_collection():
            return [(r.key, r.value) for r in self.records]


def _header(data: bytes, name: str, problems: list[Problem]) -> Header | None:
    magic = data[:20]
    if magic != MAGIC:
        if data.startswith(SKIPLIST_MAGIC):
            raise InputError(f"{name}: offset 0: a skiplist file, not twoskip")
        same = sum(a == b for a, b in zip(magic, MAGIC, strict=False))
        if len(magic) < 20 or same < 18:
            raise InputError(f"{name}: offset 0: not a twoskip file (bad magic)")
        problems.append(
            Problem("bad_magic", 0, f"magic {magic.hex()} differs in {20 - same} byte(s)")
        )
    if len(data) < HEADER_SIZE:
        problems.append(Problem("truncated", len(data), f"header needs {HEADER_SIZE} bytes"))
        return None
    (version,) = struct.unpack_from(">I", data, 20)
    gen, nrec, repack, cur = struct.unpack_from(">QQQQ", data, 24)
    flags, crc = struct.unpack_from(">II", data, 56)
    header = Header(version, gen, nrec, repack, cur, flags, crc)
    if zlib.crc32(data[:60]) != crc:
        problems.append(
            Problem("crc_header", 60, f"header CRC {crc:08x} != {zlib.crc32(data[:60]):08x}")
        )
    if version > 1:
        problems.append(Problem("bad_version", 20, f"version {version} (> 1)"))
    if header.dirty:
        problems.append(
            Problem("dirty_header", 56, "DIRTY flag set: a transaction was in progress")
        )
    if cur < HEADER_SIZE:
        problems.append(Problem("bad_size", 48, f"current_size {cur} < {HEADER_SIZE}"))
    elif cur > len(data):
        problems.append(
            Problem("truncated", len(data), f"file has {len(data)} of {cur} committed bytes")
        )
    elif cur < len(data):
        problems.append(
            Problem("past_committed_size", cur, f"{len(data) - cur} bytes past current_size {cur}")
        )
    return header


def _record(data: bytes, off: int, end: int, problems: list[Problem]) -> Record | None:
    """The record at `off`, or None (with a problem) when it cannot be read below `end`."""
    if off + 8 > end:
        problems.append(Problem("truncated", off, "record header past the committed end"))
        return None
    kind = TYPES.get(data[off : off + 1])
    if kind is None:
        problems.append(Problem("bad_type", off, f"record type byte {data[off]:#04x}"))
        return None
    level, kl, vl = data[off + 1], *struct.unpack_from(">HI", data, off + 2)
    p = off + 8
    if kl == 0xFFFF:
        (kl,) = struct.unpack_from(">Q", data, p) if p + 8 <= end else (1 << 62,)
        p += 8
    if vl == 0xFFFFFFFF:
        (vl,) = struct.unpack_from(">Q", data, p) if p + 8 <= end else (1 << 62,)
        p += 8
    if level > MAXLEVEL:
        problems.append(Problem("bad_level", off, f"level {level} > {MAXLEVEL}"))
        return None
    nptr = level + 1
    head_end = p + 8 * nptr
    padded = (kl + vl + 7) // 8 * 8
    if head_end + 8 + padded > end:
        problems.append(
            Problem("truncated", off, f"{kind} of {head_end + 8 + padded - off} bytes past the end")
        )
        return None
    pointers = struct.unpack_from(f">{nptr}Q", data, p)
    crc_head, crc_tail = struct.unpack_from(">II", data, head_end)
    if zlib.crc32(data[off:head_end]) != crc_head:
        problems.append(Problem("crc_head", off, f"{kind} head CRC {crc_head:08x} mismatch"))
    tail = head_end + 8
    if zlib.crc32(data[tail : tail + padded]) != crc_tail:
        problems.append(Problem("crc_tail", off, f"{kind} key/value CRC {crc_tail:08x} mismatch"))
    return Record(
        offset=off,
        type=kind,
        level=level,
        key=data[tail : tail + kl],
        value=data[tail + kl : tail + kl + vl],
        pointers=tuple(pointers),
        length=tail + padded - off,
    )


def _scan(data: bytes, end: int, problems: list[Problem]) -> list[Record]:
    """Every physical record in file order from 64 to `end`, skipping BLANK padding.

    A record with short lengths, a known type and level, and both CRCs right is read inline;
    anything else (BLANK, 64-bit lengths, damage) goes through `_record`, which says what is
    wrong.
    """
    records: list[Record] = []
    append = records.append
    view = memoryview(data)
    crc32, head, crcs, pointers, types = zlib.crc32, _HEAD, _CRCS, _POINTERS, TYPES
    new = tuple.__new__  # a Record without the Python-level __new__ of named tuples
    off = DUMMY_OFFSET
    while off < end:
        if off + 8 <= end:
            code, level, kl, vl = head.unpack_from(data, off)
            kind = types.get(code)
            if kind is not None and level <= MAXLEVEL and kl != 0xFFFF and vl != 0xFFFFFFFF:
                head_end = off + 16 + 8 * level
                tail = head_end + 8
                stop = tail + ((kl + vl + 7) & ~7)
                if stop <= end:
                    crc_head, crc_tail = crcs.unpack_from(data, head_end)
                    if crc32(view[off:head_end]) == crc_head and crc32(view[tail:stop]) == crc_tail:
                        append(
                            new(Record, (
                                off, kind, level, data[tail : tail + kl],
                                data[tail + kl : tail + kl + vl],
                                pointers[level].unpack_from(data, off + 8), stop - off, True,
                            ))
                        )  # fmt: skip
                        off = stop
                        continue
        if data[off : off + 8] == BLANK:
            off += 8
            continue
        found: list[Problem] = []
        record = _record(data, off, end, found)
        problems.extend(found)
        if record is None:
            break
        records.append(record)
        if any(p.kind == "crc_head" for p in found):
            nxt = _resync(data, off + 8, end)
            if nxt < end and nxt != off + record.length:
                problems.append(Problem("resync", nxt, "scan resumed at the next valid record"))
            off = nxt
        else:
            off += record.length
    return records


def _resync(data: bytes, off: int, end: int) -> int:
    """The first 8-aligned offset from `off` holding a BLANK or a record whose head CRC is good."""
    while off < end:
        if data[off : off + 8] == BLANK:
            return off
        probe: list[Problem] = []
        if _record(data, off, end, probe) is not None and not probe:
            return off
        off += 8
    return end


def _walk(scanned: list[Record], end: int, problems: list[Problem]) -> list[Record]:
    """The live records in key order: level 0 from the DUMMY, through DELETEs.

    A repacked file holds its records in key order, so each successor is usually the next
    record in file order; the offset index is only built when one is not.
    """
    if not scanned or scanned[0].offset != DUMMY_OFFSET or scanned[0].type != "DUMMY":
        problems.append(Problem("bad_dummy", DUMMY_OFFSET, "no DUMMY record at offset 64"))
        return []
    count = len(scanned)
    index: dict[int, int] | None = None
    live: list[Record] = []
    append, seen = live.append, set()
    last_key: bytes | None = None
    current, at = scanned[0], 0
    while True:
        # `_getloc` at level 0: of the two slots, the one below `end` (the higher if both are).
        slots = current.pointers
        a = slots[0]
        b = slots[1] if len(slots) > 1 else end
        if a < end:
            nxt: int | None = a if b >= end or a > b else b
        else:
            nxt = b if b < end else None
        if nxt is None:
            problems.append(
                Problem("bad_pointer", current.offset, "both level-0 pointers past end")
            )
            return live
        target = None
        while nxt:
            if at + 1 < count and scanned[at + 1].offset == nxt:
                at += 1
            else:
                if index is None:
                    index = {r.offset: i for i, r in enumerate(scanned)}
                found = index.get(nxt)
                if found is None:
                    problems.append(
                        Problem("bad_pointer", current.offset, f"level-0 pointer to {nxt:#x}")
                    )
                    return live
                at = found
            target = scanned[at]
            if nxt in seen:
                problems.append(
                    Problem("pointer_loop", current.offset, f"level-0 pointer to {nxt:#x}")
                )
                return live
            if target.type != "DELETE":
                break
            seen.add(nxt)
            nxt = target.pointers[0]
            if nxt >= end:
                problems.append(Problem("bad_pointer", target.offset, f"DELETE points to {nxt:#x}"))
                return live
        if not nxt or target is None:
            return live
        seen.add(nxt)
        if target.type != "RECORD":
            problems.append(
                Problem("bad_pointer", current.offset, f"points to {target.type} {nxt:#x}")
            )
            return live
        key = target.key
        if last_key is not None and key <= last_key:
            problems.append(Problem("bad_order", nxt, "key not above its predecessor's"))
        append(target)
        last_key = key
        current = target


def _history(
    data: bytes, scanned: list[Record], end: int
) -> tuple[list[Record], dict[bytes, bytes]]:
    """Records in file order with DELETE keys resolved, and the state the commits replay to."""
    by_offset = {r.offset: r for r in scanned}
    state: dict[bytes, bytes] = {}
    keys: list[bytes] = []
    out: list[Record] = []
    pending: list[Record] = []
    for record in scanned:
        if record.type in ("RECORD", "DELETE"):
            pending.append(record)
            continue
        if record.type == "DUMMY":
            out.append(record)
            continue
        for op in pending:
            if op.type == "RECORD":
                if op.key not in state:
                    bisect.insort(keys, op.key)
                state[op.key] = op.value
                out.append(op)
                continue
            successor = by_offset.get(op.pointers[0])
            deleted = b""
            if keys:
                i = bisect.bisect_left(keys, successor.key) - 1 if successor else len(keys) - 1
                if i >= 0:
                    deleted = keys.pop(i)
                    del state[deleted]
            out.append(Record(op.offset, op.type, op.level, deleted, b"", op.pointers, op.length))
        pending = []
        out.append(record)
    out.extend(
        Record(r.offset, r.type, r.level, r.key, r.value, r.pointers, r.length, committed=False)
        for r in pending
    )
    return out, state


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector: a parse allocates a million acyclic tuples, and
    each collection would walk all of them again (a third of the parse time at 1M records)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read(
    source: bytes | str | Path, *, history: bool = False, name: str | None = None
) -> TwoskipFile:
    """Parse a twoskip file (path or bytes) read-only; see the module docstring."""
    with no_cycle_collection():
        return _read(source, history, name)


def _read(source: bytes | str | Path, history: bool, name: str | None) -> TwoskipFile:
    data, label = load(source, name)
    problems: list[Problem] = []
    header = _header(data, label, problems)
    if header is None or header.current_size < HEADER_SIZE:
        return TwoskipFile(label, header, [], problems)
    end = min(header.current_size, len(data))
    scan_problems: list[Problem] = []
    scanned = _scan(data, end, scan_problems)
    problems.extend(scan_problems)
    bad = {p.offset for p in scan_problems if p.kind in ("crc_head", "crc_tail")}
    walked = _walk(scanned, header.current_size, problems)
    live = [r for r in walked if r.offset not in bad]
    if scanned and scanned[-1].type != "COMMIT" and not scan_problems:
        problems.append(Problem("uncommitted", scanned[-1].offset, "records after the last COMMIT"))
    quiet = {"dirty_header", "past_committed_size"}
    if len(walked) != header.num_records and all(p.kind in quiet for p in problems):
        problems.append(
            Problem(
                "count_mismatch", 32, f"{len(live)} live records, header says {header.num_records}"
            )
        )
    past: list[Record] = []
    if history:
        past, state = _history(data, scanned, end)
        if not problems and state != {r.key: r.value for r in live}:
            problems.append(
                Problem("history_unresolved", 0, "commit replay differs from live records")
            )
    return TwoskipFile(label, header, live, problems, past)
