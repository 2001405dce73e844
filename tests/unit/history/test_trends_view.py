"""`views.trends.trend_figure`: one line per series, every axis in its unit, alerts ringed where
they fired and named in the legend; an empty history says so, a single run still shows, and no
missing label ever reads ``nan`` or ``None``. No Spark: the points are planted."""

from __future__ import annotations

import datetime as dt
import math
from types import SimpleNamespace

import matplotlib.dates as mdates
import pandas as pd
import pytest
from PIL import Image

from mqforensics.metrics import UNITS
from mqforensics.views.plots import NotebookFigure, png_bytes
from mqforensics.views.trends import (
    ALERT_HEADERS,
    STORE_ALERT_HEADERS,
    alert_rows,
    trend_figure,
    values_text,
)

DAY1 = dt.datetime(2027, 3, 1, 6, tzinfo=dt.UTC)
LABELS = ("queue", "check", "item")


def day(number: int) -> dt.datetime:
    return DAY1 + dt.timedelta(days=number - 1)


def points(metric: str, unit: str, series: dict[tuple[str, str, str], list[float]]) -> pd.DataFrame:
    """What `History.series(metric)` gives: one row per series (queue, check, item) and run."""
    rows = []
    for labels, values in series.items():
        for number, value in enumerate(values, start=1):
            rows.append({
                "system": "james", "scope": "cluster-eu1", "metric": metric,
                **dict(zip(LABELS, labels, strict=True)), "unit": unit,
                "as_of": pd.Timestamp(day(number)),
                "run_at": pd.Timestamp(day(number) + dt.timedelta(minutes=3)),
                "run_id": f"run{number}", "value": float(value),
            })  # fmt: skip
    return pd.DataFrame(rows)


def alert(rule: str, severity: str, labels: tuple[str, str, str], number: int, value: float,
          unit: str, metric: str = "reclaimable_bytes") -> SimpleNamespace:  # fmt: skip
    """An object with `history.alerts.Alert`'s attributes (read by name: no import of it)."""
    queue, check, item = labels
    return SimpleNamespace(
        rule=rule, kind="change", severity=severity, system="james", scope="cluster-eu1",
        metric=metric, queue=queue, check=check, item=item, unit=unit, as_of=day(number),
        since=day(1), value=value, values=(value / 2, value), what="rose by 100%",
        why="bytes doubled", latest=True,
    )  # fmt: skip


BYTES = {
    ("", "orphaned_blob", ""): [100_000, 120_000, 150_000, 300_000, 410_000, 420_000],
    ("", "unreclaimed_slice", ""): [5e6, 5.2e6, 5.1e6, 5.3e6, 5.6e6, 6e6],
}
DOUBLED = alert("reclaimable-bytes-doubled", "warning", ("", "orphaned_blob", ""), 5, 410_000.0,
                "bytes")  # fmt: skip


def drawn(fig) -> list[str]:
    """Every text the figure shows once drawn: title, axis labels, tick labels, legend."""
    png_bytes(fig)  # draws it: tick labels are made then
    texts = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if t]


def legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def rings(ax) -> list:
    """The alert markers: scatter collections with no face colour."""
    return [c for c in ax.collections if len(c.get_facecolors()) == 0 and len(c.get_offsets())]


def test_bytes_series_have_a_line_each_and_an_axis_in_bytes() -> None:
    fig = trend_figure(points("reclaimable_bytes", "bytes", BYTES), [DOUBLED],
                       title="reclaimable_bytes")  # fmt: skip
    assert isinstance(fig, NotebookFigure)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if len(line.get_xdata())]
    assert len(lines) == 2 and all(len(line.get_xdata()) == 6 for line in lines)
    assert all(line.get_marker() == "o" for line in lines)
    assert UNITS["bytes"] in ax.get_ylabel()
    assert ax.get_xlabel() == "instant judged (UTC)"
    png_bytes(fig)
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "MiB" in " ".join(ticks) and all(t == "0" or t.endswith("iB") for t in ticks), ticks
    assert {"check orphaned_blob", "check unreclaimed_slice"} <= set(legend_texts(fig))
    dates = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert dates and all(t.startswith("2027-03-") for t in dates), dates
    # The store is named once, in the title, with its runs and the alerts marked.
    title = ax.get_title()
    assert title.splitlines()[0] == "reclaimable_bytes"
    assert "james cluster-eu1; 2 series, 6 runs judged 2027-03-01 to 2027-03-06" in title
    assert "1 alert marked" in title


def test_the_alert_is_ringed_at_its_run_and_named_by_its_rule() -> None:
    fig = trend_figure(points("reclaimable_bytes", "bytes", BYTES), [DOUBLED],
                       title="reclaimable_bytes")  # fmt: skip
    ax = fig.axes[0]
    [ring] = rings(ax)
    [[x, y]] = ring.get_offsets().tolist()
    assert x == pytest.approx(mdates.date2num(day(5).replace(tzinfo=None)))
    assert y == pytest.approx(410_000.0)
    amber = (0xF0 / 255, 0xB4 / 255, 0x29 / 255)
    assert tuple(ring.get_edgecolors()[0][:3]) == pytest.approx(amber)
    assert "alert reclaimable-bytes-doubled (warning)" in legend_texts(fig)
    # The series the alert is on comes first in the legend.
    assert legend_texts(fig)[0] == "check orphaned_blob"


def test_an_error_is_red_and_alerts_at_several_runs_are_one_legend_entry() -> None:
    labels = ("", "orphaned_blob", "")
    found = [alert("grows", "error", labels, n, BYTES[labels][n - 1], "bytes") for n in (4, 5, 6)]
    fig = trend_figure(points("reclaimable_bytes", "bytes", BYTES), found, title="r")
    [ring] = rings(fig.axes[0])
    assert len(ring.get_offsets()) == 3
    red = (0xD6 / 255, 0x45 / 255, 0x45 / 255)
    assert tuple(ring.get_edgecolors()[0][:3]) == pytest.approx(red)
    assert "alert grows (error), at 3 points" in legend_texts(fig)


def test_seconds_read_as_durations_and_say_so() -> None:
    ages = {("spool", "", ""): [3600, 86400, 2 * 86400, 3 * 86400],
            ("outgoing", "", ""): [60, 120, 60, 30]}  # fmt: skip
    fig = trend_figure(points("oldest_live_age", "seconds", ages), [], title="oldest_live_age")
    ax = fig.axes[0]
    assert UNITS["seconds"] in ax.get_ylabel() and "duration" in ax.get_ylabel()
    png_bytes(fig)
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "3d" in ticks or "2d" in ticks, ticks
    assert all(t == "0" or t[-1] in "dhms" for t in ticks), ticks
    assert legend_texts(fig) == ["queue spool", "queue outgoing"]


def test_instants_ratios_and_successes_have_readable_ticks() -> None:
    start = day(1).timestamp()
    instants = {("spool", "", ""): [start, start + 86400, start + 86400, start + 86400]}
    fig = trend_figure(points("browse_start", "instant", instants), [], title="browse_start")
    ax = fig.axes[0]
    assert UNITS["instant"] in ax.get_ylabel()
    png_bytes(fig)
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and all(t.startswith("2027-03-0") for t in ticks), ticks
    ratio = trend_figure(points("segment_garbage_ratio", "ratio", {("q", "", ""): [0.1, 0.6]}),
                         [], title="ratio")  # fmt: skip
    png_bytes(ratio)
    assert UNITS["ratio"] in ratio.axes[0].get_ylabel()
    assert {t.get_text() for t in ratio.axes[0].get_yticklabels()} >= {"0%", "20%", "40%"}
    passed = trend_figure(points("expectation_passed", "success", {("", "s", "e"): [1, 0, 1]}),
                          [], title="passed")  # fmt: skip
    png_bytes(passed)
    assert [t.get_text() for t in passed.axes[0].get_yticklabels()] == ["failed", "passed"]


def test_a_single_run_still_shows_its_point_and_value() -> None:
    fig = trend_figure(points("findings_total", "count", {("", "", ""): [12]}), [],
                       title="findings_total")  # fmt: skip
    ax = fig.axes[0]
    [line] = [line for line in ax.get_lines() if len(line.get_xdata())]
    assert len(line.get_xdata()) == 1 and line.get_marker() == "o"
    left, right = ax.get_xlim()
    assert left < mdates.date2num(day(1).replace(tzinfo=None)) < right
    low, high = ax.get_ylim()
    assert low <= 12 < high
    assert "12" in [t.get_text() for t in ax.texts]
    assert "1 series, 1 run judged 2027-03-01" in ax.get_title()
    assert fig.legends == []  # one series, no alert: the title names it


def test_no_point_says_nothing_to_show() -> None:
    empty = points("live_mails", "count", {}).reindex(columns=["system", "scope", "metric", *LABELS,
                                                               "unit", "as_of", "run_at", "run_id",
                                                               "value"])  # fmt: skip
    for frame in (empty, points("live_mails", "count", {("q", "", ""): [math.nan]})):
        fig = trend_figure(frame, [], title="live_mails")
        ax = fig.axes[0]
        assert not ax.axison
        assert [t.get_text() for t in ax.texts] == ["no run of this metric in the history"]
        assert ax.get_title() == "live_mails"


def test_many_series_name_eight_and_count_the_others() -> None:
    many = {(f"q{i:02}", "", ""): [i, i + 1] for i in range(12)}
    fig = trend_figure(points("live_mails", "count", many), [], title="live_mails")
    texts = legend_texts(fig)
    assert len(texts) == 9 and texts[-1] == "and 4 more series (grey)"
    assert texts[0] == "queue q11"  # the largest at the last run first
    assert len([line for line in fig.axes[0].get_lines() if len(line.get_xdata())]) == 12


def test_missing_labels_and_values_never_read_nan_or_none() -> None:
    frame = points(
        "live_mails", "count", {("spool", "", ""): [1, 2, 3], ("out", "", ""): [4, 5, 6]}
    )
    frame.loc[frame["queue"] == "out", "check"] = None
    frame.loc[frame["queue"] == "out", "item"] = math.nan
    frame.loc[2, "value"] = math.nan  # a run with no value: left out of its line
    frame.loc[0, "scope"] = None
    frame["scope"] = frame["scope"].fillna("cluster-eu1")
    fig = trend_figure(frame, [], title="live_mails")
    shown = " ".join(drawn(fig))
    assert "nan" not in shown.lower() and "None" not in shown
    assert set(legend_texts(fig)) == {"queue spool", "queue out"}
    [spool] = [line for line in fig.axes[0].get_lines() if line.get_label() == "queue spool"]
    assert len(spool.get_xdata()) == 2


def test_labels_go_through_the_text_given() -> None:
    planted = points("live_mails", "count", {("a@b.example", "", ""): [1, 2]})
    fig = trend_figure(planted, [], title="live_mails", text=lambda t: t.replace("a@b.", "u-1@"))
    assert "a@b.example" not in " ".join(drawn(fig))


def test_a_notebook_shows_the_figure_as_a_png() -> None:
    import base64
    import io

    fig = trend_figure(points("reclaimable_bytes", "bytes", BYTES), [DOUBLED], title="trend")
    bundle = fig._repr_mimebundle_()
    image = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))
    assert image.size[0] > 600 and image.size[1] > 300
    assert 'alt="trend"' in bundle["text/html"]


def test_alert_rows_say_values_in_their_unit() -> None:
    [row] = alert_rows([DOUBLED])
    assert dict(zip(ALERT_HEADERS, row, strict=True)) == {
        "rule": "reclaimable-bytes-doubled", "severity": "warning", "metric": "reclaimable_bytes",
        "series": "james cluster-eu1 check orphaned_blob", "what": "rose by 100%",
        "values": "200.2 KiB, 400.4 KiB", "since": "2027-03-01T06:00:00Z",
        "run": "2027-03-05T06:00:00Z", "why it matters": "bytes doubled",
    }  # fmt: skip
    [row] = alert_rows([DOUBLED], in_store=True)  # the store and the run said above the table
    assert dict(zip(STORE_ALERT_HEADERS, row, strict=True))["series"] == "check orphaned_blob"
    assert "run" not in STORE_ALERT_HEADERS


def test_repeated_values_are_said_once_with_their_count() -> None:
    assert values_text([4.0, 4.0, 4.0], "count") == "4 (3 times)"
    assert values_text([1.0, 2.0, 2.0, 3.0], "seconds") == "1s, 2s (2 times), 3s"
    assert values_text([], "bytes") == ""


def test_a_stores_audits_and_validations_are_two_lines() -> None:
    audits = points("live_mails", "count", {("spool", "", ""): [1, 2, 3]}).assign(kind="audit")
    checks = points("live_mails", "count", {("spool", "", ""): [5, 5]}).assign(kind="validate")
    fig = trend_figure(pd.concat([audits, checks]), [], title="live_mails")
    assert set(legend_texts(fig)) == {"(audits)", "(validations)"}
    assert "james cluster-eu1 queue spool; 2 series" in fig.axes[0].get_title()


def test_the_section_says_which_audit_this_is() -> None:
    from mqforensics.views.trends import TrendsData

    data = TrendsData("/h", "james", "mx1", runs=3, first=day(1), last=day(3), audit_as_of=day(2))
    assert data.about() == (
        "3 audits of the store mx1 (james) in the history /h, judged from 2027-03-01T06:00:00Z "
        "to 2027-03-03T06:00:00Z; this audit is the one judged at 2027-03-02T06:00:00Z, not the "
        "latest."
    )
    assert "this audit is no longer in it" in TrendsData("/h", "james", "mx1", runs=1).about()
    gone = TrendsData("/h", "james", "mx1", error="history /h does not exist")
    assert gone.summary() == "trends not shown: history /h does not exist"
