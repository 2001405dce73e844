"""Read one segment file, read-only, without ever failing on its content, as the format's
reading rules say (`format.READING_RULES`, docs/logqueue-format.md).

Every record that decodes and whose CRC matches is returned with its position: the number in
the file's name (the header's when the name is no segment name: ``restart.lq``, bytes without a
name) and its offset. Damage is a `Problem` with the offset and the number of bytes it covers,
never an exception:

- ``bad_segment_header``: the 32-byte header is missing, has another magic or version, or a bad
  CRC, or holds another number than the file name (records are still scanned from offset 32);
- ``torn_tail``: a record whose bytes end past the end of the file (a crash during the last
  write): `size` is the bytes present from its start;
- ``crc_mismatch``: a whole record whose CRC does not match (skipped by its length);
- ``unknown_type``: a whole record whose type code version 1 does not define (skipped by its
  length);
- ``bad_payload``: a record whose CRC matches but whose payload does not decode as its type says;
- ``unreadable``: bytes where no record header decodes; the reader resynchronises at the next
  ``RQ`` marker that starts a record with a matching CRC (`size` = bytes skipped).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqforensics.systems.logqueue import format as fmt


@dataclass(frozen=True)
class Problem:
    kind: str
    offset: int
    size: int
    detail: str


@dataclass(frozen=True)
class Record:
    segment: int
    offset: int
    type: int
    time_us: int
    message_id: uuid.UUID
    ref: tuple[int, int]
    values: dict[str, Any]
    size: int

    @property
    def type_name(self) -> str:
        return fmt.RECORD_TYPES[self.type].name

    @property
    def position(self) -> tuple[int, int]:
        return self.segment, self.offset


@dataclass(frozen=True)
class SegmentFile:
    source: str
    size: int
    header: fmt.SegmentHeader | None
    records: list[Record]
    problems: list[Problem] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems


def _whole_record_at(data: bytes, pos: int) -> fmt.RecordHeader | None:
    """The header at `pos` if a whole record with a matching CRC starts there."""
    if pos + fmt.RECORD_HEADER_SIZE > len(data):
        return None
    try:
        head = fmt.decode_record_header(data, pos)
    except fmt.FormatError:
        return None
    if pos + fmt.RECORD_HEADER_SIZE + head.length > len(data):
        return None
    return head if fmt.record_crc(data, pos, head.length) == head.crc32 else None


def _resync(data: bytes, start: int) -> int:
    """The offset of the next whole, CRC-valid record after `start`, or the end of the data."""
    pos = data.find(fmt.RECORD_MARKER, start)
    while pos >= 0:
        if _whole_record_at(data, pos) is not None:
            return pos
        pos = data.find(fmt.RECORD_MARKER, pos + 1)
    return len(data)


def segment_number_of(name: str) -> int | None:
    """``seg-00000042.lq`` → 42; None for a name that is no segment's (reading rule 2: the
    number zero-padded to at least 8 digits, from 1 to `format.MAX_SEGMENT`)."""
    stem = Path(name).name
    digits = stem[4:-3]
    if not (stem.startswith("seg-") and stem.endswith(".lq") and digits.isascii()
            and digits.isdigit()):  # fmt: skip
        return None
    number = int(digits)
    if not 0 < number <= fmt.MAX_SEGMENT or fmt.segment_name(number) != stem:
        return None
    return number


def read_head(data: bytes, label: str) -> tuple[fmt.SegmentHeader | None, int, list[Problem]]:
    """The segment header of `data`, the number its records' positions carry (the file name's,
    else the header's, else 0: reading rule 3) and the header's problems."""
    problems: list[Problem] = []
    header: fmt.SegmentHeader | None = None
    try:
        header = fmt.decode_segment_header(data)
    except fmt.FormatError as exc:
        size = min(len(data), fmt.SEGMENT_HEADER_SIZE)
        problems.append(Problem("bad_segment_header", 0, size, str(exc)))
    named = segment_number_of(label)
    if header is not None and named is not None and header.segment != named:
        detail = f"header says segment {header.segment}, the file name {named}"
        problems.append(Problem("bad_segment_header", 0, fmt.SEGMENT_HEADER_SIZE, detail))
    number = named if named is not None else (header.segment if header else 0)
    return header, number, problems


def read_step(data: bytes, pos: int, number: int) -> tuple[Record | Problem, int]:
    """What the reading rules make of the bytes at `pos` (a record offset, below ``len(data)``):
    a whole record or a problem, and the offset reading goes on at (the end of the data after a
    torn tail)."""
    rest = len(data) - pos
    try:
        head = fmt.decode_record_header(data, pos) if rest >= fmt.RECORD_HEADER_SIZE else None
    except fmt.FormatError as exc:
        nxt = _resync(data, pos + 1)
        return Problem("unreadable", pos, nxt - pos, str(exc)), nxt
    if head is None or pos + fmt.RECORD_HEADER_SIZE + head.length > len(data):
        nxt = _resync(data, pos + 1)
        if nxt < len(data):  # whole records follow: damage here, not the last write torn
            return Problem("unreadable", pos, nxt - pos, "record runs past them"), nxt
        want = f"{fmt.RECORD_HEADER_SIZE + head.length}" if head else "at least 44"
        return Problem("torn_tail", pos, rest, f"{rest} of {want} bytes of a record"), len(data)
    end = pos + fmt.RECORD_HEADER_SIZE + head.length
    if fmt.record_crc(data, pos, head.length) != head.crc32:
        # A damaged length must not hide the records after it: stop at the next whole one.
        nxt = min(end, _resync(data, pos + 1))
        name = fmt.type_name(head.type)
        return Problem("crc_mismatch", pos, nxt - pos, f"{name} record CRC"), nxt
    if head.type not in fmt.RECORD_TYPES:
        detail = f"record type {head.type} is not defined by version {fmt.VERSION}"
        return Problem("unknown_type", pos, end - pos, detail), end
    try:
        values = fmt.decode_payload(head.type, data[pos + fmt.RECORD_HEADER_SIZE : end])
    except fmt.FormatError as exc:
        return Problem("bad_payload", pos, end - pos, str(exc)), end
    record = Record(
        number, pos, head.type, head.time_us, head.message_id, head.ref, values, end - pos
    )
    return record, end


def read_segment(source: bytes | str | Path, name: str | None = None) -> SegmentFile:
    """Parse one segment (a path, opened read-only, or bytes); see the module docstring."""
    if isinstance(source, bytes | bytearray | memoryview):
        data, label = bytes(source), name or "<bytes>"
    else:
        data, label = Path(source).read_bytes(), name or str(source)
    header, number, problems = read_head(data, label)
    records: list[Record] = []
    pos = fmt.SEGMENT_HEADER_SIZE
    while pos < len(data):
        found, pos = read_step(data, pos, number)
        if isinstance(found, Record):
            records.append(found)
        else:
            problems.append(found)
    return SegmentFile(label, len(data), header, records, problems)
