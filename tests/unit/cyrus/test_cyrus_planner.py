"""The Cyrus planner on the real 3.6.1 fixture, with keys removed and added in memory."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from mqforensics.privacy import pseudonymize_address, pseudonymize_text
from mqforensics.retention.manifest import read_plan, write_plan
from mqforensics.retention.policy import Policy, Rule, subject_hash
from mqforensics.systems.cyrus import planner, pseudonyms, twoskip
from mqforensics.systems.cyrus.checks import Database
from mqforensics.systems.cyrus.planner import (
    DELETE_ACL,
    OWNER_RIGHTS,
    RACL_ADD,
    RACL_REMOVE,
    REBUILD,
    TOMBSTONE,
    plan_cleanup,
)
from mqforensics.views.plan_report import render_text

DB = Path(__file__).resolve().parents[2] / "data" / "cyrus" / "mailboxes_twoskip.db"
ITEMS = twoskip.read(DB).items()
REPAIR = Rule("repair", "racl_repair", "integrity", systems=("cyrus",))
BOB_ALICE = b"AU\x1ebob\x1euser\x1falice"
STALE = b"AU\x1ezoe\x1euser\x1falice"
OWNER = b"AU\x1ealice\x1euser\x1falice"


def _policy(*rules: Rule) -> Policy:
    return Policy("p.toml", "0" * 64, rules)


def _erase(address: str) -> Rule:
    return Rule("erase", "erase_subject", "Art. 17", subjects=(subject_hash(address),))


def _edited(remove: tuple[bytes, ...] = (), add: tuple[bytes, ...] = ()) -> Database:
    items = sorted([(k, v) for k, v in ITEMS if k not in remove] + [(k, b"") for k in add])
    return Database("m", items)


def _keys(actions: list, kind: str) -> list[bytes]:
    return [bytes.fromhex(a.target["key_hex"]) for a in actions if a.kind == kind]


def test_consistent_database_needs_no_repair() -> None:
    plan = plan_cleanup(Database("m", ITEMS), _policy(REPAIR))
    assert plan.actions == [] and plan.deferred == [] and plan.notes == []


def test_repair_adds_missing_and_removes_unneeded_keys_removals_first() -> None:
    plan = plan_cleanup(_edited(remove=(BOB_ALICE,), add=(STALE, OWNER)), _policy(REPAIR))
    assert [a.kind for a in plan.actions] == [RACL_REMOVE, RACL_REMOVE, RACL_ADD]
    assert sorted(_keys(plan.actions, RACL_REMOVE)) == sorted([STALE, OWNER])
    assert _keys(plan.actions, RACL_ADD) == [BOB_ALICE]
    add = plan.actions[-1]
    assert add.precondition == {
        "present": False,
        "mailbox": "user.alice",
        "identifier": "bob",
        "rights": "lr",
    }
    reasons = {a.reason for a in plan.actions if a.kind == RACL_REMOVE}
    assert reasons == {"racl_stale: no_grant", "racl_forbidden: owner"}
    assert all(a.rules == ("repair",) for a in plan.actions)


def test_most_keys_missing_defers_the_adds_to_a_rebuild() -> None:
    racl = tuple(
        k for k, _ in ITEMS if k.startswith(b"AU") or (k.startswith(b"AS\x1e") and k != b"AS\x1e")
    )
    plan = plan_cleanup(_edited(remove=racl), _policy(REPAIR))
    assert plan.actions == []
    assert sorted(bytes.fromhex(d.target["key_hex"]) for d in plan.deferred) == sorted(racl)
    assert {d.reason for d in plan.deferred} == {REBUILD}
    assert plan.notes == [
        f"{len(racl)} of {len(racl)} expected RACL keys are missing: a rebuild is planned "
        "instead of single adds (see the deferred items)"
    ]


def test_wrong_marker_leaves_the_adds_to_ctl_cyrusdb() -> None:
    items = [(k, b"1" if k == b"AS\x1e" else v) for k, v in ITEMS if k != BOB_ALICE]
    plan = plan_cleanup(Database("m", items), _policy(REPAIR))
    assert plan.actions == [] and [d.reason for d in plan.deferred] == [REBUILD]
    assert plan.notes and plan.notes[0].startswith("the RACL marker is wrong (wrong_value)")


def test_erasure_of_a_grantee_and_owner() -> None:
    # bob: grantee on user.alice (lr), user.alice.Shared (s) and example.com!user.eve (lr);
    # owner of user.bob and DELETED.user.bob.Trash (where alice has lr).
    plan = plan_cleanup(
        Database("m", ITEMS), _policy(_erase("bob@example.org")), default_domain="example.org"
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


def test_erasure_without_default_domain_matches_qualified_identifiers_only() -> None:
    plan = plan_cleanup(Database("m", ITEMS), _policy(_erase("frank@example.com")))
    assert [(a.target["mailbox"], a.target["identifier"]) for a in plan.actions] == [
        ("example.com!user.eve", "frank@example.com")
    ]
    assert len(plan.notes) == 2 and "give --default-domain" in plan.notes[1]
    assert "(ctl_cyrusdb -c)" in plan.notes[0]  # old ACL values stay until a checkpoint


def test_deleteacl_makes_its_key_unneeded() -> None:
    """A grant the plan deletes gets no RACL add, even when its key is missing."""
    db = _edited(remove=(BOB_ALICE,))
    plan = plan_cleanup(
        db, _policy(REPAIR, _erase("bob@example.org")), default_domain="example.org"
    )
    assert _keys(plan.actions, RACL_ADD) == []
    assert ("user.alice", "bob") in {
        (a.target["mailbox"], a.target["identifier"]) for a in plan.actions
    }


def test_pseudonymised_targets_and_report(tmp_path: Path) -> None:
    target = pseudonyms.target({"mailbox": "user.alice.Shared", "identifier": "-dave"})
    assert target == {
        "mailbox": f"user.{pseudonymize_address('alice')}.Shared",
        "identifier": f"-{pseudonymize_address('dave')}",
    }
    hidden = pseudonyms.target({"key_hex": BOB_ALICE.hex()})
    assert hidden == {
        "key": f"AU\\x1e{pseudonymize_address('bob')}\\x1euser\\x1f{pseudonymize_address('alice')}"
    }
    assert pseudonymize_text("to=alice@example.org") == (
        f"to={pseudonymize_address('alice@example.org')}"
    )
    policy = _policy(REPAIR, _erase("bob@example.org"))
    plan = plan_cleanup(_edited(add=(STALE,)), policy, default_domain="example.org")
    out = tmp_path / "plan"
    write_plan(
        out,
        system="cyrus",
        as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=policy,
        inputs={"version": "3.6", "admins": ["cyrus"], "default_domain": "example.org"},
        actions=plan.actions,
        deferred=plan.deferred,
        notes=plan.notes,
    )
    written = read_plan(out)
    text = render_text(written)
    assert "bob" not in text and "alice" not in text and "zoe" not in text
    revealed = render_text(written, reveal=True)
    assert "identifier=bob mailbox=user.alice" in revealed
    assert "key_hex=" in revealed
