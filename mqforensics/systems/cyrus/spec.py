"""Cyrus IMAP `mailboxes.db` as the shared layers see it: ``SPEC``, the one `System` of Cyrus.

The loader reads every input in Spark, one task per file (`fleet.read_fleet`), and computes the
per-file checks there from the one read; each `Check` here selects its own findings from that
frame, except ``personal_data``, which matches the ACL entries against the searched data
subjects in Spark (`personal`). Plans come from the findings alone (`planner`); the executors
(`purge_executor`) change ACLs over IMAP and RACL keys with ``cyr_dbtool``. Importing this
module imports no Spark, pandas or IMAP code: those are imported when used.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import Login
from mqforensics.spec import Check, Loaded, Option, RuleKind, Sample, System
from mqforensics.systems.cyrus import audit, planner, pseudonyms, views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.retention.manifest import Plan
    from mqforensics.systems.cyrus.fleet import CyrusFrames

NAME = "cyrus"
SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "cyrus" / "sample"


def _selected(name: str, frames: CyrusFrames, settings: Any) -> DataFrame:
    """The findings of check `name`, computed per file by the loader's one read."""
    from pyspark.sql import functions as F

    return frames.findings.where(F.col("check") == name)


def _personal_data(frames: CyrusFrames, settings: audit.Settings) -> DataFrame:
    from mqforensics.systems.cyrus.personal import personal_data

    return personal_data(frames, settings)


def _per_file(name: str, severity: str, what: str, why: str, todo: str) -> Check:
    return Check(name, severity, functools.partial(_selected, name), what, why, todo)


CHECKS: tuple[Check, ...] = (
    _per_file(
        "integrity",
        "critical",
        "A reader problem in a mailboxes.db file at a file offset: a CRC mismatch, a truncation, "
        "a bad pointer (critical), or a dirty header or bytes past the committed size (warning).",
        "Records past it may be lost or unread: every other finding of that file comes from a "
        "partial read, and no plan is made from it.",
        "Audit a whole copy (copy the file again, or dump it with cyr_dbtool); on the server, "
        "check the database with ctl_cyrusdb -r or restore it.",
    ),
    _per_file(
        "undecodable_record",
        "error",
        "A mailbox record whose value is neither a dlist nor <=2.4 text.",
        "Its ACL is unknown: who can open that mailbox cannot be told, its RACL keys are not "
        "judged, and no plan is made from the file.",
        "Look at the record (cyr_dbtool ... show) and repair or recreate the mailbox "
        "(ctl_mboxlist, reconstruct).",
    ),
    _per_file(
        "unreclaimed_history",
        "info",
        "A twoskip file still holding superseded or deleted records: old ACL values and removed "
        "RACL keys, until a checkpoint repacks it.",
        "Anyone with a copy of the file can read back grants an erasure removed.",
        "Run a checkpoint (ctl_cyrusdb -c) after an erasure, then audit again.",
    ),
    _per_file(
        "racl_marker",
        "error",
        "The RACL marker key is missing while RACL keys exist, holds the wrong value for the "
        "version, or is of the other key generation.",
        "Cyrus ignores or rebuilds the reverse ACLs: LIST answers from keys that do not match "
        "the ACLs, hiding or showing shared mailboxes.",
        "Fix reverseacls in imapd.conf (and --version) and restart: ctl_cyrusdb -r rebuilds the "
        "keys.",
    ),
    _per_file(
        "racl_missing",
        "error",
        "A reverse-ACL key that a grant needs under the version's rule is absent.",
        "The grantee does not see the mailbox shared with them in LIST.",
        "Plan a racl_repair: the key is added with cyr_dbtool under the database lock (or a "
        "rebuild when most keys are missing).",
    ),
    _per_file(
        "racl_stale",
        "warning",
        "A reverse-ACL key no grant needs: no such mailbox, no grant, rights too weak for the "
        "version's rule, or the other namespace letter.",
        "LIST offers the grantee a mailbox they cannot open, and the key keeps naming a person "
        "after the grant is gone.",
        "Plan a racl_repair: the key is removed after a last check that no grant needs it.",
    ),
    _per_file(
        "racl_forbidden",
        "warning",
        "A reverse-ACL key Cyrus never writes: for the owner, an admin, a tombstone or an "
        "intermediate mailbox.",
        "Something other than Cyrus wrote it (a bad restore or tool), and LIST answers from it.",
        "Plan a racl_repair: the key is removed.",
    ),
    _per_file(
        "dangling_acl_identifier",
        "warning",
        "A grant on a live mailbox to a user whose INBOX is not in the database: deleted, "
        "renamed or mistyped.",
        "A user created later under that name inherits the access; the grant keeps a departed "
        "person's name.",
        "Remove the grant (SETACL over IMAP), or plan an erase_subject for that person.",
    ),
    _per_file(
        "noncanonical_acl_identifier",
        "warning",
        "A grant written local@<default domain>, which Cyrus never matches to the login local.",
        "The grant gives nobody access: the owner believes the mailbox is shared, and its RACL "
        "key is never looked up.",
        "Grant the rights again to the bare userid, and remove the written form.",
    ),
    _per_file(
        "cross_domain_share",
        "info",
        "A positive grant on a live mailbox to a user of another domain.",
        "Mail is readable outside the mailbox's domain: check it is intended (contracts, data "
        "residency).",
        "Review it with the mailbox's owner; remove what is not intended.",
    ),
    _per_file(
        "anyone_share",
        "info",
        "A positive grant to anyone or anonymous on a live mailbox.",
        "Every user, or anyone without a login, can list or read that mailbox.",
        "Review it with the owner; keep only the intended public folders.",
    ),
    Check(
        "personal_data",
        "info",
        _personal_data,
        "An ACL entry whose grantee, or the owner of whose mailbox, is a data subject the audit "
        "looked for (--erasure-policy); the subjects are keyed hashes only.",
        "An erasure request covers it: the person's access to others' mailboxes, or others' "
        "access to the person's mailboxes.",
        "Plan the erasure: an erase_subject rule becomes DELETEACLs over IMAP (the owner's own "
        "rights, admins' and tombstones' are deferred).",
    ),
)

# Where the IMAP admin login of a purge comes from (`purge_executor`).
IMAP_LOGIN = ("MQF_IMAP_USERNAME", "MQF_IMAP_PASSWORD")

PURGE_OPTIONS = (
    Option(
        ("--imap",),
        {
            "metavar": "HOST:PORT",
            "help": "Cyrus IMAP server for DELETEACL; admin login from MQF_IMAP_USERNAME/_PASSWORD",
        },
        login=Login(IMAP_LOGIN, host=True),
    ),
    Option(
        ("--imap-ssl",),
        {"action": "store_true", "default": False, "help": "IMAP over TLS (IMAPS)"},
    ),
    Option(
        ("--cyrus-config",),
        {"metavar": "FILE", "help": "the server's imapd.conf (RACL key repairs)"},
    ),
    Option(
        ("--cyrus-tools",),
        {"metavar": "DIR", "help": "directory of cyr_dbtool (default /usr/lib/cyrus/bin)"},
    ),
    Option(
        ("--cyrus-user",),
        {"metavar": "NAME", "help": "run cyr_dbtool as this user when root (default cyrus)"},
    ),
)


def executors(plan: Plan, args: argparse.Namespace) -> list[Any]:
    from mqforensics.systems.cyrus.purge_executor import build_executors

    return build_executors(plan, args)


def validation_frames(loaded: Loaded) -> Mapping[str, DataFrame]:
    """The frames the suites ``expectations/cyrus_<frame>.json`` check: the files read, every
    ACL entry, and every live key/value record (a second, lazy read of each file)."""
    frames: CyrusFrames = loaded.frames
    return {"files": frames.files, "acl": frames.acl, "records": frames.records()}


def sample(workdir: Path) -> Sample:
    """Two backends of one murder (datasets/cyrus/sample/ANOMALIES.md), audited with the
    server's default domain (the notebooks and the demo add ``--erasure-policy`` with the sample
    policy, so its data subject is looked for)."""
    return Sample(
        argv=[
            str(SAMPLE / "backend1" / "mailboxes.db"),
            str(SAMPLE / "backend2" / "mailboxes.show"),
            "--default-domain",
            "example.org",
        ],
        policy=SAMPLE / "policy.toml",
    )


def data_sources() -> Sequence[type]:
    from mqforensics.systems.cyrus.fleet import SOURCES

    return SOURCES


SPEC = System(
    name=NAME,
    title="Cyrus IMAP mailboxes.db (files or dumps)",
    add_source_options=audit.add_source_options,
    check_inputs=audit.check_inputs,
    load=audit.load_fleet,
    settings=audit.settings,
    checks=CHECKS,
    plan=planner.plan,
    rule_kinds=(RuleKind(planner.RACL_REPAIR),),
    executors=executors,
    purge_options=PURGE_OPTIONS,
    validation_frames=validation_frames,
    sample=sample,
    data_sources=data_sources,
    hide_target=pseudonyms.target,
    hide_finding=pseudonyms.hide_finding,
    views=views,
)
