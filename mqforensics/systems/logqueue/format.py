"""The one definition of the log-structured queue's segment format, version 1.

Everything about the bytes is declared here — the segment header, the record header and each
record type's payload fields — and `encode_*`/`decode_*` and the documentation
(`render_markdown`, which ``docs/logqueue-format.md`` must equal) are all driven by these
declarations, so the three cannot disagree.

All integers are big-endian and unsigned. A string is a ``u16`` byte length and that many bytes
of UTF-8. A list is a ``u16`` count followed by its items. Offsets are byte offsets from the
start of the segment file; a back-reference is (segment number, offset) of an earlier record,
(0, 0) meaning none (segment numbers start at 1, and no record starts at offset 0).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

VERSION = 1
SEGMENT_MAGIC = b"MQLQ"
RECORD_MARKER = b"RQ"


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # u8 | u16 | u32 | u64 | str | strs | outcomes | positions
    meaning: str


@dataclass(frozen=True)
class RecordType:
    code: int
    name: str
    message: str  # what the record header's message id is
    ref: str  # what the back-reference points at
    fields: tuple[Field, ...]
    meaning: str


# --- headers -------------------------------------------------------------------------------------

# (name, struct format, meaning); the CRC field is last and covers every byte before it.
SEGMENT_HEADER = (
    ("magic", "4s", 'b"MQLQ"'),
    ("version", "H", "format version, 1"),
    ("header_size", "H", "32"),
    ("segment", "Q", "segment number, from 1, +1 per rotation; the file is `seg-<number:08d>.lq`"),
    ("created_us", "Q", "creation time, microseconds since the Unix epoch (UTC)"),
    ("reserved", "I", "0"),
    ("crc32", "I", "CRC-32 (zlib) of the 28 bytes before it"),
)
RECORD_HEADER = (
    ("marker", "2s", 'b"RQ": where a record starts (used to resynchronise after damage)'),
    ("type", "B", "record type code (below)"),
    ("flags", "B", "0 (reserved)"),
    ("length", "I", "payload length in bytes"),
    ("time_us", "Q", "when the record was written, microseconds since the Unix epoch (UTC)"),
    ("message_id", "16s", "the message (UUID bytes); zeros for RESTART"),
    ("ref_segment", "I", "back-reference: segment number of an earlier record, 0 for none"),
    ("ref_offset", "I", "back-reference: offset of that record in its segment, 0 for none"),
    ("crc32", "I", "CRC-32 (zlib) of the 40 header bytes before it and of the payload"),
)
_SEGMENT = struct.Struct(">" + "".join(f for _, f, _ in SEGMENT_HEADER))
_RECORD = struct.Struct(">" + "".join(f for _, f, _ in RECORD_HEADER))
SEGMENT_HEADER_SIZE = _SEGMENT.size  # 32
RECORD_HEADER_SIZE = _RECORD.size  # 44
MAX_PAYLOAD = 1 << 24  # a length above this is damage, not a record
# Segment numbers run from 1 to this: the u32 fields naming a segment (back-references, restart
# positions) and a signed 32-bit integer (a JVM int) hold every one.
MAX_SEGMENT = (1 << 31) - 1

# --- record types --------------------------------------------------------------------------------

ENVELOPE, START, DELIVERY, FINISH, RESTART = 1, 2, 3, 4, 5
DELIVERED, TEMPORARY_FAILURE, PERMANENT_FAILURE = 0, 1, 2
STATUSES = {DELIVERED: "delivered", TEMPORARY_FAILURE: "deferred", PERMANENT_FAILURE: "failed"}
FINISH_REASONS = {0: "delivered", 1: "bounced", 2: "expired"}

RECORD_TYPES: dict[int, RecordType] = {
    t.code: t
    for t in (
        RecordType(
            ENVELOPE,
            "ENVELOPE",
            "the message",
            "the envelope this one replaces (a retry), or none for a new message",
            (
                Field("sender", "str", "envelope sender (may be empty: a bounce)"),
                Field("recipients", "strs", "recipients still to be delivered"),
                Field("spool", "str", "name of the message's spool file (the content)"),
                Field("attempt", "u16", "0 for a new message, +1 per replacement"),
                Field("not_before_us", "u64", "earliest next delivery attempt (retry interval)"),
            ),
            "routing data of a message waiting for delivery; live until a START or a "
            "replacement ENVELOPE refers to it",
        ),
        RecordType(
            START,
            "START",
            "the message",
            "the ENVELOPE being delivered (it is garbage from now on)",
            (Field("runner", "str", "the queue runner that took the message"),),
            "a delivery attempt began",
        ),
        RecordType(
            DELIVERY,
            "DELIVERY",
            "the message",
            "the START of this attempt",
            (Field("outcomes", "outcomes", "per recipient: address, status, server reply"),),
            "outcomes for a set of recipients, fsync'ed before any is acknowledged; several per "
            "attempt are allowed",
        ),
        RecordType(
            FINISH,
            "FINISH",
            "the message",
            "the START of the last attempt",
            (Field("reason", "u8", "0 delivered, 1 bounced, 2 expired"),),
            "the message is done: every record of it is garbage; the spool file may be removed",
        ),
        RecordType(
            RESTART,
            "RESTART",
            "zeros",
            "none",
            (
                Field("positions", "positions", "per queue runner: name, segment, offset"),
                Field("suffix_segment", "u32", "start of the working suffix: segment"),
                Field("suffix_offset", "u32", "start of the working suffix: offset"),
            ),
            "restart positions: a restart scans only from the working suffix on; every record "
            "before it is garbage",
        ),
    )
}

_INT = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q"}
_INT_STRUCTS = {kind: struct.Struct(">" + code) for kind, code in _INT.items()}


class FormatError(ValueError):
    """Bytes that do not decode as the format says (the reader turns it into a problem)."""


# --- encode --------------------------------------------------------------------------------------


def _str(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError(f"string of {len(raw)} bytes is longer than 65535")
    return struct.pack(">H", len(raw)) + raw


def _list(items: list[Any], encode: Any) -> bytes:
    if len(items) > 0xFFFF:
        raise ValueError(f"list of {len(items)} items is longer than 65535")
    return struct.pack(">H", len(items)) + b"".join(encode(i) for i in items)


def _encode_field(kind: str, value: Any) -> bytes:
    if kind in _INT:
        return struct.pack(">" + _INT[kind], value)
    if kind == "str":
        return _str(value)
    if kind == "strs":
        return _list(list(value), _str)
    if kind == "outcomes":
        return _list(list(value), lambda o: _str(o[0]) + struct.pack(">B", o[1]) + _str(o[2]))
    if kind == "positions":
        return _list(list(value), lambda p: _str(p[0]) + struct.pack(">II", p[1], p[2]))
    raise AssertionError(kind)


def encode_payload(code: int, values: dict[str, Any]) -> bytes:
    rtype = RECORD_TYPES[code]
    names = {f.name for f in rtype.fields}
    if set(values) != names:
        raise ValueError(f"{rtype.name} needs exactly {sorted(names)}, got {sorted(values)}")
    return b"".join(_encode_field(f.kind, values[f.name]) for f in rtype.fields)


def encode_record(
    code: int,
    message_id: uuid.UUID | None,
    time_us: int,
    ref: tuple[int, int],
    values: dict[str, Any],
) -> bytes:
    """One record: header and payload, CRC filled in."""
    payload = encode_payload(code, values)
    mid = message_id.bytes if message_id is not None else bytes(16)
    head = _RECORD.pack(RECORD_MARKER, code, 0, len(payload), time_us, mid, *ref, 0)
    crc = zlib.crc32(payload, zlib.crc32(head[:-4]))
    return head[:-4] + struct.pack(">I", crc) + payload


def encode_segment_header(segment: int, created_us: int) -> bytes:
    head = _SEGMENT.pack(SEGMENT_MAGIC, VERSION, SEGMENT_HEADER_SIZE, segment, created_us, 0, 0)
    return head[:-4] + struct.pack(">I", zlib.crc32(head[:-4]))


def segment_name(segment: int) -> str:
    return f"seg-{segment:08d}.lq"


def type_name(code: int) -> str:
    """``ENVELOPE``, ..., or ``type 9`` for a code this version does not define."""
    known = RECORD_TYPES.get(code)
    return known.name if known is not None else f"type {code}"


# --- decode --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentHeader:
    segment: int
    created_us: int
    version: int


@dataclass(frozen=True)
class RecordHeader:
    type: int
    flags: int
    length: int
    time_us: int
    message_id: uuid.UUID
    ref: tuple[int, int]
    crc32: int


def decode_segment_header(data: bytes) -> SegmentHeader:
    if len(data) < SEGMENT_HEADER_SIZE:
        raise FormatError(f"segment header: {len(data)} of {SEGMENT_HEADER_SIZE} bytes")
    magic, version, size, segment, created, _, crc = _SEGMENT.unpack_from(data)
    if magic != SEGMENT_MAGIC:
        raise FormatError(f"segment header: magic {magic!r}, expected {SEGMENT_MAGIC!r}")
    if zlib.crc32(data[: SEGMENT_HEADER_SIZE - 4]) != crc:
        raise FormatError("segment header: CRC mismatch")
    if version != VERSION or size != SEGMENT_HEADER_SIZE:
        raise FormatError(f"segment header: version {version} size {size}, expected {VERSION}")
    return SegmentHeader(segment, created, version)


def decode_record_header(data: bytes, offset: int) -> RecordHeader:
    """The header at `offset` (``data`` holds at least `RECORD_HEADER_SIZE` bytes from it). Its
    type code may be one this version does not define (`RECORD_TYPES`): the reader decides
    what a whole record of an unknown type is (`READING_RULES`)."""
    marker, code, flags, length, time_us, mid, rseg, roff, crc = _RECORD.unpack_from(data, offset)
    if marker != RECORD_MARKER:
        raise FormatError(f"no record marker ({marker!r})")
    if length > MAX_PAYLOAD:
        raise FormatError(f"payload length {length} > {MAX_PAYLOAD}")
    return RecordHeader(code, flags, length, time_us, uuid.UUID(bytes=mid), (rseg, roff), crc)


def record_crc(data: bytes, offset: int, length: int) -> int:
    """The CRC a record at `offset` with a `length`-byte payload must carry."""
    head_end = offset + RECORD_HEADER_SIZE
    return zlib.crc32(data[head_end : head_end + length], zlib.crc32(data[offset : head_end - 4]))


class _Cursor:
    """Reads a payload's fields in place (`unpack_from`, no intermediate slices)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _need(self, size: int) -> None:
        if self.pos + size > len(self.data):
            raise FormatError(f"payload ends inside a field at payload byte {self.pos}")

    def int(self, kind: str) -> int:
        unpacker = _INT_STRUCTS[kind]
        self._need(unpacker.size)
        (value,) = unpacker.unpack_from(self.data, self.pos)
        self.pos += unpacker.size
        return int(value)

    def str(self) -> str:
        size = self.int("u16")
        self._need(size)
        start = self.pos
        self.pos += size
        try:
            return self.data[start : self.pos].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"string is not UTF-8 ({exc.reason})") from None

    def list(self, item: Any) -> list[Any]:
        return [item() for _ in range(self.int("u16"))]


def decode_payload(code: int, payload: bytes) -> dict[str, Any]:
    cursor = _Cursor(payload)
    values: dict[str, Any] = {}
    for f in RECORD_TYPES[code].fields:
        if f.kind in _INT:
            values[f.name] = cursor.int(f.kind)
        elif f.kind == "str":
            values[f.name] = cursor.str()
        elif f.kind == "strs":
            values[f.name] = cursor.list(cursor.str)
        elif f.kind == "outcomes":
            values[f.name] = cursor.list(lambda: (cursor.str(), cursor.int("u8"), cursor.str()))
        elif f.kind == "positions":
            values[f.name] = cursor.list(
                lambda: (cursor.str(), cursor.int("u32"), cursor.int("u32"))
            )
    if cursor.pos != len(payload):
        raise FormatError(f"{len(payload) - cursor.pos} bytes after the last field")
    return values


# --- reading rules -------------------------------------------------------------------------------

# What a reader makes of every file a queue directory can hold, damaged ones included. Each rule
# has a test written from its text (tests/unit/logqueue/test_logqueue_format_rules.py, which
# builds its bytes by hand, not with this module). Problem kinds are in backquotes; the audit's
# checks table (docs/logqueue.md) says which finding each becomes.
READING_RULES: tuple[tuple[str, str], ...] = (
    (
        "Segment numbers",
        "Segments are numbered from 1 to 2^31-1 (2147483647), so that the `u32` fields that name "
        "a segment (`ref_segment`, the segments of RESTART positions) and a signed 32-bit integer "
        "hold every one. The header's `segment` field is a `u64` holding the same number.",
    ),
    (
        "File names",
        "Segment n is the file named `seg-` followed by n in decimal, zero-padded to at least 8 "
        "digits, and `.lq`: `seg-00000042.lq`, `seg-123456789.lq`. A file named in any other way "
        "(`seg-42.lq`, `seg-00000000.lq`, a number above 2^31-1) is not a segment: readers do not "
        "read it, and no position can name it.",
    ),
    (
        "The file name decides",
        "Positions name a segment by its number, and the restart procedure finds segment n by "
        "its file name. A record's position is therefore (the number in its file's name, its "
        "offset), whatever the header says. A header that decodes but holds another number is "
        "one `bad_segment_header` problem (offset 0, 32 bytes); the records after it are read "
        "and numbered by the file name as usual.",
    ),
    (
        "Damaged segment header",
        "A header of fewer than 32 bytes, with another magic, a CRC that does not match, a "
        "`version` other than 1 or a `header_size` other than 32 is one `bad_segment_header` "
        "problem over the header bytes present. Records are still read from offset 32. The "
        "`reserved` field of the segment header and the `flags` of a record header are written "
        "as 0 and ignored by readers.",
    ),
    (
        "Whole records",
        "The first record starts at offset 32, each next one where the previous one ends. A "
        "record is whole when its 44-byte header and its `length` payload bytes are in the file, "
        "`length` is at most 16 MiB (2^24 bytes) and its CRC matches. Only whole records count; "
        "every other byte after the header is in exactly one problem below.",
    ),
    (
        "Torn tail",
        "A record that runs past the end of the file (fewer than 44 bytes left where a record "
        "should start, or a header whose `length` reaches past the end), with no whole record "
        "starting after its start, is `torn_tail` (its offset; size: the bytes present from its "
        "start): the last write of a crashed writer. A file can only be torn at its end.",
    ),
    (
        "CRC mismatch",
        "A record whose header decodes and whose bytes are all in the file but whose CRC does "
        "not match is `crc_mismatch`. Reading goes on after its `length`, or at the first whole "
        "record that starts inside it if one does (a damaged `length` must not hide the records "
        "after it); the problem's size is the bytes skipped.",
    ),
    (
        "Unreadable bytes",
        "Bytes where a record should start and at least 44 bytes are left but no record header "
        "decodes (no `RQ` marker, a `length` above 16 MiB), and a record that runs past the end "
        "of the file while a whole "
        "record starts after it, are `unreadable` up to the next offset where a whole record "
        "starts (an `RQ` marker that begins a whole record), or the end of the file; size: the "
        "bytes skipped.",
    ),
    (
        "Unknown record type",
        "A whole record whose type code is not one of those above is `unknown_type` (its offset "
        "and size) and is skipped by its `length`: a reader of version 1 never guesses what it "
        "means, and the records after it are read as usual.",
    ),
    (
        "Bad payload",
        "A whole record of a known type whose payload does not decode exactly as its type says "
        "(a field ending past the payload, a string that is not UTF-8, bytes left after the last "
        "field) is `bad_payload`.",
    ),
    (
        "Back-references",
        "A back-reference names an earlier record by (segment, offset); (0, 0) means none and "
        "is what an ENVELOPE of a new message and a RESTART carry. A START, DELIVERY or FINISH "
        "with (0, 0) refers to nothing: the restart procedure cannot attach it, and an audit "
        "reports it as an orphan (a DELIVERY as `orphan_delivery`, the others as "
        "`orphan_record`).",
    ),
    (
        "RESTART records",
        "RESTART records belong in `restart.lq` only. One in a segment is ignored: it does not "
        "move the working suffix (the restart procedure reads positions from `restart.lq` "
        "alone) and refers to no message. It is not damage to the file; the validation suite of "
        "the records (`expectations/logqueue_records.json`) reports it as a record type a "
        "segment must not hold.",
    ),
    (
        "restart.lq",
        "The file `restart.lq` holds the saved restart positions: a segment header numbered 0 "
        "and exactly one whole RESTART record (message id zeros, back-reference (0, 0)), nothing "
        "after it; it is replaced atomically (written as `restart.lq.tmp`, then renamed). Any "
        "problem in it is `bad_restart`, with the problem the rules above give in its detail "
        "(`crc_mismatch: ...`), as are a header number other than 0, a record of another type, "
        "no RESTART record or several, and a suffix segment outside 1 to 2^31-1. When it holds "
        "exactly one whole RESTART record with a suffix in range, that suffix is still the "
        "working suffix; otherwise, and when the file is missing, the working suffix is (the "
        "lowest segment present, 32).",
    ),
    (
        "Missing segments",
        "Every number from the working suffix's segment up to the highest segment present that "
        "has no file is a missing segment. Consecutive missing numbers are one `missing_segment` "
        "problem, at offset 0 of the first of them, of size 0: none of their bytes is on disk.",
    ),
    (
        "Bytes behind",
        "How far the saved suffix lags behind the garbage end (the earliest position the "
        "restart still needs) is counted in file bytes, headers included: the rest of the saved "
        "suffix's segment from its offset, every segment file between the two whole, and the "
        "garbage end's offset into its own segment. A missing segment counts 0 bytes; when the "
        "garbage end is not after the saved suffix, the lag is 0.",
    ),
)


# --- documentation -------------------------------------------------------------------------------

_KIND_TEXT = {
    "u8": "u8",
    "u16": "u16",
    "u32": "u32",
    "u64": "u64",
    "str": "string",
    "strs": "list of string",
    "outcomes": "list of (string address, u8 status 0 delivered / 1 deferred / 2 failed, "
    "string reply)",
    "positions": "list of (string runner, u32 segment, u32 offset)",
}


def _header_table(fields: tuple[tuple[str, str, str], ...]) -> list[str]:
    rows = ["| offset | size | field | meaning |", "|---|---|---|---|"]
    offset = 0
    for name, fmt, meaning in fields:
        size = struct.calcsize(">" + fmt)
        rows.append(f"| {offset} | {size} | `{name}` | {meaning} |")
        offset += size
    return rows


def render_markdown() -> str:
    """The format's documentation, generated from the declarations above."""
    lines = [
        f"# Log-structured queue segment format, version {VERSION}",
        "",
        "Generated from `mqforensics/systems/logqueue/format.py` (`render_markdown`); a unit test",
        "keeps this file equal to it. Integers are big-endian and unsigned; a string is a `u16`",
        "byte length and UTF-8 bytes; a list is a `u16` count and its items. A back-reference is",
        "(segment, offset) of an earlier record; (0, 0) means none.",
        "",
        f"## Segment header ({SEGMENT_HEADER_SIZE} bytes, at offset 0)",
        "",
        *_header_table(SEGMENT_HEADER),
        "",
        f"## Record header ({RECORD_HEADER_SIZE} bytes), followed by `length` payload bytes",
        "",
        *_header_table(RECORD_HEADER),
        "",
        "Records follow each other without padding. A record whose bytes end past the end of the",
        "file is a torn write; a record whose CRC does not match is damaged.",
        "",
        "## Record types",
    ]
    for rtype in RECORD_TYPES.values():
        lines += [
            "",
            f"### {rtype.code} `{rtype.name}`",
            "",
            f"{rtype.meaning[0].upper()}{rtype.meaning[1:]}. Message id: {rtype.message}. "
            f"Back-reference: {rtype.ref}.",
            "",
            "| field | type | meaning |",
            "|---|---|---|",
            *(f"| `{f.name}` | {_KIND_TEXT[f.kind]} | {f.meaning} |" for f in rtype.fields),
        ]
    lines += [
        "",
        "## Reading rules",
        "",
        "What a reader makes of every file of a queue directory, damaged ones included. Each rule",
        "has a test written from its text: `tests/unit/logqueue/test_logqueue_format_rules.py`.",
    ]
    for number, (title, text) in enumerate(READING_RULES, start=1):
        lines += ["", f"{number}. **{title}.** {text}"]
    return "\n".join(lines) + "\n"
