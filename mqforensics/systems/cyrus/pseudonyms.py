"""Pseudonymised Cyrus identifiers, mailbox names, RACL keys and findings.

A userid and the user part of a mailbox name get the same ``u-…`` token
(`privacy.pseudonymize_address` of ``local@domain``, or of the bare ``local`` in the default
domain), so ``alice`` in an ACL and ``user.alice.Sent`` still match after pseudonymising;
``anyone``, ``anonymous``, ``group:…`` and admins are kept. A negative identifier keeps its
``-``. Findings are rebuilt field by field, and a RACL key subject is rebuilt from its
pseudonymised identifier and mailbox, so every subject stays unique and comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mqforensics.privacy import pseudonymize_address, pseudonymize_text
from mqforensics.systems.cyrus import dbchecks, records


def identifier(ident: str | None, admins: Sequence[str] = (), salt: str = "") -> str | None:
    """``bob@example.com`` → ``u-…@example.com``, ``bob`` → ``u-…``, ``-bob`` → ``-u-…``."""
    if ident is None:
        return None
    negative = ident.startswith("-")
    bare = ident.removeprefix("-")
    if bare in dbchecks.PUBLIC or bare.startswith("group:") or bare in admins:
        return ident
    return ("-" if negative else "") + pseudonymize_address(bare, salt)


def mailbox(name: str | None, salt: str = "") -> str | None:
    """An intname with its user part pseudonymised: ``user.alice.Sent`` → ``user.u-….Sent``."""
    if name is None:
        return None
    domain, bang, rest = name.partition("!")
    if not bang:
        domain, rest = "", name
    parts = rest.split(".")
    for i in range(len(parts) - 1):
        if parts[i] == "user":
            local = parts[i + 1].replace("^", ".")
            userid = f"{local}@{domain}" if domain else local
            parts[i + 1] = pseudonymize_address(userid, salt).partition("@")[0]
            break
    return f"{domain}{bang}{'.'.join(parts)}"


def _racl_subject(original: str, detail: dict[str, Any]) -> str | None:
    """The RACL key of `detail` in the format of the `original` subject (3.6+ or legacy)."""
    ident, name = detail.get("identifier"), detail.get("mailbox")
    namespace = detail.get("namespace")
    if ident is None or name is None or namespace not in ("U", "S"):
        return None
    key_format = (3, 6, 0) if original.startswith("A") else (3, 0, 0)
    return dbchecks.visible(records.racl_key(key_format, namespace == "S", ident, name))


def hide_finding(row: dict[str, Any], salt: str = "") -> dict[str, Any]:
    """A finding (``detail`` decoded) with every identifier and mailbox name in its subject and
    detail pseudonymised, and the exact RACL key (``key_hex``) dropped: the system's
    `hide_finding`, after the runner pseudonymised plain addresses. An admin's identifier (a
    ``racl_forbidden`` key of reason ``admin``, a ``personal_data`` entry marked ``admin``) is
    kept, as admins are everywhere else."""
    detail = dict(row.get("detail") or {})
    check, subject = row["check"], row["subject"]
    detail.pop("key_hex", None)  # the exact key names the user: only with --reveal-addresses
    admin = detail.get("reason") == "admin" or detail.get("admin") is True
    for key in ("identifier", "canonical", "owner"):
        if key in detail and not (admin and key == "identifier"):
            detail[key] = identifier(detail[key], (), salt)
    for key in ("mailbox", "inbox"):
        if key in detail:
            detail[key] = mailbox(detail[key], salt)
    if "grants" in detail:
        detail["grants"] = [{**g, "mailbox": mailbox(g["mailbox"], salt)} for g in detail["grants"]]
    if check in ("racl_missing", "racl_stale", "racl_forbidden"):
        subject = _racl_subject(subject, detail) or f"(pseudonymised {check} key)"
    elif check in ("dangling_acl_identifier", "noncanonical_acl_identifier"):
        subject = identifier(subject, (), salt) or subject
    elif check == "undecodable_record":
        subject = pseudonymize_text(mailbox(subject, salt) or "", salt)
        detail["problem"] = pseudonymize_text(str(detail.get("problem", "")), salt)
    elif check in ("cross_domain_share", "anyone_share", "personal_data"):
        subject = f"{dbchecks.visible(detail['mailbox'])} {dbchecks.visible(detail['identifier'])}"
    return {**row, "subject": subject, "detail": detail}


def sharing_row(row: dict[str, Any], admins: Sequence[str] = ()) -> dict[str, Any]:
    """A row of the sharing report (``sharing.json``) with owner, grantee and mailbox
    pseudonymised (admins, ``anyone`` and groups kept)."""
    return {
        **row,
        "owner": identifier(row["owner"], admins),
        "grantee": identifier(row["grantee"], admins),
        "mailbox": mailbox(row["mailbox"]),
    }


def target(value: dict[str, Any], salt: str = "") -> dict[str, Any]:
    """A Cyrus plan target as a report shows it: identifier and mailbox pseudonymised, a RACL
    key (``key_hex``) replaced by its pseudonymised visible form."""
    out = dict(value)
    if "identifier" in out:
        out["identifier"] = identifier(out["identifier"], dbchecks.DEFAULT_ADMINS, salt)
    if "mailbox" in out:
        out["mailbox"] = mailbox(out["mailbox"], salt)
    if "key_hex" in out:
        key = bytes.fromhex(out.pop("key_hex"))
        info = records.classify_key(key)
        if info.kind in ("racl", "legacy_racl") and info.user is not None:
            modern = info.kind == "racl"
            name = records.dbname_to_intname(info.name or "") if modern else info.name
            ident = identifier(info.user, dbchecks.DEFAULT_ADMINS, salt) or ""
            key_format = (3, 6, 0) if modern else (3, 0, 0)
            hidden = records.racl_key(key_format, bool(info.shared), ident, mailbox(name) or "")
            out["key"] = dbchecks.visible(hidden)
        else:
            out["key"] = "(pseudonymised)"
    return out
