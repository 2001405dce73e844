"""The Cyrus planner: an audit's findings and a policy in, RACL repairs and DELETEACLs out.

It reads only the findings (``findings.raw.json``: exact keys, identifiers and mailbox names),
never a database: each anomaly is defined once, in its check. Two rule kinds apply to system
``cyrus`` (docs/cyrus.md, "Plans"):

* ``racl_repair``: every key the checks call `racl_missing` becomes a `RACL_ADD`, every
  `racl_stale`/`racl_forbidden` key a `RACL_REMOVE`, on the database (``file``) the finding
  came from. Cyrus's own rebuild (`ctl_cyrusdb -r` after removing the marker) only ever *adds*
  keys on 3.6+ and leaves stale ``AU`` keys behind (cyrus.md §4.4), so key-level removals are
  always planned; a file's adds are deferred to a rebuild when most of its expected keys are
  missing (``expected_keys`` of its `racl_missing` findings), or when its marker is wrong
  (`racl_marker`).
* ``erase_subject``: every ACL entry the audit's ``personal_data`` check found holding a
  subject of the rule, as grantee or as the mailbox's owner, becomes a `DELETE_ACL`, applied
  over IMAP with admin credentials. The owner's own rights, admins' rights and entries kept in
  tombstone or intermediate records are deferred with the reason. An entry found in several
  databases (a murder's frontend and backend) is one action citing each finding.

A database the audit could not read whole (`integrity`, `undecodable_record` findings) is
refused: a plan from a partial read could miss grants or remove needed keys. Actions go in this
order: removals, additions, then DELETEACLs; a key the plan's DELETEACLs make unnecessary is not
added. Every action and deferral cites the findings that justify it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError
from mqforensics.retention.manifest import Action, Deferred
from mqforensics.spec import PlanParts

if TYPE_CHECKING:
    from mqforensics.retention.policy import Policy, Rule

SYSTEM = "cyrus"
RACL_REMOVE = "cyrus.racl_remove"
RACL_ADD = "cyrus.racl_add"
DELETE_ACL = "cyrus.delete_acl"
KINDS = (RACL_REMOVE, RACL_ADD, DELETE_ACL)
RACL_REPAIR = "racl_repair"
ERASE_SUBJECT = "erase_subject"
PERSONAL_DATA = "personal_data"

# More than this share of the expected keys missing: a rebuild is the repair.
REBUILD_SHARE = 0.5
REBUILD = (
    "covered by a rebuild: remove the marker key and restart Cyrus "
    "(ctl_cyrusdb -r at START writes every key the ACLs need)"
)
GRANT_TO_SUBJECT = "grant to the data subject"
GRANT_ON_SUBJECTS_MAILBOX = "grant on a mailbox of the data subject"
OWNER_RIGHTS = "the owner's own rights: delete or rename the user's mailboxes instead"
ADMIN_RIGHTS = "an admin's rights: admins keep access through the admins: option"
TOMBSTONE = "kept in a tombstone record, not a live mailbox: no DELETEACL can reach it"
INTERMEDIATE = "an intermediate mailbox record: no DELETEACL can reach it"
DISAGREE = (
    "the audited databases disagree on this entry ({}): audit copies taken at one time, "
    "then plan again"
)
UNEXPECTED = ("racl_stale", "racl_forbidden")


def refuse_partial_reads(findings: list[dict[str, Any]]) -> None:
    """A ConfigError naming the first database the audit could not read whole."""
    problems: dict[str, list[dict[str, Any]]] = {}
    undecodable: dict[str, list[dict[str, Any]]] = {}
    for row in findings:
        if row["check"] == "integrity":
            problems.setdefault(row["detail"]["file"], []).append(row)
        elif row["check"] == "undecodable_record":
            undecodable.setdefault(row["detail"]["file"], []).append(row)
    for file, rows in sorted(problems.items()):
        first = min(rows, key=lambda r: r["detail"]["offset"])["detail"]
        raise ConfigError(
            f"{file}: {len(rows)} integrity problem(s), first {first['kind']} at offset "
            f"{first['offset']:#x} ({first['problem']}): a plan from a partial read could miss "
            "keys or grants; audit a whole copy (or a dump) and plan from that audit"
        )
    for file, rows in sorted(undecodable.items()):
        raise ConfigError(
            f"{file}: {len(rows)} mailbox record(s) do not decode (first key "
            f"{rows[0]['subject']}): their ACLs are unknown, so no plan is made"
        )


def _key_target(file: str, detail: dict[str, Any]) -> dict[str, str]:
    """A RACL action's target: the database it was found in and the key's bytes in hex."""
    return {"file": file, "key_hex": detail["key_hex"]}


def _racl_plan(
    findings: list[dict[str, Any]],
    rules: list[Rule],
    removed_grants: set[tuple[str, str]],
    notes: list[str],
) -> tuple[list[Action], list[Deferred]]:
    rule_ids = tuple(r.id for r in rules)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for row in findings:
        if row["check"] in ("racl_marker", "racl_missing", *UNEXPECTED):
            by_file.setdefault(row["detail"]["file"], []).append(row)
    removals: list[Action] = []
    additions: list[Action] = []
    deferred: list[Deferred] = []
    for file, rows in sorted(by_file.items()):
        marker = [r for r in rows if r["check"] == "racl_marker"]
        missing = sorted(
            (r for r in rows if r["check"] == "racl_missing"), key=lambda r: r["detail"]["key_hex"]
        )
        unexpected = sorted(
            (r for r in rows if r["check"] in UNEXPECTED), key=lambda r: r["detail"]["key_hex"]
        )
        for row in unexpected:
            d = row["detail"]
            precondition = {"present": True, "mailbox": d["mailbox"], "identifier": d["identifier"]}
            removals.append(
                Action(
                    RACL_REMOVE,
                    _key_target(file, d),
                    precondition,
                    rule_ids,
                    0,
                    0,
                    f"{row['check']}: {d['reason']}",
                    findings=(row["id"],),
                )
            )
        expected = max((r["detail"]["expected_keys"] for r in missing), default=0)
        rebuild = bool(marker) or (expected > 0 and len(missing) > REBUILD_SHARE * expected)
        for row in missing:
            d = row["detail"]
            if (d["mailbox"], d["identifier"]) in removed_grants:
                continue  # the plan's DELETEACL removes the grant that needs it
            target = _key_target(file, d)
            if rebuild:
                deferred.append(Deferred(RACL_ADD, target, rule_ids, REBUILD, (row["id"],)))
                continue
            precondition = {
                "present": False,
                "mailbox": d["mailbox"],
                "identifier": d["identifier"],
                "rights": d["rights"],
            }
            additions.append(
                Action(
                    RACL_ADD,
                    target,
                    precondition,
                    rule_ids,
                    0,
                    0,
                    "racl_missing: the grantee cannot LIST the mailbox",
                    findings=(row["id"],),
                )
            )
        if marker:
            problems = sorted({r["detail"]["problem"] for r in marker})
            notes.append(
                f"the RACL marker of {file} is wrong ({', '.join(problems)}): fix reverseacls in "
                "imapd.conf and restart, ctl_cyrusdb -r then rebuilds the keys; missing keys are "
                "left to it"
            )
        elif rebuild:
            notes.append(
                f"{len(missing)} of {expected} expected RACL keys of {file} are missing: a "
                "rebuild is planned instead of single adds (see the deferred items)"
            )
    return removals + additions, deferred


def _deferral(detail: dict[str, Any]) -> str | None:
    if detail["tombstone"]:
        return TOMBSTONE
    if detail["intermediate"]:
        return INTERMEDIATE
    if detail["own_rights"]:
        return OWNER_RIGHTS
    if detail["admin"]:
        return ADMIN_RIGHTS
    return None


def _erasure(
    findings: list[dict[str, Any]], rules: list[Rule], notes: list[str]
) -> tuple[list[Action], list[Deferred]]:
    """DELETEACLs of every ACL entry a ``personal_data`` finding holds for a rule's subject,
    one per (mailbox, identifier) whichever databases it was found in."""
    entries: dict[tuple[str, str], list[tuple[dict[str, Any], list[Rule]]]] = {}
    for row in findings:
        if row["check"] != PERSONAL_DATA:
            continue
        held = set(row["detail"]["subjects"])
        matched = [r for r in rules if held & set(r.subjects)]
        if matched:
            d = row["detail"]
            entries.setdefault((d["mailbox"], d["identifier"]), []).append((row, matched))
    actions: list[Action] = []
    deferred: list[Deferred] = []
    for (mailbox, ident), found in sorted(entries.items()):
        target = {"mailbox": mailbox, "identifier": ident}
        ids = tuple(sorted(row["id"] for row, _ in found))
        selecting = {rule.id for _, matched in found for rule in matched}
        rule_ids = tuple(rule.id for rule in rules if rule.id in selecting)  # policy order
        states = {(row["detail"]["rights"], _deferral(row["detail"])) for row, _ in found}
        if len(states) > 1:
            seen = "; ".join(sorted(f"{rights} ({why or 'live'})" for rights, why in states))
            deferred.append(Deferred(DELETE_ACL, target, rule_ids, DISAGREE.format(seen), ids))
            continue
        ((rights, why),) = states
        if why is not None:
            deferred.append(Deferred(DELETE_ACL, target, rule_ids, why, ids))
            continue
        to_subject = any(
            set(rule.subjects) & set(row["detail"]["grantee_subjects"])
            for row, matched in found
            for rule in matched
        )
        reason = GRANT_TO_SUBJECT if to_subject else GRANT_ON_SUBJECTS_MAILBOX
        actions.append(
            Action(DELETE_ACL, target, {"rights": rights}, rule_ids, 0, 0, reason, findings=ids)
        )
    if actions:
        notes.append(
            "after the DELETEACLs, mailboxes.db keeps the old ACL values until Cyrus's next "
            "checkpoint repacks it: audit it again (unreclaimed_history) and run a checkpoint "
            "(ctl_cyrusdb -c) before declaring the erasure done"
        )
    return actions, deferred


def plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    """The actions `policy` asks for on the audited databases, from the audit's `findings`
    (exact keys) and its `manifest` (the inputs, the server settings)."""
    refuse_partial_reads(findings)
    notes: list[str] = []
    inputs = [i for i in manifest.get("inputs") or () if isinstance(i, dict)]
    erase_rules = policy.rules_of(ERASE_SUBJECT, SYSTEM)
    repair_rules = policy.rules_of(RACL_REPAIR, SYSTEM)
    erase_actions: list[Action] = []
    erase_deferred: list[Deferred] = []
    if erase_rules:
        erase_actions, erase_deferred = _erasure(findings, erase_rules, notes)
        bare = sum(int(i.get("bare_userids") or 0) for i in inputs)
        if bare:
            notes.append(
                f"{bare} ACL entries name a userid without a domain and the audit had no "
                "--default-domain: they match no erasure request, as grantee or as owner; audit "
                "again with --default-domain to match them"
            )
    removed = {(a.target["mailbox"], a.target["identifier"]) for a in erase_actions}
    racl_actions: list[Action] = []
    racl_deferred: list[Deferred] = []
    if repair_rules:
        for item in inputs:
            if item.get("format") == "ctl_mboxlist":
                notes.append(
                    f"{item['location']} holds mailbox entries only (ctl_mboxlist -d): no RACL "
                    "repair is possible from it"
                )
        racl_actions, racl_deferred = _racl_plan(findings, repair_rules, removed, notes)
    return PlanParts(racl_actions + erase_actions, racl_deferred + erase_deferred, notes)
