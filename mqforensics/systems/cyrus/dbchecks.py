"""The per-file checks of one Cyrus `mailboxes.db` (or a dump of it) as plain `Finding` values;
they run on the frames, one Spark task per file (`perfile`), and each check of `checks` selects
its own.

Every function is pure: it takes a `Database` (the key/value records, any integrity `Problem`s
and the label of the file they came from) and returns findings with system ``cyrus``. Subjects
are exact: a RACL key (control bytes shown as ``\\x1e``), an ACL identifier, a mailbox and
identifier, or ``FILE@OFFSET``. The facts behind each finding are in its ``detail``; the spec is
in docs/cyrus.md, "Checks".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mqforensics.findings import Finding
from mqforensics.systems.cyrus import records
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.records import MailboxEntry
from mqforensics.systems.cyrus.twoskip import Record

SYSTEM = "cyrus"
DEFAULT_VERSION = "3.6"
DEFAULT_ADMINS = ("cyrus",)
PUBLIC = ("anyone", "anonymous")
# Problems that mean the file may still be whole; every other kind loses or may lose records.
WARNING_PROBLEMS = frozenset({"dirty_header", "past_committed_size", "uncommitted"})


def visible(value: bytes | str) -> str:
    """`value` with control bytes, invalid UTF-8 and backslashes escaped (``\\x1e``, ``\\\\``)."""
    text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def _finding(
    check: str, severity: str, scope: str, subject: str, detail: dict[str, Any], as_of: Any
) -> Finding:
    return Finding(check, severity, SYSTEM, None, scope, subject, as_of, None, detail)


# --- RACL --------------------------------------------------------------------------------------


def _racl_keys(items: Iterable[tuple[bytes, bytes]]) -> dict[bytes, records.Key]:
    return {
        key: info
        for key, _ in items
        if (info := records.classify_key(key)).kind in ("racl", "legacy_racl")
    }


def _split(key: bytes, info: records.Key, names: set[str]) -> tuple[str | None, str | None]:
    """(acluser, intname) of a RACL key; a legacy key is split where the intname exists."""
    if info.kind == "racl":
        return info.user, records.dbname_to_intname(info.name or "")
    splits = records.split_legacy_racl(key, names)
    return splits[0] if splits else (info.user, info.name)


def _marker_present(items: Sequence[tuple[bytes, bytes]], version: str) -> bool:
    keys = {k for k, _ in items}
    return records.racl_marker(version) in keys


def racl_missing(
    db: Database,
    version: str = DEFAULT_VERSION,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
) -> list[Finding]:
    """Error per RACL key the version's rule needs for a grant and the file lacks (only when the
    RACL marker says RACLs are on: without it Cyrus neither reads nor writes the keys)."""
    if db.items is None or not _marker_present(db.items, version):
        return []
    present = {k for k, _ in db.items}
    ver = records.parse_version(version)
    entries = db.entries
    expected = records.expected_racls(entries, version, admins)
    out = []
    for entry in entries:
        owner = records.owner_of(entry.name)
        for ident, rights in entry.acl:
            if entry.deleted or entry.intermediate:
                continue
            key = records.racl_key(ver, owner is None, ident, entry.name)
            if key in present or key not in expected:
                continue
            out.append(
                _finding(
                    "racl_missing",
                    "error",
                    "racl",
                    visible(key),
                    {
                        "file": db.source,
                        "key_hex": key.hex(),
                        "mailbox": entry.name,
                        "identifier": ident,
                        "rights": rights,
                        "namespace": "S" if owner is None else "U",
                        "version": version,
                        # How many keys the file should hold: a plan rebuilds rather than adds
                        # when most are missing.
                        "expected_keys": len(expected),
                    },
                    as_of,
                )
            )
    return out


def _unexpected_reason(
    user: str | None,
    intname: str | None,
    shared: bool | None,
    by_name: dict[str, MailboxEntry],
    version: str,
    admins: Sequence[str],
) -> tuple[str, str, dict[str, Any]]:
    """(check, reason, facts) of a RACL key no grant needs."""
    entry = by_name.get(intname or "")
    if entry is None:
        return "racl_stale", "no_mailbox", {}
    acl = dict(entry.acl)
    owner = records.owner_of(entry.name)
    facts: dict[str, Any] = {"grant": acl.get(user or "")}
    if entry.deleted:
        return "racl_forbidden", "tombstone", facts
    if entry.intermediate:
        return "racl_forbidden", "intermediate", facts
    if user is not None and user == owner:
        return "racl_forbidden", "owner", facts
    if user in admins:
        return "racl_forbidden", "admin", facts
    if user not in acl:
        return "racl_stale", "no_grant", facts
    if shared != (owner is None):
        return "racl_stale", "wrong_namespace", facts
    return "racl_stale", "rights_not_enough", {**facts, "version": version}


def racl_unexpected(
    db: Database,
    version: str = DEFAULT_VERSION,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
) -> list[Finding]:
    """`racl_stale` and `racl_forbidden` findings (warnings) for every RACL key no grant needs.

    Forbidden: a key Cyrus never writes whatever the ACL (owner, admin, tombstone, intermediate).
    Stale: a key for a mailbox that does not exist, an identifier without a grant, a grant whose
    rights fail the version's test, or the other namespace letter (U/S)."""
    if db.items is None:
        return []
    entries = db.entries
    by_name = {e.name: e for e in entries}
    expected = records.expected_racls(entries, version, admins)
    marker = _marker_present(db.items, version)
    out = []
    # A key of a mailbox whose record does not decode cannot be judged (`undecodable_record`).
    unjudged = set()
    for bad, _ in db.undecodable:
        bad_info = records.classify_key(bad)
        if bad_info.name is not None:
            modern = bad_info.kind == "mailbox"
            unjudged.add(records.dbname_to_intname(bad_info.name) if modern else bad_info.name)
    for key, info in _racl_keys(db.items).items():
        if key in expected:
            continue
        user, intname = _split(key, info, set(by_name) | unjudged)
        if intname in unjudged:
            continue
        check, reason, facts = _unexpected_reason(
            user, intname, info.shared, by_name, version, admins
        )
        if (info.kind == "racl") != (records.parse_version(version) >= (3, 6, 0)):
            check, reason = "racl_stale", "other_version_format"
        detail = {
            "file": db.source,
            "key_hex": key.hex(),
            "identifier": user,
            "mailbox": intname,
            "namespace": "S" if info.shared else "U",
            "reason": reason,
            "racl_on": marker,
            **facts,
        }
        out.append(_finding(check, "warning", "racl", visible(key), detail, as_of))
    return out


def racl_stale(
    db: Database,
    version: str = DEFAULT_VERSION,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
) -> list[Finding]:
    return [f for f in racl_unexpected(db, version, admins, as_of) if f.check == "racl_stale"]


def racl_forbidden(
    db: Database,
    version: str = DEFAULT_VERSION,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
) -> list[Finding]:
    return [f for f in racl_unexpected(db, version, admins, as_of) if f.check == "racl_forbidden"]


def _marker_value(version: str) -> bytes:
    ver = records.parse_version(version)
    if ver >= (3, 6, 0) or ver < (3, 3, 0):
        return b""
    return b"3" if ver >= (3, 4, 2) else b"2"


def racl_marker(db: Database, version: str = DEFAULT_VERSION, as_of: Any = None) -> list[Finding]:
    """Errors: RACL keys without the version's marker, a marker with the wrong value for the
    version (3.3-3.4: the RACL_VERSION digit), or the other generation's marker."""
    if db.items is None:
        return []
    values = dict(db.items)
    marker = records.racl_marker(version)
    want = _marker_value(version)
    keys = _racl_keys(db.items)
    out = []
    base = {"file": db.source, "version": version}
    if marker not in values and keys:
        detail = {**base, "problem": "missing", "racl_keys": len(keys)}
        out.append(_finding("racl_marker", "error", "racl", visible(marker), detail, as_of))
    elif marker in values and values[marker] != want:
        detail = {
            **base,
            "problem": "wrong_value",
            "value": visible(values[marker]),
            "expected_value": visible(want),
        }
        out.append(_finding("racl_marker", "error", "racl", visible(marker), detail, as_of))
    for other in (records.RACL_MARKER, records.LEGACY_RACL_MARKER):
        if other != marker and other in values:
            detail = {**base, "problem": "other_version_format", "expected_key": visible(marker)}
            out.append(_finding("racl_marker", "error", "racl", visible(other), detail, as_of))
    return out


# --- ACLs --------------------------------------------------------------------------------------


def inbox_of(userid: str) -> str:
    """The intname of a userid's INBOX: ``bob`` → ``user.bob``, ``a.b@x`` → ``x!user.a^b``."""
    local, at, domain = userid.rpartition("@")
    if not at:
        local, domain = userid, ""
    name = "user." + local.replace(".", "^")
    return f"{domain}!{name}" if domain else name


def canonical_user(ident: str, default_domain: str | None = None) -> str:
    """`ident` as Cyrus authorises it: ``bob@<defaultdomain>`` is the same user as ``bob``
    (imapd strips the default domain from logins and ACL identifiers when it compares them)."""
    local, at, domain = ident.rpartition("@")
    if at and default_domain and domain.lower() == default_domain.lower():
        return local
    return ident


def _personal(ident: str, admins: Sequence[str]) -> bool:
    return not (ident in PUBLIC or ident.startswith("group:") or ident in admins)


def _domain(name: str) -> str:
    domain, sep, _ = name.partition("!")
    return domain if sep else ""


def _grants_by_identifier(
    db: Database, wanted: Callable[[MailboxEntry, records.AclRow], bool]
) -> dict[str, list[dict[str, Any]]]:
    """Identifier (no ``-``) → its `wanted` grants on live mailboxes, in database order."""
    grants: dict[str, list[dict[str, Any]]] = {}
    for entry in db.entries:
        if entry.deleted or entry.intermediate:
            continue
        for row in entry.acl_rows():
            if wanted(entry, row):
                grants.setdefault(row.identifier, []).append(
                    {"mailbox": entry.name, "rights": row.rights, "negative": row.negative}
                )
    return grants


def _identifier_findings(
    check: str,
    db: Database,
    grants: dict[str, list[dict[str, Any]]],
    facts: Callable[[str], dict[str, Any]],
    as_of: Any,
) -> list[Finding]:
    """One warning per identifier, with its grants and the check's `facts` about it."""
    return [
        _finding(
            check,
            "warning",
            "user",
            visible(ident),
            {"file": db.source, **facts(ident), "grants": found},
            as_of,
        )
        for ident, found in sorted(grants.items())
    ]


def dangling_acl_identifier(
    db: Database,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
    default_domain: str | None = None,
) -> list[Finding]:
    """Warning per user identifier granted rights (on a live mailbox) whose INBOX is not in the
    database: a deleted or renamed user, or a typo. Skips anyone, anonymous, groups, admins and
    the owner's own rights (e.g. on a deleted user's ``DELETED.*`` mailbox).
    ``bob@<default_domain>`` has the INBOX ``user.bob``."""
    live = {e.name for e in db.entries if not e.deleted}

    def inbox(ident: str) -> str:
        return inbox_of(canonical_user(ident, default_domain))

    def wanted(entry: MailboxEntry, row: records.AclRow) -> bool:
        own = canonical_user(row.identifier, default_domain) == records.owner_of(entry.name)
        return not own and _personal(row.identifier, admins) and inbox(row.identifier) not in live

    grants = _grants_by_identifier(db, wanted)
    return _identifier_findings(
        "dangling_acl_identifier", db, grants, lambda ident: {"inbox": inbox(ident)}, as_of
    )


def noncanonical_acl_identifier(
    db: Database,
    default_domain: str | None,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
) -> list[Finding]:
    """Warning per identifier written ``local@<default_domain>`` in the ACL of a live mailbox.

    Cyrus stores and compares ACL identifiers verbatim, while a user of the default domain logs
    in (and is authorised) as the bare ``local`` [verified 3.6.1: a grant ``q@example.org lr``
    let user q neither LIST nor SELECT the folder]. Such a grant gives nobody access; its RACL
    key is written under the written form and never found either. One finding per identifier.
    """
    if not default_domain:
        return []

    def canonical(ident: str) -> str:
        return canonical_user(ident, default_domain)

    grants = _grants_by_identifier(
        db,
        lambda _, row: (
            _personal(row.identifier, admins) and canonical(row.identifier) != row.identifier
        ),
    )
    return _identifier_findings(
        "noncanonical_acl_identifier", db, grants, lambda i: {"canonical": canonical(i)}, as_of
    )


def cross_domain_share(
    db: Database,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: Any = None,
    default_domain: str | None = None,
) -> list[Finding]:
    """Info per positive grant on a live mailbox to a user of another domain (a mailbox or
    identifier without a domain is in `default_domain`)."""
    out = []
    for entry in db.entries:
        if entry.deleted:
            continue
        owner = records.owner_of(entry.name)
        for row in entry.acl_rows():
            ident = row.identifier
            user = canonical_user(ident, default_domain)
            if row.negative or user == owner or not _personal(ident, admins):
                continue
            user_domain = user.rpartition("@")[2] if "@" in user else ""
            if user_domain.lower() != _domain(entry.name).lower():
                detail = {
                    "file": db.source,
                    "mailbox": entry.name,
                    "identifier": ident,
                    "rights": row.rights,
                    "mailbox_domain": _domain(entry.name),
                    "identifier_domain": user_domain,
                }
                subject = f"{visible(entry.name)} {visible(ident)}"
                out.append(_finding("cross_domain_share", "info", "acl", subject, detail, as_of))
    return out


def anyone_share(db: Database, as_of: Any = None) -> list[Finding]:
    """Info per positive grant to ``anyone`` or ``anonymous`` on a live mailbox."""
    out = []
    for entry in db.entries:
        if entry.deleted:
            continue
        for row in entry.acl_rows():
            if row.negative or row.identifier not in PUBLIC:
                continue
            detail = {
                "file": db.source,
                "mailbox": entry.name,
                "identifier": row.identifier,
                "rights": row.rights,
                "readable": "r" in row.rights,
                "listable": "l" in row.rights,
            }
            subject = f"{visible(entry.name)} {row.identifier}"
            out.append(_finding("anyone_share", "info", "acl", subject, detail, as_of))
    return out


# --- integrity ---------------------------------------------------------------------------------


def integrity(db: Database, as_of: Any = None) -> list[Finding]:
    """One finding per reader `Problem`: warning for a dirty header, bytes past the committed
    size or an uncommitted tail, critical otherwise (CRC, truncation, bad pointer, ...)."""
    return [
        _finding(
            "integrity",
            "warning" if p.kind in WARNING_PROBLEMS else "critical",
            "file",
            f"{db.source}@{p.offset:#x}",
            {"file": db.source, "kind": p.kind, "offset": p.offset, "problem": p.detail},
            as_of,
        )
        for p in db.problems
    ]


def undecodable_record(db: Database, as_of: Any = None) -> list[Finding]:
    """Error per mailbox record (an ``N`` key, or any unprefixed key read as a ≤3.5 intname)
    whose value is neither dlist nor ≤2.4 text: the checks cannot see its ACL."""
    return [
        _finding(
            "undecodable_record",
            "error",
            "file",
            visible(key),
            {"file": db.source, "key_hex": key.hex(), "problem": why},
            as_of,
        )
        for key, why in db.undecodable
    ]


def unreclaimed_history(db: Database, as_of: Any = None) -> list[Finding]:
    """Info per twoskip file still holding superseded or deleted records (before Cyrus's next
    checkpoint repacks it, reference §8.7): old ACL values and removed RACL keys that anyone
    with the file can read back, e.g. grants an erasure removed."""
    if not db.history:
        return []
    live = dict(db.items or ())
    last: dict[bytes, Record] = {}
    superseded: list[Record] = []
    deletes = [r for r in db.history if r.type == "DELETE" and r.committed]
    for record in db.history:
        if record.type != "RECORD" or not record.committed:
            continue
        if record.key in last:
            superseded.append(last[record.key])
        last[record.key] = record
    superseded += [r for k, r in last.items() if k not in live]
    if not superseded and not deletes:
        return []
    gone = {r.key for r in superseded if r.key not in live}
    size = sum(r.length for r in (*superseded, *deletes))
    kinds = [records.classify_key(k).kind for k in gone]
    detail = {
        "file": db.source,
        "superseded_records": len(superseded),
        "delete_records": len(deletes),
        "bytes": size,
        "keys_gone": len(gone),
        "racl_keys_gone": sum(kind in ("racl", "legacy_racl") for kind in kinds),
        "mailbox_versions": sum(
            records.classify_key(r.key).kind in ("mailbox", "legacy_mailbox") for r in superseded
        ),
    }
    return [
        Finding("unreclaimed_history", "info", SYSTEM, None, "file", db.source, as_of, size, detail)
    ]


# --- all ---------------------------------------------------------------------------------------


def run_checks(
    db: Database,
    version: str = DEFAULT_VERSION,
    admins: Sequence[str] = DEFAULT_ADMINS,
    as_of: dt.datetime | None = None,
    default_domain: str | None = None,
) -> list[Finding]:
    """Every check above, in a stable order. `default_domain` is ``defaultdomain:`` of
    ``imapd.conf`` (None: every identifier is taken as written)."""
    return [
        *integrity(db, as_of),
        *undecodable_record(db, as_of),
        *unreclaimed_history(db, as_of),
        *racl_marker(db, version, as_of),
        *racl_missing(db, version, admins, as_of),
        *racl_unexpected(db, version, admins, as_of),
        *dangling_acl_identifier(db, admins, as_of, default_domain),
        *noncanonical_acl_identifier(db, default_domain, admins, as_of),
        *cross_domain_share(db, admins, as_of, default_domain),
        *anyone_share(db, as_of),
    ]


def address_of(userid: str | None, default_domain: str | None = None) -> str | None:
    """The mail address a userid stands for, as an erasure request names it: ``bob@x`` as it
    is, a bare ``bob`` as ``bob@<default_domain>`` (None without one); None for ``anyone``,
    ``anonymous`` and groups."""
    if userid is None or userid in PUBLIC or userid.startswith("group:"):
        return None
    if "@" in userid:
        return userid
    return f"{userid}@{default_domain}" if default_domain else None


def acl_report(
    entries: Iterable[MailboxEntry], admins: Sequence[str] = (), default_domain: str | None = None
) -> list[dict[str, Any]]:
    """Every ACL entry of every mailbox record (tombstones and intermediates too), in record
    order, with what the sharing report and the erasure of a data subject need to know of it:
    `identifier` as stored (a negative one with its ``-``) and `userid` without it; `tombstone`,
    `intermediate`; `own_rights` (the owner's own entry), `admin` (an ``admins:`` identifier);
    `shown` (a row of `sharing_report`) and `effective` (False for an identifier written with
    the default domain, which Cyrus never matches); `grantee_address` and `owner_address`
    (`address_of` the identifier and of the mailbox's owner)."""
    admin_set = set(admins)
    rows = []
    for entry in entries:
        owner = records.owner_of(entry.name)
        for ident, rights in entry.acl:
            userid = ident.removeprefix("-")
            negative = ident.startswith("-")
            rows.append(
                {
                    "mailbox": entry.name,
                    "owner": owner,
                    "identifier": ident,
                    "userid": userid,
                    "rights": rights,
                    "negative": negative,
                    "tombstone": entry.deleted,
                    "intermediate": entry.intermediate,
                    "own_rights": owner is not None
                    and canonical_user(ident, default_domain) == owner,
                    "admin": ident in admin_set,
                    "shown": not entry.deleted
                    and not (userid == owner and not negative)
                    and userid not in admin_set,
                    "effective": canonical_user(userid, default_domain) == userid,
                    "grantee_address": address_of(userid, default_domain),
                    "owner_address": address_of(owner, default_domain),
                }
            )
    return rows


def bare_userids(acl: Iterable[dict[str, Any]]) -> int:
    """How many entries of an `acl_report` name a user by a bare userid that no default domain
    qualifies: no erasure request can match them."""
    return sum(
        1
        for r in acl
        if r["grantee_address"] is None and _personal(r["userid"], ()) and "@" not in r["userid"]
    )


def sharing_report(
    entries: Iterable[MailboxEntry], admins: Sequence[str] = (), default_domain: str | None = None
) -> list[dict[str, Any]]:
    """Who can see whose mailbox: every ACL row of a live mailbox except the owner's own and
    `admins`' (owner None for shared mailboxes), sorted by owner, mailbox, grantee.
    `effective` is False for an identifier written with `default_domain`, which Cyrus never
    matches (see `noncanonical_acl_identifier`)."""
    rows = [
        {
            "owner": r["owner"],
            "mailbox": r["mailbox"],
            "grantee": r["userid"],
            "rights": r["rights"],
            "negative": r["negative"],
            "effective": r["effective"],
        }
        for r in acl_report(entries, admins, default_domain)
        if r["shown"]
    ]
    return sorted(rows, key=lambda r: (r["owner"] or "", r["mailbox"], r["grantee"], r["negative"]))
