"""The one findings builder of James's checks (`checks`, `broker_checks`), on the shared
`mqforensics.findings.select_findings`: a finding's queue is its row's ``queuename`` unless
given, its ``observed_at`` the audit's as-of, its null facts kept in ``detail``."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from mqforensics.findings import select_findings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SYSTEM = "james"


def finding(
    frame: DataFrame,
    check: str,
    severity: Column | str,
    scope: str,
    subject: Column,
    as_of: dt.datetime,
    detail: Column,
    size: Column | None = None,
    queue: Column | None = None,
) -> DataFrame:
    """The findings of `frame`'s rows, one each (`findings.SCHEMA`, system ``james``)."""
    return select_findings(
        frame, check=check, severity=severity, system=SYSTEM,
        queue=queue if queue is not None else F.col("queuename"), scope=scope, subject=subject,
        observed_at=as_of, bytes=size, detail=detail,
    )  # fmt: skip


def older_than(value: dt.timedelta) -> str:
    """The olderThan of a RepublishNotProcessedMails call, as every call of an audit writes it:
    whole seconds (``86400s``, ``64799s``), one amount and one unit James's DurationParser
    reads, so that calls in one report compare at a glance."""
    return f"{int(value.total_seconds())}s"
