"""The ``personal_data`` check of Cyrus: every ACL entry that names a searched data subject.

A Cyrus ACL entry holds personal data of two people: the grantee (its identifier) and the owner
of the mailbox (``user.<local>…``). The "address" of each is the userid as an erasure request
names it (`dbchecks.address_of`: ``bob@example.org``, or a bare ``bob`` in the default domain),
keyed with the audit's key in Spark (`subjects.keyed_addresses`) and matched against the
searched subjects. Each matching entry becomes one finding (`findings.select_findings`) with
what the planner needs to remove the grant, or to say why it will not: the entry exactly as
stored (``mailbox``, ``identifier`` with its ``-``, ``rights``), the mailbox's ``owner``, whether
it is a ``tombstone`` or ``intermediate`` record, the owner's own rights (``own_rights``) or an
admin's (``admin``), and the keyed hashes matched: ``subjects`` (as grantee or owner) and
``grantee_subjects`` (as grantee).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqforensics import subjects
from mqforensics.findings import select_findings
from mqforensics.systems.cyrus.dbchecks import SYSTEM, visible
from mqforensics.systems.cyrus.frames import acl_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from mqforensics.systems.cyrus.frames import CyrusFrames
    from mqforensics.systems.cyrus.options import Settings

CHECK = subjects.CHECK


def _at(column: str, where: str) -> Column:
    """`column`'s subjects, each with `where` it was found (``detail.found``)."""
    from pyspark.sql import functions as F

    return F.transform(column, lambda s: F.struct(s.alias("subject"), F.lit(where).alias("where")))


def personal_data(frames: CyrusFrames, settings: Settings) -> DataFrame:
    """One ``info`` finding per ACL entry (of the frames judged with the settings' server
    settings) whose grantee or mailbox owner is a searched data subject (none when no subject
    is searched)."""
    from pyspark.sql import functions as F

    common = settings.common
    acl = acl_of(frames.judged(settings.version, settings.admins, settings.default_domain))
    if not common.subjects:
        acl = acl.limit(0)
    wanted = F.array(*(F.lit(s) for s in sorted(common.subjects))).cast("array<string>")
    key = common.subject_key

    def matched(address: str) -> Column:
        return F.array_sort(
            F.array_intersect(subjects.keyed_addresses(F.array(address), key), wanted)
        )

    # A lambda: no type hints for Spark to guess an evaluation type from.
    shown = F.udf(lambda text: visible(text), "string")
    rows = acl.select(
        "*",
        matched("grantee_address").alias("grantee_subjects"),
        matched("owner_address").alias("owner_subjects"),
    ).where((F.size("grantee_subjects") > 0) | (F.size("owner_subjects") > 0))
    detail = F.struct(
        "file", "mailbox", "identifier", "rights", "owner", "tombstone", "intermediate",
        "own_rights", "admin",
        F.array_sort(F.array_union("grantee_subjects", "owner_subjects")).alias("subjects"),
        "grantee_subjects",
        F.array_sort(
            F.concat(_at("grantee_subjects", "acl:grantee"), _at("owner_subjects", "acl:owner"))
        ).alias("found"),
        # A mailboxes.db holds no message: both depths search the same ACL entries.
        F.lit(common.searched.depth).alias("depth"),
    )  # fmt: skip
    return select_findings(
        rows,
        check=CHECK,
        severity="info",
        system=SYSTEM,
        queue=None,
        scope="acl",
        subject=F.concat_ws(" ", shown("mailbox"), shown("identifier")),
        observed_at=settings.as_of,
        bytes=None,
        detail=detail,
    )
