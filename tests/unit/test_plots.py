"""The static figures: what they mark, what they say, and that they render to real images."""

from __future__ import annotations

import datetime as dt
import io

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
    assert right.get_title() == "2.0 KiB held"


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
    assert "100 B reclaimable in 1 garbage segment(s)" in ax.get_title()
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
