"""Postfix queue-file records, decoded as Postfix's own ``rec_get()`` reads them.

A queue file is a sequence of records: one type byte, the data length in 7-bit groups (least
significant first, bit 0x80 set while more follow), then the data (src/global/record.c). Edits
made after a file was written (an added header, an appended recipient) are records in a heap
after the end record, reached by pointer records (``p``, a decimal file offset). `read_records`
returns the records in the order Postfix reads them: pointers followed, padding (``w``)
skipped, nothing after the end record (``E``) but what a pointer leads to. Damage does not
raise: it is returned with the byte offset where reading stopped, for the checks to report.
See docs/postfix.md for the sources.
"""

from __future__ import annotations

from dataclasses import dataclass

# record.c: a length needing a shift of 32 bits or more ("too many length bits").
LENGTH_BITS = 32
# record.c rec_goto(): more reverse jumps than this in one file is a pointer loop.
REVERSE_JUMP_LIMIT = 10_000

POINTER, PADDING, END = "p", "w", "E"

# The record types and postcat's names for them (src/global/rec_type.h, rec_type.c).
RECORD_NAMES: dict[str, str] = {
    "C": "message_size", "T": "message_arrival_time", "c": "queue_file_create_time",
    "F": "sender_fullname", "I": "content_inspector", "L": "content_filter",
    "S": "sender", "D": "done_recipient", "R": "recipient", "O": "original_recipient",
    "/": "canceled_recipient", "W": "warning_message_time", "A": "named_attribute",
    "K": "killed_record", ">": "redirect_to", "f": "flags", "d": "delay",
    "M": "message_content", "N": "regular_text", "w": "padding", "X": "extracted_info",
    "r": "return_receipt", "e": "errors_to", "P": "priority", "p": "pointer_record",
    "V": "verp_delimiters", "<": "dsn_return", "i": "dsn_envelope_id",
    "o": "dsn_original_recipient", "n": "dsn_notify", "m": "milter_count", "E": "message_end",
}  # fmt: skip


@dataclass(frozen=True)
class Record:
    """One record: where its type byte is, its type (one character) and its data."""

    offset: int
    type: str
    data: bytes


@dataclass(frozen=True)
class Damage:
    """Where reading a queue file stopped, and why."""

    offset: int
    reason: str


@dataclass(frozen=True)
class QueueFileRecords:
    """A queue file's records in reading order, and the damage that stopped reading, if any."""

    records: tuple[Record, ...]
    damage: Damage | None

    @property
    def complete(self) -> bool:
        """Read to its end record without damage."""
        return self.damage is None and bool(self.records) and self.records[-1].type == END


def read_raw(data: bytes, offset: int, max_length: int = 0) -> tuple[Record, int] | Damage:
    """The record at `offset` and the offset after it, or the damage there. `max_length` > 0
    refuses longer records, as Postfix's readers do with their line limits."""
    kind = chr(data[offset])
    length, shift, position = 0, 0, offset + 1
    while True:
        if shift >= LENGTH_BITS:
            return Damage(offset, f"record {kind!r} has too many length bytes")
        if position >= len(data):
            return Damage(offset, f"record {kind!r}: the file ends in its length")
        byte = data[position]
        position += 1
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    if max_length and length > max_length:
        return Damage(offset, f"record {kind!r} claims {length} bytes, over the {max_length} limit")
    end = position + length
    if end > len(data):
        return Damage(
            offset, f"record {kind!r} claims {length} bytes, the file ends {len(data) - position} "
            "bytes after its length",
        )  # fmt: skip
    return Record(offset, kind, data[position:end]), end


def _pointer_target(record: Record, size: int) -> int | Damage:
    """Where a pointer record leads in a file of `size` bytes (0: nowhere, a dummy)."""
    text = record.data.decode("latin-1").lstrip(" \t\r\n\v\f")
    if not text.isdigit() or not text.isascii():
        return Damage(record.offset, f"pointer record holds {text[:20]!r}, not a file offset")
    if int(text) >= size:
        return Damage(record.offset, f"pointer to byte {int(text)}, past the file's {size}")
    return int(text)


def read_records(data: bytes, max_length: int = 0) -> QueueFileRecords:
    """Every record of a queue file's bytes in the order Postfix reads them (``rec_get``)."""
    records: list[Record] = []
    offset, last_target, reverse_jumps = 0, 0, 0
    while offset < len(data):
        read = read_raw(data, offset, max_length)
        if isinstance(read, Damage):
            return QueueFileRecords(tuple(records), read)
        record, offset = read
        if record.type == POINTER:
            target = _pointer_target(record, len(data))
            if target == 0:  # a dummy pointer: reading goes on after it
                continue
            if not isinstance(target, Damage) and target <= last_target:
                reverse_jumps += 1
                if reverse_jumps > REVERSE_JUMP_LIMIT:
                    target = Damage(
                        record.offset, f"over {REVERSE_JUMP_LIMIT} reverse pointer jumps"
                    )
            if isinstance(target, Damage):
                return QueueFileRecords(tuple(records), target)
            offset = last_target = target
        elif record.type != PADDING:
            records.append(record)
            if record.type == END:
                return QueueFileRecords(tuple(records), None)
    ended = Damage(len(data), "the file ends before its end record")
    return QueueFileRecords(tuple(records), ended)
