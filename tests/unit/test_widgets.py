"""The explorers: pickers filter, views redraw, and headless outputs keep a picture."""

from __future__ import annotations

import base64
import io

import pandas as pd
import pytest
from PIL import Image

from mqforensics.demo import BUNDLED
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


@pytest.fixture(scope="module")
def james(spark):
    from mqforensics.systems.james.snapshot import read_snapshot

    return read_snapshot(spark, BUNDLED)


def test_heatmap_explorer_follows_the_queue_and_computes_each_view_once(james, monkeypatch):
    calls: list[tuple] = []
    real = plot_data.james_slice_cells

    def counted(state, queue, **kwargs):
        calls.append((queue, kwargs["start"], kwargs["end"]))
        return real(state, queue, **kwargs)

    monkeypatch.setattr(plot_data, "james_slice_cells", counted)
    explorer = widgets.SliceHeatmapExplorer(james)
    assert explorer.queue.value == "spool"  # the queue with the most rows
    first = explorer.png()
    assert "Queue spool" in explorer.figure().axes[0].get_title()
    explorer.queue.value = "outgoing"
    assert explorer.selection()["queue"] == "outgoing"
    start, end = explorer.selection()["slices"]
    assert start < end
    assert explorer.png() != first
    seen = len(calls)
    explorer.queue.value = "spool"
    assert explorer.png() == first
    # Back to spool and its full range: drawn from the cache (only figure() above recomputed).
    assert len(calls) == seen


def _sharing_rows() -> list[dict]:
    from mqforensics.systems.cyrus import checks
    from mqforensics.systems.cyrus.audit import load
    from mqforensics.views.notebook_sources import DATASETS

    db = load(DATASETS / "cyrus" / "sample" / "backend1" / "mailboxes.db")
    return checks.sharing_report(db.entries, checks.DEFAULT_ADMINS, "example.org")


def test_sharing_explorer_focuses_on_the_picked_identity() -> None:
    from mqforensics.privacy import pseudonymize_address

    rows = _sharing_rows()
    explorer = widgets.SharingExplorer(rows)
    assert explorer.identity.value == widgets.EVERYONE
    bob = pseudonymize_address("bob")
    assert bob in explorer.identity.options and "bob" not in explorer.identity.options
    explorer.identity.value = bob
    assert explorer.selection() == {"identity": bob}
    assert explorer.figure().axes[0].get_title().startswith(f"Who can see whose mailboxes: {bob}")
    # The caption lists bob's edges only: as many as the report has (owner, grantee) pairs with bob.
    pairs = {(r["owner"], r["grantee"]) for r in rows if "bob" in (r["owner"], r["grantee"])}
    assert explorer.caption_html().count("</tr>") == 1 + len(pairs)  # header + one per edge
    assert f"identity={bob}" in explorer._repr_mimebundle_()["text/plain"]


def test_garbage_timeline_explorer_follows_the_queue(spark) -> None:
    from mqforensics.systems.logqueue.state import read_state
    from mqforensics.views.notebook_sources import DATASETS

    sample = DATASETS / "logqueue" / "sample"
    state = read_state(spark, [sample / "outbound", sample / "inbound"])
    queues = {q.queue: q for q in state.queues.collect()}
    explorer = widgets.GarbageTimelineExplorer(state)
    assert explorer.queue.options == tuple(sorted(queues))
    first = explorer.png()
    other = sorted(queues)[-1]
    explorer.queue.value = other
    assert explorer.selection() == {"queue": other}
    queue = queues[other]
    garbage = [s for s in queue.segments if s.segment < queue.garbage_end_segment]
    reclaimable = sum(s.size for s in garbage)
    title = explorer.figure().axes[0].get_title()
    assert title.startswith(f"Segments of {other}: ")
    assert f"in {len(garbage)} garbage segment(s)" in title
    assert reclaimable > 0 and explorer.png() != first
    caption = explorer.caption_html()
    assert f"<td>{reclaimable}</td>" in caption
