"""The twoskip kernel (`twoskip_fast.read`) gives what the reference (`twoskip.read`) gives:
header, problems with offsets and details, live records, history and `complete`, on every
bundled file (real Cyrus 3.6.1 ones included), on files written here (64-bit lengths, BLANK
padding, deletes, uncommitted tails) and on a few thousand fuzzed variants of all of them from a
fixed seed; and without the kernel (``MQF_NATIVE=off``) it is the reference itself."""

from __future__ import annotations

import functools
import hashlib
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqforensics import native
from mqforensics.systems.cyrus import columns, twoskip, twoskip_fast
from mqforensics.systems.cyrus.database import read_database
from tests.unit.cyrus.fast_readers import answer, same_as_reference

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = (
    ROOT / "tests" / "data" / "cyrus" / "mailboxes_twoskip.db",
    ROOT / "tests" / "data" / "cyrus" / "evil_twoskip.db",
    ROOT / "datasets" / "cyrus" / "sample" / "backend1" / "mailboxes.db",
)
SEED = 47
FUZZED = 3000


# --- a small twoskip writer (lib/cyrusdb_twoskip.c's layout) ------------------------------------


def _record(kind: bytes, pointers: list[int], key: bytes = b"", value: bytes = b"",
            ext: bool = False) -> bytes:  # fmt: skip
    """One record; `ext` writes both lengths as 64-bit fields (as Cyrus does past 0xFFFF)."""
    level = len(pointers) - 1
    if ext or len(key) >= 0xFFFF:
        head = struct.pack(">cBHI", kind, level, 0xFFFF, 0xFFFFFFFF)
        head += struct.pack(">QQ", len(key), len(value))
    else:
        head = struct.pack(">cBHI", kind, level, len(key), len(value))
    head += struct.pack(f">{len(pointers)}Q", *pointers)
    body = key + value
    body += b"\0" * (-len(body) % 8)
    return head + struct.pack(">II", zlib.crc32(head), zlib.crc32(body)) + body


def _size(kind: bytes, level: int, key: bytes = b"", value: bytes = b"", ext: bool = False) -> int:
    return len(_record(kind, [0] * (level + 1), key, value, ext))


def write(pairs: list[tuple[bytes, bytes]], *, deleted: int = 0, blanks: bool = False,
          ext_every: int = 0, tail: bool = False) -> bytes:  # fmt: skip
    """A twoskip file of `pairs` (sorted here) in key order after a DUMMY, then a COMMIT; the
    first `deleted` keys are then deleted in a second transaction (each DELETE linking past
    its key); `blanks` pads with BLANK records; `tail` leaves an uncommitted RECORD at the end."""
    pairs = sorted(dict(pairs).items())
    out = bytearray(b"\0" * twoskip.HEADER_SIZE)
    dummy_at = len(out)
    out += _record(b"=", [0] * 32)
    sizes = [
        _size(b"+", 1, k, v, bool(ext_every and i % ext_every == 0))
        for i, (k, v) in enumerate(pairs)
    ]
    at = len(out) + (8 if blanks else 0)
    offsets = []
    for size in sizes:
        offsets.append(at)
        at += size + (8 if blanks else 0)
    if blanks:
        out += twoskip.BLANK
    for i, (k, v) in enumerate(pairs):
        nxt = offsets[i + 1] if i + 1 < len(pairs) else 0
        out += _record(b"+", [nxt, 0], k, v, bool(ext_every and i % ext_every == 0))
        if blanks:
            out += twoskip.BLANK
    out += _record(b"$", [dummy_at])
    first = offsets[0] if offsets else 0
    live = len(pairs)
    dummy = [first] + [0] * 31
    if deleted:
        # One DELETE per removed key, each linking to the first key kept; the DUMMY's newer
        # slot (1) leads through the first DELETE.
        start = len(out)
        successor = offsets[deleted] if deleted < len(pairs) else 0
        for _ in range(deleted):
            out += _record(b"-", [successor])
        out += _record(b"$", [start])
        dummy[1] = start
        live -= deleted
    record = _record(b"=", dummy)
    out[dummy_at : dummy_at + len(record)] = record
    if tail:
        out += _record(b"+", [0, 0], b"zzz-uncommitted", b"v")
    _header(out, num_records=live, current_size=len(out))
    return bytes(out)


def _header(data: bytearray, *, num_records: int, current_size: int, flags: int = 0,
            version: int = 1, generation: int = 1, repack: int = 0) -> None:  # fmt: skip
    data[:20] = twoskip.MAGIC
    struct.pack_into(">I", data, 20, version)
    struct.pack_into(">QQQQ", data, 24, generation, num_records, repack, current_size)
    struct.pack_into(">I", data, 56, flags)
    struct.pack_into(">I", data, 60, zlib.crc32(bytes(data[:60])))


def _pairs(rng: random.Random, n: int) -> list[tuple[bytes, bytes]]:
    return [
        (rng.randbytes(rng.randint(0, 12)) + b"%d" % i, rng.randbytes(rng.randint(0, 40)))
        for i in range(n)
    ]


def written() -> list[bytes]:
    rng = random.Random(SEED)
    return [
        write([]),
        write(_pairs(rng, 1)),
        write(_pairs(rng, 40)),
        write(_pairs(rng, 40), blanks=True),
        write(_pairs(rng, 30), ext_every=3),
        write([(b"big", b"x" * 70_000), (b"k" * 70_000, b"v"), (b"small", b"")]),
        write(_pairs(rng, 30), deleted=4),
        write(_pairs(rng, 10), deleted=10),
        write(_pairs(rng, 20), tail=True),
        write([(b"a", b"1"), (b"a\0", b"2"), (b"b", b"")]),
    ]


# --- comparing the two readers -----------------------------------------------------------------


def _answer(read: object, data: bytes, history: bool) -> tuple:
    return answer(read, data, history, name="f.db")  # type: ignore[arg-type]


def _same(data: bytes, history: bool = True) -> bool:
    """Whether the kernel took the file (rather than handing it to the reference)."""
    return same_as_reference(
        twoskip_fast.read, twoskip.read, twoskip_fast.FastTwoskipFile, data, history
    )


def _resign(data: bytearray, off: int) -> None:
    """Recompute the head CRC of the record at `off` after its head was changed (so the change
    reaches the walk instead of stopping at the CRC)."""
    level = data[off + 1]
    kl, vl = struct.unpack_from(">HI", data, off + 2)
    p = off + 8 + (8 if kl == 0xFFFF else 0) + (8 if vl == 0xFFFFFFFF else 0)
    head_end = p + 8 * (level + 1)
    if head_end + 4 <= len(data):
        struct.pack_into(">I", data, head_end, zlib.crc32(bytes(data[off:head_end])))


def _offsets(data: bytes) -> list[int]:
    end = min(len(data), struct.unpack_from(">Q", data, 48)[0])
    return [r.offset for r in twoskip._scan(data, end, [])]


def fuzzed(bases: list[bytes], count: int) -> Iterator[bytes]:
    """`count` variants: truncated, bit-flipped, spliced, header fields changed, and lengths,
    levels, types and pointers changed with the head CRC recomputed."""
    rng = random.Random(SEED)
    for _ in range(count):
        base = rng.choice(bases)
        data = bytearray(base)
        offsets = _offsets(base) or [64]
        how = rng.randrange(9)
        if how == 0:
            del data[rng.randrange(len(data)) :]
        elif how == 1:
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 2:
            other = rng.choice(bases)
            a = rng.randrange(len(other))
            piece = other[a : a + rng.randint(1, 200)]
            b = rng.randrange(64, len(data))
            data[b : b + len(piece)] = piece
        elif how == 3:
            off = rng.choice(offsets)
            struct.pack_into(">H", data, off + 2, rng.choice((0, 1, 7, 0xFFFE, 0xFFFF)))
            _resign(data, off)
        elif how == 4:
            off = rng.choice(offsets)
            data[off + 1] = rng.choice((0, 1, 2, 31, 32, 200))
            _resign(data, off)
        elif how == 5:
            off = rng.choice(offsets)
            data[off] = ord(rng.choice("=+-$ ?"))
            _resign(data, off)
        elif how == 6:
            off = rng.choice(offsets)
            slot = rng.randrange(2)
            target = rng.choice([0, 8, len(data), 1 << 40, *offsets, *(o + 8 for o in offsets)])
            p = off + 8 + 8 * slot
            if p + 8 <= len(data) and data[off + 1] >= slot:
                struct.pack_into(">Q", data, p, target)
                _resign(data, off)
        elif how == 7:
            nrec, cur = struct.unpack_from(">QQ", data, 32)[0], len(data)
            choice = rng.randrange(4)
            if choice == 0:
                nrec += rng.choice((-1, 1))
            elif choice == 1:
                cur = rng.choice(offsets)
            elif choice == 2:
                data += rng.choice((b"garbage!", twoskip.BLANK, bytes(16)))
            flags = rng.choice((0, 0, 1))
            _header(data, num_records=max(nrec, 0), current_size=cur, flags=flags,
                    version=rng.choice((1, 1, 2)))  # fmt: skip
            if rng.random() < 0.2:
                data[60] ^= 1
        else:
            # Swap two records' keys' first bytes and re-sign the tails: keys out of order.
            a, b = rng.sample(offsets, 2) if len(offsets) > 1 else (offsets[0], offsets[0])
            for off in (a, b):
                kl, vl = struct.unpack_from(">HI", data, off + 2)
                level = data[off + 1]
                if kl in (0, 0xFFFF) or vl == 0xFFFFFFFF or level > 31:
                    continue
                tail = off + 16 + 8 * level + 8
                padded = (kl + vl + 7) // 8 * 8
                if tail + padded > len(data):
                    continue
                data[tail] = rng.randrange(256)
                crc = zlib.crc32(bytes(data[tail : tail + padded]))
                struct.pack_into(">I", data, tail - 4, crc)
        yield bytes(data)


# --- the tests ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _kernel() -> None:
    assert native.load(twoskip_fast.KERNEL) is not None, native.unavailable(twoskip_fast.KERNEL)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.parent.name + "/" + p.name)
@pytest.mark.parametrize("history", [False, True])
def test_bundled_files_equal_the_reference(path: Path, history: bool) -> None:
    data = path.read_bytes()
    assert _same(data, history)
    by_path = twoskip_fast.read(path, history=history)
    assert isinstance(by_path, twoskip_fast.FastTwoskipFile)
    assert _answer(lambda d, **k: twoskip_fast.read(path, **k), data, history) == _answer(
        lambda d, **k: twoskip.read(path, **k), data, history
    )


def test_written_files_equal_the_reference() -> None:
    took = [_same(data, history) for data in written() for history in (False, True)]
    assert sum(took) >= len(took) - 4  # the empty file and the uncommitted tail go either way


def test_fuzzed_files_equal_the_reference() -> None:
    bases = [p.read_bytes() for p in BUNDLED] + written()
    took = [_same(data) for data in fuzzed(bases, FUZZED)]
    # Both paths are exercised: clean variants stay in the kernel, damaged ones go to the
    # reference.
    assert 0.1 * FUZZED < sum(took) < 0.9 * FUZZED


def test_views_index_slice_and_iterate_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BATCH", 3)
    monkeypatch.setattr(columns, "WINDOW", 10_000)
    data = written()[3]
    fast = twoskip_fast.read(data, history=True)
    ref = twoskip.read(data, history=True)
    assert isinstance(fast, twoskip_fast.FastTwoskipFile)
    assert fast.records == ref.records and fast.history == ref.history
    assert fast.items()[5] == ref.items()[5] and fast.items()[-1] == ref.items()[-1]
    assert fast.records[2:7] == ref.records[2:7]
    assert [len(b) for b in fast.items().batches()][:2] == [3, 3]  # type: ignore[attr-defined]
    with pytest.raises(IndexError):
        fast.records[len(ref.records)]


def test_read_database_equals_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "mailboxes.db"
    path.write_bytes(written()[6])
    db = read_database(path)
    ref = twoskip.read(path.read_bytes(), history=True)
    assert db.format == "twoskip" and db.size == path.stat().st_size
    assert db.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert list(db.items or ()) == ref.items() and list(db.history) == ref.history
    assert tuple(db.problems) == tuple(ref.problems)


def test_without_the_kernel_the_reference_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = BUNDLED[0].read_bytes()
    path = tmp_path / "mailboxes.db"
    path.write_bytes(data)
    fast = _answer(twoskip_fast.read, data, True)
    loaded = read_database(path)
    assert twoskip_fast.kernel_note() is None
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    try:
        assert native.load(twoskip_fast.KERNEL) is None
        parsed = twoskip_fast.read(data, history=True)
        assert not isinstance(parsed, twoskip_fast.FastTwoskipFile)
        assert _answer(twoskip_fast.read, data, True) == fast
        assert _answer(twoskip.read, data, True) == fast
        assert twoskip_fast.kernel_note() == (
            "twoskip files read by the reference reader: MQF_NATIVE is off"
        )
        again = read_database(path)
        assert (list(again.items or ()), list(again.history), tuple(again.problems)) == (
            list(loaded.items or ()),
            list(loaded.history),
            tuple(loaded.problems),
        )
        assert (again.size, again.sha256) == (loaded.size, loaded.sha256)
    finally:
        monkeypatch.delenv("MQF_NATIVE")
        native.forget()


def test_columns_grow_past_the_header_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(twoskip_fast, "SPARE", 0)
    monkeypatch.setattr(columns, "WINDOW", 256)
    took = [_same(data) for data in written()]
    assert sum(took) >= len(took) - 2


def test_spilled_columns_and_a_paused_walk_equal_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "SPILL_BYTES", 0)
    monkeypatch.setattr(twoskip_fast, "WALK_STEPS", 3)
    monkeypatch.setattr(columns, "BATCH", 5)
    for i, data in enumerate([p.read_bytes() for p in BUNDLED] + written()[1:]):
        path = tmp_path / f"{i}.db"
        path.write_bytes(data)
        fast = twoskip_fast.read(path, history=True)
        assert isinstance(fast, twoskip_fast.FastTwoskipFile)
        assert fast.records.rows.buffer.spill  # type: ignore[attr-defined]
        by_path = functools.partial(lambda d, p, **k: twoskip_fast.read(p, **k), p=path)
        assert _answer(by_path, data, True) == _answer(twoskip.read, data, True)
