"""The segment format (one definition, encode = decode = docs) and the reader on damaged files."""

from __future__ import annotations

import struct
import uuid
import zlib
from pathlib import Path

import pytest

from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import Problem, read_segment, segment_number_of

DOC = Path(__file__).resolve().parents[3] / "docs" / "logqueue-format.md"
M1, M2 = uuid.UUID(int=1), uuid.UUID(int=2)
T0 = 1_800_000_000_000_000

VALUES = {
    fmt.ENVELOPE: {
        "sender": "alice@example.org",
        "recipients": ["bob@example.net", "carol@example.com"],
        "spool": "spool/0001",
        "attempt": 0,
        "not_before_us": T0,
    },
    fmt.START: {"runner": "fast"},
    fmt.DELIVERY: {
        "outcomes": [
            ("bob@example.net", fmt.DELIVERED, "250 ok"),
            ("carol@example.com", fmt.TEMPORARY_FAILURE, "451 later"),
        ]
    },
    fmt.FINISH: {"reason": 0},
    fmt.RESTART: {
        "positions": [("fast", 1, 32), ("slow", 1, 32)],
        "suffix_segment": 1,
        "suffix_offset": 32,
    },
}


def _segment(number: int = 7) -> tuple[bytes, list[int]]:
    """A segment holding one record of each type; the records' offsets."""
    data = bytearray(fmt.encode_segment_header(number, T0))
    offsets = []
    refs = {fmt.ENVELOPE: (0, 0)}
    for code, values in VALUES.items():
        offsets.append(len(data))
        ref = refs.get(code, (number, offsets[0]))
        mid = None if code == fmt.RESTART else M1
        data += fmt.encode_record(code, mid, T0 + len(offsets), ref, values)
    return bytes(data), offsets


def test_docs_are_generated_from_the_definition() -> None:
    assert DOC.read_text() == fmt.render_markdown()
    assert (fmt.SEGMENT_HEADER_SIZE, fmt.RECORD_HEADER_SIZE) == (32, 44)


def test_every_record_type_round_trips() -> None:
    data, offsets = _segment()
    seg = read_segment(data, name="seg-00000007.lq")
    assert seg.complete and seg.header == fmt.SegmentHeader(7, T0, 1)
    assert [r.offset for r in seg.records] == offsets
    assert [(r.type, r.values) for r in seg.records] == [
        (code, {k: list(v) if isinstance(v, list) else v for k, v in values.items()})
        for code, values in VALUES.items()
    ]
    assert [r.message_id for r in seg.records] == [M1] * 4 + [uuid.UUID(int=0)]
    assert seg.records[1].ref == (7, offsets[0]) and seg.records[0].ref == (0, 0)
    assert seg.records[2].type_name == "DELIVERY" and seg.records[2].position == (7, offsets[2])
    assert sum(r.size for r in seg.records) == len(data) - fmt.SEGMENT_HEADER_SIZE


def test_encoding_refuses_wrong_fields() -> None:
    with pytest.raises(ValueError, match="FINISH needs exactly"):
        fmt.encode_record(fmt.FINISH, M1, T0, (0, 0), {"reason": 0, "extra": 1})


@pytest.mark.parametrize("cut", [1, 10, 43, 44, 50])
def test_torn_last_write(cut: int) -> None:
    data, offsets = _segment()
    last = offsets[-1]
    seg = read_segment(data[: last + cut])
    assert seg.problems == [
        Problem("torn_tail", last, cut, seg.problems[0].detail)
    ]  # fmt: skip
    assert [r.offset for r in seg.records] == offsets[:-1]


def test_flipped_payload_byte_is_a_crc_mismatch_and_reading_goes_on() -> None:
    data, offsets = _segment()
    broken = bytearray(data)
    broken[offsets[2] + fmt.RECORD_HEADER_SIZE + 5] ^= 0x20
    seg = read_segment(bytes(broken))
    size = offsets[3] - offsets[2]
    assert seg.problems == [Problem("crc_mismatch", offsets[2], size, "DELIVERY record CRC")]
    assert [r.offset for r in seg.records] == offsets[:2] + offsets[3:]


def test_damaged_length_mid_file_does_not_hide_later_records() -> None:
    data, offsets = _segment()
    broken = bytearray(data)
    struct.pack_into(">I", broken, offsets[1] + 4, 1 << 20)  # START's length: far past the end
    seg = read_segment(bytes(broken))
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [
        ("unreadable", offsets[1], offsets[2] - offsets[1])
    ]
    assert [r.offset for r in seg.records] == [offsets[0], *offsets[2:]]


def test_garbage_between_records_is_skipped_to_the_next_record() -> None:
    data, offsets = _segment()
    junk = b"\x00RQ\x09garbage"
    spliced = data[: offsets[3]] + junk + data[offsets[3] :]
    seg = read_segment(spliced)
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [
        ("unreadable", offsets[3], len(junk))
    ]
    assert len(seg.records) == 5


def test_payload_that_does_not_decode_with_a_valid_crc() -> None:
    data, offsets = _segment()
    payload = fmt.encode_payload(fmt.FINISH, {"reason": 1}) + b"\x00"
    head = bytearray(data[offsets[3] : offsets[3] + fmt.RECORD_HEADER_SIZE])
    struct.pack_into(">I", head, 4, len(payload))
    struct.pack_into(">I", head, 40, zlib.crc32(payload, zlib.crc32(bytes(head[:40]))))
    spliced = data[: offsets[3]] + bytes(head) + payload + data[offsets[4] :]
    seg = read_segment(spliced)
    assert [(p.kind, p.offset) for p in seg.problems] == [("bad_payload", offsets[3])]
    assert "1 bytes after the last field" in seg.problems[0].detail
    assert len(seg.records) == 4


def test_bad_segment_header_still_reads_records() -> None:
    data, _ = _segment()
    seg = read_segment(b"XXXX" + data[4:], name="dir/seg-00000007.lq")
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [("bad_segment_header", 0, 32)]
    assert seg.header is None and len(seg.records) == 5
    assert {r.segment for r in seg.records} == {7}  # from the file name
    empty = read_segment(b"")
    assert [p.kind for p in empty.problems] == ["bad_segment_header"] and empty.records == []
    assert segment_number_of("seg-00000042.lq") == 42 and segment_number_of("x.lq") is None
