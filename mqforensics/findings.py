"""The one findings table every check of every system returns, and its summaries.

A finding names something exact that a person or a plan can act on: ``subject`` is the key (a
blob key, an enqueueId, a partition ``queue/timerangestart/bucket``, a RACL key, a segment file).
``detail`` is a JSON object string with check-specific facts; ``bytes`` the storage it holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = (
    "check string, severity string, system string, queue string, scope string, subject string, "
    "observed_at timestamp, bytes bigint, detail string"
)
COLUMNS = [c.split()[0] for c in SCHEMA.split(", ")]

# Ordered from least to most serious; the CLI exits 1 when any finding is "error" or worse.
SEVERITIES = ("info", "warning", "error", "critical")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def exit_status(rows: Iterable[dict[str, Any]]) -> int:
    """An audit's exit status: 1 when any finding is ``error`` or worse, else 0."""
    worst = max((severity_rank(r["severity"]) for r in rows), default=-1)
    return 1 if worst >= SEVERITIES.index("error") else 0


@dataclass(frozen=True)
class Finding:
    """One finding as a plain value (for checks that build findings in Python, and for tests)."""

    check: str
    severity: str
    system: str
    queue: str | None
    scope: str
    subject: str
    observed_at: Any = None
    bytes: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> tuple:
        values = asdict(self)
        values["detail"] = json.dumps(self.detail, sort_keys=True, default=str)
        return tuple(values[c] for c in COLUMNS)


def to_frame(spark: SparkSession, findings: Iterable[Finding]) -> DataFrame:
    from mqforensics.spark import local_frame

    return local_frame(spark, [f.as_row() for f in findings], SCHEMA)


def empty(spark: SparkSession) -> DataFrame:
    from mqforensics.spark import local_frame

    return local_frame(spark, [], SCHEMA)


def union_all(spark: SparkSession, frames: Iterable[DataFrame]) -> DataFrame:
    result = empty(spark)
    for frame in frames:
        result = result.unionByName(frame.select(*COLUMNS))
    return result
