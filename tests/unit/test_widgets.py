"""The explorers: pickers filter, views redraw, and headless outputs keep a picture: a displayed
explorer writes its widget and then a static fallback that a stock ``nbconvert --to html`` shows
when the widget cannot render. Pandas tables in notebooks read as prose tables should."""

from __future__ import annotations

import base64
import io
import json
import re

import pandas as pd
import pytest
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
    # A missing queue, size and detail value are an en dash; never None, nan or a 0 for an
    # unknown size. The detail reads as one key: value line per key.
    assert _cells(caption)[:6] == ["error", "stuck_mail", "\u2013", "m0", "\u2013",
                                   "age_seconds: 0<br>name: \u2013<br>visible: yes"]  # fmt: skip
    for word in ("None", "nan", "NaT", "null"):
        assert word not in caption, word


def _cells(table: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", table)


def test_the_fallback_carries_a_static_picture_of_the_current_view() -> None:
    explorer = widgets.FindingsExplorer(_findings(), title="F")
    bundle = explorer.fallback_bundle()
    picture = _image(base64.b64decode(bundle["image/png"]))
    assert picture.size[0] > 300 and len(picture.getcolors(1 << 24) or []) > 20
    page = bundle["text/html"]
    assert (
        f'<img alt="F" style="max-width: 100%" src="data:image/png;base64,{bundle["image/png"]}"'
        in page
    )
    assert "3 findings selected" in page and "<table" in page
    assert "run the notebook's cells again to explore interactively" in page
    assert "run the notebook's cells again" in bundle["text/plain"]
    assert explorer._image.value == base64.b64decode(bundle["image/png"])  # the live view too
    explorer.queue.value = "outgoing"
    assert explorer.fallback_bundle()["image/png"] != bundle["image/png"]
    assert "queue=outgoing" in explorer.fallback_bundle()["text/html"]
    assert "queue=outgoing" in explorer._repr_mimebundle_()["text/plain"]


def _displayed(explorer: widgets.Explorer, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The outputs `explorer` writes when a cell shows it, as nbformat outputs."""
    import IPython.display
    from nbformat.v4 import new_output

    shown: list[dict] = []

    def display(data: dict, raw: bool = False, metadata: dict | None = None) -> None:
        assert raw
        shown.append(new_output("display_data", data=data, metadata=metadata or {}))

    monkeypatch.setattr(IPython.display, "display", display)
    explorer._ipython_display_()
    return shown


def test_a_shown_explorer_writes_its_widget_then_a_static_fallback(monkeypatch) -> None:
    explorer = widgets.FindingsExplorer(_findings(), title="F")
    widget, fallback = _displayed(explorer, monkeypatch)
    # The widget output is the live view alone: in a stock nbconvert export with the widget
    # state it is chosen over anything static beside it (nbconvert's WidgetsDataTypeFilter).
    assert set(widget["data"]) == {widgets.WIDGET_VIEW, "text/plain"}
    model = widget["data"][widgets.WIDGET_VIEW]["model_id"]
    assert model == explorer.model_id
    assert set(fallback["data"]) == {"text/html", "image/png", "text/plain"}
    assert fallback["metadata"] == {"mqforensics": {"fallback_of": model}}
    assert widgets.WIDGET_VIEW not in fallback["data"]


def test_stock_nbconvert_shows_the_fallback_beside_a_widget_it_cannot_render(monkeypatch) -> None:
    """`jupyter nbconvert --to html` of an executed notebook: the widget (state saved, as
    nbclient and papermill save it) is a script its CDN widget manager would render; the
    fallback right after it is a picture and a table that need neither."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook

    explorer = widgets.FindingsExplorer(_findings(), title="F")
    outputs = _displayed(explorer, monkeypatch)
    model = explorer.model_id
    notebook = new_notebook(cells=[new_code_cell("audit.explore()", outputs=outputs)])
    notebook.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": {model: {"model_name": "VBoxModel", "state": {},
                              "model_module": "@jupyter-widgets/controls",
                              "model_module_version": "2.0.0"}},
            "version_major": 2, "version_minor": 0,
        }
    }  # fmt: skip
    nbformat.validate(notebook)
    for template in ("lab", "classic"):
        page, _ = HTMLExporter(template_name=template).from_notebook_node(notebook)
        script = page.index('<script type="application/vnd.jupyter.widget-view+json">')
        assert f'"model_id": "{model}"' in page[script : script + 200]
        after = page[script:]
        assert '<div class="mqf-explorer mqf-fallback">' in after, template
        assert '<img alt="F"' in after and "<table" in after, template
        assert "run the notebook's cells again" in after, template
        # Hidden where the widget rendered (its VBox view), never otherwise; the line saying to
        # run the cells again stays under one drawn from saved state with no kernel behind it.
        assert widgets.FALLBACK_STYLE in after
        static = after.index('<div class="mqf-static">')
        assert static < after.index('<img alt="F"') < after.index('<p class="mqf-rerun">')


def test_findings_tables_call_the_subject_object_and_page_long_selections() -> None:
    rows = [
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": "spool",
         "scope": "mail", "subject": f"m{i}", "observed_at": "2026-11-01T10:00:00Z",
         "bytes": 1234567, "detail": {"age_seconds": i, "why": "a reason " * 30}}
        for i in range(widgets.PAGE_ROWS + 1)
    ]  # fmt: skip
    table = plot_data.findings_table(rows)
    page = widgets.findings_rows_html(table.head(widgets.PAGE_ROWS))
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert headers == ["severity", "check", "queue", "object", "bytes", "detail"]
    assert "mqf-scroll" not in page
    cells = re.findall(r'<td style="[^"]*text-align: (\w+)[^"]*">', page)[:6]
    assert cells == ["left", "left", "left", "left", "right", "left"]
    assert _cells(page)[4] == "1,234,567"
    detail = _cells(page)[5].split("<br>")
    assert detail[0] == "age_seconds: 0" and detail[1].startswith("why: a reason a reason")
    # Cut after a whole word, with an ellipsis, never inside one.
    shown, full = detail[1].removeprefix("why: "), "a reason " * 30
    assert shown.endswith("\u2026") and full.startswith(shown[:-1]) and full[len(shown) - 1] == " "
    # More rows than a page: the table scrolls in a box a page high, its header in view.
    longer = widgets.findings_rows_html(table)
    assert longer.startswith('<div class="mqf-scroll" style="max-height: 33em; overflow: auto">')
    assert "position: sticky; top: 0" in longer


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


def test_notebook_tables_of_prose_are_left_aligned_wrapped_and_whole() -> None:
    prose = "Stuck mail pins browseStart for ever, so every browse reads all the slices behind it"
    frame = pd.DataFrame(
        {
            "check": ["stuck_mail", "orphaned_blob"],
            "what": [prose, "short"],
            "id": ["3a60006b-0e96-4773-8c11-bda24893ab23", None],
            "count": [3, 12000],
            "detail": [json.dumps({"age_seconds": 5, "name": None}), None],
        }
    ).set_index("check")
    page = widgets.frame_html(frame)
    ident = re.search(r'<table[^>]* id="(mqf-[0-9a-f]+)"', page).group(1)
    assert prose in page  # whole, not cut at display.max_colwidth (50) mid-word
    style = page[: page.index("</style>")]
    # "what", "id" and "detail" are text (cells 1, 2 and 4 of a row), "count" a number. Prose
    # wraps; an id never breaks.
    assert f"#{ident} td:nth-of-type(1) {{text-align: left; white-space: normal;" in style
    assert f"#{ident} td:nth-of-type(2) {{text-align: left; white-space: nowrap;}}" in style
    assert f"#{ident} td:nth-of-type(4) {{text-align: left; white-space: normal;" in style
    assert "td:nth-of-type(3)" not in style
    assert f"#{ident} tbody th {{text-align: left;}}" in style  # the check names
    assert "min-width: 12em" in style  # prose gets room to wrap in lines, not words
    # A finding's detail as key: value lines, not raw JSON.
    assert "<td>age_seconds: 5<br>name: \u2013</td>" in page
    assert "{" not in page[page.index("<table") :]


def test_a_wide_notebook_table_styles_the_columns_pandas_shows() -> None:
    frame = pd.DataFrame({f"c{i}": ["text" if i % 2 else 1] for i in range(30)})
    with pd.option_context("display.max_columns", 6):
        page = widgets.frame_html(frame)
        assert widgets._shown_columns(30) == [0, 1, 2, None, 27, 28, 29]
    cells = re.findall(r"<td>([^<]*)</td>", page)
    assert cells == ["1", "text", "1", "...", "text", "1", "text"]
    texts = sorted(int(n) for n in re.findall(r"td:nth-of-type\((\d+)\)", page))
    assert texts == [2, 5, 7]
