"""The readers and checks against what the real Cyrus 3.6 wrote: users, folders, shares, renames
and deletes made over IMAP (`cyrus_support.build`), then the real `mailboxes.db`, its dumps made
by Cyrus's own tools, copies with planted inconsistencies and corrupted copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.services import cyrus as cyrus_service
from mqforensics.systems.cyrus import dbchecks, dumps, records, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.dbtool import DbTool
from tests.integration.cyrus import cyrus_support as support
from tests.integration.cyrus.cyrus_support import DOMAIN

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scenario(cyrus):
    return support.build(cyrus)


@pytest.fixture(scope="module")
def live_copy(cyrus, scenario, tmp_path_factory) -> Path:
    """The live database right after the scenario (copied: the checks never read the live file)."""
    return support.snapshot(cyrus, tmp_path_factory.mktemp("cyrus") / "mailboxes.db")


@pytest.fixture(scope="module")
def db(live_copy) -> Database:
    return support.read_db(live_copy)


def _live_entries(db: Database) -> list[records.MailboxEntry]:
    return [e for e in db.entries if not e.deleted and not e.intermediate]


def test_every_acl_read_equals_getacl(cyrus, scenario, db):
    admin = support.admin(cyrus)
    try:
        listed = set(admin.mailboxes())
        entries = _live_entries(db)
        # Every live record is a mailbox the admin lists under the name we derive, and back.
        assert {admin.name_of(e.name) for e in entries} == listed
        t = scenario.tag
        mine = {admin.name_of(e.name) for e in entries if t in e.name}
        deleted = {name for name in mine if name.startswith("DELETED/")}
        assert mine - deleted == {
            f"user/ann{t}", f"user/ann{t}/Archive", f"user/ann{t}/Archive/Q1",
            f"user/ann{t}/Private", f"user/ben{t}", f"user/ben{t}/Notes", f"user/eve{t}",
            f"user/cat{t}@other.test", f"shared{t}", f"shared{t}/board",
        }  # fmt: skip
        assert {name.rpartition("/")[0] for name in deleted} == {
            f"DELETED/user/ann{t}/Dot.ted",
            f"DELETED/user/dan{t}",
        }
        for entry in entries:
            assert dict(entry.acl) == admin.getacl(admin.name_of(entry.name)), entry.name
    finally:
        admin.close()


def test_renames_and_deletes_leave_tombstones_with_history(db, scenario):
    by_name = {e.name: e for e in db.entries}
    ann = f"user.ann{scenario.tag}"
    assert by_name[f"{ann}.Projects"].deleted and by_name[f"{ann}.Projects"].acl == ()
    archive = by_name[f"{ann}.Archive"]
    # The I record (by uniqueid) keeps the name history of the rename.
    by_id = dict(db.items or ())[b"I" + (archive.uniqueid or "").encode()]
    history = records.decode_value(archive.name, by_id).history
    assert [h["N"] for h in history] == [f"user\x1fann{scenario.tag}\x1fProjects"]
    deleted = [n for n in by_name if n.startswith(f"DELETED.{ann}.Dot^ted.")]
    assert len(deleted) == 1 and not by_name[deleted[0]].deleted
    assert dict(by_name[deleted[0]].acl)[f"ben{scenario.tag}"] == "lrs"


def test_racl_keys_equal_cyrus_rule(db, scenario):
    present = {k for k, _ in db.items or () if records.classify_key(k).kind == "racl"}
    assert records.RACL_MARKER in dict(db.items or ())
    assert present == records.expected_racls(db.entries, "3.6", ["cyrus"])
    t, US, RS = scenario.tag, "\x1f", "\x1e"
    archive = f"user{US}ann{t}{US}Archive"
    mine = {k.decode() for k in present if t.encode() in k}
    assert mine == {
        f"AU{RS}ben{t}@{DOMAIN}{RS}{archive}",
        # no key for "-ben w" (no l or r) nor for "eve p"
        f"AU{RS}cat{t}@other.test{RS}{archive}",
        f"AU{RS}anyone{RS}{archive}",
        f"AU{RS}dan{t}@{DOMAIN}{RS}{archive}",  # dan's account is gone, his grant and key stay
        f"AU{RS}ben{t}{RS}{archive}{US}Q1",
        f"AU{RS}eve{t}{RS}user{US}ann{t}{US}Private",
        f"AU{RS}ben{t}{RS}DELETED{US}user{US}ann{t}{US}Dot.ted{US}"
        + next(
            k.decode().rpartition(US)[2]
            for k in present
            if b"DELETED" in k and f"ann{t}".encode() in k
        ),
        f"AU{RS}ann{t}@{DOMAIN}{RS}user{US}ben{t}{US}Notes",
        f"AU{RS}eve{t}@{DOMAIN}{RS}user{US}ben{t}{US}Notes",
        f"AS{RS}ben{t}@{DOMAIN}{RS}shared{t}{US}board",
        f"AS{RS}group:staff{RS}shared{t}{US}board",
        f"AS{RS}ghost{t}{RS}shared{t}{US}board",
    }
    assert support.racl_findings(db) == []


def test_acl_findings_on_the_scenario(db, scenario):
    t = scenario.tag
    found = [f for f in dbchecks.run_checks(db, default_domain=DOMAIN) if t in f.subject]
    assert sorted((f.check, f.subject) for f in found) == sorted(
        [
            ("anyone_share", f"user.ann{t}.Archive anyone"),
            ("cross_domain_share", f"user.ann{t}.Archive cat{t}@other.test"),
            ("dangling_acl_identifier", f"dan{t}@{DOMAIN}"),
            ("dangling_acl_identifier", f"ghost{t}"),
            # written with the default domain: Cyrus matches none of these to a login
            ("noncanonical_acl_identifier", f"ann{t}@{DOMAIN}"),
            ("noncanonical_acl_identifier", f"ben{t}@{DOMAIN}"),
            ("noncanonical_acl_identifier", f"dan{t}@{DOMAIN}"),
            ("noncanonical_acl_identifier", f"eve{t}@{DOMAIN}"),
        ]
    )
    ben = next(f for f in found if f.subject == f"ben{t}@{DOMAIN}")
    assert ben.detail["canonical"] == f"ben{t}"
    assert sorted((g["mailbox"], g["negative"]) for g in ben.detail["grants"]) == [
        (f"shared{t}.board", False),
        (f"user.ann{t}.Archive", False),
        (f"user.ann{t}.Archive", True),  # "-ben@example.org w"
    ]
    dangling = next(f for f in found if f.subject == f"dan{t}@{DOMAIN}")
    assert dangling.detail["inbox"] == f"user.dan{t}"
    assert dangling.detail["grants"] == [
        {"mailbox": f"user.ann{t}.Archive", "rights": "lr", "negative": False}
    ]
    rows = [r for r in dbchecks.sharing_report(db.entries, ["cyrus"], DOMAIN) if t in r["mailbox"]]
    assert {(r["mailbox"], r["grantee"], r["rights"], r["effective"]) for r in rows} >= {
        (f"user.ben{t}.Notes", f"ann{t}@{DOMAIN}", "lrsw", False),
        (f"user.ann{t}.Archive.Q1", f"ben{t}", "r", True),
    }
    assert not any(r["grantee"] == f"ann{t}" for r in rows)  # the owner's own rights


def test_dumps_by_cyrus_tools_read_the_same(cyrus, live_copy, db, tmp_path):
    copy = cyrus_service.copy_for_tools(cyrus, live_copy)
    try:
        show = cyrus_service.run_tool(cyrus, "cyr_dbtool", str(copy), "twoskip", "show")
        flat = copy.with_suffix(".flat")
        cyrus_service.run_tool(cyrus, "cvt_cyrusdb", str(copy), "twoskip", str(flat), "flat")
        flat_items = dumps.read_flat(flat.read_bytes())
        batch = DbTool(Path(cyrus["config"]), copy).show()
    finally:
        copy.unlink()
        copy.with_suffix(".flat").unlink(missing_ok=True)
    items = list(db.items or ())
    assert dumps.read_show(show.encode(errors="surrogateescape")) == items
    assert flat_items == items and batch == items
    dump = tmp_path / "mailboxes.show"
    dump.write_bytes(show.encode(errors="surrogateescape"))
    out = tmp_path / "out"
    argv = ["audit", "cyrus", str(live_copy), str(dump), "--out", str(out)]
    assert cli.main([*argv, "--default-domain", DOMAIN, "--reveal-addresses"]) == 0
    rows = json.loads((out / "findings.json").read_text())
    by_file: dict[str, set] = {}
    for row in rows:
        by_file.setdefault(row["detail"]["file"], set()).add((row["check"], row["subject"]))
    # Only the file itself holds history (superseded records before the next repack).
    history = {("unreclaimed_history", str(live_copy))}
    assert history <= by_file[str(live_copy)]
    assert by_file[str(live_copy)] - history == by_file[str(dump)]


def test_planted_inconsistencies_are_found_exactly(cyrus, live_copy, scenario):
    """Keys removed and stale keys added with Cyrus's own cyr_dbtool, on a copy."""
    t, US, RS = scenario.tag, b"\x1f", b"\x1e"
    archive = b"user" + US + f"ann{t}".encode() + US + b"Archive"
    removed = b"AU" + RS + f"cat{t}@other.test".encode() + RS + archive
    removed_shared = b"AS" + RS + b"group:staff" + RS + f"shared{t}".encode() + US + b"board"
    planted = {
        b"AU" + RS + f"zoe{t}".encode() + RS + archive: ("racl_stale", "no_grant"),
        b"AU" + RS + f"eve{t}".encode() + RS + archive: ("racl_stale", "rights_not_enough"),
        b"AU" + RS + f"ann{t}".encode() + RS + archive: ("racl_forbidden", "owner"),
        b"AU" + RS + b"cyrus" + RS + archive: ("racl_forbidden", "admin"),
        b"AU" + RS + f"ben{t}".encode() + RS + archive[:-7] + b"Projects": (
            "racl_forbidden",
            "tombstone",
        ),
        b"AS" + RS + f"ben{t}@{DOMAIN}".encode() + RS + archive: ("racl_stale", "wrong_namespace"),
        b"AU" + RS + b"bob" + RS + b"user" + US + b"nobody" + t.encode(): (
            "racl_stale",
            "no_mailbox",
        ),
    }
    copy = cyrus_service.copy_for_tools(cyrus, live_copy)
    try:
        tool = DbTool(Path(cyrus["config"]), copy)
        tool.delete_keys([removed, removed_shared])
        tool.set_keys([(key, b"") for key in planted])
        db = support.read_db(copy)
    finally:
        copy.unlink()
    found = support.racl_findings(db)
    assert sorted((f.check, f.subject, f.detail.get("reason")) for f in found) == sorted(
        [
            ("racl_missing", dbchecks.visible(removed), None),
            ("racl_missing", dbchecks.visible(removed_shared), None),
            *((check, dbchecks.visible(key), reason) for key, (check, reason) in planted.items()),
        ]
    )
    assert {f.severity for f in found if f.check == "racl_missing"} == {"error"}


def _record_of(parsed: twoskip.TwoskipFile, key: bytes) -> twoskip.Record:
    return next(r for r in parsed.records if r.key == key)


def test_bit_flip_in_a_live_record_is_located(live_copy, db, scenario, tmp_path):
    data = bytearray(live_copy.read_bytes())
    parsed = twoskip.read(bytes(data))
    key = next(k for k, _ in db.items or () if f"cat{scenario.tag}".encode() in k and k[:1] == b"A")
    record = _record_of(parsed, key)
    # The last byte of the record's stored key/value CRC (after the 8-byte head, level+1
    # pointers and the head CRC): the key itself stays intact and in order.
    data[record.offset + 8 + 8 * (record.level + 1) + 7] ^= 0x01
    broken = tmp_path / "flipped.db"
    broken.write_bytes(bytes(data))
    result = twoskip.read(bytes(data), name=str(broken))
    assert [(p.kind, p.offset) for p in result.problems] == [("crc_tail", record.offset)]
    assert not result.complete and key not in dict(result.items())
    assert len(result.records) == len(parsed.records) - 1
    found = dbchecks.integrity(Database.from_file(result))
    assert [(f.severity, f.subject) for f in found] == [
        ("critical", f"{broken}@{record.offset:#x}")
    ]
    out = tmp_path / "out"
    assert cli.main(["audit", "cyrus", str(broken), "--out", str(out)]) == 1


def test_truncated_copy_is_never_read_as_complete(live_copy, tmp_path):
    data = live_copy.read_bytes()
    parsed = twoskip.read(data)
    last = max(parsed.records, key=lambda r: r.offset)
    cut = last.offset + 12  # inside the last record written
    result = twoskip.read(data[:cut])
    kinds = [(p.kind, p.offset) for p in result.problems]
    assert ("truncated", cut) in kinds and not result.complete
    assert last.key not in dict(result.items())
    # Nothing is invented: what is read is exactly the whole file's records, minus some.
    assert set(result.items()) < set(parsed.items())
