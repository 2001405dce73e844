"""The checks of Cyrus as the runner calls them: each is ``name(frames, settings)`` returning a
findings frame (`findings.SCHEMA`), built with `findings.select_findings`; `CHECKS` maps each
name to its function (the `Check` metadata is in `spec`).

The per-file checks (`dbchecks`: pure functions of one `database.Database`) run on the frames:
each file's read (`frames.CyrusFrames.read`) is rebuilt into its `Database` in a Spark task and
judged with the settings' server settings (`perfile`, through `CyrusFrames.judged`, computed
once for all of them); each check here selects its own findings from that and stamps them with
the audit's instant. ``personal_data`` matches the ACL entries against the searched data
subjects in Spark (`personal`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mqforensics.findings import select_findings
from mqforensics.systems.cyrus.dbchecks import SYSTEM
from mqforensics.systems.cyrus.frames import findings_of
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


def selected(name: str, frames: CyrusFrames, settings: Settings) -> DataFrame:
    """The findings of per-file check `name`: `dbchecks` run on the frames' read of each file
    with the settings' version, admins and default domain (`CyrusFrames.judged`)."""
    from pyspark.sql import functions as F

    judged = frames.judged(settings.version, settings.admins, settings.default_domain)
    found = findings_of(judged).where(F.col("check") == name)
    return select_findings(
        found,
        check=name,
        severity=F.col("severity"),
        system=SYSTEM,
        queue=None,
        scope=F.col("scope"),
        subject=F.col("subject"),
        observed_at=settings.as_of,
        bytes=F.col("bytes"),
        detail_json=F.col("detail"),
    )


def integrity(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("integrity", frames, settings)


def undecodable_record(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("undecodable_record", frames, settings)


def unreclaimed_history(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("unreclaimed_history", frames, settings)


def racl_marker(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_marker", frames, settings)


def racl_missing(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_missing", frames, settings)


def racl_stale(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_stale", frames, settings)


def racl_forbidden(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("racl_forbidden", frames, settings)


def dangling_acl_identifier(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("dangling_acl_identifier", frames, settings)


def noncanonical_acl_identifier(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("noncanonical_acl_identifier", frames, settings)


def cross_domain_share(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("cross_domain_share", frames, settings)


def anyone_share(frames: CyrusFrames, settings: Settings) -> DataFrame:
    return selected("anyone_share", frames, settings)


CHECKS: dict[str, Callable[[CyrusFrames, Settings], DataFrame]] = {
    check.__name__: check
    for check in (
        integrity, undecodable_record, unreclaimed_history, racl_marker, racl_missing,
        racl_stale, racl_forbidden, dangling_acl_identifier, noncanonical_acl_identifier,
        cross_domain_share, anyone_share, personal_data,
    )
}  # fmt: skip
