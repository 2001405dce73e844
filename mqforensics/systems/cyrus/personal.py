"""The ``personal_data`` check of Cyrus: every ACL entry that names a searched data subject.

A Cyrus ACL entry holds personal data of two people: the grantee (its identifier) and the owner
of the mailbox (``user.<local>…``). The "address" of each is the userid as an erasure request
names it (`checks.address_of`: ``bob@example.org``, or a bare ``bob`` in the default domain),
keyed with the audit's key in Spark (`subjects.keyed_addresses`) and matched against the
searched subjects. Only the few matching entries are collected; each becomes one finding with
what the planner needs to remove the grant, or to say why it will not: the entry exactly as
stored (``mailbox``, ``identifier`` with its ``-``, ``rights``), the mailbox's ``owner``, whether
it is a ``tombstone`` or ``intermediate`` record, the owner's own rights (``own_rights``) or an
admin's (``admin``), and the keyed hashes matched: ``subjects`` (as grantee or owner) and
``grantee_subjects`` (as grantee).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqforensics import subjects
from mqforensics.findings import Finding, empty, to_frame
from mqforensics.systems.cyrus import checks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.cyrus.audit import Settings
    from mqforensics.systems.cyrus.fleet import CyrusFrames

CHECK = subjects.CHECK


def personal_data(frames: CyrusFrames, settings: Settings) -> DataFrame:
    """One ``info`` finding per ACL entry whose grantee or mailbox owner is a searched data
    subject (none when no subject is searched)."""
    from pyspark.sql import functions as F

    common = settings.common
    if not common.subjects:
        return empty(frames.spark)
    wanted = F.array(*(F.lit(s) for s in sorted(common.subjects)))
    key = common.subject_key

    def matched(address: str) -> F.Column:
        return F.array_sort(
            F.array_intersect(subjects.keyed_addresses(F.array(address), key), wanted)
        )

    rows = (
        frames.acl.select(
            "*",
            matched("grantee_address").alias("grantee_subjects"),
            matched("owner_address").alias("owner_subjects"),
        )
        .where((F.size("grantee_subjects") > 0) | (F.size("owner_subjects") > 0))
        .collect()
    )
    found = []
    for row in rows:
        detail = {
            "file": row.file,
            "mailbox": row.mailbox,
            "identifier": row.identifier,
            "rights": row.rights,
            "owner": row.owner,
            "tombstone": row.tombstone,
            "intermediate": row.intermediate,
            "own_rights": row.own_rights,
            "admin": row.admin,
            "subjects": sorted({*row.grantee_subjects, *row.owner_subjects}),
            "grantee_subjects": list(row.grantee_subjects),
        }
        subject = f"{checks.visible(row.mailbox)} {checks.visible(row.identifier)}"
        found.append(
            Finding(
                CHECK, "info", checks.SYSTEM, None, "acl", subject, settings.as_of, None, detail
            )
        )
    return to_frame(frames.spark, found)
