"""Cyrus IMAP `mailboxes.db` as the shared layers see it: ``SPEC``, the one `System` of Cyrus.

The loader (`read`) reads every input in Spark, one task per file (`fleet.read_fleet`), into the
frames (`frames.CyrusFrames`), judging nothing; the checks (`checks`) run on the frames: the
per-file checks (`dbchecks`) on each file's read rebuilt in a Spark task (`perfile`), and
``personal_data`` matching the ACL entries against the searched data subjects in Spark
(`personal`). Plans come
from the findings alone (`plan`); the executors (`purge`) change ACLs over IMAP and RACL keys
with ``cyr_dbtool``. Importing this module imports no Spark, pandas or IMAP code: those are
imported when used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mqforensics.spec import SUBJECTS_SEARCHED, Check, Loaded, Needs, RuleKind, System, deferred
from mqforensics.systems.cyrus import plan, pseudonyms, sample, views
from mqforensics.systems.cyrus.options import CyrusOptions, PurgeOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.cyrus.frames import CyrusFrames

NAME = "cyrus"
CHECKS_MODULE = "mqforensics.systems.cyrus.checks"
READ_MODULE = "mqforensics.systems.cyrus.read"


def _check(
    name: str, severity: str, what: str, why: str, todo: str, needs: Needs | None = None
) -> Check:
    return Check(name, severity, deferred(CHECKS_MODULE, name), what, why, todo, needs)


CHECKS: tuple[Check, ...] = (
    _check(
        "integrity",
        "critical",
        "A reader problem in a mailboxes.db file at a file offset: a CRC mismatch, a truncation, "
        "a bad pointer (critical), or a dirty header or bytes past the committed size (warning).",
        "Records past it may be lost or unread: every other finding of that file comes from a "
        "partial read, and no plan is made from it.",
        "Audit a whole copy (copy the file again, or dump it with cyr_dbtool); on the server, "
        "check the database with ctl_cyrusdb -r or restore it.",
    ),
    _check(
        "undecodable_record",
        "error",
        "A mailbox record whose value is neither a dlist nor <=2.4 text.",
        "Its ACL is unknown: who can open that mailbox cannot be told, its RACL keys are not "
        "judged, and no plan is made from the file.",
        "Look at the record (cyr_dbtool ... show) and repair or recreate the mailbox "
        "(ctl_mboxlist, reconstruct).",
    ),
    _check(
        "unreclaimed_history",
        "info",
        "A twoskip file still holding superseded or deleted records: old ACL values and removed "
        "RACL keys, until a checkpoint repacks it.",
        "Anyone with a copy of the file can read back grants an erasure removed.",
        "Run a checkpoint (ctl_cyrusdb -c) after an erasure, then audit again.",
    ),
    _check(
        "racl_marker",
        "error",
        "The RACL marker key is missing while RACL keys exist, holds the wrong value for the "
        "version, or is of the other key generation.",
        "Cyrus ignores or rebuilds the reverse ACLs: LIST answers from keys that do not match "
        "the ACLs, hiding or showing shared mailboxes.",
        "Fix reverseacls in imapd.conf (and --version) and restart: ctl_cyrusdb -r rebuilds the "
        "keys.",
    ),
    _check(
        "racl_missing",
        "error",
        "A reverse-ACL key that a grant needs under the version's rule is absent.",
        "The grantee does not see the mailbox shared with them in LIST.",
        "Plan a racl_repair: the key is added with cyr_dbtool under the database lock (or a "
        "rebuild when most keys are missing).",
    ),
    _check(
        "racl_stale",
        "warning",
        "A reverse-ACL key no grant needs: no such mailbox, no grant, rights too weak for the "
        "version's rule, or the other namespace letter.",
        "LIST offers the grantee a mailbox they cannot open, and the key keeps naming a person "
        "after the grant is gone.",
        "Plan a racl_repair: the key is removed after a last check that no grant needs it.",
    ),
    _check(
        "racl_forbidden",
        "warning",
        "A reverse-ACL key Cyrus never writes: for the owner, an admin, a tombstone or an "
        "intermediate mailbox.",
        "Something other than Cyrus wrote it (a bad restore or tool), and LIST answers from it.",
        "Plan a racl_repair: the key is removed.",
    ),
    _check(
        "dangling_acl_identifier",
        "warning",
        "A grant on a live mailbox to a user whose INBOX is not in the database: deleted, "
        "renamed or mistyped.",
        "A user created later under that name inherits the access; the grant keeps a departed "
        "person's name.",
        "Remove the grant (SETACL over IMAP), or plan an erase_subject for that person.",
    ),
    _check(
        "noncanonical_acl_identifier",
        "warning",
        "A grant written local@<default domain>, which Cyrus never matches to the login local.",
        "The grant gives nobody access: the owner believes the mailbox is shared, and its RACL "
        "key is never looked up.",
        "Grant the rights again to the bare userid, and remove the written form.",
        Needs("no default domain", ("default_domain",)),
    ),
    _check(
        "cross_domain_share",
        "info",
        "A positive grant on a live mailbox to a user of another domain.",
        "Mail is readable outside the mailbox's domain: check it is intended (contracts, data "
        "residency).",
        "Review it with the mailbox's owner; remove what is not intended.",
    ),
    _check(
        "anyone_share",
        "info",
        "A positive grant to anyone or anonymous on a live mailbox.",
        "Every user, or anyone without a login, can list or read that mailbox.",
        "Review it with the owner; keep only the intended public folders.",
    ),
    _check(
        "personal_data",
        "info",
        "An ACL entry whose grantee, or the owner of whose mailbox, is a data subject the audit "
        "looked for (--erasure-policy); the subjects are keyed hashes only.",
        "An erasure request covers it: the person's access to others' mailboxes, or others' "
        "access to the person's mailboxes.",
        "Plan the erasure: an erase_subject rule becomes DELETEACLs over IMAP (the owner's own "
        "rights, admins' and tombstones' are deferred).",
        SUBJECTS_SEARCHED,
    ),
)


def validation_frames(loaded: Loaded[CyrusFrames]) -> Mapping[str, DataFrame]:
    """The frames the suites ``expectations/cyrus_<frame>.json`` check: the files read, every
    ACL entry, and every live key/value record (a second, lazy read of each file)."""
    frames: CyrusFrames = loaded.frames
    return {"files": frames.files, "acl": frames.acl, "records": frames.records}


def data_sources() -> Sequence[type]:
    from mqforensics.systems.cyrus.fleet import SOURCES

    return SOURCES


SPEC = System(
    name=NAME,
    title="Cyrus IMAP mailboxes.db (files or dumps)",
    options=CyrusOptions,
    load=deferred(READ_MODULE, "load"),
    settings=deferred(READ_MODULE, "settings"),
    checks=CHECKS,
    plan=plan.plan,
    rule_kinds=(RuleKind(plan.RACL_REPAIR),),
    executors=deferred("mqforensics.systems.cyrus.purge", "build_executors"),
    purge_options=PurgeOptions,
    validation_frames=validation_frames,
    sample=sample.bundled,
    data_sources=data_sources,
    hide_target=pseudonyms.target,
    hide_finding=pseudonyms.hide_finding,
    views=views,
    metrics=deferred("mqforensics.systems.cyrus.metrics", "measure"),
)
