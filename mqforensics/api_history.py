"""The run history in the Python API: open it, look at a metric over time, ask for its alerts.

    import mqforensics
    history = mqforensics.open_history("datasets/james/history")   # or MQF_HISTORY
    history                                      # its stores, runs and time span
    history.runs()                               # one row per run (pandas)
    history.series("browse_start_lag", queue="spool")   # a metric's points (pandas)
    alerts = history.alerts()                    # the bundled rules at each store's last run
    alerts                                       # a table; alerts.lines() as the CLI prints
    history.plot("live_mails")                   # the series with the alerts marked
    alerts.raise_if_any()                        # a scheduled notebook fails naming them

What a run appends, and the rules' semantics: docs/history.md. Appending is the audit's and the
validation's ``history=`` keyword (``--history`` on the command line).
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError
from mqforensics.history import query
from mqforensics.history.alerts import Alert, latest
from mqforensics.history.rules import Rule, load_rules
from mqforensics.history.store import ENVIRONMENT, Location, check_readable, location, read
from mqforensics.units import plural, utc_text

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Alerts", "History", "history_alerts", "open_history"]


def where_of(history: str | Path | None) -> Location:
    """The history given, else ``MQF_HISTORY``'s; a ConfigError when neither names one."""
    found = location(history)
    if found is None:
        raise ConfigError(f"no history: give one (--history DIR|URL) or set {ENVIRONMENT}")
    return found


def open_history(
    history: str | Path | None = None, *, spark: SparkSession | None = None
) -> History:
    """The run history at `history` (a directory or a URL; default ``MQF_HISTORY``), read by
    Spark. A history that holds no run, or is not one, is an InputError naming it."""
    where = where_of(history)
    check_readable(where)
    if spark is None:
        from mqforensics import systems
        from mqforensics.spark import session

        spark = session("mqforensics-history", data_sources=systems.data_sources())
    return History(where, read(spark, where))


def history_alerts(
    history: str | Path | None = None,
    *,
    rules: str | Path | None = None,
    system: str | None = None,
    every_run: bool = False,
    spark: SparkSession | None = None,
) -> Alerts:
    """The alerts of `rules` (a TOML file; default the bundled ones) on the history: those
    firing at each store's latest run, or with `every_run` at every run."""
    loaded = load_rules(rules)  # a bad rules file is said before Spark starts
    return open_history(history, spark=spark).alerts(loaded, system=system, every_run=every_run)


@dataclass(repr=False)
class Alerts(Sequence[Alert]):
    """Alerts of a history (`Alert`s): a table in a notebook, `lines()` as ``history alerts``
    prints them, and `raise_if_any()` for a scheduled notebook."""

    alerts: list[Alert]
    rules: list[Rule]
    history: str
    every_run: bool = False

    def __getitem__(self, index: Any) -> Any:
        return self.alerts[index]

    def __len__(self) -> int:
        return len(self.alerts)

    def __iter__(self) -> Iterator[Alert]:
        return iter(self.alerts)

    def lines(self) -> list[str]:
        return [alert.line() for alert in self.alerts]

    def summary(self) -> str:
        when = "at any run" if self.every_run else "at each store's latest run"
        rules = f"the {len(self.rules)} rules {when} of the history {self.history}"
        if not self.alerts:
            return f"no alert from {rules}"
        return f"{plural(len(self.alerts), 'alert')} from {rules}"

    def raise_if_any(self) -> None:
        """An AssertionError naming every alert's rule and metric when there is one."""
        if self.alerts:
            raise AssertionError("history alerts:\n" + "\n".join(self.lines()))

    def table(self) -> pd.DataFrame:
        import pandas as pd

        from mqforensics.metrics import value_text

        return pd.DataFrame(
            [(a.rule, a.severity, a.metric, a.where, a.what,
              ", ".join(value_text(v, a.unit) for v in a.values), utc_text(a.since),
              utc_text(a.as_of), a.why)
             for a in self.alerts],
            columns=["rule", "severity", "metric", "series", "what", "values", "since", "run",
                     "why it matters"],
        )  # fmt: skip

    def __repr__(self) -> str:
        return "\n".join([self.summary(), *self.lines()])

    def _repr_html_(self) -> str:
        head = f"<p>{html.escape(self.summary())}</p>"
        if not self.alerts:
            return head
        return head + self.table().to_html(index=False, escape=True)


@dataclass(repr=False)
class History:
    """A run history read by Spark: `frame` holds every figure of every run (docs/history.md)."""

    location: Location
    frame: DataFrame
    _runs: Any = field(default=None, repr=False)

    def runs(self) -> pd.DataFrame:
        """One row per run: system, scope (the store), kind, as_of, run_at, run_id, figures."""
        if self._runs is None:
            self._runs = query.runs(self.frame)
        return self._runs.copy()

    def metrics(self) -> pd.DataFrame:
        """The metrics the history holds: system, metric, unit and how many series of each."""
        from mqforensics.history.schema import SERIES

        series = self.frame.select(*SERIES, "unit").distinct()
        table: pd.DataFrame = series.groupBy("system", "metric", "unit").count().toPandas()
        table = table.rename(columns={"count": "series"})
        return table.sort_values(["system", "metric"], ignore_index=True)

    def series(
        self,
        metric: str,
        *,
        system: str | None = None,
        scope: str | None = None,
        queue: str | None = None,
        check: str | None = None,
        item: str | None = None,
    ) -> pd.DataFrame:
        """The points of `metric` over time, one row per (series, run); the labels are
        shell-style patterns (``queue="out*"``)."""
        patterns = {"system": system, "scope": scope, "queue": queue, "check": check,
                    "item": item}  # fmt: skip
        return query.series(self.frame, metric, patterns)

    def alerts(
        self,
        rules: str | Path | Sequence[Rule] | None = None,
        *,
        system: str | None = None,
        every_run: bool = False,
    ) -> Alerts:
        """The alerts of `rules` (a TOML file, `Rule`s, or the bundled ones) at each store's
        latest run (`every_run`: at every run)."""
        loaded = (
            list(rules)
            if isinstance(rules, Sequence) and not isinstance(rules, str)
            else (load_rules(rules))
        )
        found = query.alerts(self.frame, loaded, system=system)
        kept = found if every_run else latest(found)
        return Alerts(kept, loaded, str(self.location), every_run)

    def plot(
        self,
        metric: str,
        *,
        rules: str | Path | Sequence[Rule] | None = None,
        **labels: str,
    ) -> Any:
        """A figure of `metric`'s series over time, each alert of `rules` marked where it
        fired (`views.trends`)."""
        from mqforensics.views.trends import trend_figure

        points = self.series(metric, **labels)
        fired = self.alerts(rules, every_run=True)
        return trend_figure(points, [a for a in fired if a.metric == metric], title=metric)

    def __repr__(self) -> str:
        table = self.runs()
        if table.empty:
            return f"history {self.location}: no run"
        stores = table.groupby(["system", "scope"]).size()
        named = ", ".join(f"{system} {scope} ({count} runs)" for (system, scope), count
                          in stores.items())  # fmt: skip
        first, last = table["as_of"].min(), table["as_of"].max()
        return (
            f"history {self.location}: {len(table)} runs of {len(stores)} store(s), judged from "
            f"{utc_text(first.to_pydatetime())} to {utc_text(last.to_pydatetime())}: {named}"
        )

    def _repr_html_(self) -> str:
        return f"<div>{html.escape(repr(self))}</div>"
