"""Cyrus plans carried out by the purger against the real Cyrus 3.6: DELETEACLs for a data
subject over IMAP, RACL key repairs through cyr_dbtool on the live database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.purge.engine import PurgeResult
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Action, read_plan
from mqforensics.systems.cyrus import dbchecks, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.dbtool import DbTool
from mqforensics.systems.cyrus.options import PurgeOptions
from mqforensics.systems.cyrus.plan import (
    DELETE_ACL,
    GRANT_ON_SUBJECTS_MAILBOX,
    GRANT_TO_SUBJECT,
    OWNER_RIGHTS,
    RACL_ADD,
    RACL_REMOVE,
)
from mqforensics.systems.cyrus.purge import build_executors
from tests.integration.cyrus import cyrus_support as support
from tests.integration.cyrus.cyrus_support import DOMAIN
from tests.purge_hooks import apply_with_hook

pytestmark = pytest.mark.integration

US, RS = "\x1f", "\x1e"


@pytest.fixture(scope="module")
def scenario(cyrus):
    return support.build(cyrus)


def _env(cyrus: dict, password: str | None = None) -> dict[str, str]:
    return {
        "MQF_IMAP_USERNAME": cyrus["username"],
        "MQF_IMAP_PASSWORD": password or cyrus["password"],
    }


def purge(plan: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`mqforensics purge PLAN ...` in its own process, as an operator (or cron) runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", "purge", str(plan), *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _plan(cyrus: dict, tmp: Path, policy_text: str, name: str) -> Path:
    """`plan cyrus` of a copy of the live database; the same plan as `plan --findings` of the
    audit it made, every action citing that audit's findings."""
    policy = tmp / f"{name}.toml"
    policy.write_text(policy_text)
    snapshot = support.snapshot(cyrus, tmp / f"{name}.db")
    out = tmp / name
    argv = ["plan", "cyrus", "--policy", str(policy), str(snapshot), "--out", str(out)]
    assert cli.main([*argv, "--default-domain", DOMAIN]) == 0
    audit_dir = tmp / f"{name}.audit"
    again = tmp / f"{name}-from-findings"
    argv = ["plan", "--findings", str(audit_dir), "--policy", str(policy), "--out", str(again)]
    assert cli.main(argv) == 0
    for part in ("actions.jsonl", "deferred.jsonl"):
        assert (again / part).read_bytes() == (out / part).read_bytes()
    ids = {row["id"] for row in json.loads((audit_dir / "findings.json").read_text())}
    plan = read_plan(out)
    for item in [*plan.actions(), *plan.deferred()]:
        assert item.findings and set(item.findings) <= ids, item
    return out


def _all_acls(cyrus: dict) -> dict[tuple[str, str], str]:
    admin = support.admin(cyrus)
    try:
        return {
            (mailbox, ident): rights
            for mailbox in admin.mailboxes()
            for ident, rights in admin.getacl(mailbox).items()
        }
    finally:
        admin.close()


def _erase(address: str) -> str:
    return f"""version = 1

[[rules]]
id = "erase-subject"
kind = "erase_subject"
legal_basis = "GDPR Art. 17 request 2026-118"
systems = ["cyrus"]
addresses = ["{address}"]
"""


REPAIR = """version = 1

[[rules]]
id = "racl-consistency"
kind = "racl_repair"
legal_basis = "operational integrity"
systems = ["cyrus"]
"""


def test_deleteacl_plan_removes_exactly_the_planned_grants(cyrus, scenario, tmp_path):
    t = scenario.tag
    ben = scenario.users["ben"]
    plan_dir = _plan(cyrus, tmp_path, _erase(ben), "erase")
    plan = read_plan(plan_dir)
    deleted_dot = next(
        m for m, i in _all_acls(cyrus) if m.startswith(f"DELETED/user/ann{t}/Dot.ted/")
    )
    hexpart = deleted_dot.rpartition("/")[2]
    planned = {
        (a.target["mailbox"], a.target["identifier"], a.precondition["rights"], a.reason)
        for a in plan.actions()
    }
    to, on = GRANT_TO_SUBJECT, GRANT_ON_SUBJECTS_MAILBOX
    assert planned == {
        (f"user.ann{t}.Archive", ben, "lr", to),
        (f"user.ann{t}.Archive", f"-{ben}", "w", to),
        (f"user.ann{t}.Archive.Q1", f"ben{t}", "r", to),
        (f"DELETED.user.ann{t}.Dot^ted.{hexpart}", f"ben{t}", "lrs", to),
        (f"shared{t}.board", ben, "lrs", to),
        (f"user.ben{t}.Notes", scenario.users["ann"], "lrsw", on),
        (f"user.ben{t}.Notes", scenario.users["eve"], "lr", on),
    }
    assert {a.kind for a in plan.actions()} == {DELETE_ACL}
    assert {(d.target["mailbox"], d.reason) for d in plan.deferred()} == {
        (f"user.ben{t}", OWNER_RIGHTS),
        (f"user.ben{t}.Notes", OWNER_RIGHTS),
    }
    # The plan names no credential; its header says which rule and Cyrus settings were applied.
    assert cyrus["password"] not in (plan_dir / "plan.json").read_text()
    assert plan.header["inputs"]["default_domain"] == DOMAIN

    # Drift after planning: the owner changes one planned grant's rights.
    ann = support.login(cyrus, scenario.users["ann"])
    support.ok(ann.setacl("Archive/Q1", f"ben{t}", "lr"))
    ann.logout()
    before = _all_acls(cyrus)

    imap = ["--imap", f"{cyrus['host']}:{cyrus['port']}"]
    dry = purge(plan_dir, _env(cyrus), *imap)
    assert dry.returncode == 0, dry.stderr
    assert _all_acls(cyrus) == before  # a dry run changes nothing
    refused = purge(plan_dir, _env(cyrus), *imap, "--apply")
    assert refused.returncode == 2 and "not approved" in refused.stderr
    assert cli.main(["approve", str(plan_dir), "--by", "dpo@example.net"]) == 0

    wrong = purge(plan_dir, _env(cyrus, "not-the-password"), *imap, "--apply")
    assert wrong.returncode == 2, wrong.stderr
    assert "not-the-password" not in wrong.stdout + wrong.stderr
    assert "Traceback" not in wrong.stderr and _all_acls(cyrus) == before

    applied = purge(plan_dir, _env(cyrus), *imap, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = _all_acls(cyrus)
    admin = support.admin(cyrus)
    removed = {
        (admin.name_of(mailbox), ident)
        for mailbox, ident, _, _ in planned
        if mailbox != f"user.ann{t}.Archive.Q1"
    }
    admin.close()
    kept = {k: v for k, v in before.items() if k not in removed}
    assert after == kept  # exactly the planned grants are gone, the drifted one stays
    assert after[(f"user/ann{t}/Archive/Q1", f"ben{t}")] == "lr"
    journal = read_journal(plan_dir / "journal.jsonl")
    outcomes = [r for r in journal if r.get("event") in ("done", "skipped")]
    assert sorted(r["event"] for r in outcomes) == ["done"] * 6 + ["skipped"]
    skipped = next(r for r in outcomes if r["event"] == "skipped")
    assert "rights changed since the plan (r -> lr)" in skipped["reason"]
    assert [r for r in journal if r.get("event") == "verified"][-1]["ok"] is True

    again = purge(plan_dir, _env(cyrus), *imap, "--apply")  # resumes: nothing left to do
    assert again.returncode == 0 and _all_acls(cyrus) == after

    # Re-audit: Cyrus removed the RACL keys with the grants; what is left for ben is the
    # drifted grant, which a new plan picks up.
    db = support.read_db(support.snapshot(cyrus, tmp_path / "after.db"))
    assert support.racl_findings(db) == []
    rows = dbchecks.sharing_report(db.entries, ["cyrus"], DOMAIN)
    left = [(r["mailbox"], r["grantee"]) for r in rows if f"ben{t}" in r["grantee"]]
    assert left == [(f"user.ann{t}.Archive.Q1", f"ben{t}")]
    assert not [r for r in rows if r["owner"] == f"ben{t}"]
    # The qualified identifier is in no live record any more; whatever bytes of it remain are
    # superseded history, which the audit reports until Cyrus repacks the file.
    raw = (tmp_path / "after.db").read_bytes()
    parsed = twoskip.read(raw, history=True)
    assert ben.encode() not in b"".join(k + v for k, v in parsed.items())
    if ben.encode() in raw:
        assert any(ben.encode() in r.key + r.value for r in parsed.history)
        assert [f.check for f in dbchecks.unreclaimed_history(Database.from_file(parsed))] == [
            "unreclaimed_history"
        ]
    second = read_plan(_plan(cyrus, tmp_path, _erase(ben), "erase-again"))
    assert [(a.target["identifier"], a.precondition["rights"]) for a in second.actions()] == [
        (f"ben{t}", "lr")
    ]


def _list(cyrus: dict, user: str) -> list[bytes]:
    imap = support.login(cyrus, user)
    try:
        return support.ok(imap.list())
    finally:
        imap.logout()


def test_racl_repair_plan_fixes_the_live_database(cyrus, scenario, tmp_path):
    t = scenario.tag
    tool = DbTool.for_mailboxes(Path(cyrus["config"]))
    private = f"user{US}ann{t}{US}Private"
    needed = f"AU{RS}eve{t}{RS}{private}".encode()
    stale = f"AU{RS}zoe{t}{RS}{private}".encode()
    owner = f"AU{RS}ann{t}{RS}{private}".encode()
    listed = f'"Other Users/ann{t}/Private"'.encode()
    assert any(listed in line for line in _list(cyrus, scenario.users["eve"]))
    tool.delete_keys([needed])  # damage the live database as a lost write would
    tool.set_keys([(stale, b""), (owner, b"")])
    # The missing key hides the folder from its grantee's LIST: what racl_missing means.
    assert not any(listed in line for line in _list(cyrus, scenario.users["eve"]))

    plan_dir = _plan(cyrus, tmp_path, REPAIR, "repair")
    plan = read_plan(plan_dir)
    mine = [a for a in plan.actions() if t.encode() in bytes.fromhex(a.target["key_hex"])]
    assert len(mine) == plan.action_count  # the rest of the server is consistent
    assert sorted((a.kind, bytes.fromhex(a.target["key_hex"])) for a in mine) == sorted(
        [(RACL_ADD, needed), (RACL_REMOVE, stale), (RACL_REMOVE, owner)]
    )
    assert cli.main(["approve", str(plan_dir), "--by", "postmaster"]) == 0
    applied = purge(plan_dir, {}, "--cyrus-config", cyrus["config"], "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    verified = [r for r in read_journal(plan_dir / "journal.jsonl") if r["event"] == "verified"]
    assert verified[-1]["ok"] is True
    assert tool.get(needed) == b"" and tool.get(stale) is None and tool.get(owner) is None
    assert any(listed in line for line in _list(cyrus, scenario.users["eve"]))
    db = support.read_db(support.snapshot(cyrus, tmp_path / "repaired.db"))
    assert support.racl_findings(db) == []
    assert cli.main(["report", "plan", str(plan_dir)]) == 0
    report = (plan_dir / "report.txt").read_text()
    assert "racl_remove" in report and f"ann{t}" not in report  # pseudonymised keys


def test_purge_without_the_server_options_says_what_is_missing(cyrus, scenario, tmp_path):
    plan_dir = _plan(cyrus, tmp_path, _erase(scenario.users["eve"]), "needs-imap")
    result = purge(plan_dir, _env(cyrus))
    assert result.returncode == 2
    assert "--imap HOST:PORT" in result.stderr
    result = purge(plan_dir, {"MQF_IMAP_USERNAME": ""}, "--imap", "127.0.0.1:1")
    assert result.returncode == 2 and "MQF_IMAP_PASSWORD" in result.stderr
    assert json.loads((plan_dir / "plan.json").read_text())["action_count"] >= 1


class _AtAction:
    """A fault hook: ``changes[(action id, point label)]`` runs at that point of that action
    (the action is the one whose ``started`` record was written last)."""

    def __init__(self, plan_dir: Path, changes: dict[tuple[str, str], Callable[[], None]]):
        self.journal = plan_dir / "journal.jsonl"
        self.pending = dict(changes)
        self.current = ""

    def __call__(self, label: str) -> None:
        if label == "journal started":
            self.current = json.loads(self.journal.read_text().splitlines()[-1])["id"]
        change = self.pending.pop((self.current, label), None)
        if change is not None:
            change()


def _hooked_purge(plan_dir: Path, args: PurgeOptions, hook: _AtAction) -> PurgeResult:
    plan = read_plan(plan_dir)
    return apply_with_hook(plan, build_executors(plan, args), hook)


def _outcomes(plan_dir: Path) -> dict[str, dict]:
    return {
        r["id"]: r
        for r in read_journal(plan_dir / "journal.jsonl")
        if r["event"] in ("done", "skipped")
    }


def test_deleteacl_last_check_and_rights_removal_keep_what_changed(cyrus, tmp_path, monkeypatch):
    """A grant changed during the rate wait is skipped at the last check; rights granted
    between the check and the delete survive SETACL -<planned rights>, and the action is
    skipped; a legacy identifier Cyrus refuses in SETACL is removed with DELETEACL."""
    s = support.build(cyrus)  # its own users: the module scenario's ben is erased above
    t, ben = s.tag, s.users["ben"]
    legacy = f"ann&ben{t}@{DOMAIN}"  # '&': Cyrus cannot canonify it, SETACL -lr is refused
    support.legacy_grant(cyrus, f"user.ann{t}.Private", legacy, "lr")
    policy = _erase(ben).replace(f'["{ben}"]', f'["{ben}", "{legacy}"]')
    plan_dir = _plan(cyrus, tmp_path, policy, "erase")
    assert cli.main(["approve", str(plan_dir), "--by", "dpo@example.net"]) == 0
    actions = list(read_plan(plan_dir).actions())
    admin = support.admin(cyrus)
    names = {a.id: admin.name_of(a.target["mailbox"]) for a in actions}
    admin.close()
    (old,) = [a for a in actions if a.target["identifier"] == legacy]
    waited, raced = [a for a in actions if a is not old][:2]
    before = _all_acls(cyrus)
    now: dict[str, str | None] = {}

    def grant_more(action: Action) -> None:
        name, ident = names[action.id], action.target["identifier"]
        extra = "w" if "w" not in action.precondition["rights"] else "i"
        support.setacl(cyrus, name, ident, "+" + extra)
        now[action.id] = support.rights(cyrus, name, ident)
        now[action.id + " extra"] = extra

    hook = _AtAction(
        plan_dir,
        {
            (waited.id, "rate slot remove rights"): lambda: grant_more(waited),
            (raced.id, "before remove rights"): lambda: grant_more(raced),
        },
    )
    monkeypatch.setenv("MQF_IMAP_USERNAME", cyrus["username"])
    monkeypatch.setenv("MQF_IMAP_PASSWORD", cyrus["password"])
    args = PurgeOptions(imap=f"{cyrus['host']}:{cyrus['port']}", imap_ssl=False)
    result = _hooked_purge(plan_dir, args, hook)
    assert not hook.pending

    w_ident, r_ident = waited.target["identifier"], raced.target["identifier"]
    w_name, r_name = names[waited.id], names[raced.id]
    assert now[waited.id] != waited.precondition["rights"]
    assert result.skips == [
        (
            waited.seq,
            DELETE_ACL,
            f"rights changed since the plan ({waited.precondition['rights']} -> {now[waited.id]})",
        ),
        (
            raced.seq,
            DELETE_ACL,
            f"rights granted to {r_ident} on {r_name} between the check and the delete were "
            f"kept: {now[raced.id + ' extra']}",
        ),
    ]
    outcomes = _outcomes(plan_dir)
    assert outcomes[waited.id]["at_last_check"] is True
    assert outcomes[waited.id]["completed_operations"] == 0
    assert outcomes[raced.id]["at_last_check"] is True
    assert outcomes[raced.id]["completed_operations"] == 1  # its planned rights went
    assert outcomes[old.id]["event"] == "done"
    assert outcomes[old.id]["removed"] == {"removed_rights": "lr", "method": "DELETEACL"}
    assert [a.id for a in actions if outcomes[a.id]["event"] == "done"] == [
        a.id for a in actions if a not in (waited, raced)
    ]
    removed = {(names[a.id], a.target["identifier"]) for a in actions}
    expected = {k: v for k, v in before.items() if k not in removed}
    expected[(w_name, w_ident)] = now[waited.id]  # planned rights and the new one
    expected[(r_name, r_ident)] = now[raced.id + " extra"]  # only the right granted late
    assert _all_acls(cyrus) == expected
    verified = [r for r in read_journal(plan_dir / "journal.jsonl") if r["event"] == "verified"]
    assert verified[-1]["ok"] is True, verified[-1]["problems"]
    # Cyrus kept the RACL keys in step: gone with the entries, kept for the surviving l/r.
    db = support.read_db(support.snapshot(cyrus, tmp_path / "after.db"))
    assert support.racl_findings(db) == []


def test_racl_last_check_holds_the_database_lock_until_the_write(cyrus, tmp_path):
    """A grant changed during the rate wait skips the key's action; a grant changed between
    the check and the write waits for the write's commit (cyr_dbtool's transaction holds the
    lock), and Cyrus then updates the key for it."""
    s = support.build(cyrus)
    t, cat = s.tag, s.users["cat"]
    tool = DbTool.for_mailboxes(Path(cyrus["config"]))
    private, archive = f"user{US}ann{t}{US}Private", f"user{US}ann{t}{US}Archive"
    eve = f"AU{RS}eve{t}{RS}{private}".encode()  # needed by "eve lr"
    cat_key = f"AU{RS}{cat}{RS}{archive}".encode()  # needed by "cat lrs"
    zoe = f"AU{RS}zoe{t}{RS}{private}".encode()  # no grant
    yan = f"AU{RS}yan{t}{RS}{archive}".encode()  # no grant
    assert tool.get(eve) == b"" and tool.get(cat_key) == b""
    tool.delete_keys([eve, cat_key])
    tool.set_keys([(zoe, b""), (yan, b"")])
    plan_dir = _plan(cyrus, tmp_path, REPAIR, "repair")
    assert cli.main(["approve", str(plan_dir), "--by", "postmaster"]) == 0
    mine = {
        bytes.fromhex(a.target["key_hex"]): a
        for a in read_plan(plan_dir).actions()
        if f"ann{t}".encode() in bytes.fromhex(a.target["key_hex"])
    }
    assert {k: a.kind for k, a in mine.items()} == {
        eve: RACL_ADD, cat_key: RACL_ADD, zoe: RACL_REMOVE, yan: RACL_REMOVE,
    }  # fmt: skip
    box = {private: f"user/ann{t}/Private", archive: f"user/ann{t}/Archive"}
    blocked: dict[str, threading.Thread] = {}

    def racing(name: str, change: Callable[[], None]) -> None:
        """Start `change` (over IMAP) and see that it waits for the lock the check holds."""
        thread = threading.Thread(target=change)
        thread.start()
        time.sleep(1.0)
        assert thread.is_alive(), f"{name}: the ACL change did not wait for the transaction"
        blocked[name] = thread

    hook = _AtAction(
        plan_dir,
        {
            (mine[zoe].id, "rate slot racl remove"): lambda: support.setacl(
                cyrus, box[private], f"zoe{t}", "lr"
            ),
            (mine[eve].id, "rate slot racl add"): lambda: support.setacl(
                cyrus, box[private], f"eve{t}", ""
            ),
            (mine[yan].id, "before racl remove"): lambda: racing(
                "yan", lambda: support.setacl(cyrus, box[archive], f"yan{t}", "lr")
            ),
            (mine[cat_key].id, "before racl add"): lambda: racing(
                "cat", lambda: support.setacl(cyrus, box[archive], cat, "")
            ),
        },
    )
    args = PurgeOptions(cyrus_config=cyrus["config"])
    result = _hooked_purge(plan_dir, args, hook)
    assert not hook.pending
    for thread in blocked.values():
        thread.join(30)
        assert not thread.is_alive()
    assert sorted(blocked) == ["cat", "yan"]

    outcomes = _outcomes(plan_dir)
    assert {k: outcomes[a.id]["event"] for k, a in mine.items()} == {
        zoe: "skipped", eve: "skipped", yan: "done", cat_key: "done",
    }  # fmt: skip
    assert outcomes[mine[zoe].id]["reason"] == "a grant now needs this key"
    assert outcomes[mine[eve].id]["reason"] == "the grant that needs this key is gone or changed"
    assert all(outcomes[mine[k].id]["at_last_check"] is True for k in (zoe, eve))
    assert outcomes[mine[yan].id]["removed"] == {"removed": True}
    assert outcomes[mine[cat_key].id]["removed"] == {"added": True}
    assert len(result.skips) == 2
    # The late changes came after the writes: Cyrus re-added yan's key for the new grant, and
    # removed the key just added for cat with cat's grant; zoe's grant kept its key.
    assert support.rights(cyrus, box[private], f"zoe{t}") == "lr" and tool.get(zoe) == b""
    assert support.rights(cyrus, box[private], f"eve{t}") is None and tool.get(eve) is None
    assert support.rights(cyrus, box[archive], f"yan{t}") == "lr" and tool.get(yan) == b""
    assert support.rights(cyrus, box[archive], cat) is None and tool.get(cat_key) is None
    verified = [r for r in read_journal(plan_dir / "journal.jsonl") if r["event"] == "verified"]
    assert verified[-1]["ok"] is True, verified[-1]["problems"]
    db = support.read_db(support.snapshot(cyrus, tmp_path / "after.db"))
    assert support.racl_findings(db) == []
