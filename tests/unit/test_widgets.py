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
    assert explorer.queue.options == (widgets.ALL, "(none)", "outgoing", "spool")
    assert len(explorer.selected()) == 3
    explorer.queue.value = "spool"
    assert explorer.selected()["subject"].tolist() == ["m1"]
    assert explorer.figure().axes[0].get_title() == "F: 1 findings"
    explorer.queue.value = widgets.ALL
    explorer.severity.value = ("info",)
    assert explorer.selected()["subject"].tolist() == ["b1"]
    explorer.severity.value = ("error", "info")
    days = explorer.period.options
    assert [label for label, _ in days] == ["2026-11-01 00:00", "2026-11-03 00:00"]
    assert explorer.period.readout is False  # cut at ~20 characters: spelled out below instead
    assert "observed=2026-11-01 00:00..2026-11-03 00:00" in explorer._chosen.value
    explorer.period.index = (1, 1)
    assert sorted(explorer.selected()["subject"]) == ["b1", "m2"]
    assert "observed=2026-11-03 00:00..2026-11-03 00:00" in explorer._chosen.value
    assert "2 findings selected" in explorer.caption_html()


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
