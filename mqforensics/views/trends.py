"""Figures of the run history: a metric's series over the instants judged, with the alerts
marked where they fired (`trend_figure`), and what the report's Trends section shows of one
audit's store (`TrendsData`, built by the API from the history: `api_history.report_trends`).

A view: nothing here reads a history. `trend_figure` takes the points `History.series(metric)`
gives (pandas: system, scope, metric, queue, check, item, unit, as_of, run_at, run_id, value)
and alerts as objects with the attributes of `history.alerts.Alert` (rule, severity, the series'
labels, as_of, value...), read by name. Every axis says its unit (`metrics.UNITS`) and its ticks
read as that unit does (``2 KiB``, ``3d``, a date, ``40%``, passed/failed); a label with no value
is left out, never shown as ``nan`` or ``None``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from mqforensics.metrics import UNITS, value_text
from mqforensics.units import human_duration, plural, utc_text
from mqforensics.views.plot_data import is_missing
from mqforensics.views.plots import SEVERITY_COLOURS, NotebookFigure, nothing_to_show

__all__ = [
    "ALERT_HEADERS",
    "STORE_ALERT_HEADERS",
    "MetricTrend",
    "TrendsData",
    "alert_rows",
    "series_name",
    "trend_figure",
    "values_text",
]

# What makes a series once its metric is chosen (`history.schema.SERIES` without ``metric``),
# and, when the points say it, the kind of run (a store's audits and validations are apart).
LABELS = ("system", "scope", "queue", "check", "item")
KEY = (*LABELS, "kind")
_KINDS = {"audit": "audits", "validate": "validations"}
# Series named in a legend; the others are drawn in grey and counted ("and 4 more").
LEGEND_SERIES = 8
_LONGEST_NAME = 60
_OTHERS = "#b8bec6"
# How the y axis of each unit is labelled besides `metrics.UNITS`' words: what its ticks show.
_SHOWN_AS = {
    "seconds": "shown as a duration: d, h, m, s",
    "ratio": "shown as a percentage",
    "instant": "shown as the UTC date",
}
# Tick steps of a duration axis, in seconds: round numbers of each unit.
_DURATION_STEPS = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600,
    12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 60 * 86400, 90 * 86400,
    180 * 86400, 365 * 86400,
)  # fmt: skip
_NICE = (1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500)


def _text(value: Any) -> str:
    """A label as text: ``""`` for no value (None, NaN), never ``None`` or ``nan``."""
    return "" if is_missing(value) else str(value)


def series_name(labels: dict[str, str], names: Sequence[str] = LABELS) -> str:
    """A series in words, from its non-empty labels among `names`, as `Alert.where` says it:
    ``james mx1 queue spool``, ``check orphaned_blob item error``."""
    parts = []
    for name in names:
        value = labels.get(name, "")
        if not value:
            continue
        if name == "kind":
            parts.append(f"({_KINDS.get(value, value)})")
        else:
            parts.append(f"{name} {value}" if name in ("queue", "check", "item") else value)
    return " ".join(parts)


def _short(text: str) -> str:
    return text if len(text) <= _LONGEST_NAME else text[: _LONGEST_NAME - 1] + "\u2026"


def _utc_naive(values: Any) -> pd.Series:
    """Instants as naive UTC timestamps (what matplotlib's date axis takes); a naive instant is
    taken as UTC already (Spark's ``toPandas`` in a UTC session)."""
    return pd.to_datetime(pd.Series(values), utc=True, errors="coerce").dt.tz_localize(None)


def _prepared(points: pd.DataFrame) -> pd.DataFrame:
    frame = points.copy()
    for name in KEY:
        frame[name] = [_text(v) for v in frame[name]] if name in frame else ""
    frame["unit"] = [_text(v) for v in frame["unit"]] if "unit" in frame else "count"
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    frame["as_of"] = _utc_naive(frame["as_of"]).values
    frame = frame[frame["value"].map(math.isfinite) & frame["as_of"].notna()]
    order = [*KEY, "as_of", *(["run_at"] if "run_at" in frame else [])]
    return frame.sort_values(order, ignore_index=True)


def _alert_key(alert: Any) -> tuple[str, ...]:
    return tuple(_text(getattr(alert, name, "")) for name in LABELS)


def _alert_point(alert: Any) -> tuple[pd.Timestamp, float] | None:
    value: Any = getattr(alert, "value", None)
    when = getattr(alert, "as_of", None)
    if is_missing(value) or is_missing(when) or not math.isfinite(float(value)):
        return None
    stamp = _utc_naive([when]).iloc[0]
    return None if pd.isna(stamp) else (stamp, float(value))


def trend_figure(
    points: pd.DataFrame,
    alerts: Sequence[Any] = (),
    *,
    title: str,
    text: Callable[[str], str] | None = None,
    note: str | None = None,
) -> Figure:
    """`points` (`History.series`) as one line per series over the instants judged, each of
    `alerts` ringed at its run and value in its severity's colour, and named in the legend by
    its rule. `text` goes over every label shown (the report pseudonymises with it); `note` is
    a line under the title. No point: a figure saying so."""
    frame = _prepared(points) if not points.empty else points
    if frame.empty:
        return nothing_to_show(title, "no run of this metric in the history")
    shown = text or (lambda label: label)
    unit = next((u for u in frame["unit"] if u), "count")
    groups = dict(iter(frame.groupby(list(KEY), sort=False)))
    marked = [(a, p) for a in alerts if (p := _alert_point(a)) is not None]
    alerted = {_alert_key(a) for a, _ in marked}
    # The series an alert is on first, then the largest at its last run: the legend names those.
    keys = sorted(groups, key=lambda k: (k[:-1] not in alerted,
                                         -float(groups[k]["value"].iloc[-1]), k))  # fmt: skip
    varying = [n for i, n in enumerate(KEY) if len({k[i] for k in keys}) > 1]
    common = series_name(dict(zip(KEY, keys[0], strict=True)),
                         [n for n in LABELS if n not in varying])  # fmt: skip

    fig = NotebookFigure(figsize=(9.5, 4.8), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    y_of = _y_values(unit)
    colours = itertools.cycle(_palette())
    handles: list[Any] = []
    for index, key in enumerate(keys):
        rows = groups[key]
        name = _short(shown(series_name(dict(zip(KEY, key, strict=True)), varying)))
        named = index < LEGEND_SERIES
        ys = y_of(rows["value"])
        (line,) = ax.plot(
            rows["as_of"], ys, marker="o", markersize=4 if named else 3,
            linewidth=1.6 if named else 1.0, color=next(colours) if named else _OTHERS,
            label=name or shown(common) or title, zorder=3 if named else 2,
            drawstyle="steps-post" if unit == "success" else "default",
        )  # fmt: skip
        if named:
            handles.append(line)
        if named and len(rows) == 1:  # one run: its value beside its point
            ax.annotate(value_text(float(rows["value"].iloc[0]), unit), (rows["as_of"].iloc[0],
                        ys.iloc[0]), xytext=(6, 4), textcoords="offset points", fontsize=8,
                        color=line.get_color())  # fmt: skip
    hidden = len(keys) - LEGEND_SERIES
    if hidden > 0:
        others = plural(hidden, "more series", "more series")
        (more,) = ax.plot([], [], color=_OTHERS, linewidth=1.0, label=f"and {others} (grey)")
        handles.append(more)
    handles += _mark_alerts(ax, marked, y_of)

    xs = [*frame["as_of"], *(p[0] for _, p in marked)]
    _time_axis(ax, min(xs), max(xs))
    ys = [*y_of(frame["value"]), *(y_of(pd.Series([p[1]])).iloc[0] for _, p in marked)]
    _value_axis(ax, unit, min(ys), max(ys))
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)

    runs = frame["run_id"].nunique() if "run_id" in frame else frame["as_of"].nunique()
    first, last = frame["as_of"].min(), frame["as_of"].max()
    span = f"{first:%Y-%m-%d}" if first == last else f"{first:%Y-%m-%d} to {last:%Y-%m-%d}"
    about = [shown(common)] if common else []
    about.append(f"{plural(len(keys), 'series', 'series')}, {plural(runs, 'run')} judged {span}")
    if marked:
        about.append(f"{plural(len(marked), 'alert')} marked")
    lines = [title, "; ".join(part for part in about if part)]
    if note:
        lines += textwrap.wrap(shown(note), 110)
    ax.set_title("\n".join(lines), fontsize=10)
    # One series and no alert: the title names it, no legend needed.
    if len(handles) > 1 or marked or varying:
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8,
                   frameon=False)  # fmt: skip
    return fig


def _palette() -> list[str]:
    import matplotlib

    colours = matplotlib.colormaps["tab10"]
    # Red and orange are the alerts' colours: the series keep to the others.
    return [matplotlib.colors.to_hex(colours(i)) for i in (0, 2, 4, 5, 6, 8, 9, 7)]


def _y_values(unit: str) -> Callable[[pd.Series], pd.Series]:
    """How a value of `unit` is placed on the y axis: an instant as a matplotlib date number,
    anything else as it is."""
    if unit != "instant":
        return lambda values: pd.Series(values, dtype=float).reset_index(drop=True)

    def dates(values: pd.Series) -> pd.Series:
        import matplotlib.dates as mdates

        stamps = pd.to_datetime(pd.Series(values, dtype=float), unit="s", utc=True)
        return pd.Series(mdates.date2num(stamps.dt.tz_localize(None)), dtype=float)

    return dates


def _mark_alerts(ax: Any, marked: list[tuple[Any, tuple[pd.Timestamp, float]]],
                 y_of: Callable[[pd.Series], pd.Series]) -> list[Any]:  # fmt: skip
    """A ring per alert at its run, one legend entry per rule and severity."""
    by_rule: dict[tuple[str, str], list[tuple[pd.Timestamp, float]]] = {}
    for alert, point in marked:
        rule = _text(getattr(alert, "rule", "")) or "alert"
        severity = _text(getattr(alert, "severity", "")) or "warning"
        by_rule.setdefault((rule, severity), []).append(point)
    handles = []
    for (rule, severity), found in sorted(by_rule.items(), key=lambda kv: kv[0]):
        colour = SEVERITY_COLOURS.get(severity, SEVERITY_COLOURS["warning"])
        runs = f", at {len(found)} points" if len(found) > 1 else ""
        handles.append(
            ax.scatter(
                [x for x, _ in found], y_of(pd.Series([y for _, y in found])), s=190,
                facecolors="none", edgecolors=colour, linewidths=2.2, zorder=5,
                label=_short(f"alert {rule} ({severity}){runs}"),
            )
        )  # fmt: skip
    return handles


def _time_axis(ax: Any, first: pd.Timestamp, last: pd.Timestamp) -> None:
    import matplotlib.dates as mdates

    span = last - first
    margin = max(span * 0.04, pd.Timedelta(hours=6)) if span > pd.Timedelta(0) else None
    if margin is None:
        margin = pd.Timedelta(days=1)
    ax.set_xlim(mdates.date2num(first - margin), mdates.date2num(last + margin))
    wide = span + 2 * margin >= pd.Timedelta(days=3)
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=9 if wide else 6))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d" if wide else "%Y-%m-%d %H:%M"))
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.set_xlabel("instant judged (UTC)")


def _nice_step(span: float, base: float = 1.0, wanted: int = 5) -> float:
    """A round tick step (1, 2, 2.5, 5 times a power of ten, times `base`) giving about `wanted`
    ticks over `span`."""
    if span <= 0:
        return base
    raw = span / base / wanted
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next((n * power for n in _NICE if n * power >= raw), _NICE[-1] * power)
    return step * base


def _value_axis(ax: Any, unit: str, low: float, high: float) -> None:
    """The y axis of `unit`: its words (`metrics.UNITS`) as the label, ticks as the unit reads,
    from 0 for amounts that cannot be negative."""
    import matplotlib.dates as mdates
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, MultipleLocator

    words = UNITS.get(unit, unit)
    label = words + (f"\n({_SHOWN_AS[unit]})" if unit in _SHOWN_AS else "")
    ax.set_ylabel(label)
    if unit == "instant":
        pad = (high - low) * 0.08 if high > low else 1.0
        ax.set_ylim(low - pad, high + pad)
        ax.yaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=7))
        days = high - low + 2 * pad
        ax.yaxis.set_major_formatter(
            mdates.DateFormatter("%Y-%m-%d" if days >= 3 else "%Y-%m-%d %H:%M")
        )
        return
    if unit == "success":
        ax.set_ylim(-0.25, 1.25)
        ax.yaxis.set_major_locator(FixedLocator([0, 1]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: {0: "failed", 1: "passed"}
                                                   .get(round(y), "")))  # fmt: skip
        return
    bottom = 0.0 if low >= 0 else low - (high - low) * 0.08
    top = high + (high - bottom) * 0.12 if high > bottom else bottom + 1
    if unit == "ratio":
        top = max(top, 0.05) if high <= 1 else top
        if high <= 1:
            top = min(top, 1.05)
        ax.set_ylim(bottom, top)
        ax.yaxis.set_major_locator(MultipleLocator(_nice_step(top - bottom, 0.01)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: _percent(y)))
        return
    ax.set_ylim(bottom, top)
    if unit == "bytes":
        base = 1024.0 ** max(0, min(4, int(math.log(max(top, 1.0), 1024))))
        step = _nice_step(top - bottom, base) if base > 1 else _nice_step(top - bottom)
        ax.yaxis.set_major_locator(MultipleLocator(max(step, 1.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: _size_tick(y)))
    elif unit == "seconds":
        wanted = (top - bottom) / 5
        found = next((s for s in _DURATION_STEPS if s >= wanted), None)
        step = float(found) if found is not None else _nice_step(top - bottom, 365 * 86400)
        ax.yaxis.set_major_locator(MultipleLocator(step))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: _duration_tick(y)))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=2))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: f"{y:,.0f}"))


def _percent(y: float) -> str:
    text = f"{y * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _size_tick(y: float) -> str:
    if y == 0:
        return "0"
    return value_text(y, "bytes").replace(".0 ", " ")


def _duration_tick(y: float) -> str:
    return "0" if abs(y) < 0.5 else human_duration(y)


# --- the report's Trends section -----------------------------------------------------------------

ALERT_HEADERS = ["rule", "severity", "metric", "series", "what", "values", "since", "run",
                 "why it matters"]  # fmt: skip
# The columns of a table of one store's alerts at its latest run (the report's Trends section):
# the store and the run are said above it.
STORE_ALERT_HEADERS = [h for h in ALERT_HEADERS if h != "run"]


def alert_rows(alerts: Sequence[Any], *, in_store: bool = False) -> list[list[str]]:
    """Alerts (`history.alerts.Alert`'s attributes) as the rows of a table under
    `ALERT_HEADERS` (`in_store`: `STORE_ALERT_HEADERS`, each series by its labels only): values
    in their unit (`metrics.value_text`, a value repeated said once with its count), instants
    in UTC."""
    rows = []
    for alert in alerts:
        unit = _text(getattr(alert, "unit", "")) or "count"
        values = [float(v) for v in getattr(alert, "values", ()) or () if not is_missing(v)]
        labels = {n: _text(getattr(alert, n, "")) for n in LABELS}
        where = getattr(alert, "where", None)
        if in_store:
            where = series_name(labels, ("queue", "check", "item")) or "the store"
        elif not isinstance(where, str):
            where = series_name(labels)
        row = [
            _text(getattr(alert, "rule", "")), _text(getattr(alert, "severity", "")),
            _text(getattr(alert, "metric", "")), where, _text(getattr(alert, "what", "")),
            values_text(values, unit), _instant(getattr(alert, "since", None)),
            _instant(getattr(alert, "as_of", None)),
            " ".join(_text(getattr(alert, "why", "")).split()),
        ]  # fmt: skip
        rows.append(row[:7] + row[8:] if in_store else row)
    return rows


def values_text(values: Sequence[float], unit: str) -> str:
    """Values in their unit, in order, a run of equal ones said once with its count:
    ``2027-03-03T06:00:00Z (5 times)``, ``13, 16, 19``."""
    parts = []
    for value, same in itertools.groupby(values):
        count = len(list(same))
        text = value_text(value, unit)
        parts.append(f"{text} ({count} times)" if count > 1 else text)
    return ", ".join(parts)


def _instant(value: Any) -> str:
    if is_missing(value):
        return ""
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    return utc_text(value) if isinstance(value, dt.datetime) else str(value)


@dataclass
class MetricTrend:
    """One metric of a store: its points (`History.series`), the alerts to mark on them (at
    every run) and a line said under its title (what was left out)."""

    metric: str
    points: pd.DataFrame
    alerts: list[Any] = field(default_factory=list)
    note: str | None = None

    def figure(self, text: Callable[[str], str] | None = None) -> Figure:
        return trend_figure(self.points, self.alerts, title=self.metric, text=text,
                            note=self.note)  # fmt: skip


@dataclass
class TrendsData:
    """What the report's Trends section shows of one audit's store in a history: its trended
    metrics, the alerts firing at its latest run, or the one line saying why the history could
    not be read (`error`)."""

    location: str
    system: str
    scope: str
    trends: list[MetricTrend] = field(default_factory=list)
    alerts: list[Any] = field(default_factory=list)  # firing at the store's latest run
    rules: int = 0
    runs: int = 0
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    audit_as_of: dt.datetime | None = None  # the audit's own run, when the history holds it
    quiet: list[str] = field(default_factory=list)  # metrics at 0 in every audit, not drawn
    error: str | None = None

    def figures(self, text: Callable[[str], str] | None = None) -> list[tuple[str, Figure]]:
        """(metric, figure) per trended metric, `text` over every label shown."""
        return [(trend.metric, trend.figure(text)) for trend in self.trends]

    def about(self) -> str:
        """The store and its audits in one sentence."""
        store = f"the store {self.scope} ({self.system}) in the history {self.location}"
        if self.error is not None or not self.runs:
            return store[0].upper() + store[1:] + "."
        span = ""
        if self.first is not None and self.last is not None:
            span = f", judged from {utc_text(self.first)} to {utc_text(self.last)}"
        if self.audit_as_of is None:
            own = "; this audit is no longer in it"
        else:
            own = f"; this audit is the one judged at {utc_text(self.audit_as_of)}"
            if self.last is not None and self.audit_as_of < self.last:
                own += ", not the latest"
        return f"{plural(self.runs, 'audit')} of {store}{span}{own}."

    def summary(self) -> str:
        """One line, as ``report html`` prints it."""
        if self.error is not None:
            return f"trends not shown: {self.error}"
        firing = plural(len(self.alerts), "alert")
        return (
            f"{plural(len(self.trends), 'metric')} of {plural(self.runs, 'audit')} of the store "
            f"{self.scope} in the history {self.location}; {firing} at its latest audit"
        )
