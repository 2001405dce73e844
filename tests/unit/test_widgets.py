"""The explorers: pickers filter, views redraw, and headless outputs keep a picture."""

from __future__ import annotations

import base64
import io

import pandas as pd
from PIL import Image

from mqforensics.views import plot_data, widgets


def _image(png: bytes) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB")


def _findings() -> pd.DataFrame:
    rows = [
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": "spool",
         "scope": "mail", "subject": "m1", "observed_at": "2026-11-01T10:00:00Z", "bytes": 5,
         "detail": {}},
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": "outgoing",
         "scope": "mail", "subject": "m2", "observed_at": "2026-11-03T10:00:00Z", "bytes": 7,
         "detail": {}},
        {"check": "orphaned_blob", "severity": "info", "system": "james", "queue": None,
         "scope": "blob", "subject": "b1", "observed_at": "2026-11-03T11:00:00Z", "bytes": 9,
         "detail": {}},
    ]  # fmt: skip
    return plot_data.findings_table(rows)


def test_findings_pickers_filter_the_table_and_the_figure() -> None:
    explorer = widgets.FindingsExplorer(_findings(), title="F")
    assert explorer.queue.options == (widgets.ALL, "(no queue)", "outgoing", "spool")
    assert len(explorer.selected()) == 3
    explorer.queue.value = "spool"
    assert explorer.selected()["subject"].tolist() == ["m1"]
    assert explorer.figure().axes[0].get_title() == "F: 1 finding"
    explorer.queue.value = "(no queue)"
    assert explorer.selected()["subject"].tolist() == ["b1"]
    explorer.queue.value = widgets.ALL
    explorer.severity.value = ("info",)
    assert explorer.selected()["subject"].tolist() == ["b1"]
    explorer.severity.value = ("error", "info")
    # The days holding a finding, then the end of the last: a range picks whole days.
    days = explorer.period.options
    assert [label for label, _ in days] == ["2026-11-01", "2026-11-03", "2026-11-04"]
    assert not explorer.period.disabled
    assert explorer.period.readout is False  # cut at ~20 characters: spelled out below instead
    assert "observed=2026-11-01..2026-11-04" in explorer._chosen.value
    explorer.period.index = (1, 2)
    assert sorted(explorer.selected()["subject"]) == ["b1", "m2"]
    assert "observed=2026-11-03..2026-11-04" in explorer._chosen.value
    assert "2 findings selected" in explorer.caption_html()
    explorer.period.index = (0, 0)  # both handles on one edge: the day that starts there
    assert explorer.selected()["subject"].tolist() == ["m1"]
    assert "observed=2026-11-01..2026-11-03" in explorer._chosen.value


def _one_instant(observed_at: str | None) -> pd.DataFrame:
    rows = [
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": None,
         "scope": "mail", "subject": f"m{i}", "observed_at": observed_at, "bytes": None,
         "detail": {"name": None, "visible": True, "age_seconds": 60 * i}}
        for i in range(2)
    ]  # fmt: skip
    return plot_data.findings_table(rows)


def test_findings_at_one_instant_still_get_a_working_time_range() -> None:
    explorer = widgets.FindingsExplorer(_one_instant("2026-11-03T12:00:00Z"), title="F")
    assert not explorer.period.disabled
    assert [label for label, _ in explorer.period.options] == ["2026-11-03", "2026-11-04"]
    assert "observed=2026-11-03..2026-11-04" in explorer._chosen.value
    assert len(explorer.selected()) == 2
    assert "None" not in explorer._chosen.value


def test_findings_within_one_day_get_hours_and_within_one_hour_minutes() -> None:
    assert [f"{t:%d %H:%M}" for t in widgets.time_edges(
        [pd.Timestamp("2026-11-03T09:10Z"), pd.Timestamp("2026-11-03T11:50Z")])[0]
    ] == ["03 09:00", "03 11:00", "03 12:00"]  # fmt: skip
    assert [f"{t:%H:%M}" for t in widgets.time_edges(
        [pd.Timestamp("2026-11-03T09:10:05Z"), pd.Timestamp("2026-11-03T09:12:00Z")])[0]
    ] == ["09:10", "09:12", "09:13"]  # fmt: skip


def test_no_timestamps_disable_the_range_and_say_so() -> None:
    explorer = widgets.FindingsExplorer(_one_instant(None), title="F")
    assert explorer.period.disabled
    assert explorer.period.tooltip == "no finding has an observation time"
    assert "observed=no timestamps" in explorer._chosen.value
    assert len(explorer.selected()) == 2
    caption = explorer.caption_html()
    assert "2 findings selected" in caption
    # A missing queue and a missing detail value are an en dash; never None or nan.
    assert "<td>error</td><td>stuck_mail</td><td>\u2013</td><td>m0</td><td>0</td>" in caption
    assert "<td>age_seconds: 0; name: \u2013; visible: yes</td>" in caption
    for word in ("None", "nan", "NaT", "null"):
        assert word not in caption, word


def test_display_bundle_carries_a_static_picture_of_the_current_view() -> None:
    explorer = widgets.FindingsExplorer(_findings(), title="F")
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    picture = _image(base64.b64decode(bundle["image/png"]))
    assert picture.size[0] > 300 and len(picture.getcolors(1 << 24) or []) > 20
    assert bundle["image/png"] in bundle["text/html"]
    assert "3 findings selected" in bundle["text/html"]
    assert explorer._image.value == base64.b64decode(bundle["image/png"])  # the live view too
    explorer.queue.value = "outgoing"
    assert explorer._repr_mimebundle_()["image/png"] != bundle["image/png"]
    assert "queue=outgoing" in explorer._repr_mimebundle_()["text/plain"]


def test_notebook_tables_show_missing_values_as_dashes() -> None:
    import re

    import numpy as np

    frame = pd.DataFrame(
        {
            "sender": [None, "u-1@example.org"],
            "attempts": [np.nan, 1.5],
            "arrival": pd.to_datetime([None, "2026-11-22T08:58:41Z"], utc=True),
            "recipients": [["u-2@example.org"], None],
            "count": pd.array([None, 3], dtype="Int64"),
            "kind": ["message", "message"],
        }
    )
    cells = re.findall(r"<td>([^<]*)</td>", widgets.frame_html(frame))
    dash = "\u2013"
    assert cells == [dash, dash, dash, "[u-2@example.org]", dash, "message",
                     "u-1@example.org", "1.5", "2026-11-22 08:58:41+00:00", dash, "3",
                     "message"]  # fmt: skip
