"""dlist values, key classification, ACL rows and the RACL rule, over the real 3.6.1 file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.cyrus import dlist, records, twoskip
from mqforensics.systems.cyrus.records import AclRow, Key

DATA = Path(__file__).resolve().parents[2] / "data" / "cyrus"
ITEMS = twoskip.read(DATA / "mailboxes_twoskip.db").items()


def test_dlist_forms() -> None:
    value = b'%(A {4+}\r\na\r\nb B {2}\r\nxy C "q\\"x" D NIL E () F (1 %(K v)) G %{p g 3}\r\nabc)'
    assert dlist.parse(value) == {
        "A": "a\r\nb",
        "B": "xy",
        "C": 'q"x',
        "D": None,
        "E": [],
        "F": ["1", {"K": "v"}],
        "G": dlist.DlistFile("p", "g", 3, b"abc"),
    }
    assert dlist.parse(b'%(N "example.com\x1duser\x1feve")') == {"N": "example.com\x1duser\x1feve"}
    with pytest.raises(InputError, match="dlist offset"):
        dlist.parse(b"%(A b")


def test_every_value_of_the_real_file_parses() -> None:
    for key, value in ITEMS:
        if value:
            assert isinstance(dlist.parse(value), dict), key


def test_key_classification() -> None:
    kinds: dict[str, list[bytes]] = {}
    for key, _ in ITEMS:
        kinds.setdefault(records.classify_key(key).kind, []).append(key)
    assert {k: len(v) for k, v in kinds.items()} == {
        "racl_marker": 1,
        "racl": 8,
        "id": 8,
        "mailbox": 8,
    }
    assert records.classify_key(b"AU\x1ebob\x1eexample.com\x1duser\x1feve") == Key(
        "racl", name="example.com\x1duser\x1feve", user="bob", shared=False
    )
    assert records.classify_key(b"$RACL$S$anyone$shared.team") == Key(
        "legacy_racl", name="shared.team", user="anyone", shared=True
    )
    assert records.classify_key(b"user.bob.Sent").kind == "legacy_mailbox"
    assert records.classify_key(b"J\x1eabc").kind == "jmapid"
    assert records.split_legacy_racl(b"$RACL$U$a$b$user.x$y", ["user.x$y", "b$user.x$y"]) == [
        ("a", "b$user.x$y"),
        ("a$b", "user.x$y"),
    ]


def test_names() -> None:
    assert records.dbname_to_intname("example.com\x1duser\x1feve") == "example.com!user.eve"
    assert records.dbname_to_intname("user\x1falice\x1fDot.ted") == "user.alice.Dot^ted"
    assert records.intname_to_dbname("user.alice.Dot^ted") == "user\x1falice\x1fDot.ted"
    assert records.owner_of("DELETED.user.bob.Trash.65A0B1C2") == "bob"
    assert records.owner_of("example.com!user.eve") == "eve@example.com"
    assert records.owner_of("shared.team") is None


def test_acl_rows_exact() -> None:
    entries = {e.name: e for e in records.mailbox_entries(ITEMS)}
    assert entries["user.alice.Shared"].acl_rows() == [
        AclRow("user.alice.Shared", "alice", "lrswipkxtecdan", False),
        AclRow("user.alice.Shared", "bob", "s", False),
        AclRow("user.alice.Shared", "dave", "lr", True),
        AclRow("user.alice.Shared", "charlie", "p", False),
        AclRow("user.alice.Shared", "group:staff", "lr", False),
    ]
    assert entries["shared.team"].acl_rows()[1] == AclRow(
        "shared.team", "group:team co", "lrswi", False
    )
    assert entries["user.bob.Old"].deleted and entries["user.alice.Dot^ted"].deleted
    alice = entries["user.alice"]
    assert (alice.mbtype, alice.partition, alice.uniqueid, alice.uidvalidity) == (
        "e",
        "default",
        "11111111-1111-4111-8111-111111111111",
        1700000001,
    )


def test_legacy_text_value() -> None:
    entry = records.decode_value("user.bob", b"0 default bob\tlrswipkxtecda\tanyone\tp\t")
    assert (entry.mbtype, entry.partition, entry.acl) == (
        "0",
        "default",
        (("bob", "lrswipkxtecda"), ("anyone", "p")),
    )


def test_expected_racls_equal_those_present() -> None:
    entries = records.mailbox_entries(ITEMS)
    present = {k for k, _ in ITEMS if records.classify_key(k).kind == "racl"}
    assert records.expected_racls(entries, "3.6.1", admins=["cyrus"]) == present
    assert records.racl_marker("3.6.1") in dict(ITEMS)
    assert b"AU\x1e-dave\x1euser\x1falice\x1fShared" in present  # negative entries get keys
    assert not any(b"Old" in k or b"Dot.ted" in k for k in present)  # tombstones get none


def test_racl_rule_by_version() -> None:
    entry = records.MailboxEntry(
        "user.alice.X", "e", acl=(("alice", "lrs"), ("bob", "l"), ("carol", "r"), ("dan", "p"))
    )

    def users(version: str) -> set[bytes]:
        return records.expected_racls([entry], version)

    assert users("3.0.8") == {b"$RACL$U$bob$user.alice.X"}
    assert users("3.2.0") == {
        b"$RACL$U$bob$user.alice.X",
        b"$RACL$U$carol$user.alice.X",
        b"$RACL$U$dan$user.alice.X",
    }
    assert users("3.4.0") == {b"$RACL$U$carol$user.alice.X"}
    assert users("3.4.2") == {b"$RACL$U$bob$user.alice.X", b"$RACL$U$carol$user.alice.X"}
    assert users("3.6.0") == {
        b"AU\x1ebob\x1euser\x1falice\x1fX",
        b"AU\x1ecarol\x1euser\x1falice\x1fX",
    }
    assert users("2.4.17") == set()
