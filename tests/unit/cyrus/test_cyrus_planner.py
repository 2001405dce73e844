"""The Cyrus planner on the findings of the real 3.6.1 fixture, with keys removed and added in
memory: it reads findings only, and every action cites the findings that justify it."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.errors import ConfigError
from mqforensics.privacy import pseudonymize_address, pseudonymize_text
from mqforensics.retention.manifest import read_plan, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.cyrus import plan as planner
from mqforensics.systems.cyrus import pseudonyms, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.options import PurgeOptions
from mqforensics.systems.cyrus.plan import (
    ADMIN_RIGHTS,
    DELETE_ACL,
    OWNER_RIGHTS,
    RACL_ADD,
    RACL_REMOVE,
    REBUILD,
    TOMBSTONE,
)
from mqforensics.systems.cyrus.purge import RaclExecutor, build_executors
from mqforensics.views.plan_report import render_text
from tests.unit.cyrus.cyrus_findings import finding_rows, keyed_subject, manifest

DB = Path(__file__).resolve().parents[2] / "data" / "cyrus" / "mailboxes_twoskip.db"
ITEMS = twoskip.read(DB).items()
REPAIR = Rule("repair", "racl_repair", "integrity", systems=("cyrus",))
BOB_ALICE = b"AU\x1ebob\x1euser\x1falice"
STALE = b"AU\x1ezoe\x1euser\x1falice"
OWNER = b"AU\x1ealice\x1euser\x1falice"


def _policy(*rules: Rule) -> Policy:
    return Policy("p.toml", "0" * 64, rules)


def _erase(address: str, rule_id: str = "erase") -> Rule:
    # As planning gives it: the rule's subjects keyed with the audit's key.
    return Rule(rule_id, "erase_subject", "Art. 17", subjects=(keyed_subject(address),))


def _edited(
    remove: tuple[bytes, ...] = (), add: tuple[bytes, ...] = (), name: str = "m"
) -> Database:
    items = sorted([(k, v) for k, v in ITEMS if k not in remove] + [(k, b"") for k in add])
    return Database(name, items)


def _plan(
    *dbs: Database, rules: tuple[Rule, ...], default_domain: str | None = None, erase=()
) -> planner.PlanParts:
    findings = finding_rows(*dbs, default_domain=default_domain, erase=erase)
    parts = planner.plan(findings, _policy(*rules), manifest(*dbs, default_domain=default_domain))
    ids = {row["id"]: row for row in findings}
    for item in [*parts.actions, *parts.deferred]:
        assert item.findings and all(ident in ids for ident in item.findings), item
    return parts


def _keys(actions: list, kind: str) -> list[bytes]:
    return [bytes.fromhex(a.target["key_hex"]) for a in actions if a.kind == kind]


def test_consistent_database_needs_no_repair() -> None:
    plan = _plan(Database("m", ITEMS), rules=(REPAIR,))
    assert plan.actions == [] and plan.deferred == [] and plan.notes == []


def test_repair_adds_missing_and_removes_unneeded_keys_removals_first() -> None:
    db = _edited(remove=(BOB_ALICE,), add=(STALE, OWNER))
    findings = finding_rows(db)
    plan = planner.plan(findings, _policy(REPAIR), manifest(db))
    assert [a.kind for a in plan.actions] == [RACL_REMOVE, RACL_REMOVE, RACL_ADD]
    assert sorted(_keys(plan.actions, RACL_REMOVE)) == sorted([STALE, OWNER])
    assert _keys(plan.actions, RACL_ADD) == [BOB_ALICE]
    add = plan.actions[-1]
    assert add.target == {"file": "m", "key_hex": BOB_ALICE.hex()}
    assert add.precondition == {
        "present": False,
        "mailbox": "user.alice",
        "identifier": "bob",
        "rights": "lr",
    }
    reasons = {a.reason for a in plan.actions if a.kind == RACL_REMOVE}
    assert reasons == {"racl_stale: no_grant", "racl_forbidden: owner"}
    assert all(a.rules == ("repair",) for a in plan.actions)
    # Each action cites the one finding of its key.
    by_id = {row["id"]: row for row in findings}
    for action in plan.actions:
        (cited,) = action.findings
        assert by_id[cited]["detail"]["key_hex"] == action.target["key_hex"]
        assert by_id[cited]["check"] in ("racl_missing", "racl_stale", "racl_forbidden")


def test_most_keys_missing_defers_the_adds_to_a_rebuild() -> None:
    racl = tuple(
        k for k, _ in ITEMS if k.startswith(b"AU") or (k.startswith(b"AS\x1e") and k != b"AS\x1e")
    )
    plan = _plan(_edited(remove=racl), rules=(REPAIR,))
    assert plan.actions == []
    assert sorted(bytes.fromhex(d.target["key_hex"]) for d in plan.deferred) == sorted(racl)
    assert {d.reason for d in plan.deferred} == {REBUILD}
    assert plan.notes == [
        f"{len(racl)} of {len(racl)} expected RACL keys of m are missing: a rebuild is planned "
        "instead of single adds (see the deferred items)"
    ]


def test_wrong_marker_leaves_the_adds_to_ctl_cyrusdb() -> None:
    items = [(k, b"1" if k == b"AS\x1e" else v) for k, v in ITEMS if k != BOB_ALICE]
    plan = _plan(Database("m", items), rules=(REPAIR,))
    assert plan.actions == [] and [d.reason for d in plan.deferred] == [REBUILD]
    assert plan.notes and plan.notes[0].startswith("the RACL marker of m is wrong (wrong_value)")


def test_erasure_of_a_grantee_and_owner() -> None:
    # bob: grantee on user.alice (lr), user.alice.Shared (s) and example.com!user.eve (lr);
    # owner of user.bob and DELETED.user.bob.Trash (where alice has lr).
    plan = _plan(
        Database("m", ITEMS),
        rules=(_erase("bob@example.org"),),
        default_domain="example.org",
        erase=["bob@example.org"],
    )
    assert {(a.target["mailbox"], a.target["identifier"], a.reason) for a in plan.actions} == {
        ("user.alice", "bob", planner.GRANT_TO_SUBJECT),
        ("user.alice.Shared", "bob", planner.GRANT_TO_SUBJECT),
        ("example.com!user.eve", "bob", planner.GRANT_TO_SUBJECT),
        ("DELETED.user.bob.Trash.65A0B1C2", "alice", planner.GRANT_ON_SUBJECTS_MAILBOX),
    }
    assert all(a.kind == DELETE_ACL for a in plan.actions)
    assert {(d.target["mailbox"], d.target["identifier"], d.reason) for d in plan.deferred} == {
        ("user.bob", "bob", OWNER_RIGHTS),
        ("DELETED.user.bob.Trash.65A0B1C2", "bob", OWNER_RIGHTS),
        ("user.alice.Dot^ted", "bob", TOMBSTONE),
        ("user.bob.Old", "bob", TOMBSTONE),
        ("user.bob.Old", "alice", TOMBSTONE),
    }
    lr = next(a for a in plan.actions if a.target["mailbox"] == "user.alice")
    assert lr.precondition == {"rights": "lr"} and lr.rules == ("erase",)


def test_erasure_defers_an_admins_rights() -> None:
    items = [
        (k, v.replace(b"A %(", b"A %(cyrus lrswipkxtecda ", 1) if k == b"Nuser\x1fbob" else v)
        for k, v in ITEMS
    ]
    plan = _plan(
        Database("m", items),
        rules=(_erase("bob@example.org"),),
        default_domain="example.org",
        erase=["bob@example.org"],
    )
    assert ("user.bob", "cyrus", ADMIN_RIGHTS) in {
        (d.target["mailbox"], d.target["identifier"], d.reason) for d in plan.deferred
    }


def test_erasure_without_default_domain_matches_qualified_identifiers_only() -> None:
    plan = _plan(
        Database("m", ITEMS), rules=(_erase("frank@example.com"),), erase=["frank@example.com"]
    )
    assert [(a.target["mailbox"], a.target["identifier"]) for a in plan.actions] == [
        ("example.com!user.eve", "frank@example.com")
    ]
    assert len(plan.notes) == 2 and "audit again with --default-domain" in plan.notes[1]
    assert "(ctl_cyrusdb -c)" in plan.notes[0]  # old ACL values stay until a checkpoint


def test_only_the_rules_whose_subjects_an_entry_holds_select_it() -> None:
    rules = (_erase("frank@example.com", "e-frank"), _erase("carol@example.com", "e-carol"))
    plan = _plan(
        Database("m", ITEMS),
        rules=rules,
        erase=["frank@example.com", "carol@example.com"],
    )
    assert [(a.target["identifier"], a.rules) for a in plan.actions] == [
        ("frank@example.com", ("e-frank",))
    ]


def test_deleteacl_makes_its_key_unneeded() -> None:
    """A grant the plan deletes gets no RACL add, even when its key is missing."""
    plan = _plan(
        _edited(remove=(BOB_ALICE,)),
        rules=(REPAIR, _erase("bob@example.org")),
        default_domain="example.org",
        erase=["bob@example.org"],
    )
    assert _keys(plan.actions, RACL_ADD) == []
    assert ("user.alice", "bob") in {
        (a.target["mailbox"], a.target["identifier"]) for a in plan.actions
    }


def test_several_databases_make_one_plan() -> None:
    """The same entry in two databases is one DELETEACL citing both findings; RACL repairs
    name the database they are for; rights that disagree are deferred, not guessed."""
    one, two = Database("one", ITEMS), _edited(remove=(BOB_ALICE,), name="two")
    findings = finding_rows(one, two, erase=["frank@example.com"])
    policy = _policy(REPAIR, _erase("frank@example.com"))
    plan = planner.plan(findings, policy, manifest(one, two))
    (add,) = [a for a in plan.actions if a.kind == RACL_ADD]
    assert add.target == {"file": "two", "key_hex": BOB_ALICE.hex()}
    (delete,) = [a for a in plan.actions if a.kind == DELETE_ACL]
    cited = {row["id"]: row["detail"]["file"] for row in findings if row["id"] in delete.findings}
    assert sorted(cited.values()) == ["one", "two"]
    assert delete.precondition == {"rights": "lrs"}

    changed = [
        (k, v.replace(b"frank@example.com lrs", b"frank@example.com lr"))
        if k.startswith(b"Nexample.com")
        else (k, v)
        for k, v in ITEMS
    ]
    drifted = Database("two", changed)
    plan = planner.plan(
        finding_rows(one, drifted, erase=["frank@example.com"]), policy, manifest(one, drifted)
    )
    assert [a.kind for a in plan.actions] == []
    (deferred,) = plan.deferred
    assert deferred.reason == planner.DISAGREE.format("lr (live); lrs (live)")
    assert len(deferred.findings) == 2


def test_a_partial_read_is_refused_naming_the_file() -> None:
    data = bytearray(DB.read_bytes())
    data[0x3C0 + 96 - 20] ^= 1
    broken = Database.from_file(twoskip.read(bytes(data), name="/copies/b1.db"))
    findings = finding_rows(Database("ok", ITEMS), broken)
    with pytest.raises(ConfigError, match=r"^\[mqforensics:ConfigError\] /copies/b1\.db: 1 int"):
        planner.plan(findings, _policy(REPAIR), manifest(broken))
    with pytest.raises(ConfigError, match="crc_tail at offset 0x3c0"):
        planner.plan(findings, _policy(), manifest(broken))


def test_a_dump_without_records_cannot_be_repaired() -> None:
    ctl = dataclasses.replace(
        Database("ctl.json", None, (), Database("m", ITEMS).entries), format="ctl_mboxlist"
    )
    plan = planner.plan(finding_rows(ctl), _policy(REPAIR), manifest(ctl))
    assert plan.actions == [] and plan.notes == [
        "ctl.json holds mailbox entries only (ctl_mboxlist -d): no RACL repair is possible from it"
    ]


def _written(tmp_path: Path, parts: planner.PlanParts, policy: Policy, name: str = "plan"):
    return write_plan(
        tmp_path / name,
        system="cyrus",
        as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=policy,
        inputs={"version": "3.6", "admins": ["cyrus"], "default_domain": "example.org"},
        actions=parts.actions,
        deferred=parts.deferred,
        notes=parts.notes,
    )


def test_pseudonymised_targets_and_report(tmp_path: Path) -> None:
    target = pseudonyms.target({"mailbox": "user.alice.Shared", "identifier": "-dave"})
    assert target == {
        "mailbox": f"user.{pseudonymize_address('alice')}.Shared",
        "identifier": f"-{pseudonymize_address('dave')}",
    }
    hidden = pseudonyms.target({"file": "/c/m.db", "key_hex": BOB_ALICE.hex()})
    assert hidden == {
        "file": "/c/m.db",
        "key": f"AU\\x1e{pseudonymize_address('bob')}\\x1euser\\x1f{pseudonymize_address('alice')}",
    }
    assert pseudonymize_text("to=alice@example.org") == (
        f"to={pseudonymize_address('alice@example.org')}"
    )
    policy = _policy(REPAIR, _erase("bob@example.org"))
    parts = _plan(
        _edited(add=(STALE,)),
        rules=policy.rules,
        default_domain="example.org",
        erase=["bob@example.org"],
    )
    written = read_plan(_written(tmp_path, parts, policy).directory)
    hide_target = systems.get(written.system).hide_target
    text = render_text(written, hide_target=hide_target)
    assert "bob" not in text and "alice" not in text and "zoe" not in text
    revealed = render_text(written, reveal=True, hide_target=hide_target)
    assert "identifier=bob mailbox=user.alice" in revealed
    assert "key_hex=" in revealed


def test_racl_repairs_of_several_databases_are_refused_by_the_purge(tmp_path: Path) -> None:
    one, two = _edited(remove=(BOB_ALICE,), name="one"), _edited(add=(STALE,), name="two")
    policy = _policy(REPAIR)
    parts = planner.plan(finding_rows(one, two), policy, manifest(one, two))
    assert {a.target["file"] for a in parts.actions} == {"one", "two"}
    written = _written(tmp_path, parts, policy)
    options = PurgeOptions(cyrus_config="/etc/imapd.conf")
    with pytest.raises(ConfigError, match=r"RACL keys of 2 databases \(one, two\)"):
        build_executors(written, options)
    # One database's repairs get their executor, for the database imapd.conf names.
    single = planner.PlanParts([a for a in parts.actions if a.target["file"] == "one"])
    plan = _written(tmp_path, single, policy, "single")
    config = tmp_path / "imapd.conf"
    config.write_text(f"configdirectory: {tmp_path / 'conf'}\n")
    (executor,) = build_executors(plan, PurgeOptions(cyrus_config=str(config)))
    assert isinstance(executor, RaclExecutor)
    assert executor.tool.database == tmp_path / "conf" / "mailboxes.db"
