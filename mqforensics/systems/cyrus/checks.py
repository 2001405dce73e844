"""The checks of Cyrus as the runner calls them: each is ``name(frames, settings)`` returning a
findings frame (`findings.SCHEMA`), built with `findings.select_findings`; `CHECKS` maps each
name to its function (the `Check` metadata is in `spec`).

The per-file checks (`dbchecks`: pure functions of one `database.Database`) are computed by the
fleet reader, in the task that reads each file (`fleet.fleet_row`), into the ``findings`` of
`frames.CyrusFrames`; each check here selects its own. ``personal_data`` matches the ACL
entries against the searched data subjects in Spark (`personal`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mqforensics.findings import select_findings
from mqforensics.systems.cyrus.dbchecks import SYSTEM
from mqforensics.systems.cyrus.personal import personal_data

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.cyrus.frames import CyrusFrames
    from mqforensics.systems.cyrus.options import Settings

__all__ = [
    "CHECKS", "anyone_share", "cross_domain_share", "dangling_acl_identifier", "integrity",
    "noncanonical_acl_identifier", "personal_data", "racl_forbidden", "racl_marker",
    "racl_missing", "racl_stale", "undecodable_record", "unreclaimed_history",
]  # fmt: skip


def selected(name: str, frames: CyrusFrames) -> DataFrame:
    """The findings of per-file check `name`, as the fleet's read computed them."""
    from pyspark.sql import functions as F

    found = frames.findings.where(F.col("check") == name)
    return select_findings(
        found,
        check=name,
        severity=F.col("severity"),
        system=SYSTEM,
        queue=F.col("queue"),
        scope=F.col("scope"),
        subject=F.col("subject"),
        observed_at=F.col("observed_at"),
        bytes=F.col("bytes"),
        detail_json=F.col("detail"),
    )


def integrity(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("integrity", frames)


def undecodable_record(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("undecodable_record", frames)


def unreclaimed_history(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("unreclaimed_history", frames)


def racl_marker(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_marker", frames)


def racl_missing(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_missing", frames)


def racl_stale(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_stale", frames)


def racl_forbidden(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_forbidden", frames)


def dangling_acl_identifier(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("dangling_acl_identifier", frames)


def noncanonical_acl_identifier(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("noncanonical_acl_identifier", frames)


def cross_domain_share(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("cross_domain_share", frames)


def anyone_share(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("anyone_share", frames)


CHECKS: dict[str, Callable[[CyrusFrames, Settings], DataFrame]] = {
    check.__name__: check
    for check in (
        integrity, undecodable_record, unreclaimed_history, racl_marker, racl_missing,
        racl_stale, racl_forbidden, dangling_acl_identifier, noncanonical_acl_identifier,
        cross_domain_share, anyone_share, personal_data,
    )
}  # fmt: skip
