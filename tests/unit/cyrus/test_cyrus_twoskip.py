"""twoskip and skiplist readers over real Cyrus 3.6.1 files (datasets/cyrus/make_fixtures.py)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.cyrus import dumps, skiplist, twoskip
from mqforensics.systems.cyrus.problems import Problem

DATA = Path(__file__).resolve().parents[2] / "data" / "cyrus"
DB = DATA / "mailboxes_twoskip.db"


def _bytes() -> bytes:
    return DB.read_bytes()


def _kinds(result: twoskip.TwoskipFile) -> list[tuple[str, int]]:
    return [(p.kind, p.offset) for p in result.problems]


def test_live_records_equal_show_output() -> None:
    result = twoskip.read(DB)
    assert result.complete and result.problems == []
    assert result.header is not None and result.header.num_records == len(result.records) == 25
    assert result.items() == dumps.read_show(DATA / "mailboxes_twoskip.show")
    keys = [r.key for r in result.records]
    assert keys == sorted(keys)


def test_bytes_and_path_agree_and_file_untouched() -> None:
    before = DB.stat().st_mtime_ns
    assert twoskip.read(_bytes()).items() == twoskip.read(DB).items()
    assert DB.stat().st_mtime_ns == before


def test_history_has_superseded_and_deleted_records() -> None:
    result = twoskip.read(DB, history=True)
    assert result.complete
    deletes = [(r.offset, r.key) for r in result.history if r.type == "DELETE"]
    # The second undump dropped bob's l/r on user.alice.Shared and tombstoned Dot^ted.
    assert deletes == [
        (0x11C8, b"AU\x1ebob\x1euser\x1falice\x1fShared"),
        (0x13A0, b"AU\x1ebob\x1euser\x1falice\x1fDot.ted"),
    ]
    dump = (DATA / "mailboxes_twoskip.dump").read_text(errors="replace")
    for offset, _ in deletes:
        assert f"{offset:08X} DELETE" in dump
    commits = [r.offset for r in result.history if r.type == "COMMIT"]
    assert all(f"{c:08X} COMMIT" in dump for c in commits)
    live = {r.offset for r in result.records}
    superseded = [r for r in result.history if r.type == "RECORD" and r.offset not in live]
    assert {r.key for r in superseded} >= {
        b"Nuser\x1falice\x1fShared",
        b"Nuser\x1falice\x1fDot.ted",
    }


def test_evil_keys_and_values() -> None:
    result = twoskip.read(DATA / "evil_twoskip.db", history=True)
    assert result.complete
    assert result.items() == [
        (b"key\twith\x00nul", b"line1\nline2\r\xff end"),
        (b"plain", b"hello"),
        (b"tab\tvalue", b"a\tb\tc"),
        (b"\xff\xfe", b"\r\n"),
    ]
    assert [r.key for r in result.history if r.type == "DELETE"] == [b"gone"]


def test_flipped_tail_byte() -> None:
    data = bytearray(_bytes())
    data[0x3C0 + 96 - 20] ^= 1  # inside the key of AU RS -dave RS user US alice US Shared
    result = twoskip.read(bytes(data))
    assert _kinds(result) == [("crc_tail", 0x3C0)]
    assert not result.complete
    assert len(result.records) == 24
    assert b"AU\x1e-dave\x1euser\x1falice\x1fShared" not in dict(result.items())


def test_flipped_keylen_resyncs() -> None:
    data = bytearray(_bytes())
    data[0x3C0 + 2] ^= 1
    result = twoskip.read(bytes(data))
    assert _kinds(result) == [("crc_head", 0x3C0), ("crc_tail", 0x3C0), ("resync", 0x420)]
    assert not result.complete and len(result.records) == 24


def test_flipped_pointer() -> None:
    data = bytearray(_bytes())
    data[0x3C0 + 9] ^= 1  # high byte of nextloc[0]: the slot goes past the end, the other is used
    result = twoskip.read(bytes(data))
    assert _kinds(result) == [("crc_head", 0x3C0)]
    assert not result.complete and len(result.records) == 24


def test_truncated() -> None:
    result = twoskip.read(_bytes()[:3000])
    assert _kinds(result) == [("truncated", 3000), ("truncated", 0xB00), ("bad_pointer", 0x150)]
    assert not result.complete
    assert result.records == twoskip.read(DB).records[: len(result.records)]


def test_truncated_header() -> None:
    result = twoskip.read(_bytes()[:40])
    assert _kinds(result) == [("truncated", 40)] and result.records == [] and not result.complete


def test_appended_garbage() -> None:
    result = twoskip.read(_bytes() + b"garbage!")
    assert _kinds(result) == [("past_committed_size", 5440)]
    assert not result.complete and len(result.records) == 25


def test_dirty_flag_with_good_crc() -> None:
    data = bytearray(_bytes())
    data[59] |= 1
    data[60:64] = struct.pack(">I", zlib.crc32(bytes(data[:60])))
    result = twoskip.read(bytes(data))
    assert result.problems == [
        Problem("dirty_header", 56, "DIRTY flag set: a transaction was in progress")
    ]
    assert not result.complete and len(result.records) == 25


def test_dirty_flag_without_crc_update() -> None:
    data = bytearray(_bytes())
    data[59] |= 1
    assert _kinds(twoskip.read(bytes(data))) == [("crc_header", 60), ("dirty_header", 56)]


def test_bad_magic_byte() -> None:
    data = bytearray(_bytes())
    data[0] ^= 0xFF
    assert _kinds(twoskip.read(bytes(data))) == [("bad_magic", 0), ("crc_header", 60)]


def test_not_twoskip_raises_naming_file(tmp_path: Path) -> None:
    other = tmp_path / "x.db"
    other.write_bytes(b"hello world, not a database at all" * 3)
    with pytest.raises(InputError, match=r"x\.db: offset 0: not a twoskip file"):
        twoskip.read(other)
    with pytest.raises(InputError, match="skiplist file, not twoskip"):
        twoskip.read(DATA / "mailboxes_skiplist.db")


def test_skiplist_equals_its_show_and_the_twoskip_source() -> None:
    result = skiplist.read(DATA / "mailboxes_skiplist.db", history=True)
    assert result.complete
    assert result.items() == dumps.read_show(DATA / "mailboxes_skiplist.show")
    source = dict(twoskip.read(DB).items())
    source[b"Nuser\x1fbob\x1fNew"] = b"%(T e P default)"
    del source[b"AU\x1ebob\x1euser\x1falice"]
    assert dict(result.items()) == source
    types = [r.type for r in result.history]
    assert types[0] == "DUMMY" and types[-4:] == ["ADD", "COMMIT", "DELETE", "COMMIT"]
    assert result.history[-2].key == b"AU\x1ebob\x1euser\x1falice"


def test_skiplist_corruption() -> None:
    data = (DATA / "mailboxes_skiplist.db").read_bytes()
    cut = skiplist.read(data[:0xE4E])
    assert _kinds(cut) == [("truncated", 0xE4C), ("uncommitted", 0xE10)] and not cut.complete
    with pytest.raises(InputError, match="twoskip file, not skiplist"):
        skiplist.read(DB)
