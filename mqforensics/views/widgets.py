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
from mqforensics.views import plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
