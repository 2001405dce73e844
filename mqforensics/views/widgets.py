"""ipywidgets explorers the notebooks use: pickers over findings, James partitions, Cyrus sharing
and segment garbage, each redrawing a static figure from `plots`.

An explorer is a `VBox` of its pickers and an `Image` of the current figure. Its display bundle
also carries that figure as ``image/png`` and an HTML rendering, so a notebook run headless
(nbmake, nbconvert) keeps a picture of the current view in the cell output, which exported
notebooks and reports show without any widget JavaScript. Each selection's figure is computed
once (Spark work included) and kept, so moving a picker back costs nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import ipywidgets
import pandas as pd

from mqforensics.findings import SEVERITIES
from mqforensics.views import plot_data, plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mqforensics.systems.james.state import JamesState
    from mqforensics.systems.logqueue.state import LogQueueState

ALL = "(all)"
TABLE_ROWS = 200


def show(fig: Figure) -> Any:
    """A figure as an IPython image (for a cell's result), rendered once."""
    from IPython.display import Image

    return Image(data=plots.png_bytes(fig), format="png")


class Explorer(ipywidgets.VBox):
    """Pickers, the current figure and a caption; subclasses say what a selection draws."""

    def __init__(self, controls: list[ipywidgets.Widget], title: str = "") -> None:
        self._rendered: dict[Hashable, tuple[bytes, str]] = {}
        self._title = title
        self._quiet = False  # set while one picker resets another: draw only the final state
        self._image = ipywidgets.Image(format="png", layout=ipywidgets.Layout(max_width="100%"))
        self._caption = ipywidgets.HTML()
        # A range slider's own readout is cut at ~20 characters; the whole selection is spelled
        # out here instead.
        self._chosen = ipywidgets.HTML()
        header = [ipywidgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        super().__init__(
            [*header, ipywidgets.HBox(controls), self._chosen, self._image, self._caption]
        )
        for control in controls:
            control.observe(lambda _change: self.refresh(), names="value")
        self.refresh()

    # What subclasses provide.
    def selection(self) -> dict[str, Any]:
        raise NotImplementedError

    def figure(self) -> Figure:
        raise NotImplementedError

    def caption_html(self) -> str:
        return ""

    # The rendering, cached per selection.
    def _key(self) -> Hashable:
        return tuple(sorted((k, _hashable(v)) for k, v in self.selection().items()))

    def _render(self) -> tuple[bytes, str]:
        key = self._key()
        if key not in self._rendered:
            self._rendered[key] = (plots.png_bytes(self.figure()), self.caption_html())
        return self._rendered[key]

    def refresh(self) -> None:
        if self._quiet:
            return
        png, caption = self._render()
        self._image.value = png
        self._caption.value = caption
        self._chosen.value = f"<small>{html.escape(self._chosen_text())}</small>"

    def _chosen_text(self) -> str:
        return ", ".join(f"{k}={_text(v)}" for k, v in self.selection().items())

    def png(self) -> bytes:
        """The current view as PNG bytes."""
        return self._render()[0]

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        png, caption = self._render()
        encoded = base64.b64encode(png).decode("ascii")
        chosen = self._chosen_text()
        bundle["image/png"] = encoded
        bundle["text/html"] = (
            f'<div class="mqf-explorer"><p><b>{html.escape(self._title)}</b> '
            f"<small>({html.escape(chosen)})</small></p>"
            f'<img alt="{html.escape(self._title or type(self).__name__)}" '
            f'src="data:image/png;base64,{encoded}"/>{caption}</div>'
        )
        bundle["text/plain"] = f"{type(self).__name__}({chosen})"
        return bundle


def _hashable(value: Any) -> Hashable:
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(_hashable(v) for v in value)
    return value


def _text(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "..".join(_text(v) for v in value) if len(value) == 2 else ",".join(map(str, value))
    if isinstance(value, (dt.datetime, pd.Timestamp)):
        return f"{value:%Y-%m-%d %H:%M}"
    return str(value)


def _dropdown(options: list[str], description: str, value: str | None = None) -> Any:
    return ipywidgets.Dropdown(
        options=options, value=value or (options[0] if options else None), description=description
    )


def _range_slider(instants: list[Any], description: str) -> Any:
    """A range picker over `instants` (sorted), disabled when there are fewer than two."""
    labels = [(f"{pd.Timestamp(t):%Y-%m-%d %H:%M}", pd.Timestamp(t)) for t in instants]
    if len(labels) < 2:
        labels = labels or [("-", None)]
        slider = ipywidgets.SelectionRangeSlider(
            options=labels, index=(0, 0), description=description, disabled=True, readout=False
        )
        return slider
    return ipywidgets.SelectionRangeSlider(
        options=labels,
        index=(0, len(labels) - 1),
        description=description,
        readout=False,
        layout=ipywidgets.Layout(width="480px"),
    )


# --- findings ------------------------------------------------------------------------------------


class FindingsExplorer(Explorer):
    """Findings filtered by queue, observation time and severity: the overview figure and the
    table of the selected findings (the first 200)."""

    def __init__(self, table: pd.DataFrame, *, title: str = "Findings") -> None:
        self.table = table
        queues = sorted({q if isinstance(q, str) else "(none)" for q in table["queue"]})
        days = sorted({t.floor("D") for t in table["observed_at"].dropna()})
        present = [s for s in SEVERITIES if s in set(table["severity"])]
        self.queue = _dropdown([ALL, *queues], "queue")
        self.period = _range_slider(days, "observed")
        self.severity = ipywidgets.SelectMultiple(
            options=present, value=tuple(present), description="severity", rows=len(present) or 1
        )
        super().__init__([self.queue, self.period, self.severity], title)

    def selection(self) -> dict[str, Any]:
        period = self.period.value if not self.period.disabled else (None, None)
        return {
            "queue": self.queue.value,
            "observed": tuple(period),
            "severity": tuple(self.severity.value),
        }

    def selected(self) -> pd.DataFrame:
        """The findings of the current selection."""
        chosen = self.selection()
        rows = self.table
        if chosen["queue"] not in (ALL, None):
            queue = rows["queue"].fillna("(none)")
            rows = rows[queue == chosen["queue"]]
        start, end = chosen["observed"]
        if start is not None and end is not None:
            day = rows["observed_at"].dt.floor("D")
            rows = rows[(day >= start) & (day <= end)]
        return rows[rows["severity"].isin(chosen["severity"])]

    def figure(self) -> Figure:
        return plots.findings_overview(self.selected(), title=self._title or "Findings")

    def caption_html(self) -> str:
        rows = self.selected()
        columns = ["severity", "check", "queue", "subject", "bytes", "detail"]
        shown = rows[columns].head(TABLE_ROWS)
        table = shown.to_html(index=False, escape=True, border=0, classes="mqf-findings")
        more = len(rows) - len(shown)
        tail = f"<p>{more:,} more not shown</p>" if more > 0 else ""
        return f"<p>{len(rows):,} findings selected</p>{table}{tail}"


# --- James ---------------------------------------------------------------------------------------


class SliceHeatmapExplorer(Explorer):
    """One James queue's partitions (slice x bucket), live versus consumed, with browseStart and
    contentStart; pick the queue and the slice range."""

    def __init__(self, state: JamesState, *, queue: str | None = None, max_slices: int = 2000):
        self.state = state
        self.max_slices = max_slices
        queues = plot_data.james_queues(state)
        self.queue = _dropdown(queues, "queue", queue)
        self.period = _range_slider(self._slices(self.queue.value), "slices")
        self.queue.observe(self._queue_changed, names="value")
        super().__init__([self.queue, self.period], "Slices x buckets: live vs consumed rows")

    def _slices(self, queue: str | None) -> list[Any]:
        if queue is None:
            return []
        from pyspark.sql import functions as F

        rows = (
            self.state.entries.where(F.col("queuename") == queue)
            .select("timerangestart")
            .distinct()
            .orderBy("timerangestart")
            .collect()
        )
        return [r.timerangestart.replace(tzinfo=dt.UTC) for r in rows]

    def _queue_changed(self, _change: Any) -> None:
        fresh = _range_slider(self._slices(self.queue.value), "slices")
        self._quiet = True  # the queue's own observer redraws once the range is reset
        try:
            self.period.options = fresh.options
            self.period.index = fresh.index
            self.period.disabled = fresh.disabled
        finally:
            self._quiet = False

    def selection(self) -> dict[str, Any]:
        period = self.period.value if not self.period.disabled else (None, None)
        return {"queue": self.queue.value, "slices": tuple(period)}

    def figure(self) -> Figure:
        chosen = self.selection()
        queue = chosen["queue"]
        if queue is None:
            return plots.nothing_to_show("Slices x buckets", "no queue")
        start, end = chosen["slices"]
        cells = plot_data.james_slice_cells(
            self.state, queue, start=start, end=end, max_slices=self.max_slices
        )
        marks = plot_data.james_marks(self.state, queue)
        return plots.slice_bucket_heatmap(
            cells, queue=queue, note=cells.attrs.get("note") or None, **marks
        )


# --- Cyrus ---------------------------------------------------------------------------------------


EVERYONE = "(everyone)"


class SharingExplorer(Explorer):
    """The sharing graph of the Cyrus sharing report, for everyone or one identity."""

    def __init__(self, sharing: Any, *, reveal: bool = False) -> None:
        self.edges = plot_data.cyrus_sharing_edges(sharing, reveal=reveal)
        identities = sorted(set(self.edges["owner"]) | set(self.edges["grantee"]))
        self.identity = _dropdown([EVERYONE, *identities], "identity")
        super().__init__([self.identity], "Who can see whose mailboxes")

    def selection(self) -> dict[str, Any]:
        return {"identity": self.identity.value}

    def figure(self) -> Figure:
        focus = self.identity.value
        return plots.sharing_graph(self.edges, focus=None if focus == EVERYONE else focus)

    def caption_html(self) -> str:
        focus = self.identity.value
        rows = self.edges
        if focus != EVERYONE:
            rows = rows[(rows["owner"] == focus) | (rows["grantee"] == focus)]
        return rows.to_html(index=False, escape=True, border=0)


# --- log-structured queues -----------------------------------------------------------------------


class GarbageTimelineExplorer(Explorer):
    """A queue's segments along the log: garbage, the garbage end, the restart position."""

    def __init__(self, state: LogQueueState) -> None:
        self.segments = plot_data.logqueue_segments(state)
        queues = sorted(set(self.segments["queue"])) if not self.segments.empty else []
        self.queue = _dropdown(queues, "queue")
        super().__init__([self.queue], "Segment garbage timeline")

    def selection(self) -> dict[str, Any]:
        return {"queue": self.queue.value}

    def figure(self) -> Figure:
        queue = self.queue.value
        if queue is None:
            return plots.nothing_to_show("Segments", "no queue")
        return plots.garbage_timeline(self.segments, queue=queue)

    def caption_html(self) -> str:
        rows = self.segments[self.segments["queue"] == self.queue.value]
        summary = rows.groupby("status")["size"].agg(["count", "sum"]).reset_index()
        summary.columns = ["status", "segments", "bytes"]
        return summary.to_html(index=False, border=0)
