"""Content search of slimta envelopes written by the REAL python-slimta 5.0.5: a DiskStorage in
tests/data/slimta/content/ (`datasets/slimta/content_writer.py`, run under the slimta runtime;
``roles.json`` maps each role to the id slimta gave it, ``flat/<role>.eml`` is slimta's own
``Envelope.flatten()`` of it). Subjects are placed in one position each (the writer's comments);
the expected (subject, where) pairs below are written by hand from those comments, at both
depths, with decoys that must not match."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mqforensics import systems
from mqforensics.content_search import Searched, search_message
from mqforensics.findings import with_ids
from mqforensics.retention.policy import Policy, Rule
from mqforensics.subjects import erasure_subjects, keyed, keyed_all
from mqforensics.systems.slimta import checks, disk, fleet
from mqforensics.systems.slimta.frames import SlimtaFrames
from mqforensics.systems.slimta.items import Item
from mqforensics.systems.slimta.options import Settings
from mqforensics.systems.slimta.plan import DELETE_FILES, EVIDENCE, plan

DATA = Path(__file__).resolve().parents[2] / "data" / "slimta" / "content"
ROLES: dict[str, str] = json.loads((DATA / "roles.json").read_text())
LAYOUT = disk.DiskLayout(str(DATA / "env"), str(DATA / "meta"))
KEY = b"k" * 32
# name -> the address as the policy gives it (carol and dave in the other IDNA form than the
# messages write them).
SUBJECTS = {
    "alice": "alice@example.com",
    "bob": "bob@example.com",
    "carol": "carol@xn--bcher-kva.example",
    "dave": "dave@bücher.example",
}
E = "envelope"

HEADERS: dict[str, set[tuple[str, str]]] = {
    "env_sender": {("alice", E)},
    "env_rcpt": {("bob", E)},
    "list_from": {("alice", "header:from")},
    "reply_to": {("bob", "header:reply-to")},
    "sender_header": {("alice", "header:sender")},
    "received_for": {("bob", "header:received")},
    "delivered_to": {("alice", "header:delivered-to")},
    "encoded_name": {("bob", "header:cc")},
    "text_body": set(),
    "attachment": set(),
    "nested": set(),
    "decoys": set(),
    "mixed_case": {("alice", E), ("alice", "header:to"), ("bob", E), ("bob", "header:from")},
    "idna_unicode": {("carol", E), ("carol", "header:to")},
    "idna_ascii": {("dave", E), ("dave", "header:from")},
    "qp_soft_break": set(),
    "base64_body": set(),
    "smime": set(),
}
FULL = {
    **HEADERS,
    "text_body": {("bob", "body")},
    "attachment": {("alice", "attachment")},
    "nested": {("bob", "attachment"), ("alice", "attachment")},
    "qp_soft_break": {("bob", "body")},
    "base64_body": {("alice", "body")},
}
SMIME = [("body", "encrypted (S/MIME enveloped-data)")]


def policy_file(tmp_path: Path, depths: dict[str, str]) -> Path:
    """One erase_subject rule per subject, searching at its depth."""
    text = "version = 1\n"
    for name, depth in depths.items():
        text += (f'[[rules]]\nid = "erase-{name}"\nkind = "erase_subject"\n'
                 f'addresses = ["{SUBJECTS[name]}"]\nsearch = "{depth}"\n'
                 'legal_basis = "GDPR art. 17"\n')  # fmt: skip
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def searched_for(tmp_path: Path, depths: dict[str, str]) -> tuple[Searched, dict[str, str], Policy]:
    """What an audit with that policy searches, and each keyed hash's subject name."""
    policy = systems.load_policy(policy_file(tmp_path, depths))
    every = frozenset(keyed_all(erasure_subjects(policy), KEY))
    full = frozenset(keyed_all(erasure_subjects(policy, "full"), KEY))
    names = {keyed(h, KEY): r.id.removeprefix("erase-") for r in policy.rules for h in r.subjects}
    return Searched(KEY, every, full), names, policy


def read_all() -> dict[str, Item]:
    ids: list[tuple[str, int | None]] = [(message_id, None) for message_id in ROLES.values()]
    by_id = {item.id: item for item in disk.read_items(LAYOUT, ids, [])}
    return {role: by_id[message_id] for role, message_id in ROLES.items()}


def pairs(item: Item, names: dict[str, str]) -> set[tuple[str, str]]:
    assert item.found is not None
    return {(names[hit.subject], hit.where) for hit in item.found.hits}


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_each_position_found_at_each_depth_and_no_decoy(tmp_path: Path, depth: str) -> None:
    searched, names, _ = searched_for(tmp_path, dict.fromkeys(SUBJECTS, depth))
    expected = HEADERS if depth == "headers" else FULL
    assert sorted(expected) == sorted(ROLES)
    items = read_all()
    for item in items.values():
        item.search(searched)
    assert {role: pairs(item, names) for role, item in items.items()} == expected
    unreadable = {r: i.found.unreadable for r, i in items.items() if i.found and i.found.unreadable}
    assert unreadable == ({"smime": SMIME} if depth == "full" else {})


def test_each_rule_searches_at_its_own_depth(tmp_path: Path) -> None:
    """alice searched in full, bob in headers only: bob's body and attachment places are not
    looked at, alice's are."""
    searched, names, _ = searched_for(tmp_path, {"alice": "full", "bob": "headers"})
    items = read_all()
    for item in items.values():
        item.search(searched)
    got = {role: pairs(item, names) for role, item in items.items()}
    assert got["text_body"] == set() and got["qp_soft_break"] == set()
    assert got["base64_body"] == {("alice", "body")}
    assert got["nested"] == {("alice", "attachment")}
    assert got["received_for"] == {("bob", "header:received")}
    smime = items["smime"].found
    assert got["smime"] == set() and smime is not None and smime.unreadable == SMIME


def test_the_message_searched_is_what_slimta_sends(tmp_path: Path) -> None:
    """The reader's `flatten` finds exactly what a search of slimta's own ``Envelope.flatten()``
    output finds (slimta refolds headers; the places are the same)."""
    searched, _, _ = searched_for(tmp_path, dict.fromkeys(SUBJECTS, "full"))
    for role, item in read_all().items():
        assert item.envelope is not None
        header, body = item.envelope.flatten()
        ours = search_message(header + body, searched)
        theirs = search_message((DATA / "flat" / f"{role}.eml").read_bytes(), searched)
        assert (ours.hits, ours.unreadable) == (theirs.hits, theirs.unreadable), role
        assert len(body) == item.envelope.body_bytes, role


def test_an_envelope_that_does_not_decode_is_unreadable(tmp_path: Path) -> None:
    searched, _, _ = searched_for(tmp_path, {"alice": "headers"})
    env = (DATA / "env" / f"{ROLES['env_sender']}.env").read_bytes()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.env").write_bytes(env[: len(env) // 2])
    (broken / "y.meta").write_bytes(b"\x80\x05}\x94.")  # a meta alone: nothing to search
    layout = disk.DiskLayout(str(broken), str(broken))
    half, meta_only = disk.read_items(layout, [("x", 0), ("y", None)], [])
    half.search(searched)
    meta_only.search(searched)
    assert half.found is not None and half.found.hits == set()
    assert half.found.unreadable == [("envelope", "the envelope does not decode (corrupt_pickle)")]
    assert meta_only.found is None


def test_nothing_searched_leaves_the_columns_null() -> None:
    items = read_all()
    item = items["env_sender"]
    item.search(Searched())
    assert item.found is None and item.as_row()[-3:] == (None, None, None)


def _findings(spark: Any, searched: Searched, depth: str) -> list[dict[str, Any]]:
    frame = fleet.read_items(spark, fleet.Stores(disk=LAYOUT), searched)
    settings = Settings(env_dir=LAYOUT.env_dir, meta_dir=LAYOUT.meta_dir, subjects=searched.headers,
                        subject_key=KEY, depth=depth)  # fmt: skip
    frames = SlimtaFrames(frame)
    rows = [
        *checks.personal_data(frames, settings).collect(),
        *checks.unreadable_content(frames, settings).collect(),
    ]
    return [{**r.asDict(), "detail": json.loads(r["detail"])} for r in rows]


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_the_spark_audit_gives_one_finding_per_message(spark, tmp_path: Path, depth: str) -> None:
    """Searched in the executors (the data source's partition read): one personal_data finding
    per message holding a subject, with where, and one unreadable_content for the S/MIME one."""
    searched, names, _ = searched_for(tmp_path, dict.fromkeys(SUBJECTS, depth))
    expected = HEADERS if depth == "headers" else FULL
    role_of = {message_id: role for role, message_id in ROLES.items()}
    rows = _findings(spark, searched, depth)
    found = {
        role_of[r["detail"]["id"]]: {
            (names[f["subject"]], f["where"]) for f in r["detail"]["found"]
        }
        for r in rows
        if r["check"] == "personal_data"
    }
    assert found == {role: want for role, want in expected.items() if want}
    for r in rows:
        assert r["detail"]["depth"] == depth
        if r["check"] == "personal_data":
            assert r["detail"]["subjects"] == sorted({f["subject"] for f in r["detail"]["found"]})
            assert r["subject"] == str(DATA / "env" / f"{r['detail']['id']}.env")
    unreadable = {
        role_of[r["detail"]["id"]]: [(u["where"], u["reason"]) for u in r["detail"]["unreadable"]]
        for r in rows
        if r["check"] == "unreadable_content"
    }
    assert unreadable == ({"smime": SMIME} if depth == "full" else {})
    assert {r["severity"] for r in rows if r["check"] == "unreadable_content"} <= {"warning"}


def _finding(check: str, message_id: str, **detail: Any) -> dict[str, Any]:
    env = f"{LAYOUT.env_dir}/{message_id}.env"
    facts = {"backend": "disk", "id": message_id, "files": [env, f"{LAYOUT.meta_dir}/x.meta"],
             "parts": [{"name": env, "size": 10, "digest": "s1"}], "queued_by": None,
             "arrival": None, "modified": None, "next_attempt": None}  # fmt: skip
    return {"check": check, "severity": "info", "system": "slimta", "queue": LAYOUT.env_dir,
            "scope": "message", "subject": env, "observed_at": "2026-01-01T00:00:00Z",
            "bytes": 10, "detail": {**facts, **detail}}  # fmt: skip


def test_the_plan_erases_content_findings_and_defers_unreadable_ones() -> None:
    """A subject found only in a header is planned like an envelope one; an item the search
    could not read is deferred under every erase_subject rule that searches the unread place
    (a body only under rules of depth full), citing its finding; a hostile envelope stays
    evidence."""
    erase_a = Rule("erase-a", "erase_subject", "art. 17", subjects=("ka",), search="full")
    erase_b = Rule("erase-b", "erase_subject", "art. 17", subjects=("kb",))
    elsewhere = Rule("erase-elsewhere", "erase_subject", "art. 17", subjects=("ka",),
                     queues=("/other",))  # fmt: skip
    rows = with_ids([
        _finding("personal_data", "1" * 32, subjects=["ka"], depth="full",
                 found=[{"subject": "ka", "where": "header:reply-to"}]),
        _finding("unreadable_content", "2" * 32, depth="full",
                 unreadable=[{"where": "body", "reason": "encrypted (S/MIME enveloped-data)"}]),
        _finding("unreadable_content", "3" * 32, depth="full",
                 unreadable=[{"where": "envelope",
                              "reason": "the envelope does not decode (unsafe_pickle)"}]),
        _finding("unsafe_pickle", "3" * 32, pickle="envelope", reason="os.system"),
    ])  # fmt: skip
    ids = [r["id"] for r in rows]
    manifest = {"as_of": "2026-01-01T00:00:00Z", "options": {}}
    parts = plan(rows, Policy("p.toml", "0" * 64, (erase_a, erase_b, elsewhere)), manifest)
    (action,) = parts.actions
    assert (action.kind, action.target["id"], action.rules, action.findings) == (
        DELETE_FILES,
        "1" * 32,
        ("erase-a",),
        (ids[0],),
    )
    assert [(d.target["id"], d.rules, d.reason, d.findings) for d in parts.deferred] == [
        ("2" * 32, ("erase-a",),
         "content could not be searched: body: encrypted (S/MIME enveloped-data)", (ids[1],)),
        ("3" * 32, ("erase-a", "erase-b"), EVIDENCE, tuple(sorted(ids[2:]))),
    ]  # fmt: skip
    assert any("headers and bodies" in note for note in parts.notes)
