"""The figures an operator trends, as every layer carries them: one `Metric` per figure.

A system's ``metrics.py`` measures its loaded frames (`spec.System.metrics`: rows and live mails
per queue, the oldest live mail's age, browseStart lag, segment garbage ratio, ...); the run
history (`mqforensics.history`) adds what every system has (findings and bytes per check and
severity, personal-data objects, each expectation's result) and appends them all, one row each,
to the history (docs/history.md). A metric is named once here or in its system's
``metrics.py``, with its unit; `AGE_BANDS` are the age bands every system counts mail in.

A figure is a number (`value`, a float) with a `unit` (`UNITS`) and up to three labels saying
what it is of: `queue` (a queue, a mailbox database, a segment directory), `check` (a check's
stable name) and `item` (a table, a severity, an age band, an expectation): each ``""`` when the
figure is not of one. Labels are text; an address in one is pseudonymised when written, unless
the run reveals addresses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AGE_BANDS", "UNITS", "Metric", "age_band", "age_metrics", "band_counts", "epoch_seconds",
    "value_text",
]  # fmt: skip

# What a value counts or measures: how reports and plots label an axis.
UNITS = {
    "count": "count",
    "bytes": "bytes",
    "seconds": "seconds",
    "ratio": "ratio (0 to 1)",
    "instant": "seconds since 1970-01-01 UTC",
    "success": "1 passed, 0 failed",
}

# Age bands (label, lower bound inclusive, upper bound exclusive, in seconds; None: open) that
# every system counts its live mail in (``mails_by_age`` with ``item`` = the band's label).
AGE_BANDS: tuple[tuple[str, float, float | None], ...] = (
    ("under 1h", float("-inf"), 3600.0),
    ("1h to 1d", 3600.0, 86400.0),
    ("1d to 7d", 86400.0, 7 * 86400.0),
    ("7d or more", 7 * 86400.0, None),
)


def age_band(seconds: float) -> str:
    """The label of the band of `AGE_BANDS` an age in seconds falls in (a negative age, mail
    dated after the instant judged, is in the first)."""
    for label, low, high in AGE_BANDS:
        if seconds >= low and (high is None or seconds < high):
            return label
    raise AssertionError(seconds)  # the bands cover every number


def band_counts(age: Any, wanted: Any = None) -> list[Any]:
    """Spark aggregate columns ``band_0`` .. ``band_3``: how many rows (of the `wanted` ones,
    a boolean column; None: every row) have an `age` (a column of seconds, null: none) in each
    band of `AGE_BANDS`. What each system's ``metrics.py`` counts ``mails_by_age`` with."""
    from pyspark.sql import functions as F

    counts = []
    for index, (_, low, high) in enumerate(AGE_BANDS):
        inside = age.isNotNull() if wanted is None else wanted & age.isNotNull()
        if low != float("-inf"):
            inside = inside & (age >= F.lit(low))
        if high is not None:
            inside = inside & (age < F.lit(high))
        counts.append(F.count(F.when(inside, 1)).alias(f"band_{index}"))
    return counts


def epoch_seconds(instant: dt.datetime) -> float:
    """An instant as seconds since 1970-01-01 UTC (a naive one is taken as UTC): the value of
    a metric whose unit is ``instant``."""
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=dt.UTC)
    return instant.timestamp()


@dataclass(frozen=True)
class Metric:
    """One figure of one run: `metric` (its stable name), `value`, `unit` (a key of `UNITS`)
    and what it is of (`queue`, `check`, `item`; ``""`` when not of one)."""

    metric: str
    value: float
    unit: str
    queue: str = ""
    check: str = ""
    item: str = ""

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.metric}: unknown unit {self.unit!r}")
        object.__setattr__(self, "value", float(self.value))


def age_metrics(figures: Mapping[str, Any] | None, queue: str) -> list[Metric]:
    """A queue's ``mails_by_age`` (one per band of `AGE_BANDS`, zeros included) and, when it
    holds a dated live mail, its ``oldest_live_age``, from the `band_counts` columns and an
    ``oldest`` (seconds) of one aggregated row (`figures`; None or missing: none counted)."""
    counted = figures or {}
    found = [
        Metric("mails_by_age", counted.get(f"band_{index}") or 0, "count", queue=queue, item=band)
        for index, (band, _, _) in enumerate(AGE_BANDS)
    ]
    if counted.get("oldest") is not None:
        found.append(Metric("oldest_live_age", counted["oldest"], "seconds", queue=queue))
    return found


def value_text(value: float, unit: str) -> str:
    """A figure as people read it: ``1,204`` mails, ``2.1 KiB``, ``3 d 4 h``, an instant in
    UTC, ``42%``, ``passed``/``failed``."""
    from mqforensics.findings import size_text
    from mqforensics.units import human_duration, utc_from_unix, utc_text

    if unit == "bytes":
        return size_text(value)
    if unit == "seconds":
        return human_duration(value)
    if unit == "instant":
        instant = utc_from_unix(value)
        return utc_text(instant) if instant is not None else "-"
    if unit == "ratio":
        return f"{value:.1%}"
    if unit == "success":
        return "passed" if value >= 1 else "failed"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
