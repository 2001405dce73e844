"""The Cyrus planner: a `mailboxes.db` and a policy in, RACL repairs and DELETEACL actions out.

Two rule kinds apply to system ``cyrus`` (docs/cyrus.md, "Plans"):

* ``racl_repair``: every key the checks call `racl_missing` becomes a `RACL_ADD`, every
  `racl_stale`/`racl_forbidden` key a `RACL_REMOVE`. Cyrus's own rebuild (`ctl_cyrusdb -r`
  after removing the marker) only ever *adds* keys on 3.6+ and leaves stale ``AU`` keys behind
  (cyrus.md §4.4), so key-level removals are always planned; the adds are deferred to a rebuild
  when most expected keys are missing, or when the marker says another rule made the keys.
* ``erase_subject``: every grant *to* the data subject and every grant *on* a mailbox the
  subject owns (to anyone but the owner) becomes a `DELETE_ACL`, applied over IMAP with admin
  credentials. The owner's own rights, admins' rights and grants kept in tombstone records are
  deferred with the reason. Identifiers are matched by the SHA-256 of the address they stand
  for (a bare userid is in ``defaultdomain``).

Actions go in this order: removals, additions, then DELETEACLs. A key the plan's DELETEACLs make
unnecessary is not added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mqforensics.retention.manifest import Action, Deferred
from mqforensics.retention.policy import Policy, Rule, subject_hash
from mqforensics.systems.cyrus import checks, records
from mqforensics.systems.cyrus.checks import Database, canonical_user
from mqforensics.systems.cyrus.records import MailboxEntry

SYSTEM = "cyrus"
RACL_REMOVE = "cyrus.racl_remove"
RACL_ADD = "cyrus.racl_add"
DELETE_ACL = "cyrus.delete_acl"
KINDS = (RACL_REMOVE, RACL_ADD, DELETE_ACL)

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


@dataclass
class CyrusPlan:
    actions: list[Action]
    deferred: list[Deferred]
    notes: list[str] = field(default_factory=list)


def key_target(key: bytes) -> dict[str, str]:
    """A RACL action's target: the key's bytes in hex (keys hold control bytes)."""
    return {"key_hex": key.hex()}


def subject_of(ident: str, default_domain: str | None) -> str | None:
    """The SHA-256 of the address an identifier stands for; None for anyone/groups/bare ids
    without a default domain."""
    bare = ident.removeprefix("-")
    if bare in checks.PUBLIC or bare.startswith("group:"):
        return None
    if "@" not in bare:
        if not default_domain:
            return None
        bare = f"{bare}@{default_domain}"
    return subject_hash(bare)


def _racl_actions(
    db: Database,
    rules: list[Rule],
    version: str,
    admins: Sequence[str],
    removed_grants: set[tuple[str, str]],
    notes: list[str],
) -> tuple[list[Action], list[Deferred]]:
    rule_ids = tuple(r.id for r in rules)
    marker = checks.racl_marker(db, version)
    missing = checks.racl_missing(db, version, admins)
    unexpected = checks.racl_unexpected(db, version, admins)
    expected = records.expected_racls(db.entries, version, admins)
    actions: list[Action] = []
    deferred: list[Deferred] = []
    for finding in unexpected:
        d = finding.detail
        key = bytes.fromhex(d["key_hex"])
        reason = f"{finding.check}: {d['reason']}"
        precondition = {"present": True, "mailbox": d["mailbox"], "identifier": d["identifier"]}
        actions.append(Action(RACL_REMOVE, key_target(key), precondition, rule_ids, 0, 0, reason))
    rebuild = bool(marker) or (expected and len(missing) > REBUILD_SHARE * len(expected))
    for finding in missing:
        d = finding.detail
        if (d["mailbox"], d["identifier"]) in removed_grants:
            continue  # the plan's DELETEACL removes the grant that needs it
        key = bytes.fromhex(d["key_hex"])
        if rebuild:
            deferred.append(Deferred(RACL_ADD, key_target(key), rule_ids, REBUILD))
            continue
        precondition = {
            "present": False,
            "mailbox": d["mailbox"],
            "identifier": d["identifier"],
            "rights": d["rights"],
        }
        reason = "racl_missing: the grantee cannot LIST the mailbox"
        actions.append(Action(RACL_ADD, key_target(key), precondition, rule_ids, 0, 0, reason))
    if marker:
        problems = sorted({f.detail["problem"] for f in marker})
        notes.append(
            f"the RACL marker is wrong ({', '.join(problems)}): fix reverseacls in imapd.conf and "
            "restart, ctl_cyrusdb -r then rebuilds the keys; missing keys are left to it"
        )
    elif rebuild:
        notes.append(
            f"{len(missing)} of {len(expected)} expected RACL keys are missing: a rebuild is "
            "planned instead of single adds (see the deferred items)"
        )
    return actions, deferred


def _erasure(
    entries: list[MailboxEntry],
    rules: list[Rule],
    admins: Sequence[str],
    default_domain: str | None,
    notes: list[str],
) -> tuple[list[Action], list[Deferred]]:
    actions: list[Action] = []
    deferred: list[Deferred] = []
    bare_ids = 0
    for entry in entries:
        owner = records.owner_of(entry.name)
        owner_hash = subject_of(owner, default_domain) if owner else None
        for ident, rights in entry.acl:
            ident_hash = subject_of(ident, default_domain)
            bare_ids += "@" not in ident and ident_hash is None and not default_domain
            matched = [r for r in rules if ident_hash in r.subjects or owner_hash in r.subjects]
            if not matched:
                continue
            target = {"mailbox": entry.name, "identifier": ident}
            rule_ids = tuple(r.id for r in matched)
            is_owner = owner is not None and canonical_user(ident, default_domain) == owner
            reason = None
            if entry.deleted:
                reason = TOMBSTONE
            elif entry.intermediate:
                reason = INTERMEDIATE
            elif is_owner:
                reason = OWNER_RIGHTS
            elif ident in admins:
                reason = ADMIN_RIGHTS
            if reason is not None:
                deferred.append(Deferred(DELETE_ACL, target, rule_ids, reason))
                continue
            why = (
                GRANT_TO_SUBJECT
                if any(ident_hash in r.subjects for r in matched)
                else (GRANT_ON_SUBJECTS_MAILBOX)
            )
            actions.append(Action(DELETE_ACL, target, {"rights": rights}, rule_ids, 0, 0, why))
    if actions:
        notes.append(
            "after the DELETEACLs, mailboxes.db keeps the old ACL values until Cyrus's next "
            "checkpoint repacks it: audit it again (unreclaimed_history) and run a checkpoint "
            "(ctl_cyrusdb -c) before declaring the erasure done"
        )
    if bare_ids:
        notes.append(
            f"{bare_ids} ACL entries name a userid without a domain: they were matched only "
            "as mailbox owners; give --default-domain to match them as grantees"
        )
    return actions, deferred


def plan_cleanup(
    db: Database,
    policy: Policy,
    *,
    version: str = checks.DEFAULT_VERSION,
    admins: Sequence[str] = checks.DEFAULT_ADMINS,
    default_domain: str | None = None,
) -> CyrusPlan:
    """The actions `policy` asks for on `db` (a complete read of one `mailboxes.db`)."""
    notes: list[str] = []
    erase_rules = policy.rules_of("erase_subject", SYSTEM)
    repair_rules = policy.rules_of("racl_repair", SYSTEM)
    erase_actions, erase_deferred = (
        _erasure(db.entries, erase_rules, admins, default_domain, notes)
        if erase_rules
        else ([], [])
    )
    removed = {(a.target["mailbox"], a.target["identifier"]) for a in erase_actions}
    racl_actions: list[Action] = []
    racl_deferred: list[Deferred] = []
    if repair_rules:
        if db.items is None:
            notes.append(f"{db.source} holds mailbox entries only: no RACL repair is possible")
        else:
            racl_actions, racl_deferred = _racl_actions(
                db, repair_rules, version, admins, removed, notes
            )
    order = {kind: i for i, kind in enumerate(KINDS)}
    actions = sorted(racl_actions, key=lambda a: order[a.kind]) + erase_actions
    return CyrusPlan(actions, racl_deferred + erase_deferred, notes)
