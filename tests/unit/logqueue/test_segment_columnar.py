"""The columnar segment reader (C kernel + the reference's steps) against the reference reader,
`segment.read_segment`: the same `RECORDS` rows (every field, the payload's JSON text byte for
byte) and the same problems (kind, offset, size, detail), on every bundled segment and on a few
thousand damaged files generated from a seed; and the same answer without the kernel."""

from __future__ import annotations

import json
import random
import struct
import uuid
import zlib
from pathlib import Path

import pytest

from mqforensics import native
from mqforensics.systems.logqueue import columnar, fleet
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import read_segment
from tests.unit.logqueue.planted_quality import defective_queue

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "datasets" / "logqueue" / "sample"
SEED = 47
FUZZED = 3000
T0 = 1_800_000_000_000_000
_HEAD = struct.Struct(">2sBBIQ16sII")

# Strings json.dumps escapes in every way it can: quotes, backslashes, control characters,
# DEL, two- three- and four-byte UTF-8 (surrogate pairs), and the empty string.
TEXTS = ["", "a", "bob@example.net", 'say "hi"', "back\\slash", "tab\tnew\nline\rret",
         "\b\f\x00\x01\x1f", "del\x7f", "caf\u00e9", "\u20ac\u4e2d", "\U0001f600 smile",
         "\u0800\uffff\U00010000\U0010ffff", "x" * 300]  # fmt: skip
BAD_UTF8 = [b"\x80", b"\xc0\xaf", b"\xc2", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
            b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"ok\xe2\x82"]  # fmt: skip


def _raw_record(code: int, payload: bytes, time_us: int = T0, ref: tuple[int, int] = (0, 0),
                mid: bytes = bytes(range(16))) -> bytes:  # fmt: skip
    """A record with any payload, its CRC right (so the payload itself is what is judged)."""
    head = _HEAD.pack(fmt.RECORD_MARKER, code, 0, len(payload), time_us, mid, *ref)
    return head + struct.pack(">I", zlib.crc32(payload, zlib.crc32(head))) + payload


def _values(code: int, rng: random.Random) -> dict:
    def text() -> str:
        return rng.choice(TEXTS)

    def many(item, most: int = 3) -> list:  # type: ignore[no-untyped-def]
        return [item() for _ in range(rng.randint(0, most))]

    if code == fmt.ENVELOPE:
        return {"sender": text(), "recipients": many(text), "spool": text(),
                "attempt": rng.choice([0, 1, 0xFFFF]),
                "not_before_us": rng.choice([0, T0, (1 << 64) - 1])}  # fmt: skip
    if code == fmt.START:
        return {"runner": text()}
    if code == fmt.DELIVERY:
        return {"outcomes": many(lambda: (text(), rng.choice([0, 1, 2, 255]), text()))}
    if code == fmt.FINISH:
        return {"reason": rng.choice([0, 1, 2, 255])}
    return {"positions": many(lambda: (text(), rng.choice([0, 1, (1 << 32) - 1]), 32)),
            "suffix_segment": rng.choice([1, (1 << 31), (1 << 32) - 1]),
            "suffix_offset": rng.choice([32, (1 << 32) - 1])}  # fmt: skip


def _odd_record(rng: random.Random) -> bytes:
    """A whole record the reader must not take: unknown type, or a payload that does not decode
    (bad UTF-8, bytes after the last field, a field cut short)."""
    choice = rng.randrange(4)
    if choice == 0:
        return _raw_record(rng.choice([0, 6, 200, 255]), rng.randbytes(rng.randint(0, 20)))
    if choice == 1:
        bad = rng.choice(BAD_UTF8)
        return _raw_record(fmt.START, struct.pack(">H", len(bad)) + bad)
    payload = fmt.encode_payload(fmt.FINISH if choice == 2 else fmt.START, {"reason": 1}
                                 if choice == 2 else {"runner": "fast"})  # fmt: skip
    return _raw_record(fmt.FINISH if choice == 2 else fmt.START,
                       payload + b"\0" if choice == 2 else payload[:-1])  # fmt: skip


def _segment(rng: random.Random, number: int, records: int) -> bytes:
    data = bytearray(fmt.encode_segment_header(number, T0))
    for _ in range(records):
        if rng.random() < 0.08:
            data += _odd_record(rng)
            continue
        code = rng.choice(list(fmt.RECORD_TYPES))
        mid = None if code == fmt.RESTART else uuid.UUID(int=rng.getrandbits(128))
        ref = rng.choice([(0, 0), (number, 32), ((1 << 32) - 1, (1 << 32) - 1), (1 << 31, 7)])
        time_us = rng.choice([T0, 0, (1 << 63) - 1, 1 << 63, (1 << 64) - 1])
        data += fmt.encode_record(code, mid, time_us, ref, _values(code, rng))
    return bytes(data)


def _damaged(rng: random.Random, a: bytes, b: bytes) -> bytes:
    """`a` truncated, bit-flipped, spliced with `b`, or with a record length rewritten."""
    how = rng.randrange(5)
    data = bytearray(a)
    if how == 0:
        return bytes(data[: rng.randrange(len(data) + 1)])
    if how == 1:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if how == 2:
        return bytes(data[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :])
    if how == 3:
        starts = [i for i in range(32, len(data) - 8) if data[i : i + 2] == fmt.RECORD_MARKER]
        at = rng.choice(starts) if starts else 32
        length = rng.choice([0, 1, rng.randrange(1 << 16), fmt.MAX_PAYLOAD, fmt.MAX_PAYLOAD + 1,
                             (1 << 32) - 1, len(data)])  # fmt: skip
        data[at + 4 : at + 8] = struct.pack(">I", length)[: max(0, len(data) - at - 4)]
        return bytes(data[: len(a)])
    at = rng.randrange(len(data) + 1)
    return bytes(data[:at] + rng.choice([b"RQ", b"\0" * 7, rng.randbytes(50)]) + data[at:])


def _rows_of_reference(data: bytes, path: str) -> list[tuple]:
    return list(fleet.record_rows("q", read_segment(data, name=path)))


def _assert_same(data: bytes, path: str, rows: int = columnar.BATCH_ROWS) -> None:
    reference = read_segment(data, name=path)
    fast = columnar.ColumnarSegment(data, path)
    batches = [
        columnar.columns_batch("q", Path(path).name, fast.number, c) for c in fast.batches(rows)
    ]
    got = [tuple(r.values()) for b in batches for r in b.to_pylist()]
    assert got == list(fleet.record_rows("q", reference))
    assert all(b.schema == columnar.RECORDS_ARROW and b.num_rows <= rows for b in batches)
    assert fast.problems == reference.problems
    assert (fast.records, fast.size, fast.header) == (
        len(reference.records),
        reference.size,
        reference.header,
    )
    counted = columnar.ColumnarSegment(data, path).count()
    assert (counted.records, counted.problems) == (fast.records, fast.problems)


def test_the_kernel_is_built_here() -> None:
    # The machine that runs the tests has a C compiler: the fast path is what is compared.
    assert columnar.kernel_note() is None


@pytest.mark.parametrize("path", sorted(SAMPLE.glob("*/*.lq")), ids=lambda p: p.name)
def test_bundled_sample(path: Path) -> None:
    _assert_same(path.read_bytes(), str(path), rows=5)


def test_planted_queue(tmp_path: Path) -> None:
    queue = defective_queue(tmp_path / "q")
    for path in sorted(queue.glob("*.lq")):
        _assert_same(path.read_bytes(), str(path))


def test_every_kind_of_value_and_odd_records() -> None:
    rng = random.Random(SEED)
    for number in (1, 2, 3):
        _assert_same(_segment(rng, number, 400), fmt.segment_name(number), rows=64)


def test_fuzzed_files() -> None:
    rng = random.Random(SEED + 1)
    bases = [_segment(rng, n, rng.randint(1, 25)) for n in range(1, 9)]
    names = [fmt.segment_name(1), "restart.lq", "<bytes>", fmt.segment_name(3)]
    kinds: set[str] = set()
    for _ in range(FUZZED):
        data = _damaged(rng, rng.choice(bases), rng.choice(bases))
        name = rng.choice(names)
        _assert_same(data, name, rows=rng.choice([1, 3, columnar.BATCH_ROWS]))
        kinds.update(p.kind for p in read_segment(data, name=name).problems)
    # The fuzzing reaches every kind of damage the reader reports.
    assert kinds == {"bad_segment_header", "torn_tail", "crc_mismatch", "unknown_type",
                     "bad_payload", "unreadable"}  # fmt: skip


def test_records_whose_json_outgrows_a_batch() -> None:
    # One ENVELOPE of 2 MB of control characters (12 MB of JSON escapes: more than a batch's
    # JSON space, which grows for it), then records that fill batches by their JSON.
    big = {"sender": "", "recipients": ["\x01" * 50_000] * 40, "spool": "", "attempt": 0,
           "not_before_us": 0}  # fmt: skip
    small_values = {"runner": "\x01" * 60_000}
    small = fmt.encode_payload(fmt.START, small_values)
    data = (
        fmt.encode_segment_header(1, T0)
        + _raw_record(fmt.ENVELOPE, fmt.encode_payload(fmt.ENVELOPE, big))
        + b"".join(_raw_record(fmt.START, small) for _ in range(30))
    )
    assert len(json.dumps(big)) > columnar.BATCH_JSON < 30 * len(json.dumps(small_values))
    _assert_same(data, fmt.segment_name(1), rows=64)


def test_without_the_kernel_the_reference_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED + 2)
    files = [(p.read_bytes(), str(p)) for p in sorted(SAMPLE.glob("*/*.lq"))[:4]]
    files += [(_damaged(rng, _segment(rng, 1, 30), _segment(rng, 2, 30)), fmt.segment_name(1))
              for _ in range(40)]  # fmt: skip
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    try:
        assert native.load(columnar.KERNEL) is None
        assert (
            columnar.kernel_note() == "log-queue segments read by the reference: MQF_NATIVE is off"
        )
        for data, name in files:
            _assert_same(data, name, rows=7)
    finally:
        monkeypatch.delenv("MQF_NATIVE")
        native.forget()
    assert columnar.kernel_note() is None


def test_through_spark_numbers_too_large_for_their_columns_are_null(spark, tmp_path) -> None:
    # Arrow batches with nulls (validity bitmaps) reach Spark's rows as the reference's tuples.
    rng = random.Random(SEED + 3)
    queue = tmp_path / "q"
    queue.mkdir()
    for number in (1, 2):
        (queue / fmt.segment_name(number)).write_bytes(_segment(rng, number, 300))
    rows = [tuple(r) for r in fleet.read_records(spark, [queue]).collect()]
    expected = [
        row
        for number in (1, 2)
        for row in _rows_of_reference(
            (queue / fmt.segment_name(number)).read_bytes(), str(queue / fmt.segment_name(number))
        )
    ]
    expected = [(str(queue.resolve()), *row[1:]) for row in expected]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    assert any(r[6] is None for r in rows) and any(r[8] is None for r in rows)
