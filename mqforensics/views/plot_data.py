"""The small tables plots and explorers draw: reductions done in Spark, collected as pandas.

Nothing here decides what is wrong (the checks do); these functions only count and lay out what
the readers and checks produced, bounded in size whatever the store's size: a heatmap keeps at
most `max_slices` slices, a timeline one row per segment file, the sharing graph one row per
(owner, grantee).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from mqforensics.findings import COLUMNS, SEVERITIES
from mqforensics.privacy import pseudonymize_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


# --- findings ------------------------------------------------------------------------------------


def findings_table(
    findings: DataFrame | Iterable[Mapping[str, Any]], *, reveal: bool = False
) -> pd.DataFrame:
    """Findings (a findings frame, or the rows of a ``findings.json``) as pandas, ordered by
    severity (worst first), check and subject; `queue`, `subject` and `detail` text
    pseudonymised unless `reveal` (already pseudonymised text is left as it is)."""
    if hasattr(findings, "toLocalIterator"):
        rows = [row.asDict() for row in findings.toLocalIterator()]  # type: ignore[union-attr]
    else:
        rows = [dict(r) for r in findings]  # type: ignore[union-attr]
    for row in rows:
        detail = row.get("detail")
        if not isinstance(detail, str):
            row["detail"] = json.dumps(detail or {}, sort_keys=True, default=str)
        row["observed_at"] = _utc(row.get("observed_at"))
        if not reveal:
            for column in ("queue", "subject", "detail"):
                if isinstance(row.get(column), str):
                    row[column] = pseudonymize_text(row[column])
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["bytes"] = table["bytes"].fillna(0).astype("int64")
    table["observed_at"] = pd.to_datetime(table["observed_at"], utc=True)
    table["rank"] = table["severity"].map(lambda s: -SEVERITIES.index(s) if s in SEVERITIES else 1)
    table = table.sort_values(["rank", "check", "subject"], kind="stable")
    return table.drop(columns="rank").reset_index(drop=True)
