"""The alert rules evaluated on Spark: for every rule, every series it picks and every run of
that series, whether the rule fires there (`evaluate`), and the alerts of each store's latest
run (`latest`), which is what a scheduler acts on.

A series' runs are ordered by ``as_of`` (the instant judged), then ``run_at`` and ``run_id``;
its windows (``the last N runs``) count the series' own points. A store (``system``,
``scope``) has a run number for each of its runs: an alert is "latest" when it fires at the
store's newest run. `Alert.since` is when what the rule saw began: the first run of the streak
over the threshold, of the unchanged value, of the growth (the run before the first rise), the
run compared to (``change``), or the run itself (``new``, ``outlier``).

Why not PyDeequ's anomaly strategies (docs/history.md): PyDeequ drives Deequ's Scala classes
through the classic JVM gateway (``spark._jvm``), which Spark Connect does not have, and Deequ is
built for Spark 3.x, not for this project's Spark 4. The few rules here are window functions
over the history frame, so they run wherever the audit does, local, on a cluster or through
Spark Connect; their semantics are tested on planted series (tests/unit/test_history_alerts.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqforensics.history.rules import Rule, pattern_regex
from mqforensics.history.schema import SERIES
from mqforensics.metrics import value_text
from mqforensics.units import utc_text

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# A store's runs of one kind (audits, validations) are numbered apart: each is its own
# scheduled job, with its own cadence, and a rule over "the last N runs" counts one job's runs.
STORE = ("system", "scope", "kind")
ORDER = ("as_of", "run_at", "run_id")
OUTPUT = (
    "rule", "kind", "severity", *SERIES, "run_kind", "unit", "run_id", "run_number", "latest",
    "as_of", "since", "value", "values",
)  # fmt: skip


@dataclass(frozen=True)
class Alert:
    """One rule firing on one series at one run."""

    rule: str
    kind: str
    severity: str
    system: str
    scope: str
    metric: str
    queue: str
    check: str
    item: str
    unit: str
    run_id: str
    run_number: int
    latest: bool
    as_of: dt.datetime
    since: dt.datetime
    value: float
    values: tuple[float, ...]
    what: str = ""
    why: str = ""
    # The kind of the runs the series is of: ``audit`` or ``validate`` (their series are apart).
    run_kind: str = "audit"

    @property
    def where(self) -> str:
        """The series in words: ``james james-sample queue spool`` and its labels."""
        labels = [f"{name} {getattr(self, name)}" for name in ("queue", "check", "item")
                  if getattr(self, name)]  # fmt: skip
        runs = ["(validations)"] if self.run_kind == "validate" else []
        return " ".join([self.system, self.scope, *runs, *labels])

    def line(self) -> str:
        """The alert in one line, as ``history alerts`` prints it."""
        shown = ", ".join(value_text(v, self.unit) for v in self.values)
        return (
            f"ALERT {self.rule} ({self.severity}): {self.metric} of {self.where}: {self.what}; "
            f"values {shown}; since {utc_text(self.since)} (run of {utc_text(self.as_of)})"
        )


def numbered(history: DataFrame) -> DataFrame:
    """The history with each run's number within its store (1 first) and whether it is the
    store's latest run."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    runs = history.select(*STORE, *ORDER).distinct()
    order = Window.partitionBy(*STORE).orderBy(*ORDER)
    runs = runs.withColumn("run_number", F.row_number().over(order)).withColumn(
        "latest", F.col("run_number") == F.max("run_number").over(Window.partitionBy(*STORE))
    )
    return history.join(runs.drop("as_of", "run_at"), [*STORE, "run_id"])


def evaluate(base: DataFrame, rules: Sequence[Rule]) -> DataFrame:
    """Every (rule, series, run) where the rule fires: the columns of `OUTPUT`; `base` is the
    history `numbered`."""
    from functools import reduce

    fired = [_fired(base, rule) for rule in rules]
    return reduce(lambda a, b: a.unionByName(b), fired)


def _picked(frame: DataFrame, rule: Rule) -> DataFrame:
    from pyspark.sql import functions as F

    frame = frame.filter(F.col("metric") == rule.metric)
    for name in ("system", "scope", "queue", "check", "item"):
        pattern = getattr(rule, name)
        if pattern != "*":
            frame = frame.filter(F.col(name).rlike(pattern_regex(pattern)))
    return frame


def _fired(base: DataFrame, rule: Rule) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    series = Window.partitionBy(*SERIES, "kind").orderBy("run_number")
    earlier = series.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    value, as_of = F.col("value"), F.col("as_of")
    previous = F.lag(value, 1).over(series)
    frame = _picked(base, rule)
    n = rule.runs

    def last(count: int) -> Column:
        return F.collect_list(value).over(series.rowsBetween(-count, Window.currentRow))

    if rule.kind == "threshold":
        fires = F.lit(False)
        if rule.above is not None:
            fires = fires | (value > rule.above)
        if rule.below is not None:
            fires = fires | (value < rule.below)
        frame, since = _streak(frame, fires.cast("boolean"), series, earlier, firing_only=True)
        values = last(0)
    elif rule.kind == "change":
        before = F.lag(value, n).over(series)
        delta = {"up": value - before, "down": before - value}.get(
            rule.direction, F.abs(value - before)
        )
        fires = F.lit(False)
        if rule.absolute is not None:
            fires = fires | (delta >= rule.absolute)
        if rule.relative is not None:
            fires = fires | ((F.abs(before) > 0) & (delta / F.abs(before) >= rule.relative))
        frame = frame.withColumn("_fires", F.coalesce(fires, F.lit(False)))
        since, values = F.lag(as_of, n).over(series), last(n)
    elif rule.kind == "unchanged":
        same = F.coalesce(value == previous, F.lit(False))
        frame, since = _streak(frame, same, series, earlier, firing_only=False)
        frame = frame.withColumn("_fires", F.col("_length") >= n)
        values = last(n - 1)
    elif rule.kind == "growing":
        rose = F.coalesce(value > previous, F.lit(False))
        frame, since = _streak(frame, rose, series, earlier, firing_only=False)
        frame = frame.withColumn("_fires", F.col("_length") - 1 >= n)
        values = last(n)
    elif rule.kind == "new":
        before_max = F.max(value).over(series.rowsBetween(Window.unboundedPreceding, -1))
        fires = (value > 0) & (F.coalesce(before_max, F.lit(0.0)) <= 0) & (F.col("run_number") > n)
        frame = frame.withColumn("_fires", fires)
        since, values = as_of, last(0)
    else:  # outlier
        window = series.rowsBetween(-n, -1)
        mean, spread = F.avg(value).over(window), F.stddev_samp(value).over(window)
        enough = F.count(value).over(window) == n
        off = F.when(spread > 0, F.abs(value - mean) > rule.sigmas * spread).otherwise(
            value != mean
        )
        frame = frame.withColumn("_fires", enough & F.coalesce(off, F.lit(False)))
        since, values = as_of, last(n)
    frame = frame.withColumn("since", since).withColumn("values", values)
    return frame.filter(F.col("_fires")).select(
        F.lit(rule.id).alias("rule"), F.lit(rule.kind).alias("kind"),
        F.lit(rule.severity).alias("severity"), *SERIES, F.col("kind").alias("run_kind"), "unit",
        "run_id", "run_number",
        "latest", "as_of", "since", "value", "values",
    )  # fmt: skip


def _streak(
    frame: DataFrame, member: Column, series: Any, earlier: Any, *, firing_only: bool
) -> tuple[DataFrame, Column]:
    """`frame` with ``_member`` (whether this run continues the streak), ``_length`` (runs in
    the streak up to this one, its first run included) and, with `firing_only`, ``_fires`` =
    ``_member``; and the column of when the streak began. A streak starts at a run that is not
    a member (the base: the run before the first rise, the first of equal values) unless
    `firing_only`, where it starts at its first member (the first run over a threshold)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = frame.withColumn("_member", member)
    starts = F.when(F.col("_member"), 0).otherwise(1)
    frame = frame.withColumn("_group", F.sum(starts).over(earlier))
    group = Window.partitionBy(*SERIES, "kind", "_group").orderBy("run_number")
    upto = group.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    if firing_only:
        frame = frame.withColumn("_fires", F.col("_member"))
        began = F.min(F.when(F.col("_member"), F.col("as_of"))).over(upto)
    else:
        frame = frame.withColumn("_length", F.count("*").over(upto))
        began = F.min("as_of").over(upto)
    return frame, began


def collected(frame: DataFrame, rules: Sequence[Rule]) -> list[Alert]:
    """The alerts of an `evaluate` frame as `Alert`s, by store, rule and series, then time."""
    by_id = {rule.id: rule for rule in rules}
    alerts = [
        Alert(**{name: row[name] for name in OUTPUT if name not in ("values", "as_of", "since")},
              as_of=_utc(row["as_of"]), since=_utc(row["since"]), values=tuple(row["values"]),
              what=by_id[row["rule"]].describe(row["unit"]), why=by_id[row["rule"]].why)
        for row in frame.collect()
    ]  # fmt: skip
    return sorted(alerts, key=lambda a: (a.system, a.scope, a.run_kind, a.rule, a.metric, a.queue,
                                          a.check, a.item, a.run_number))  # fmt: skip


def _utc(instant: dt.datetime) -> dt.datetime:
    """An instant Spark returned (naive, in the session's time zone: UTC in every session
    `mqforensics.spark` makes) as an aware UTC one."""
    return instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant


def latest(alerts: Sequence[Alert]) -> list[Alert]:
    """The alerts that fire at their store's newest run."""
    return [alert for alert in alerts if alert.latest]
