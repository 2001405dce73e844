"""Read-only parser of Cyrus skiplist files (`lib/cyrusdb_skiplist.c`), the ≤2.4 default backend.

Big-endian u32 throughout and no CRCs (§9). `read()` checks the 48-byte header, scans every
record from the DUMMY at offset 48 (INORDER records of the last checkpoint, then ADD / DELETE /
COMMIT log records from `logstart`) and walks the live records in key order along forward pointer
0. Bad data is reported as `Problem`s and makes `complete` false; only a file that is not a
skiplist raises `InputError`. The result has the same shape as `twoskip.read`'s.
"""

from __future__ import annotations

import struct
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.systems.cyrus.problems import Problem, load
from mqforensics.systems.cyrus.twoskip import MAGIC as TWOSKIP_MAGIC
from mqforensics.systems.cyrus.twoskip import Header, Record, TwoskipFile

MAGIC = b"\xa1\x02\x8b\x0dskiplist file\x00\x00\x00"
HEADER_SIZE = 48
DUMMY_OFFSET = 48
TYPES = {257: "DUMMY", 1: "INORDER", 2: "ADD", 4: "DELETE", 255: "COMMIT"}
NO_PTR = 0xFFFFFFFF

# A skiplist result reuses twoskip's shapes: `Header.generation` holds `last_recovery`,
# `repack_size` holds `logstart`, `current_size` the file size and `flags` the `curlevel`.
SkiplistFile = TwoskipFile


def _u32(data: bytes, off: int) -> int:
    return int(struct.unpack_from(">I", data, off)[0])


def _header(data: bytes, name: str, problems: list[Problem]) -> Header | None:
    if data[: len(MAGIC)] != MAGIC:  # slices, not startswith: a mapped file is read too
        if data[: len(TWOSKIP_MAGIC)] == TWOSKIP_MAGIC:
            raise InputError(f"{name}: offset 0: a twoskip file, not skiplist")
        same = sum(a == b for a, b in zip(data[:20], MAGIC, strict=False))
        if len(data) < 20 or same < 18:
            raise InputError(f"{name}: offset 0: not a skiplist file (bad magic)")
        problems.append(Problem("bad_magic", 0, f"magic differs in {20 - same} byte(s)"))
    if len(data) < HEADER_SIZE:
        problems.append(Problem("truncated", len(data), f"header needs {HEADER_SIZE} bytes"))
        return None
    version, minor, maxlevel, curlevel, listsize, logstart, recovery = struct.unpack_from(
        ">7I", data, 20
    )
    if version != 1:
        problems.append(Problem("bad_version", 20, f"version {version}.{minor}"))
    if maxlevel > 20 or curlevel > maxlevel:
        problems.append(Problem("bad_level", 28, f"maxlevel {maxlevel}, curlevel {curlevel}"))
    if not DUMMY_OFFSET < logstart <= len(data):
        problems.append(Problem("bad_logstart", 40, f"logstart {logstart} outside the file"))
    return Header(version, recovery, listsize, logstart, len(data), curlevel, 0)


def _record(data: bytes, off: int, problems: list[Problem]) -> Record | None:
    end = len(data)
    if off + 4 > end:
        problems.append(Problem("truncated", off, "record type past the end"))
        return None
    code = _u32(data, off)
    kind = TYPES.get(code)
    if kind is None:
        problems.append(Problem("bad_type", off, f"record type {code}"))
        return None
    if kind == "COMMIT":
        return Record(off, kind, 0, b"", b"", (), 4)
    if kind == "DELETE":
        if off + 8 > end:
            problems.append(Problem("truncated", off, "DELETE past the end"))
            return None
        return Record(off, kind, 0, b"", b"", (_u32(data, off + 4),), 8)
    p = off + 4
    try:
        klen = _u32(data, p)
        key = data[p + 4 : p + 4 + klen]
        p += 4 + (klen + 3) // 4 * 4
        vlen = _u32(data, p)
        value = data[p + 4 : p + 4 + vlen]
        p += 4 + (vlen + 3) // 4 * 4
        pointers: list[int] = []
        while (ptr := _u32(data, p)) != NO_PTR:
            pointers.append(ptr)
            p += 4
            if len(pointers) > 20:
                problems.append(Problem("bad_level", off, "more than 20 forward pointers"))
                return None
    except struct.error:
        problems.append(Problem("truncated", off, f"{kind} record past the end"))
        return None
    if len(key) != klen or len(value) != vlen:
        problems.append(Problem("truncated", off, f"{kind} record past the end"))
        return None
    return Record(off, kind, len(pointers), key, value, tuple(pointers), p + 4 - off)


def read(
    source: bytes | str | Path, *, history: bool = False, name: str | None = None
) -> TwoskipFile:
    """Parse a skiplist file (path or bytes) read-only; `history` keeps every physical record."""
    data, label = load(source, name)
    problems: list[Problem] = []
    header = _header(data, label, problems)
    if header is None:
        return TwoskipFile(label, header, [], problems)
    scanned: list[Record] = []
    off = DUMMY_OFFSET
    while off < len(data):
        record = _record(data, off, problems)
        if record is None:
            break
        scanned.append(record)
        off += record.length
    by_offset = {r.offset: r for r in scanned}
    live: list[Record] = []
    dummy = by_offset.get(DUMMY_OFFSET)
    if dummy is None or dummy.type != "DUMMY":
        problems.append(Problem("bad_dummy", DUMMY_OFFSET, "no DUMMY record at offset 48"))
    else:
        current, seen = dummy, {DUMMY_OFFSET}
        while current.pointers and current.pointers[0]:
            nxt = current.pointers[0]
            target = by_offset.get(nxt)
            if target is None or nxt in seen or target.type not in ("INORDER", "ADD"):
                problems.append(Problem("bad_pointer", current.offset, f"pointer 0 to {nxt:#x}"))
                break
            if live and target.key <= live[-1].key:
                problems.append(Problem("bad_order", nxt, "key not above its predecessor's"))
            seen.add(nxt)
            live.append(target)
            current = target
    last = scanned[-1] if scanned else None
    if last is not None and last.offset >= header.repack_size and last.type != "COMMIT":
        problems.append(Problem("uncommitted", last.offset, "log records after the last COMMIT"))
    if len(live) != header.num_records and not problems:
        problems.append(
            Problem(
                "count_mismatch", 36, f"{len(live)} live records, header says {header.num_records}"
            )
        )
    past: list[Record] = []
    if history:
        for r in scanned:
            if r.type == "DELETE" and (target := by_offset.get(r.pointers[0])) is not None:
                r = Record(r.offset, r.type, 0, target.key, b"", r.pointers, r.length)
            past.append(r)
    return TwoskipFile(label, header, live, problems, past)
