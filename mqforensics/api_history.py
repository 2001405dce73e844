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
validation's ``history=`` keyword (``--history`` on the command line). What the validation
notebooks show of the store they just validated:

    report = mqforensics.validate("postfix", sample=True, history="out/h", history_scope="mx1")
    trends = mqforensics.validation_trends(report)   # report.history: where it was appended
    trends.figures()                             # each trended metric, its alerts marked
    trends.expectations()                        # each suite's results per run (pandas)
    trends.raise_if_any(failed_lines)            # failed expectations and alerts, one error
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, MqfError, explain, translated
from mqforensics.history import query
from mqforensics.history.alerts import Alert, latest
from mqforensics.history.record import appended_line
from mqforensics.history.rules import Rule, load_rules
from mqforensics.history.store import ENVIRONMENT, Location, check_readable, location, read
from mqforensics.units import plural, utc_text

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.quality import QualityReport
    from mqforensics.views.trends import TrendsData

__all__ = [
    "Alerts", "History", "ValidationTrends", "bundled_history", "configured_history",
    "history_alerts",
    "open_history", "report_trends", "validation_trends",
]  # fmt: skip


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
        loaded = _rules_of(rules)
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
        from mqforensics.history.schema import SERIES
        from mqforensics.views.trends import trend_figure

        points = self.series(metric, **labels)
        fired = self.alerts(rules, every_run=True)
        # Only the alerts of the series drawn (the labels may pick some stores or queues).
        drawn = set(points[[*SERIES, "kind"]].itertuples(index=False, name=None))
        marked = [a for a in fired
                  if (*(getattr(a, name) for name in SERIES), a.run_kind) in drawn]  # fmt: skip
        return trend_figure(points, marked, title=metric)

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


# --- the Trends section of `mqforensics report html` ---------------------------------------------

# What every audit appends that the Trends section draws: the verdict line's numbers and the bytes
# each check's findings hold. The other common figures (findings per check and severity, the
# checks not run, personal-data objects, what was read, the expectations') are drawn only when an
# alert fires on them at the store's latest run; a system's own figures always are.
REPORT_METRICS = ("findings_total", "bytes_held", "reclaimable_bytes")
COMMON_METRICS = frozenset({
    *REPORT_METRICS, "findings", "personal_data_objects", "check_not_run", "objects_read",
    "expectation_passed", "unexpected_rows",
})  # fmt: skip


def report_trends(
    manifest: Mapping[str, Any],
    *,
    rules: str | Path | Sequence[Rule] | None = None,
    spark: SparkSession | None = None,
) -> TrendsData | None:
    """What the report's Trends section shows of the audit whose manifest is `manifest`: its
    store's series in the history it appended to (``manifest["history"]``), the alerts of
    `rules` (default the bundled ones) marked on them and those firing at the store's latest run;
    None when the audit appended to no history. A history that can no longer be read (moved,
    deleted, not one) is `TrendsData.error`, one line. Reads the history with Spark."""
    from mqforensics.views.trends import TrendsData

    recorded = manifest.get("history")
    if not isinstance(recorded, Mapping) or not recorded.get("location"):
        return None
    system, scope = str(manifest.get("system") or ""), str(recorded.get("scope") or "")
    data = TrendsData(location=mask_secrets(str(recorded["location"])), system=system, scope=scope)
    try:
        loaded = _rules_of(rules)
        with translated():
            _fill_trends(data, str(recorded["location"]), str(recorded.get("run_id") or ""),
                         loaded, spark)  # fmt: skip
    except MqfError as exc:
        data.error = _one_line(explain(exc) or str(exc))
    except Exception as exc:  # Spark's own errors on a history it cannot read
        from pyspark.errors import PySparkException

        if not isinstance(exc, (OSError, PySparkException)):
            raise
        data.error = _one_line(f"{type(exc).__name__}: {exc}")
    return data


def _one_line(text: str) -> str:
    line = mask_secrets(text).strip().splitlines()[0] if text.strip() else "unreadable"
    return line.removeprefix("InputError: ").removeprefix("ConfigError: ")


def _fill_trends(
    data: TrendsData, given: str, run_id: str, rules: Sequence[Rule], spark: SparkSession | None
) -> None:
    from mqforensics.history.schema import SERIES
    from mqforensics.views.trends import MetricTrend

    history = open_history(given, spark=spark)
    # The store's audits: its validations are series apart (`validation_trends`).
    table, every = _store_runs(history, data.system, data.scope, "audit", rules)
    if table.empty:
        data.error = f"the history {data.location} holds no audit of the store {data.scope}"
        return
    runs = table.drop_duplicates("run_id")
    data.rules, data.runs = len(rules), len(runs)
    data.first = runs["as_of"].min().to_pydatetime()
    data.last = runs["as_of"].max().to_pydatetime()
    own = runs.loc[runs["run_id"] == run_id, "as_of"]
    data.audit_as_of = own.iloc[0].to_pydatetime() if not own.empty else None
    data.alerts = latest(every)
    firing = {alert.metric for alert in data.alerts}
    present = list(dict.fromkeys(table["metric"]))
    chosen = [m for m in present if m in firing and m not in REPORT_METRICS]
    chosen += [m for m in REPORT_METRICS if m in present]
    chosen += sorted(m for m in present if m not in COMMON_METRICS and m not in chosen)
    for metric in chosen:
        points = table[table["metric"] == metric]
        marked = [alert for alert in every if alert.metric == metric]
        points, zeros = _without_zero_series(points, marked)
        if points.empty:
            data.quiet.append(metric)
            continue
        note = f"at 0 in every audit, not drawn: {_named(zeros)}" if zeros else None
        ordered = points.sort_values([*SERIES, "as_of", "run_at"], ignore_index=True)
        data.trends.append(MetricTrend(metric, ordered, marked, note))


_LABELS = ("system", "scope", "metric", "queue", "check", "item")
_NAMED = 4  # series named in a figure's note of those left out


def _without_zero_series(
    points: pd.DataFrame, alerts: Sequence[Alert]
) -> tuple[pd.DataFrame, list[tuple[str, ...]]]:
    """`points` without the series at 0 in every run that no alert is on (a check that never
    found anything), and those series; one series alone is kept (a clean store's findings_total
    says so)."""
    keys = points[list(_LABELS)].apply(tuple, axis=1)
    flat = points.groupby(keys)["value"].apply(lambda v: bool((v == 0).all()))
    if len(flat) <= 1:
        return points, []
    alerted = {tuple(getattr(a, name) for name in _LABELS) for a in alerts}
    dropped = sorted(key for key, zero in flat.items() if zero and key not in alerted)
    return points[~keys.isin(dropped)], dropped


def _named(series: list[tuple[str, ...]]) -> str:
    """Series left out, by their labels: ``check a, check b and 3 more``."""
    from mqforensics.views.trends import series_name

    names = [series_name(dict(zip(_LABELS, key, strict=True)), ("queue", "check", "item"))
             for key in series]  # fmt: skip
    shown = ", ".join(names[:_NAMED])
    return shown + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")


# --- the validation notebooks: the store a validation just appended to ---------------------------

NO_HISTORY = "no run history configured (HISTORY or MQF_HISTORY): trends and alerts not checked"
# A validation's figures that are not trended as a metric of the system: each expectation's
# result, shown as a pass/fail table per run (`ValidationTrends.expectations`).
VALIDATION_RESULTS = ("expectation_passed", "unexpected_rows")


def bundled_history(system: str) -> Path | None:
    """The run history bundled with `system`'s sample (``datasets/james/history``: fourteen
    daily audits of the James sample as it evolves, datasets/james/HISTORY.md); None when the
    system bundles none."""
    import tempfile

    from mqforensics import systems

    spec = systems.get(system)
    if spec.sample is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mqforensics-sample-") as work:
        found = spec.sample(Path(work)).history
    return found if found is not None and found.is_dir() else None


def configured_history(history: str | Path | None = None) -> str | None:
    """The run history a run appends to, as shown (credentials masked): `history`, else the
    one ``MQF_HISTORY`` names; None when neither names one (`history.store.location`)."""
    found = location(history)
    return None if found is None else str(found)


def validation_trends(
    report: QualityReport,
    *,
    rules: str | Path | Sequence[Rule] | None = None,
    spark: SparkSession | None = None,
) -> ValidationTrends:
    """The history of the store a validation just appended to (`report`, as ``validate``
    returns it; its ``history`` says where): the store's validations, each of the system's
    trended figures (its ``metrics.py``) with the alerts of `rules` (a TOML file, `Rule`s;
    default the bundled ones) marked, each expectation's result per run, and the alerts at the
    store's latest validation. When the validation appended to no history, nothing is read
    (`ValidationTrends.configured` is false; its summary says so). Reads the history with
    Spark; the store's audits are not in it (their series are apart: docs/history.md)."""
    loaded = _rules_of(rules)  # a bad rules file is said before the history is read
    recorded = report.history
    if not recorded:
        return ValidationTrends(report.system, loaded)
    history = open_history(str(recorded["location"]), spark=spark)
    table, every = _store_runs(history, report.system, str(recorded["scope"]), "validate", loaded)
    found = Alerts(latest(every), loaded, str(history.location))
    return ValidationTrends(report.system, loaded, dict(recorded), table, every, found)


def _rules_of(rules: str | Path | Sequence[Rule] | None) -> list[Rule]:
    """`rules` as given (`Rule`s), or those of a TOML file (None: the bundled ones)."""
    if isinstance(rules, Sequence) and not isinstance(rules, str):
        return list(rules)
    return load_rules(rules)


def _store_runs(
    history: History, system: str, scope: str, kind: str, rules: Sequence[Rule]
) -> tuple[pd.DataFrame, list[Alert]]:
    """Every figure of one store's runs of one `kind` (pandas, instants in UTC, as
    `History.series` gives them) and every alert of `rules` on them, at every run."""
    from pyspark.sql import functions as F

    from mqforensics.history.schema import SERIES

    chosen = (F.col("system") == system) & (F.col("scope") == scope) & (F.col("kind") == kind)
    frame = history.frame.filter(chosen).cache()
    try:
        columns = (*SERIES, "kind", "unit", "as_of", "run_at", "run_id", "value")
        table: pd.DataFrame = query.utc(frame.select(*columns).toPandas())
        every = query.alerts(frame, rules) if not table.empty else []
    finally:
        frame.unpersist()
    return table, every


@dataclass(repr=False)
class ValidationTrends:
    """A validation's store in the run history it appended to (`validation_trends`): `table`
    holds every figure of the store's validations (pandas, as `History.series` gives them),
    `every_alert` the alerts of `rules` at every run, `alerts` those at its latest run."""

    system: str
    rules: list[Rule]
    recorded: dict[str, Any] | None = None  # `QualityReport.history`: None, appended to none
    table: pd.DataFrame | None = None
    every_alert: list[Alert] = field(default_factory=list)
    alerts: Alerts = field(default_factory=lambda: Alerts([], [], ""))

    @property
    def configured(self) -> bool:
        """Whether the validation appended to a history (and so whether trends were read)."""
        return self.recorded is not None

    def metrics(self) -> list[str]:
        """The system's figures this validation appended, in its order (no expectation's
        result: `expectations`)."""
        if self.recorded is None or self.table is None:
            return []
        own = self.table.loc[self.table["run_id"] == self.recorded["run_id"], "metric"]
        return [m for m in dict.fromkeys(own) if m not in VALIDATION_RESULTS]

    def figures(self) -> list[Any]:
        """One figure per metric of `metrics`: its series in the store's validations over time,
        each alert marked at the run it fired (`views.trends.trend_figure`)."""
        from mqforensics.history.schema import SERIES
        from mqforensics.views.trends import trend_figure

        if self.table is None:
            return []
        shown = []
        for metric in self.metrics():
            points = self.table[self.table["metric"] == metric]
            points = points.sort_values([*SERIES, "as_of", "run_at"], ignore_index=True)
            marked = [a for a in self.every_alert if a.metric == metric]
            shown.append(trend_figure(points, marked, title=metric))
        return shown

    def expectations(self, last: int = 10) -> pd.DataFrame:
        """The expectations' results of the store's `last` validations, one row per run:
        when it judged the store, its run id (``this run`` for this validation's), how many of
        each suite's expectations passed, how many failed and the unexpected rows counted."""
        import pandas as pd

        head = ["judged at", "run"]
        if self.table is None or self.recorded is None:
            return pd.DataFrame(columns=[*head, "failed", "unexpected rows"])
        table = self.table
        passed = table[table["metric"] == "expectation_passed"]
        runs = passed.drop_duplicates("run_id").sort_values(["as_of", "run_at"]).tail(last)
        suites = sorted(set(passed["check"]))
        rows = []
        for run in runs.itertuples():
            results = passed[passed["run_id"] == run.run_id]
            unexpected = table[(table["run_id"] == run.run_id)
                               & (table["metric"] == "unexpected_rows")]  # fmt: skip
            own = run.run_id == self.recorded["run_id"]
            row: list[Any] = [utc_text(run.as_of.to_pydatetime()),
                              "this run" if own else str(run.run_id)[:8]]  # fmt: skip
            for suite in suites:
                values = results.loc[results["check"] == suite, "value"]
                row.append(f"{int(values.sum())} of {len(values)}" if len(values) else "")
            row += [int((results["value"] == 0).sum()), int(unexpected["value"].sum())]
            rows.append(row)
        return pd.DataFrame(rows, columns=[*head, *suites, "failed", "unexpected rows"])

    def raise_if_any(self, failed: Sequence[str] = ()) -> None:
        """One AssertionError naming the `failed` expectations (a line each) and every alert
        at the store's latest validation (its rule and metric: `Alerts.raise_if_any`), when
        there is either: a failed expectation does not hide an alert, nor the other way."""
        messages = ["expectations failed:\n" + "\n".join(failed)] if failed else []
        try:
            self.alerts.raise_if_any()
        except AssertionError as firing:
            messages.append(str(firing))
        if messages:
            raise AssertionError("\n".join(messages))

    def summary(self) -> str:
        """Where the figures were appended, the store's validations and its alerts; or the
        line saying no history is configured."""
        if self.recorded is None:
            return NO_HISTORY
        recorded = self.recorded
        lines = [appended_line(recorded)]
        table = self.table
        if table is not None and not table.empty:
            runs = table.drop_duplicates("run_id")
            first, last = runs["as_of"].min().to_pydatetime(), runs["as_of"].max().to_pydatetime()
            span = (f"judged at {utc_text(last)}" if first == last
                    else f"judged from {utc_text(first)} to {utc_text(last)}")  # fmt: skip
            own = runs.loc[runs["run_id"] == recorded["run_id"], "as_of"]
            this = own.iloc[0].to_pydatetime() if not own.empty else None
            if this is not None and this < last:
                span += f" (this one at {utc_text(this)}, not the latest)"
            lines.append(f"{plural(len(runs), 'validation')} of the store {span}; "
                         f"{plural(len(self.metrics()), 'trended metric')}")  # fmt: skip
        rules = plural(len(self.rules), "rule")
        found = plural(len(self.alerts), "alert") if self.alerts else "no alert"
        lines.append(f"{found} from the {rules} at the store's latest validation")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "\n".join([self.summary(), *self.alerts.lines()])

    def _repr_html_(self) -> str:
        body = "".join(f"<p>{html.escape(line)}</p>" for line in self.summary().splitlines())
        if self.alerts:
            body += self.alerts.table().to_html(index=False, escape=True)
        return f"<div>{body}</div>"
