"""Postfix queue-file records, read as record.c's rec_get() reads them: lengths in 7-bit groups,
pointers followed into the heap after the end record, padding skipped, damage with its offset."""

from __future__ import annotations

from mqforensics.systems.postfix.records import (
    REVERSE_JUMP_LIMIT,
    Damage,
    read_raw,
    read_records,
)


def rec_put(kind: str, data: bytes | str) -> bytes:
    """One record as Postfix's rec_put() writes it (src/global/record.c)."""
    body = data.encode() if isinstance(data, str) else data
    out, rest = bytearray(kind.encode("latin-1")), len(body)
    while True:
        byte, rest = rest & 0x7F, rest >> 7
        out.append(byte | 0x80 if rest else byte)
        if not rest:
            return bytes(out + body)


def pointer(offset: int) -> bytes:
    return rec_put("p", f"{offset:15d}")  # cleanup writes "%15ld"


def read(data: bytes) -> list[tuple[str, bytes]]:
    result = read_records(data)
    assert result.damage is None and result.complete, result.damage
    return [(r.type, r.data) for r in result.records]


def test_a_length_of_300_is_two_bytes_least_significant_group_first():
    encoded = rec_put("N", b"x" * 300)
    assert encoded[:3] == b"N\xac\x02"
    record, after = read_raw(encoded, 0)
    assert (record.type, len(record.data), after) == ("N", 300, len(encoded))


def test_records_come_in_file_order_with_their_offsets_and_padding_skipped():
    parts = [
        rec_put("C", "             75              0              1"),
        rec_put("T", "1795820000 123456"),
        rec_put("S", "alice@example.org"),
        rec_put("R", "bob@example.net"),
        rec_put("w", "0" * 13),  # rec_pad(): room kept for a later edit
        rec_put("M", ""),
        rec_put("N", "Subject: hi"),
        rec_put("X", ""),
        rec_put("E", ""),
    ]
    data = b"".join(parts)
    result = read_records(data)
    assert [r.type for r in result.records] == ["C", "T", "S", "R", "M", "N", "X", "E"]
    starts = [sum(len(p) for p in parts[:k]) for k in range(len(parts))]
    assert [r.offset for r in result.records] == starts[:4] + starts[5:]
    assert result.records[2].data == b"alice@example.org"
    assert result.complete


def test_pointers_lead_into_the_heap_after_the_end_record_and_back():
    """An inserted header: the pointer after "Subject" leads to the heap, whose own pointer
    leads back to the record after it, as cleanup patches a written queue file."""
    head = rec_put("S", "a@x") + rec_put("M", "") + rec_put("N", "Subject: hi")
    back_at = len(head) + len(pointer(0))
    tail = rec_put("N", "body") + rec_put("E", "")
    heap_at = back_at + len(tail)
    data = head + pointer(heap_at) + tail + rec_put("N", "X-Added: 1") + pointer(back_at)
    assert read(data) == [
        ("S", b"a@x"), ("M", b""), ("N", b"Subject: hi"), ("N", b"X-Added: 1"),
        ("N", b"body"), ("E", b""),
    ]  # fmt: skip


def test_bytes_after_the_end_record_are_not_read_unless_a_pointer_leads_there():
    data = rec_put("S", "a@x") + rec_put("E", "") + rec_put("R", "stale@x")
    assert read(data) == [("S", b"a@x"), ("E", b"")]


def test_a_pointer_to_offset_zero_is_a_dummy_and_reading_goes_on():
    data = rec_put("S", "a@x") + pointer(0) + rec_put("R", "b@y") + rec_put("E", "")
    assert read(data) == [("S", b"a@x"), ("R", b"b@y"), ("E", b"")]


def test_truncated_data_is_damage_at_the_records_offset():
    whole = rec_put("S", "a@x") + rec_put("R", "bob@example.net") + rec_put("E", "")
    cut = whole[: len(rec_put("S", "a@x")) + 6]
    result = read_records(cut)
    assert [r.type for r in result.records] == ["S"]
    reason = "record 'R' claims 15 bytes, the file ends 4 bytes after its length"
    assert result.damage == Damage(len(rec_put("S", "a@x")), reason)
    assert not result.complete


def test_a_file_without_an_end_record_is_incomplete_at_its_end():
    data = rec_put("S", "a@x") + rec_put("R", "b@y")
    assert read_records(data).damage == Damage(len(data), "the file ends before its end record")


def test_a_length_of_more_than_32_bits_is_damage():
    data = rec_put("S", "a@x") + b"R" + b"\xff" * 5 + b"\x01"
    reason = "record 'R' has too many length bytes"
    assert read_records(data).damage == Damage(len(rec_put("S", "a@x")), reason)
    # Five length bytes are allowed: the last is read at a shift of 28, below 32.
    record, _ = read_raw(b"N" + b"\x80" * 4 + b"\x00", 0)
    assert record.data == b""


def test_a_record_over_the_limit_is_damage():
    data = rec_put("N", "x" * 100) + rec_put("E", "")
    assert read_records(data, max_length=99).damage == Damage(
        0, "record 'N' claims 100 bytes, over the 99 limit"
    )
    assert read_records(data, max_length=100).complete


def test_malformed_and_outside_pointers_are_damage():
    bad = rec_put("S", "a@x") + rec_put("p", "  12x") + rec_put("E", "")
    reason = "pointer record holds '12x', not a file offset"
    assert read_records(bad).damage == Damage(len(rec_put("S", "a@x")), reason)
    outside = rec_put("S", "a@x") + pointer(10_000) + rec_put("E", "")
    damage = read_records(outside).damage
    assert damage is not None and damage.offset == len(rec_put("S", "a@x"))
    assert damage.reason == f"pointer to byte 10000, past the file's {len(outside)}"


def test_a_pointer_loop_stops_after_the_reverse_jump_limit():
    lead = rec_put("S", "a@x")
    data = lead + pointer(len(lead)) + rec_put("E", "")  # points at itself
    result = read_records(data)
    assert result.damage == Damage(len(lead), f"over {REVERSE_JUMP_LIMIT} reverse pointer jumps")
    assert [r.type for r in result.records] == ["S"]
