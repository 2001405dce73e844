"""Every reading rule of docs/logqueue-format.md, tested from the rule's text.

The bytes are built here by hand from the spec's tables (big-endian `struct` packs, zlib CRCs),
never with `mqforensics.systems.logqueue.format`'s encoders, so a test fails when the reader
departs from the spec even where our writer agrees with the reader. Each test names its rule.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
import zlib
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.systems.logqueue import frames, layout
from mqforensics.systems.logqueue.replay import replay
from mqforensics.systems.logqueue.segment import read_segment, segment_number_of

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
T = int((NOW - dt.timedelta(hours=1)).timestamp()) * 1_000_000  # an hour ago, in microseconds
M1, M2 = uuid.UUID(int=1).bytes, uuid.UUID(int=2).bytes
NIL = bytes(16)
ENVELOPE, START, DELIVERY, FINISH, RESTART = 1, 2, 3, 4, 5


# --- the spec's encoding, by hand -----------------------------------------------------------------


def u8(n: int) -> bytes:
    return struct.pack(">B", n)


def u16(n: int) -> bytes:
    return struct.pack(">H", n)


def u32(n: int) -> bytes:
    return struct.pack(">I", n)


def u64(n: int) -> bytes:
    return struct.pack(">Q", n)


def string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return u16(len(raw)) + raw


def segment_header(
    number: int, *, magic: bytes = b"MQLQ", version: int = 1, size: int = 32, reserved: int = 0
) -> bytes:
    """magic, version u16, header_size u16, segment u64, created_us u64, reserved u32, then the
    CRC-32 of those 28 bytes."""
    head = magic + u16(version) + u16(size) + u64(number) + u64(T) + u32(reserved)
    return head + u32(zlib.crc32(head))


def record(
    code: int, mid: bytes, ref: tuple[int, int], payload: bytes, *, flags: int = 0, length=None
) -> bytes:
    """marker "RQ", type u8, flags u8, length u32, time_us u64, message_id 16 bytes, ref_segment
    u32, ref_offset u32, then the CRC-32 of those 40 bytes and of the payload."""
    size = len(payload) if length is None else length
    head = b"RQ" + u8(code) + u8(flags) + u32(size) + u64(T) + mid + u32(ref[0]) + u32(ref[1])
    return head + u32(zlib.crc32(head + payload)) + payload


def envelope(recipients: list[str], spool: str, sender: str = "s@example.org") -> bytes:
    return (
        string(sender) + u16(len(recipients)) + b"".join(string(r) for r in recipients)
        + string(spool) + u16(0) + u64(T)
    )  # fmt: skip


def delivery(outcomes: list[tuple[str, int, str]]) -> bytes:
    return u16(len(outcomes)) + b"".join(string(a) + u8(s) + string(r) for a, s, r in outcomes)


def restart_payload(suffix: tuple[int, int], runners: tuple = ()) -> bytes:
    body = b"".join(string(name) + u32(seg) + u32(off) for name, seg, off in runners)
    return u16(len(runners)) + body + u32(suffix[0]) + u32(suffix[1])


def a_message(segment: int, mid: bytes = M1) -> tuple[bytes, list[int]]:
    """ENVELOPE, START, DELIVERY and FINISH of one message, from offset 32 of `segment`; their
    bytes and offsets."""
    offsets, data = [], b""

    def add(code: int, ref: tuple[int, int], payload: bytes) -> None:
        nonlocal data
        offsets.append(32 + len(data))
        data += record(code, mid, ref, payload)

    add(ENVELOPE, (0, 0), envelope(["r@example.net"], "1.eml"))
    add(START, (segment, offsets[0]), string("fast"))
    add(DELIVERY, (segment, offsets[1]), delivery([("r@example.net", 0, "250 ok")]))
    add(FINISH, (segment, offsets[1]), u8(0))
    return data, offsets


UNATTACHED_OUTCOME = delivery([("r@example.net", 1, "451 later")])


def unattached(mid: bytes) -> tuple[bytes, dict[str, int]]:
    """Segment 1: an ENVELOPE of `mid` (spool ``2.eml``), then a START, a DELIVERY and a FINISH
    of it and a RESTART record, all with no back-reference (0, 0); the bytes and the offsets of
    the last four by type name."""
    data = segment_header(1) + record(ENVELOPE, mid, (0, 0), envelope(["r@example.net"], "2.eml"))
    offsets = {}
    for name, code, payload in (("START", START, string("fast")),
                                ("DELIVERY", DELIVERY, UNATTACHED_OUTCOME),
                                ("FINISH", FINISH, u8(0)),
                                ("RESTART", RESTART, restart_payload((1, 32))),):  # fmt: skip
        offsets[name] = len(data)
        data += record(code, NIL if code == RESTART else mid, (0, 0), payload)
    return data, offsets


def kinds(data: bytes, name: str = "seg-00000001.lq") -> list[tuple[str, int, int]]:
    return [(p.kind, p.offset, p.size) for p in read_segment(data, name=name).problems]


# --- 1, 2: segment numbers and file names ---------------------------------------------------------


def test_rule_1_2_a_segment_is_named_by_its_number_zero_padded_to_eight_digits(tmp_path) -> None:
    assert segment_number_of("seg-00000042.lq") == 42
    assert segment_number_of("seg-123456789.lq") == 123456789  # more than 8 digits: as is
    assert segment_number_of("seg-2147483647.lq") == 2**31 - 1
    for other in ("seg-42.lq", "seg-000000042.lq", "seg-00000000.lq", "seg-2147483648.lq",
                  "seg-0000004x.lq", "seg-00000042.lq.tmp", "restart.lq"):  # fmt: skip
        assert segment_number_of(other) is None, other
    for name in ("seg-00000001.lq", "seg-1.lq", "seg-00000000.lq", "seg-2147483648.lq"):
        (tmp_path / name).write_bytes(segment_header(1))
    assert list(layout.segments(tmp_path)) == [1]  # the others are not read


def test_rule_1_3_a_header_number_beyond_the_range_is_not_the_file_names() -> None:
    problems = read_segment(segment_header(2**32 + 1), name="seg-00000001.lq").problems
    assert [(p.kind, p.detail) for p in problems] == [
        ("bad_segment_header", "header says segment 4294967297, the file name 1")
    ]


# --- 3: the file name decides ---------------------------------------------------------------------


def test_rule_3_records_carry_the_file_names_number_and_the_header_is_one_problem() -> None:
    body, offsets = a_message(5)
    seg = read_segment(segment_header(9) + body, name="q/seg-00000005.lq")
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [("bad_segment_header", 0, 32)]
    assert [r.position for r in seg.records] == [(5, o) for o in offsets]
    # So the back-references inside the file still find their records: nothing is orphaned.
    assert replay(seg.records, (5, 32)).orphans == []


# --- 4: damaged segment headers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "size"),
    [
        (segment_header(1)[:10], 10),  # fewer than 32 bytes
        (b"XXXX" + segment_header(1)[4:], 32),  # another magic
        (segment_header(1)[:28] + b"\0\0\0\0", 32),  # a CRC that does not match
        (segment_header(1, version=2), 32),
        (segment_header(1, size=40), 32),
    ],
    ids=["short", "magic", "crc", "version", "header_size"],
)
def test_rule_4_a_damaged_header_is_one_problem_and_records_are_still_read(header, size) -> None:
    body, offsets = a_message(1)
    data = header + body if len(header) == 32 else header
    seg = read_segment(data, name="seg-00000001.lq")
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [("bad_segment_header", 0, size)]
    if len(header) == 32:
        assert [r.position for r in seg.records] == [(1, o) for o in offsets]


def test_rule_4_reserved_and_flags_are_ignored() -> None:
    body = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"), flags=0x80)
    seg = read_segment(segment_header(1, reserved=7) + body, name="seg-00000001.lq")
    assert seg.problems == [] and [r.type_name for r in seg.records] == ["ENVELOPE"]


# --- 5 to 10: records -----------------------------------------------------------------------------


def test_rule_5_records_follow_each_other_from_offset_32() -> None:
    body, offsets = a_message(1)
    seg = read_segment(segment_header(1) + body, name="seg-00000001.lq")
    assert seg.problems == [] and [r.offset for r in seg.records] == offsets == [
        32, offsets[0] + seg.records[0].size, offsets[1] + seg.records[1].size,
        offsets[2] + seg.records[2].size,
    ]  # fmt: skip


def test_rule_5_8_a_length_above_16_mib_is_no_record_header() -> None:
    good = record(START, M1, (0, 0), string("fast"))
    huge = record(START, M1, (0, 0), string("fast"), length=(1 << 24) + 1)
    data = segment_header(1) + huge + good
    assert kinds(data) == [("unreadable", 32, len(huge))]
    assert len(read_segment(data, name="seg-00000001.lq").records) == 1


@pytest.mark.parametrize("present", [1, 20, 43, 44, 60])
def test_rule_6_a_record_cut_by_the_end_of_the_file_is_a_torn_tail(present: int) -> None:
    whole = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"))
    data = segment_header(1) + whole + whole[:present]
    assert kinds(data) == [("torn_tail", 32 + len(whole), present)]


def test_rule_7_a_crc_mismatch_is_skipped_by_its_length() -> None:
    first = bytearray(record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml")))
    first[-1] ^= 0x01  # a payload byte
    second = record(ENVELOPE, M2, (0, 0), envelope(["q@example.net"], "2.eml"))
    data = segment_header(1) + bytes(first) + second
    assert kinds(data) == [("crc_mismatch", 32, len(first))]
    assert [r.offset for r in read_segment(data, name="seg-00000001.lq").records] == [
        32 + len(first)
    ]


def test_rule_7_a_damaged_length_does_not_hide_the_next_whole_record() -> None:
    payload = envelope(["r@example.net"], "1.eml")
    second = record(START, M1, (1, 32), string("fast"))
    # The length says the record reaches past the next one; the CRC was made for that length.
    first = record(ENVELOPE, M1, (0, 0), payload, length=len(payload) + len(second))
    data = segment_header(1) + first + second
    assert kinds(data) == [("crc_mismatch", 32, len(first))]
    assert [r.type_name for r in read_segment(data, name="seg-00000001.lq").records] == ["START"]


def test_rule_8_bytes_where_no_header_decodes_are_unreadable_up_to_the_next_record() -> None:
    one = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"))
    two = record(START, M1, (1, 32), string("fast"))
    junk = b"\x00RQ\x07" + b"z" * 46  # an RQ marker that begins no whole record
    data = segment_header(1) + one + junk + two
    assert kinds(data) == [("unreadable", 32 + len(one), len(junk))]
    assert [r.type_name for r in read_segment(data, name="seg-00000001.lq").records] == [
        "ENVELOPE",
        "START",
    ]
    # At the end of the file, with 44 bytes or more left, to the end of the file.
    assert kinds(segment_header(1) + one + b"z" * 50) == [("unreadable", 32 + len(one), 50)]


def test_rule_8_a_record_running_past_the_end_before_a_whole_one_is_unreadable() -> None:
    one = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"))
    two = record(START, M1, (1, 32), string("fast"))
    long = record(FINISH, M1, (1, 32), u8(0), length=10_000)  # ends past the end of the file
    data = segment_header(1) + one + long + two
    assert kinds(data) == [("unreadable", 32 + len(one), len(long))]


def test_rule_9_a_whole_record_of_an_unknown_type_is_skipped_by_its_length() -> None:
    one = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"))
    unknown = record(9, M1, (1, 32), b"future data")
    two = record(START, M1, (1, 32), string("fast"))
    seg = read_segment(segment_header(1) + one + unknown + two, name="seg-00000001.lq")
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [
        ("unknown_type", 32 + len(one), len(unknown))
    ]
    assert "record type 9" in seg.problems[0].detail
    assert [r.type_name for r in seg.records] == ["ENVELOPE", "START"]


@pytest.mark.parametrize(
    "payload",
    [
        envelope(["r@example.net"], "1.eml") + b"\0",  # a byte after the last field
        envelope(["r@example.net"], "1.eml")[:-3],  # the last field ends past the payload
        u16(2) + b"\xff\xfe" + envelope([], "1.eml")[4:],  # a sender that is not UTF-8
    ],
    ids=["trailing", "short", "utf8"],
)
def test_rule_10_a_payload_that_does_not_decode_exactly_is_a_bad_payload(payload) -> None:
    bad = record(ENVELOPE, M1, (0, 0), payload)
    two = record(START, M1, (1, 32), string("fast"))
    seg = read_segment(segment_header(1) + bad + two, name="seg-00000001.lq")
    assert [(p.kind, p.offset, p.size) for p in seg.problems] == [("bad_payload", 32, len(bad))]
    assert [r.type_name for r in seg.records] == ["START"]


# --- 11, 12: back-references and RESTART records ------------------------------------------------


def test_rule_11_12_no_back_reference_is_an_orphan_and_a_restart_record_is_ignored() -> None:
    data, offsets = unattached(M1)
    seg = read_segment(data, name="seg-00000001.lq")
    assert seg.problems == []
    result = replay(seg.records, (1, 32))
    orphaned = {(r.type_name, r.offset) for r, _ in result.orphans}
    assert orphaned == {(n, offsets[n]) for n in ("START", "DELIVERY", "FINISH")}
    assert result.suffix == (1, 32)  # the RESTART record moved nothing
    assert result.messages[uuid.UUID(bytes=M1)].state == "waiting"


# --- 13: restart.lq -------------------------------------------------------------------------------


def _restart_file(directory: Path, data: bytes) -> tuple:
    (directory / "restart.lq").write_bytes(data)
    suffix, problems = frames.read_restart(directory)
    return suffix, [(p.kind, p.detail.split(":")[0]) for p in problems]


def test_rule_13_every_problem_of_restart_lq_is_bad_restart(tmp_path: Path) -> None:
    good = record(RESTART, NIL, (0, 0), restart_payload((3, 40), (("fast", 3, 40),)))
    assert frames.read_restart(tmp_path) == (None, [])  # missing: the default suffix
    assert _restart_file(tmp_path, segment_header(0) + good) == ((3, 40), [])
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    assert _restart_file(tmp_path, segment_header(0) + bytes(flipped)) == (
        None, [("bad_restart", "crc_mismatch")]
    )  # fmt: skip
    assert _restart_file(tmp_path, segment_header(0) + good[:30]) == (
        None, [("bad_restart", "torn_tail")]
    )  # fmt: skip
    assert _restart_file(tmp_path, b"XXXX" + segment_header(0)[4:] + good) == (
        (3, 40), [("bad_restart", "bad_segment_header")]
    )  # fmt: skip
    assert _restart_file(tmp_path, segment_header(3) + good) == (
        (3, 40), [("bad_restart", "segment number 3 in the header, expected 0")]
    )  # fmt: skip
    extra = record(ENVELOPE, M1, (0, 0), envelope(["r@example.net"], "1.eml"))
    assert _restart_file(tmp_path, segment_header(0) + good + extra) == (
        (3, 40), [("bad_restart", "a ENVELOPE record")]
    )  # fmt: skip
    assert _restart_file(tmp_path, segment_header(0) + good + good) == (
        None, [("bad_restart", "2 RESTART records, expected 1")]
    )  # fmt: skip
    assert _restart_file(tmp_path, segment_header(0)) == (
        None, [("bad_restart", "no RESTART record")]
    )  # fmt: skip
    zero = record(RESTART, NIL, (0, 0), restart_payload((0, 40)))
    assert _restart_file(tmp_path, segment_header(0) + zero) == (
        None, [("bad_restart", "suffix segment 0 is no segment number")]
    )  # fmt: skip


# --- 14, 15: missing segments and bytes behind ----------------------------------------------------


def test_rule_14_missing_segments_from_the_suffix_up_to_the_highest_present() -> None:
    assert frames.missing_ranges([1, 2, 5, 8], 1) == [
        {"first": 3, "last": 4},
        {"first": 6, "last": 7},
    ]
    assert frames.missing_ranges([4, 5], 2) == [{"first": 2, "last": 3}]  # before the lowest
    assert frames.missing_ranges([1, 2], 2) == []


def test_rule_15_bytes_behind_count_file_bytes_headers_included() -> None:
    sizes = {1: 100, 2: 200, 3: 300}
    # The rest of segment 1 from 60, all of segment 2, segment 3's header up to offset 32.
    assert frames.bytes_between(sizes, (1, 60), (3, 32)) == 40 + 200 + 32
    assert frames.bytes_between({1: 100, 3: 300}, (1, 60), (3, 32)) == 40 + 0 + 32
    assert frames.bytes_between(sizes, (2, 90), (2, 150)) == 60
    assert frames.bytes_between(sizes, (3, 32), (2, 150)) == 0


# --- the rules end to end: one audit, three queues ------------------------------------------------


def test_the_audit_follows_the_rules_one_damaged_place_one_finding(spark, tmp_path) -> None:
    """3: a header numbered 7 in seg-00000001.lq is one corrupt_segment, not a cascade of
    orphans; 11: START/DELIVERY/FINISH without back-references are orphans, by their checks;
    12: a RESTART record in a segment changes nothing; 14: a missing segment is 0 bytes."""
    renamed, refs, gap = (tmp_path / n for n in ("renamed", "refs", "gap"))
    for directory in (renamed, refs, gap):
        directory.mkdir()
    body, _ = a_message(1)
    (renamed / "seg-00000001.lq").write_bytes(segment_header(7) + body)

    refs_data, offsets = unattached(M2)
    positions = {name: f"seg-00000001.lq@{offset}" for name, offset in offsets.items()}
    (refs / "seg-00000001.lq").write_bytes(refs_data)
    (refs / "spool").mkdir()
    (refs / "spool" / "2.eml").write_bytes(b"Subject: x\r\n\r\n")

    (gap / "seg-00000001.lq").write_bytes(segment_header(1) + a_message(1)[0])
    (gap / "seg-00000003.lq").write_bytes(segment_header(3) + a_message(3, M2)[0])

    out = tmp_path / "audit"
    as_of = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    argv = ["audit", "logqueue", str(renamed), str(refs), str(gap), "--as-of", as_of]
    assert cli.main([*argv, "--out", str(out)]) == 1
    rows = json.loads((out / "findings.json").read_text())
    found = {(Path(r["queue"]).name, r["check"], r["subject"], r["bytes"]) for r in rows}
    assert found == {
        ("renamed", "corrupt_segment", "seg-00000001.lq@0", 32),
        ("refs", "orphan_record", positions["START"], len(record(START, M2, (0, 0),
                                                                 string("fast")))),
        ("refs", "orphan_delivery", positions["DELIVERY"],
         len(record(DELIVERY, M2, (0, 0), UNATTACHED_OUTCOME))),
        ("refs", "orphan_record", positions["FINISH"], len(record(FINISH, M2, (0, 0), u8(0)))),
        ("gap", "corrupt_segment", "seg-00000002.lq@0", 0),
        ("gap", "unreclaimed_segment", "seg-00000001.lq",
         len(segment_header(1) + a_message(1)[0])),
    }  # fmt: skip
    assert len(rows) == len(found)
