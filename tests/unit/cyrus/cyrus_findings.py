"""Findings of a Cyrus database as an audit's ``findings.raw.json`` holds them, made in plain
Python: what the planner's unit tests feed it (test_cyrus_spec checks that the audit's
``personal_data`` findings, made in Spark, equal `personal_rows`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mqforensics.findings import COLUMNS, with_ids
from mqforensics.retention.policy import subject_hash
from mqforensics.subjects import keyed
from mqforensics.systems.cyrus import dbchecks
from mqforensics.systems.cyrus.database import Database

KEY = bytes(range(32))


def keyed_subject(address: str, key: bytes = KEY) -> str:
    return keyed(subject_hash(address), key)


def personal_rows(
    db: Database,
    addresses: Iterable[str],
    admins: Sequence[str] = dbchecks.DEFAULT_ADMINS,
    default_domain: str | None = None,
    key: bytes = KEY,
) -> list[dict[str, Any]]:
    """The ``personal_data`` findings (as dicts) of `db` for the data subjects `addresses`."""
    wanted = {keyed_subject(a, key) for a in addresses}
    out = []
    for row in dbchecks.acl_report(db.entries, admins, default_domain):
        grantee = {keyed_subject(row["grantee_address"], key)} if row["grantee_address"] else set()
        owner = {keyed_subject(row["owner_address"], key)} if row["owner_address"] else set()
        if not (grantee | owner) & wanted:
            continue
        detail = {
            "file": db.source,
            "mailbox": row["mailbox"],
            "identifier": row["identifier"],
            "rights": row["rights"],
            "owner": row["owner"],
            "tombstone": row["tombstone"],
            "intermediate": row["intermediate"],
            "own_rights": row["own_rights"],
            "admin": row["admin"],
            "subjects": sorted((grantee | owner) & wanted),
            "grantee_subjects": sorted(grantee & wanted),
            "found": sorted(
                [{"subject": s, "where": "acl:grantee"} for s in grantee & wanted]
                + [{"subject": s, "where": "acl:owner"} for s in owner & wanted],
                key=lambda f: (f["subject"], f["where"]),
            ),
            "depth": "headers",
        }
        subject = f"{dbchecks.visible(row['mailbox'])} {dbchecks.visible(row['identifier'])}"
        out.append(
            {
                "check": "personal_data",
                "severity": "info",
                "system": "cyrus",
                "queue": None,
                "scope": "acl",
                "subject": subject,
                "observed_at": None,
                "bytes": None,
                "detail": detail,
            }
        )
    return out


def finding_rows(
    *dbs: Database,
    version: str = dbchecks.DEFAULT_VERSION,
    admins: Sequence[str] = dbchecks.DEFAULT_ADMINS,
    default_domain: str | None = None,
    erase: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Every finding of `dbs` with its id, in the order an audit writes them."""
    rows: list[dict[str, Any]] = []
    for db in dbs:
        for f in dbchecks.run_checks(db, version, admins, None, default_domain):
            rows.append({**dict(zip(COLUMNS, f.as_row(), strict=True)), "detail": f.detail})
        rows += personal_rows(db, erase, admins, default_domain)
    rows.sort(key=lambda r: [(v is not None, v) for v in (r["check"], r["queue"], r["subject"])])
    return with_ids(rows)


def manifest(*dbs: Database, default_domain: str | None = None) -> dict[str, Any]:
    """The parts of an audit manifest the planner reads."""
    return {
        "inputs": [
            {
                "kind": "file",
                "location": db.source,
                "format": db.format or "twoskip",
                "bare_userids": dbchecks.bare_userids(
                    dbchecks.acl_report(db.entries, (), default_domain)
                ),
            }
            for db in dbs
        ],
        "plan_inputs": {"default_domain": default_domain},
    }
