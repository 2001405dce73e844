"""Questions asked of a history: its runs, a metric's series, the alerts its rules give."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mqforensics.history.alerts import Alert, collected, evaluate
from mqforensics.history.rules import PATTERNS, Rule, pattern_regex

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame


def picked(frame: DataFrame, patterns: Mapping[str, str | None]) -> DataFrame:
    """The rows of `frame` whose labels match `patterns` (label -> shell-style pattern; None or
    ``*``: any), the labels of `rules.PATTERNS` and ``metric``."""
    from pyspark.sql import functions as F

    for name, pattern in patterns.items():
        if name not in (*PATTERNS, "metric"):
            raise KeyError(name)
        if pattern is not None and pattern != "*":
            frame = frame.filter(F.col(name).rlike(pattern_regex(pattern)))
    return frame


def runs(frame: DataFrame) -> pd.DataFrame:
    """One row per run: system, scope, kind, as_of, run_at, run_id and its figures' count, in
    the order of the instants judged."""
    from pyspark.sql import functions as F

    grouped = frame.groupBy("system", "scope", "kind", "as_of", "run_at", "run_id").agg(
        F.count("*").alias("figures")
    )
    table: pd.DataFrame = utc(grouped.toPandas())
    return table.sort_values(["system", "scope", "as_of", "run_at"], ignore_index=True)


def series(frame: DataFrame, metric: str, patterns: Mapping[str, str | None]) -> pd.DataFrame:
    """The points of `metric` in the series `patterns` pick, in time order."""
    from mqforensics.history.schema import SERIES

    chosen = picked(frame, {**patterns, "metric": metric})
    table: pd.DataFrame = utc(
        chosen.select(*SERIES, "kind", "unit", "as_of", "run_at", "run_id", "value").toPandas()
    )
    return table.sort_values([*SERIES, "kind", "as_of", "run_at"], ignore_index=True)


def utc(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with its instants (``as_of``, ``run_at``) aware, in UTC: Spark hands them over
    naive, in the session's time zone, which is UTC in every session `mqforensics.spark` makes."""
    for column in ("as_of", "run_at"):
        if column in table and table[column].dt.tz is None:
            table[column] = table[column].dt.tz_localize("UTC")
    return table


def alerts(frame: DataFrame, rules: Sequence[Rule], *, system: str | None = None) -> list[Alert]:
    """Every alert of `rules` at every run of the history (of `system` only, when given)."""
    from mqforensics.history.alerts import numbered

    if system is not None:
        frame = picked(frame, {"system": system})
    base = numbered(frame).cache()  # every rule reads it: the runs numbered once
    try:
        return collected(evaluate(base, rules), rules)
    finally:
        base.unpersist()
