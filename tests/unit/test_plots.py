"""The static figures: what they mark, what they say, and that they render to real images."""

from __future__ import annotations

import datetime as dt
import io
import re

import matplotlib.dates as mdates
import pandas as pd
from PIL import Image

from mqforensics.views import plots

UTC = dt.UTC


def _distinct_colours(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=1 << 24) or [])


def _cells() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "timerangestart": pd.to_datetime(
                ["2026-11-01T00:00Z", "2026-11-01T01:00Z", "2026-11-01T01:00Z"], utc=True
            ),
            "bucketid": [0, 0, 1],
            "live": [0, 3, 1],
            "consumed": [4, 1, 0],
        }
    )


def test_heatmap_marks_browse_and_content_start_where_they_are() -> None:
    browse = dt.datetime(2026, 11, 1, 1, tzinfo=UTC)
    content = dt.datetime(2026, 10, 31, 22, tzinfo=UTC)
    fig = plots.slice_bucket_heatmap(
        _cells(), queue="spool", browse_start=browse, content_start=content
    )
    ax = fig.axes[0]
    lines = {line.get_label().split()[0]: line.get_xdata()[0] for line in ax.get_lines()}
    assert lines == {
        "browseStart": mdates.date2num(browse),
        "contentStart": mdates.date2num(content),
    }
    left, right = ax.get_xlim()
    assert left < mdates.date2num(content) < right  # a mark outside the cells is still shown
    # One rectangle per partition, three in all, and their counts written on them.
    assert len(ax.collections) == 3
    assert sorted(t.get_text() for t in ax.texts) == ["0/4", "1/0", "3/1"]
    assert "3 partitions, 2 slices" in ax.get_title()
    assert _distinct_colours(plots.png_bytes(fig)) > 50


def test_empty_inputs_say_so() -> None:
    for fig in (
        plots.slice_bucket_heatmap(_cells().iloc[:0], queue="q"),
        plots.findings_overview(pd.DataFrame(columns=["check", "severity", "subject", "bytes"])),
        plots.sharing_graph(pd.DataFrame(columns=["owner", "grantee", "rights", "mailboxes"])),
        plots.garbage_timeline(pd.DataFrame(columns=["queue"]), queue="q"),
        plots.plan_overview(pd.DataFrame(columns=["kind", "rule", "bytes", "tombstones"])),
    ):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert len(texts) == 1 and texts[0].startswith(("no ", "nothing", "the plan")), texts
        assert plots.png_bytes(fig).startswith(b"\x89PNG")


def test_findings_overview_counts_by_check_and_severity() -> None:
    table = pd.DataFrame(
        {
            "check": ["stuck_mail", "stuck_mail", "orphaned_blob"],
            "severity": ["error", "error", "info"],
            "subject": ["a", "b", "c"],
            "bytes": [0, 0, 2048],
        }
    )
    fig = plots.findings_overview(table, title="T")
    left, right = fig.axes[:2]
    widths = {(p.get_y(), round(p.get_width())) for p in left.patches if p.get_width()}
    assert sorted(w for _, w in widths) == [1, 2]
    assert left.get_title() == "T: 3 findings"
    assert right.get_title() == "bytes held per check"


def test_garbage_timeline_reports_reclaimable_bytes() -> None:
    segments = pd.DataFrame(
        {
            "queue": ["q"] * 3,
            "segment": [1, 2, 3],
            "file": ["s1", "s2", "s3"],
            "size": [100, 200, 50],
            "first_record": pd.to_datetime(["2027-01-15T00:00Z"] * 3, utc=True),
            "last_record": pd.to_datetime(["2027-01-15T01:00Z"] * 3, utc=True),
            "status": ["garbage", "partly_garbage", "live"],
            "restart": [False, True, False],
            "garbage_end_segment": [2, 2, 2],
        }
    )
    fig = plots.garbage_timeline(segments, queue="q")
    ax = fig.axes[0]
    assert "100 B reclaimable in 1 garbage segment" in ax.get_title()
    assert sorted(round(p.get_height()) for p in ax.patches) == [50, 100, 200]
    assert {line.get_label() for line in ax.get_lines()} == {
        "garbage end",
        "saved restart position (segment start)",
    }


def test_sharing_graph_focus_keeps_only_that_identitys_edges() -> None:
    edges = pd.DataFrame(
        {
            "owner": ["u-1", "u-1", "u-2"],
            "grantee": ["u-2", "anyone", "u-3"],
            "rights": ["lrs", "lr", "lrswi"],
            "mailboxes": [1, 2, 1],
        }
    )
    every = plots.sharing_graph(edges).axes[0]
    assert len([t for t in every.texts if "(" in t.get_text()]) == 3
    focused = plots.sharing_graph(edges, focus="u-3").axes[0]
    assert [t.get_text() for t in focused.texts if "(" in t.get_text()] == ["lrswi (1)"]
    assert plots.data_uri(plots.sharing_graph(edges)).startswith("data:image/png;base64,iVBOR")


def _findings(checks: list[str], severities: list[str], sizes: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {"check": checks, "severity": severities, "subject": [f"s{i}" for i in range(len(checks))],
         "bytes": sizes}
    )  # fmt: skip


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_one_finding_reads_well_whole_counts_from_zero_and_no_bytes_said_in_words() -> None:
    fig = plots.findings_overview(_findings(["stuck_mail"], ["error"], [0]), title="T")
    plots.png_bytes(fig)  # draws it: the legend's place is known
    left, right = fig.axes[:2]
    assert left.get_title() == "T: 1 finding"
    low, high = left.get_xlim()
    assert low == 0 and 1 <= high <= 2
    ticks = [t for t in left.get_xticks() if low <= t <= high]
    assert ticks == [0, 1]  # whole findings, never 0.2 .. 1.0
    assert [t.get_text() for t in left.texts] == [" 1"]
    # Zero bytes: no axis of -0.075..0.075 but a sentence.
    assert right.get_title() == "no bytes held"
    assert list(right.get_xticks()) == [] and list(right.patches) == []
    assert [t.get_text() for t in right.texts] == ["these findings hold no bytes"]
    # The legend sits below the axes, not over a bar.
    assert left.get_legend() is None and len(fig.legends) == 1
    legend = fig.legends[0].get_window_extent()
    assert not _overlaps(legend, left.get_window_extent())
    assert not _overlaps(legend, right.get_window_extent())


def test_plural_titles() -> None:
    assert plots.plural(1, "finding") == "1 finding"
    assert plots.plural(2, "finding") == "2 findings"
    assert plots.plural(100_000, "finding") == "100,000 findings"
    assert plots.plural(0, "mail address", "mail addresses") == "0 mail addresses"
    two = plots.findings_overview(_findings(["a", "a"], ["info", "info"], [1, 1]), title="T")
    assert two.axes[0].get_title() == "T: 2 findings"
    one = pd.DataFrame({"kind": ["k"], "rule": ["r"], "bytes": [0], "tombstones": [0]})
    fig = plots.plan_overview(one, title="P")
    assert fig.axes[0].get_title() == "P: 1 action"
    assert fig.axes[1].get_title() == "no bytes freed"


def test_a_hundred_thousand_findings_draw_as_a_few_bars_with_readable_axes() -> None:
    count = 100_000
    checks = ["stuck_mail"] * 70_000 + ["orphaned_blob"] * 29_999 + ["config_violation"]
    severities = ["error"] * 60_000 + ["warning"] * 10_000 + ["info"] * 29_999 + ["critical"]
    sizes = [0] * 70_000 + [3 * 1024 * 1024] * 29_999 + [0]
    fig = plots.findings_overview(_findings(checks, severities, sizes), title="big")
    png = plots.png_bytes(fig)
    left, right = fig.axes[:2]
    assert left.get_title() == f"big: {count:,} findings"
    # One bar per check and severity present, not one mark per finding.
    assert len([p for p in left.patches if p.get_width()]) == 4
    assert sorted(t.get_text() for t in left.texts) == [" 1", " 29,999", " 70,000"]
    low, high = left.get_xlim()
    assert low == 0 and 70_000 <= high <= 70_000 * 1.2
    labels = [t.get_text() for t in left.get_xticklabels() if t.get_text()]
    assert 3 <= len(labels) <= 8 and "0" in labels, labels
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", label) for label in labels), labels
    # Bytes start at 0 and are written in units, the bars labelled with their sizes.
    assert right.get_xlim()[0] == 0
    ticks = [t.get_text() for t in right.get_xticklabels() if t.get_text()]
    assert ticks[:3] == ["0", "25 GiB", "50 GiB"], ticks  # round steps of a unit
    assert right.get_title() == "bytes held per check"
    assert [t.get_text() for t in right.texts] == [" 87.9 GiB"]
    assert png.startswith(b"\x89PNG")


def test_a_figure_a_cell_ends_with_shows_as_a_picture_whatever_the_backend() -> None:
    """A notebook cell ending with a figure (``plots.plan_overview(...)``) shows its PNG, and the
    same PNG in HTML with the figure's title as its alternative text: never the bare
    ``<Figure size 1000x315 with 2 Axes>`` that an export would keep."""
    import base64

    from IPython.core.formatters import DisplayFormatter

    actions = pd.DataFrame(
        {"kind": ["delete_segment"], "rule": ["garbage"], "bytes": [4096], "tombstones": [0]}
    )
    fig = plots.plan_overview(actions, title="Plan p")
    data, _metadata = DisplayFormatter().format(fig)
    assert set(data) == {"image/png", "text/html", "text/plain"}
    png = base64.b64decode(data["image/png"])
    assert png.startswith(b"\x89PNG") and _distinct_colours(png) > 20
    assert data["text/html"].startswith('<img alt="Plan p: 1 action" style="max-width: 100%" ')
    assert data["image/png"] in data["text/html"]
    assert data["text/plain"] == "<figure: Plan p: 1 action>"
    heatmap = plots.slice_bucket_heatmap(_cells(), queue="spool")
    assert plots.figure_title(heatmap) == "Queue spool: rows live vs consumed per slice x bucket"
