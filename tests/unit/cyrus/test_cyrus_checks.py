"""Cyrus checks over the real 3.6.1 fixtures (datasets/cyrus/make_fixtures.py), edited in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqforensics import cli, planning
from mqforensics.errors import ConfigError, InputError
from mqforensics.findings import COLUMNS
from mqforensics.privacy import pseudonymize_address
from mqforensics.systems.cyrus import database, dbchecks, dumps, skiplist, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.records import MailboxEntry

DATA = Path(__file__).resolve().parents[2] / "data" / "cyrus"
DB = DATA / "mailboxes_twoskip.db"
ITEMS = twoskip.read(DB).items()
RACL = ("racl_missing", "racl_stale", "racl_forbidden", "racl_marker")
BOB_ALICE = b"AU\x1ebob\x1euser\x1falice"


def _racl(db: Database, version: str = "3.6") -> list[tuple[str, str]]:
    return [(f.check, f.subject) for f in dbchecks.run_checks(db, version) if f.check in RACL]


def _without(key: bytes) -> list[tuple[bytes, bytes]]:
    assert key in dict(ITEMS)
    return [(k, v) for k, v in ITEMS if k != key]


def test_visible() -> None:
    assert dbchecks.visible(b"AU\x1ebob\x1e\xff\\") == "AU\\x1ebob\\x1e\\xff\\\\"


def test_consistent_db_has_no_racl_findings() -> None:
    db = Database.from_file(twoskip.read(DB))
    found = dbchecks.run_checks(db)
    assert [f for f in found if f.check in RACL or f.check == "integrity"] == []
    assert {f.system for f in found} == {"cyrus"} and all(f.queue is None for f in found)
    assert sorted((f.check, f.subject) for f in found) == [
        ("anyone_share", "shared.team anyone"),
        ("anyone_share", "user.alice anyone"),
        ("cross_domain_share", "example.com!user.eve bob"),
        ("dangling_acl_identifier", "charlie"),
        ("dangling_acl_identifier", "dave"),
        ("dangling_acl_identifier", "frank@example.com"),
    ]
    # The same database from each dump gives the same findings.
    for dump in ("mailboxes_twoskip.show", "mailboxes_twoskip.flat"):
        other = database.read_database(DATA / dump)
        assert dbchecks.run_checks(other) == [
            f.__class__(**{**f.__dict__, "detail": {**f.detail, "file": other.source}})
            for f in found
        ]


def test_skiplist_fixture_loads() -> None:
    db = database.read_database(DATA / "mailboxes_skiplist.db")
    assert db.items == skiplist.read(DATA / "mailboxes_skiplist.db").items()
    assert [f for f in dbchecks.run_checks(db) if f.check == "integrity"] == []


def test_missing_key() -> None:
    found = dbchecks.racl_missing(Database("m", _without(BOB_ALICE)))
    assert [(f.check, f.severity, f.subject) for f in found] == [
        ("racl_missing", "error", "AU\\x1ebob\\x1euser\\x1falice")
    ]
    assert found[0].detail == {
        "file": "m",
        "key_hex": BOB_ALICE.hex(),
        "identifier": "bob",
        "mailbox": "user.alice",
        "namespace": "U",
        "rights": "lr",
        "version": "3.6",
        "expected_keys": 8,
    }
    assert _racl(Database("m", _without(BOB_ALICE))) == [
        ("racl_missing", "AU\\x1ebob\\x1euser\\x1falice")
    ]


def test_stale_and_forbidden_keys() -> None:
    added = [
        b"AU\x1echarlie\x1euser\x1falice\x1fShared",  # charlie p: rights fail the 3.6 test
        b"AU\x1ezoe\x1euser\x1falice",  # no grant
        b"AU\x1ebob\x1euser\x1fgone",  # no mailbox
        b"AU\x1ealice\x1euser\x1falice",  # owner
        b"AU\x1ecyrus\x1euser\x1falice",  # admin
        b"AU\x1ebob\x1euser\x1falice\x1fDot.ted",  # tombstone
    ]
    db = Database("m", sorted([*ITEMS, *((k, b"") for k in added)]))
    found = {f.subject: (f.check, f.severity, f.detail["reason"]) for f in dbchecks.run_checks(db)
             if f.check in RACL}  # fmt: skip
    assert found == {
        "AU\\x1echarlie\\x1euser\\x1falice\\x1fShared": (
            "racl_stale",
            "warning",
            "rights_not_enough",
        ),
        "AU\\x1ezoe\\x1euser\\x1falice": ("racl_stale", "warning", "no_grant"),
        "AU\\x1ebob\\x1euser\\x1fgone": ("racl_stale", "warning", "no_mailbox"),
        "AU\\x1ealice\\x1euser\\x1falice": ("racl_forbidden", "warning", "owner"),
        "AU\\x1ecyrus\\x1euser\\x1falice": ("racl_forbidden", "warning", "admin"),
        "AU\\x1ebob\\x1euser\\x1falice\\x1fDot.ted": ("racl_forbidden", "warning", "tombstone"),
    }
    assert [f.subject for f in dbchecks.racl_stale(db)] == sorted(
        s for s, v in found.items() if v[0] == "racl_stale"
    )
    assert len(dbchecks.racl_forbidden(db)) == 3


def test_marker_removed_and_wrong() -> None:
    db = Database("m", _without(b"AS\x1e"))
    found = dbchecks.run_checks(db)
    assert [(f.check, f.severity, f.subject) for f in found if f.check in RACL] == [
        ("racl_marker", "error", "AS\\x1e")
    ]
    assert found[0].detail["problem"] == "missing" and found[0].detail["racl_keys"] == 8
    legacy = sorted([*ITEMS, (b"$RACL", b"3")])
    assert _racl(Database("m", legacy)) == [("racl_marker", "$RACL")]
    # The same file judged as 3.4.2: every key is of the other generation.
    judged = _racl(Database("m", ITEMS), "3.4.2")
    assert ("racl_marker", "AS\\x1e") in judged
    assert sum(1 for c, _ in judged if c == "racl_stale") == 8


def test_show_and_flat_dumps_edited_as_text(tmp_path: Path) -> None:
    show = (DATA / "mailboxes_twoskip.show").read_bytes()
    line = b"AU\x1ebob\x1euser\x1falice\t\n"
    assert line in show
    edited = tmp_path / "m.show"
    edited.write_bytes(show.replace(line, b"").replace(b"AS\x1e\t\n", b""))
    # Marker gone: RACLs off, so no missing key is reported, only the marker.
    assert _racl(database.read_database(edited)) == [("racl_marker", "AS\\x1e")]
    edited.write_bytes(show.replace(line, b""))
    assert _racl(database.read_database(edited)) == [
        ("racl_missing", "AU\\x1ebob\\x1euser\\x1falice")
    ]
    flat = (DATA / "mailboxes_twoskip.flat").read_bytes()
    stale = b"AU\x1ezoe\x1eshared\x1fteam\t\n"
    edited_flat = tmp_path / "m.flat"
    edited_flat.write_bytes(stale + flat)
    assert dumps.read_flat(edited_flat)[0] == (b"AU\x1ezoe\x1eshared\x1fteam", b"")
    assert _racl(database.read_database(edited_flat)) == [
        ("racl_stale", "AU\\x1ezoe\\x1eshared\\x1fteam")
    ]


def _integrity(data: bytes) -> list[tuple[str, str, str]]:
    db = Database.from_file(twoskip.read(data, name="mailboxes.db"))
    return [(f.severity, f.subject, f.detail["kind"]) for f in dbchecks.integrity(db)]


def test_integrity_findings() -> None:
    data = bytearray(DB.read_bytes())
    data[0x3C0 + 96 - 20] ^= 1
    assert _integrity(bytes(data)) == [("critical", "mailboxes.db@0x3c0", "crc_tail")]
    assert _integrity(DB.read_bytes()[:3000]) == [
        ("critical", "mailboxes.db@0xbb8", "truncated"),
        ("critical", "mailboxes.db@0xb00", "truncated"),
        ("critical", "mailboxes.db@0x150", "bad_pointer"),
    ]
    assert _integrity(DB.read_bytes() + b"garbage!") == [
        ("warning", "mailboxes.db@0x1540", "past_committed_size")
    ]
    data = bytearray(DB.read_bytes())
    data[59] |= 1
    assert ("warning", "mailboxes.db@0x38", "dirty_header") in _integrity(bytes(data))


def test_sharing_report() -> None:
    rows = dbchecks.sharing_report(Database("m", ITEMS).entries, ("cyrus",))
    assert {"owner": "alice", "mailbox": "user.alice.Shared", "grantee": "dave", "rights": "lr",
            "negative": True, "effective": True} in rows  # fmt: skip
    assert not any(r["grantee"] == r["owner"] or r["grantee"] == "cyrus" for r in rows)
    assert not any(r["mailbox"] == "user.alice.Dot^ted" for r in rows)  # tombstone


def test_identifiers_written_with_the_default_domain() -> None:
    entries = [
        MailboxEntry("user.ann", "e", acl=(("ann", "lrswipkxtecdan"), ("ann@example.org", "lr"))),
        MailboxEntry(
            "user.ann.Work",
            "e",
            acl=(
                ("bob@example.org", "lr"),
                ("-bob@example.org", "w"),
                ("carol", "lr"),
                ("frank@example.com", "lr"),
            ),
        ),
        MailboxEntry("example.com!user.frank", "e", acl=(("frank@example.com", "lrs"),)),
        MailboxEntry("user.bob", "e", acl=(("bob", "lrswipkxtecdan"),)),
        MailboxEntry("user.carol", "e", acl=(("carol", "lrswipkxtecdan"),)),
    ]
    db = Database("m", None, (), entries)
    assert dbchecks.noncanonical_acl_identifier(db, None) == []
    found = dbchecks.noncanonical_acl_identifier(db, "example.org")
    assert [(f.subject, f.detail["canonical"]) for f in found] == [
        ("ann@example.org", "ann"),
        ("bob@example.org", "bob"),
    ]
    assert found[1].detail["grants"] == [
        {"mailbox": "user.ann.Work", "rights": "lr", "negative": False},
        {"mailbox": "user.ann.Work", "rights": "w", "negative": True},
    ]
    # bob exists as the bare userid: not dangling, and not a cross-domain share either.
    everything = dbchecks.run_checks(db, default_domain="example.org")
    assert {f.check for f in everything} == {"noncanonical_acl_identifier", "cross_domain_share"}
    assert [f.subject for f in everything if f.check == "cross_domain_share"] == [
        "user.ann.Work frank@example.com"
    ]
    rows = dbchecks.sharing_report(entries, ("cyrus",), "example.org")
    assert {(r["mailbox"], r["grantee"], r["effective"]) for r in rows} == {
        ("user.ann", "ann@example.org", False),  # not the owner's own rights: a dead grant
        ("user.ann.Work", "bob@example.org", False),
        ("user.ann.Work", "carol", True),
        ("user.ann.Work", "frank@example.com", True),
    }


def test_acl_report_says_what_sharing_and_erasure_need() -> None:
    rows = dbchecks.acl_report(Database("m", ITEMS).entries, ("cyrus",), "example.org")
    by_entry = {(r["mailbox"], r["identifier"]): r for r in rows}
    assert len(rows) == sum(len(e.acl) for e in Database("m", ITEMS).entries)
    negative = by_entry[("user.alice.Shared", "-dave")]
    assert (negative["userid"], negative["negative"], negative["shown"]) == ("dave", True, True)
    own = by_entry[("user.bob", "bob")]
    assert own["own_rights"] and not own["shown"] and own["owner_address"] == "bob@example.org"
    tomb = by_entry[("user.bob.Old", "alice")]
    assert tomb["tombstone"] and not tomb["shown"]
    eve = by_entry[("example.com!user.eve", "frank@example.com")]
    assert (eve["grantee_address"], eve["owner_address"]) == (
        "frank@example.com", "eve@example.com",
    )  # fmt: skip
    public = by_entry[("shared.team", "anyone")]
    assert public["grantee_address"] is None and public["owner"] is None
    # The sharing report is the shown rows.
    assert len(
        dbchecks.sharing_report(Database("m", ITEMS).entries, ("cyrus",), "example.org")
    ) == (sum(r["shown"] for r in rows))
    assert dbchecks.address_of("bob", None) is None
    assert dbchecks.address_of("group:staff", "x") is None
    assert dbchecks.address_of("bob", "example.org") == "bob@example.org"


def test_load_rejects_unknown_input(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"no tabs here\n")
    with pytest.raises(InputError, match=r"junk\.bin: neither"):
        database.read_database(junk)
    ctl = database.read_database(DATA / "mailboxes_twoskip.ctl_mboxlist_d.json")
    assert ctl.items is None and _racl(ctl) == []
    assert cli.main(["audit", "cyrus", str(junk), "--out", str(tmp_path / "o")]) == 2


def test_cli_writes_findings(tmp_path: Path) -> None:
    show = (DATA / "mailboxes_twoskip.show").read_bytes()
    edited = tmp_path / "m.show"
    edited.write_bytes(show.replace(b"AU\x1ebob\x1euser\x1falice\t\n", b""))
    out = tmp_path / "out"
    code = cli.main(
        [
            "audit",
            "cyrus",
            str(DB),
            str(edited),
            "--out",
            str(out),
            "--as-of",
            "2026-01-02T03:04:05Z",
        ]
    )
    assert code == 1  # racl_missing is an error
    rows = json.loads((out / "findings.json").read_text())
    assert {(r["check"], r["severity"]) for r in rows if r["check"].startswith("racl")} == {
        ("racl_missing", "error")
    }
    # Pseudonymised by default: bob's token as identifier, alice's in her mailbox name.
    bob, alice = pseudonymize_address("bob"), pseudonymize_address("alice")
    assert [r["subject"] for r in rows if r["check"] == "racl_missing"] == [
        f"AU\\x1e{bob}\\x1euser\\x1f{alice}"
    ]
    text = (out / "findings.json").read_text()
    assert '"bob' not in text and ".alice" not in text and "x1falice" not in text
    assert {r["observed_at"] for r in rows} == {"2026-01-02T03:04:05Z"}
    assert (out / "findings.parquet").is_dir()
    sharing = json.loads((out / "sharing.json").read_text())
    assert sharing and not any("alice" in json.dumps(r) for r in sharing)
    revealed = tmp_path / "revealed"
    argv = ["audit", "cyrus", str(edited), "--out", str(revealed), "--reveal-addresses"]
    assert cli.main(argv) == 1
    rows = json.loads((revealed / "findings.json").read_text())
    assert [r["subject"] for r in rows if r["check"] == "racl_missing"] == [
        "AU\\x1ebob\\x1euser\\x1falice"
    ]


def test_undecodable_records_are_findings_not_crashes(tmp_path: Path) -> None:
    """The evil fixture's unprefixed keys are read as ≤3.5 mailbox names whose values decode
    as neither dlist nor text: each is an error naming its key, the rest is still checked."""
    db = database.read_database(DATA / "evil_twoskip.db")
    found = [f for f in dbchecks.run_checks(db) if f.check == "undecodable_record"]
    assert sorted(f.subject for f in found) == [
        "\\xff\\xfe",
        "key\\x09with\\x00nul",
        "plain",
        "tab\\x09value",
    ]
    assert {f.severity for f in found} == {"error"}
    assert next(f for f in found if f.subject == "plain").detail["key_hex"] == b"plain".hex()
    policy = tmp_path / "p.toml"
    policy.write_text('version = 1\n[[rules]]\nid = "r"\nkind = "racl_repair"\nlegal_basis = "x"\n')
    argv = ["plan", "cyrus", "--policy", str(policy), str(DATA / "evil_twoskip.db")]
    assert cli.main([*argv, "--out", str(tmp_path / "plan")]) == 2
    assert not (tmp_path / "plan").exists()
    # The audit it made says why, and planning from it refuses the same way.
    audit_dir = tmp_path / "plan.audit"
    assert (audit_dir / "findings.json").is_file()
    with pytest.raises(ConfigError, match=r"evil_twoskip\.db: 4 mailbox record\(s\) do not dec"):
        planning.plan_from_audit(audit_dir, planning.policy_of(policy), tmp_path / "p2")


def test_unreclaimed_history_counts_what_a_repack_would_drop() -> None:
    """The fixture's history: bob lost two RACL keys (DELETEs), superseded records remain."""
    parsed = twoskip.read(DB, history=True)
    found = dbchecks.unreclaimed_history(Database.from_file(parsed, "m"))
    assert [(f.check, f.severity, f.subject) for f in found] == [
        ("unreclaimed_history", "info", "m")
    ]
    detail = found[0].detail
    gone = {b"AU\x1ebob\x1euser\x1falice\x1fShared", b"AU\x1ebob\x1euser\x1falice\x1fDot.ted"}
    assert {r.key for r in parsed.history if r.type == "DELETE"} == gone
    assert (detail["delete_records"], detail["keys_gone"], detail["racl_keys_gone"]) == (2, 2, 2)
    records_by_key: dict[bytes, int] = {}
    for r in parsed.history:
        if r.type == "RECORD":
            records_by_key[r.key] = records_by_key.get(r.key, 0) + 1
    # every version but the live one of each key, and every version of a deleted key
    expected = sum(n - 1 for n in records_by_key.values()) + len(gone)
    assert detail["superseded_records"] == expected == 6
    assert found[0].bytes == detail["bytes"] > 0
    # Without history (a dump, or a read without it) there is nothing to say.
    assert dbchecks.unreclaimed_history(Database.from_file(twoskip.read(DB), "m")) == []


def test_hide_finding_pseudonymises_identifiers_and_mailboxes_but_not_admins() -> None:
    from mqforensics.systems.cyrus import pseudonyms

    added = [b"AU\x1ecyrus\x1euser\x1falice", b"AU\x1ezoe\x1euser\x1falice"]
    db = Database("m", sorted([*ITEMS, *((k, b"") for k in added)]))
    rows = {
        f.subject: {**dict(zip(COLUMNS, f.as_row(), strict=True)), "detail": f.detail}
        for f in dbchecks.run_checks(db)
    }
    admin = pseudonyms.hide_finding(rows["AU\\x1ecyrus\\x1euser\\x1falice"])
    alice = pseudonymize_address("alice")
    assert admin["subject"] == f"AU\\x1ecyrus\\x1euser\\x1f{alice}"
    assert admin["detail"]["identifier"] == "cyrus" and "key_hex" not in admin["detail"]
    stale = pseudonyms.hide_finding(rows["AU\\x1ezoe\\x1euser\\x1falice"])
    assert stale["subject"] == f"AU\\x1e{pseudonymize_address('zoe')}\\x1euser\\x1f{alice}"
    assert stale["detail"]["mailbox"] == f"user.{alice}"
    dangling = pseudonyms.hide_finding(rows["dave"])
    assert dangling["subject"] == pseudonymize_address("dave")
    assert dangling["detail"]["grants"][0]["mailbox"] == f"user.{alice}.Shared"
    # The finding itself is left as it was (findings.raw.json keeps it exact).
    assert rows["dave"]["subject"] == "dave"
    personal = {
        **rows["dave"],
        "check": "personal_data",
        "scope": "acl",
        "subject": "user.bob cyrus",
        "detail": {"mailbox": "user.bob", "identifier": "cyrus", "owner": "bob", "admin": True},
    }
    hidden = pseudonyms.hide_finding(personal)
    bob = pseudonymize_address("bob")
    assert hidden["subject"] == f"user.{bob} cyrus"
    assert hidden["detail"] == {"mailbox": f"user.{bob}", "identifier": "cyrus", "owner": bob,
                                "admin": True}  # fmt: skip
