"""The skiplist kernel (`skiplist_fast.read`) gives what the reference (`skiplist.read`) gives:
header, problems with offsets and details, live records, history and `complete`, on the bundled
file written by Cyrus 3.6.1, on files written here (log ADDs, DELETEs, an uncommitted tail) and
on a few thousand fuzzed variants from a fixed seed (a skiplist has no CRCs, so flipped bytes
reach the walk); without the kernel (``MQF_NATIVE=off``) it is the reference itself."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqforensics import native
from mqforensics.systems.cyrus import skiplist, skiplist_fast
from mqforensics.systems.cyrus.database import read_database
from tests.unit.cyrus.fast_readers import answer, same_as_reference

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "cyrus" / "mailboxes_skiplist.db"
SEED = 48
FUZZED = 3000
NO_PTR = 0xFFFFFFFF


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _data(code: int, key: bytes, value: bytes, pointers: list[int]) -> bytes:
    out = struct.pack(">II", code, len(key)) + _pad(key) + struct.pack(">I", len(value))
    return out + _pad(value) + struct.pack(f">{len(pointers) + 1}I", *pointers, NO_PTR)


def write(pairs: list[tuple[bytes, bytes]], *, logged: int = 0, deleted: int = 0,
          commit: bool = True) -> bytes:  # fmt: skip
    """A skiplist of `pairs` (sorted here): INORDER records, the last `logged` of them as ADDs
    after `logstart`, then `deleted` removed records with their DELETEs, then a COMMIT."""
    pairs = sorted(dict(pairs).items())
    gone = [(b"gone%d" % i, b"old") for i in range(deleted)]
    inorder, adds = pairs[: len(pairs) - logged], pairs[len(pairs) - logged :]
    # (code, key, value, points into the live chain)
    layout = [(257, b"", b"", True)] + [(1, k, v, True) for k, v in inorder]
    layout += [(1, k, v, False) for k, v in gone]
    sizes = [len(_data(c, k, v, [0])) for c, k, v, _ in layout]
    offsets = [48]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    logstart = offsets[-1] + sizes[-1]
    at = logstart
    for k, v in adds:
        layout.append((2, k, v, True))
        offsets.append(at)
        at += len(_data(2, k, v, [0]))
    chain = sorted((k, o) for (c, k, v, live), o in zip(layout, offsets, strict=True) if live)
    following = {o: (chain[i + 1][1] if i + 1 < len(chain) else 0) for i, (_, o) in
                 enumerate(chain)}  # fmt: skip
    out = bytearray(48)
    for (code, key, value, live), off in zip(layout, offsets, strict=True):
        assert len(out) == off or code == 2
        out += _data(code, key, value, [following[off] if live else 0])
    gone_at = offsets[len(inorder) + 1 : len(inorder) + 1 + deleted]
    for off in gone_at:
        out += struct.pack(">II", 4, off)
    if commit:
        out += struct.pack(">I", 255)
    out[:20] = skiplist.MAGIC
    struct.pack_into(">7I", out, 20, 1, 2, 20, 1, len(pairs), logstart, 0)
    return bytes(out)


def written() -> list[bytes]:
    rng = random.Random(SEED)

    def pairs(n: int) -> list[tuple[bytes, bytes]]:
        return [(rng.randbytes(rng.randint(0, 9)) + b"%d" % i, rng.randbytes(rng.randint(0, 30)))
                for i in range(n)]  # fmt: skip

    return [
        write([]),
        write(pairs(1)),
        write(pairs(40)),
        write(pairs(30), logged=5),
        write(pairs(30), logged=3, deleted=4),
        write(pairs(10), commit=False, logged=2),
        write([(b"a", b""), (b"a\0", b"x"), (b"b", b"y" * 70_000)]),
    ]


def _answer(read: object, data: bytes, history: bool) -> tuple:
    return answer(read, data, history, name="s.db")  # type: ignore[arg-type]


def _same(data: bytes, history: bool = True) -> bool:
    """Whether the kernel took the file (rather than handing it to the reference)."""
    return same_as_reference(
        skiplist_fast.read, skiplist.read, skiplist_fast.FastSkiplistFile, data, history
    )


def _offsets(data: bytes) -> list[int]:
    parsed = skiplist.read(data, history=True)
    return [r.offset for r in parsed.history] or [48]


def fuzzed(bases: list[bytes], count: int) -> Iterator[bytes]:
    """`count` variants: truncated, bit-flipped, spliced, header fields, record types,
    lengths and pointers changed."""
    rng = random.Random(SEED)
    for _ in range(count):
        base = rng.choice(bases)
        data = bytearray(base)
        offsets = _offsets(base)
        how = rng.randrange(7)
        off = rng.choice(offsets)
        if how == 0:
            del data[rng.randrange(len(data)) :]
        elif how == 1:
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 2:
            other = rng.choice(bases)
            a = rng.randrange(len(other))
            piece = other[a : a + rng.randint(1, 120)]
            b = rng.randrange(48, len(data))
            data[b : b + len(piece)] = piece
        elif how == 3 and off + 8 <= len(data):
            value = rng.choice((0, 1, 3, 200, 1 << 20, NO_PTR))
            struct.pack_into(">I", data, off + 4, value)
        elif how == 4 and off + 4 <= len(data):
            struct.pack_into(">I", data, off, rng.choice((257, 1, 2, 4, 255, 3, 0)))
        elif how == 5:
            # Overwrite a 4-aligned word holding a pointer-like value with another offset.
            spots = [p for p in range(48, len(data) - 3, 4)
                     if struct.unpack_from(">I", data, p)[0] in offsets]  # fmt: skip
            if spots:
                target = rng.choice([0, 4, 48, len(data), *offsets, *(o + 4 for o in offsets)])
                struct.pack_into(">I", data, rng.choice(spots), target)
        else:
            field = rng.randrange(7)
            value = rng.choice((0, 1, 2, 20, 21, 48, len(data), len(data) + 1, 1 << 31))
            struct.pack_into(">I", data, 20 + 4 * field, value)
        yield bytes(data)


@pytest.fixture(autouse=True)
def _kernel() -> None:
    assert native.load(skiplist_fast.KERNEL) is not None, native.unavailable(skiplist_fast.KERNEL)


@pytest.mark.parametrize("history", [False, True])
def test_bundled_file_equals_the_reference(history: bool) -> None:
    assert _same(BUNDLED.read_bytes(), history)
    by_path = skiplist_fast.read(BUNDLED, history=history)
    assert isinstance(by_path, skiplist_fast.FastSkiplistFile)
    assert by_path.items() == skiplist.read(BUNDLED).items()


def test_written_files_equal_the_reference() -> None:
    took = [_same(data, history) for data in written() for history in (False, True)]
    assert sum(took) >= len(took) - 2  # the empty file goes to the reference


def test_fuzzed_files_equal_the_reference() -> None:
    bases = [BUNDLED.read_bytes(), *written()]
    took = [_same(data) for data in fuzzed(bases, FUZZED)]
    assert 0.1 * FUZZED < sum(took) < 0.9 * FUZZED


def test_read_database_equals_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "mailboxes.db"
    path.write_bytes(BUNDLED.read_bytes())
    db = read_database(path)
    ref = skiplist.read(path.read_bytes())
    assert db.format == "skiplist" and db.size == path.stat().st_size
    assert list(db.items or ()) == ref.items() and tuple(db.problems) == tuple(ref.problems)


def test_without_the_kernel_the_reference_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    data = written()[4]
    fast = _answer(skiplist_fast.read, data, True)
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    try:
        assert native.load(skiplist_fast.KERNEL) is None
        assert not isinstance(skiplist_fast.read(data), skiplist_fast.FastSkiplistFile)
        assert _answer(skiplist_fast.read, data, True) == fast
    finally:
        monkeypatch.delenv("MQF_NATIVE")
        native.forget()
