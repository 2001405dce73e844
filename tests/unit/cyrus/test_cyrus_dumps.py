"""Dump parsers (`cyr_dbtool show`, batch SHOW, flat, `ctl_mboxlist -d`) over real 3.6.1 output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.cyrus import database, dumps, records, twoskip

DATA = Path(__file__).resolve().parents[2] / "data" / "cyrus"


def test_flat_equals_the_file() -> None:
    items = twoskip.read(DATA / "mailboxes_twoskip.db").items()
    assert dumps.read_flat(DATA / "mailboxes_twoskip.flat") == items


def test_evil_flat_batch_and_show() -> None:
    items = twoskip.read(DATA / "evil_twoskip.db").items()
    assert sorted(dumps.read_flat(DATA / "evil_twoskip.flat")) == sorted(items)
    assert dumps.read_batch_show(DATA / "evil_twoskip.batchshow") == items
    keys = [k for k, _ in items]
    assert dumps.read_show(DATA / "evil_twoskip.show", keys=keys) == items
    # Without the keys a TAB inside a key cannot be told from the separator (§7.2).
    assert dumps.read_show(DATA / "evil_twoskip.show")[0] == (
        b"key",
        b"with\x00nul\tline1\nline2\r\xff end",
    )


def test_show_dlist_value_with_literal_newline() -> None:
    data = b"Nx\t%(T e A %(bob {3+}\r\na\nb))\nNy\t%(T e)\n"
    assert dumps.read_show(data) == [(b"Nx", b"%(T e A %(bob {3+}\r\na\nb))"), (b"Ny", b"%(T e)")]


def test_ctl_mboxlist_json_equals_the_n_records() -> None:
    from_dump = dumps.read_ctl_mboxlist(DATA / "mailboxes_twoskip.ctl_mboxlist_d.json")
    from_file = records.mailbox_entries(twoskip.read(DATA / "mailboxes_twoskip.db").items())
    from_flat = records.mailbox_entries(dumps.read_flat(DATA / "mailboxes_twoskip.flat"))
    key = lambda e: e.name  # noqa: E731
    assert sorted(from_dump, key=key) == sorted(from_file, key=key) == sorted(from_flat, key=key)
    assert len(from_dump) == 8
    eve = next(e for e in from_dump if e.name == "example.com!user.eve")
    assert eve.acl == (
        ("eve@example.com", "lrswipkxtecdan"),
        ("bob", "lr"),
        ("frank@example.com", "lrs"),
    )


def test_ctl_mboxlist_legacy_lines() -> None:
    data = (
        b"user.qyb\t0 default qyb\tlrswipkxtecdan\t-bob\tlr\t\n"
        b"dup2.com!user.qyb\t16 (null) \n"
        b"user.x\t1 srv1!part2 x\tlr\t\n"
    )
    entries = dumps.read_ctl_mboxlist(data)
    assert [(e.name, e.mbtype, e.server, e.partition, e.deleted) for e in entries] == [
        ("user.qyb", "0", None, "default", False),
        ("dup2.com!user.qyb", "16", None, None, True),
        ("user.x", "1", "srv1", "part2", False),
    ]
    assert entries[0].acl_rows() == [
        records.AclRow("user.qyb", "qyb", "lrswipkxtecdan", False),
        records.AclRow("user.qyb", "bob", "lr", True),
    ]


@pytest.mark.parametrize(
    ("reader", "data", "where"),
    [
        (dumps.read_flat, b"a\tb\nno tab here\n", "line 2"),
        (dumps.read_flat, b"a\tb\xff\n", "line 1"),
        (dumps.read_flat, b"a\tb", "line 1: no final newline"),
        (dumps.read_show, b"no tab\n", "line 1"),
        (dumps.read_ctl_mboxlist, b"user.a\tx default a\tlr\t\n", "line 1"),
        (dumps.read_ctl_mboxlist, b'{\n"user.a": {"name": "user.a",\n}', "line 3"),
        (dumps.read_batch_show, b"{5}\r\nab", "offset 0"),
    ],
)
def test_bad_lines_name_file_and_line(reader, data: bytes, where: str, tmp_path: Path) -> None:
    path = tmp_path / "dump.txt"
    path.write_bytes(data)
    with pytest.raises(InputError, match=rf"dump\.txt: {where}"):
        reader(path)


# A text input's format, told from its name and content (`database.dump_format`): the reader's
# choice, and the command's check before Spark, which reads only until it can tell.
FORMATS = [
    ("mailboxes.show", b"user.bob\t(A (bob lrs))\n", "show"),
    ("mailboxes.txt", b'  \n {"user.bob": {}}\n', "ctl_mboxlist"),
    ("mailboxes.flat", b'{"user.bob": {}}\n', "ctl_mboxlist"),  # the content before the name
    ("mailboxes.flat", b"user.bob 0 default bob lrs\n", "flat"),
    ("mailboxes.json", b"user.bob\t(A (bob lrs))\n", "ctl_mboxlist"),
    ("mailboxes.batchshow", b"user.bob (A (bob lrs))\n", "batchshow"),
    ("empty.db", b"", "show"),
    ("spaces.db", b" \t \n", "show"),
    ("late-tab.db", b"u" * 5000 + b"\t(A)\n", "show"),
    ("newlines.db", b"\n\n", None),
    ("junk.bin", b"no tabs here\n" * 400, None),
]


@pytest.mark.parametrize(("name", "content", "kind"), FORMATS, ids=[f[0] for f in FORMATS])
def test_a_dump_format_is_the_same_however_its_bytes_are_read(
    name: str, content: bytes, kind: str | None, tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    splits = [
        [content[i : i + size] for i in range(0, len(content), size)] for size in (1, 3, 4096)
    ]
    for pieces in [*splits, [content], [content[:1], b"", content[1:]]]:
        if kind is None:
            message = f"{path}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist"
            with pytest.raises(InputError, match=re.escape(message)):
                database.dump_format(path, pieces)
        else:
            assert database.dump_format(path, pieces) == kind, pieces[:2]
    # The reader reads what the check said, or refuses the same input in the same words.
    if kind is None:
        with pytest.raises(InputError, match="neither a twoskip/skiplist file"):
            database.read_database(path)
    else:
        try:
            assert database.read_database(path).format == kind
        except InputError as error:  # a dump of the format told, whose lines do not parse
            assert "neither" not in str(error)
