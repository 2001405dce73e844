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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets
import pandas as pd

from mqforensics.findings import SEVERITIES
from mqforensics.views import plots
from mqforensics.views.plot_data import MISSING, cell_text, detail_of, is_missing

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
    if value is None:
        return MISSING
    if isinstance(value, TimeRange):
        return value.label()
    if isinstance(value, (tuple, list)):
        return "..".join(_text(v) for v in value) if len(value) == 2 else ",".join(map(str, value))
    if isinstance(value, (dt.datetime, pd.Timestamp)):
        return f"{value:%Y-%m-%d %H:%M}"
    return str(value)


def dropdown(options: list[str], description: str, value: str | None = None) -> Any:
    return ipywidgets.Dropdown(
        options=options, value=value or (options[0] if options else None), description=description
    )


NO_TIMES = "no timestamps"
# Steps a time-range picker may move by, coarsest first.
_STEPS = (("D", "%Y-%m-%d"), ("h", "%Y-%m-%d %H:%M"), ("min", "%Y-%m-%d %H:%M"))


@dataclass(frozen=True)
class TimeRange:
    """A half-open range of instants [start, end), and how its ends are written."""

    start: pd.Timestamp
    end: pd.Timestamp
    form: str = "%Y-%m-%d %H:%M"

    def label(self) -> str:
        return f"{self.start:{self.form}}..{self.end:{self.form}}"

    def holds(self, instants: pd.Series) -> pd.Series:
        return (instants >= self.start) & (instants < self.end)


def time_edges(instants: list[Any]) -> tuple[list[pd.Timestamp], str, str]:
    """The edges a time-range picker offers over `instants` (not empty): the starts of the days
    (or hours, or minutes: the coarsest step that tells two instants apart; days when none
    does) holding one, then the end of the last; with the strftime form of an edge's label and
    the pandas frequency of a step."""
    stamps = [pd.Timestamp(t) for t in instants]
    for step, form in _STEPS:
        starts = sorted({t.floor(step) for t in stamps})
        if len(starts) >= 2:
            return [*starts, starts[-1] + pd.Timedelta(1, unit=step)], form, step
    step, form = _STEPS[0]  # every instant in one minute: the day holding them
    start = stamps[0].floor(step)
    return [start, start + pd.Timedelta(1, unit=step)], form, step


def range_slider(instants: list[Any], description: str) -> Any:
    """A range picker between the edges of `instants` (`time_edges`), all of them at first;
    disabled, saying so, when there is no instant at all."""
    if not instants:
        return ipywidgets.SelectionRangeSlider(
            options=[(NO_TIMES, None)], index=(0, 0), description=description, disabled=True,
            readout=False, tooltip="no finding has an observation time",
        )  # fmt: skip
    edges, form, _step = time_edges(instants)
    return ipywidgets.SelectionRangeSlider(
        options=[(f"{t:{form}}", t) for t in edges],
        index=(0, len(edges) - 1),
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
        queues = sorted({_queue_name(q) for q in table["queue"]})
        instants = list(table["observed_at"].dropna())
        present = [s for s in SEVERITIES if s in set(table["severity"])]
        self.queue = dropdown([ALL, *queues], "queue")
        self.period = range_slider(instants, "observed")
        self._form = time_edges(instants)[1] if instants else ""
        self.severity = ipywidgets.SelectMultiple(
            options=present, value=tuple(present), description="severity", rows=len(present) or 1
        )
        super().__init__([self.queue, self.period, self.severity], title)

    def _period(self) -> TimeRange | None:
        """The chosen range; both handles on one edge choose the step that starts there (or,
        at the last edge, the step that ends there)."""
        if self.period.disabled:
            return None
        edges = [value for _label, value in self.period.options]
        first, last = self.period.index
        if first == last:
            first, last = (first, first + 1) if first + 1 < len(edges) else (first - 1, first)
        return TimeRange(edges[first], edges[last], self._form)

    def _whole_period(self) -> bool:
        return self.period.disabled or tuple(self.period.index) == (0, len(self.period.options) - 1)

    def selection(self) -> dict[str, Any]:
        return {
            "queue": self.queue.value,
            "observed": self._period() or NO_TIMES,
            "severity": tuple(self.severity.value),
        }

    def selected(self) -> pd.DataFrame:
        """The findings of the current selection."""
        chosen = self.selection()
        rows = self.table
        if chosen["queue"] not in (ALL, None):
            rows = rows[rows["queue"].map(_queue_name) == chosen["queue"]]
        period = chosen["observed"]
        # The whole range keeps the findings without an observation time too.
        if isinstance(period, TimeRange) and not self._whole_period():
            rows = rows[period.holds(rows["observed_at"])]
        return rows[rows["severity"].isin(chosen["severity"])]

    def figure(self) -> Figure:
        return plots.findings_overview(self.selected(), title=self._title or "Findings")

    def caption_html(self) -> str:
        rows = self.selected()
        shown = rows.head(TABLE_ROWS)
        table = findings_rows_html(shown)
        more = len(rows) - len(shown)
        tail = f"<p>{more:,} more not shown</p>" if more > 0 else ""
        return f"<p>{plots.plural(len(rows), 'finding')} selected</p>{table}{tail}"


NO_QUEUE = "(no queue)"


def _queue_name(queue: Any) -> str:
    return queue if isinstance(queue, str) and queue else NO_QUEUE


def findings_rows_html(rows: pd.DataFrame) -> str:
    """Some findings as an HTML table: severity, check, queue, subject, bytes and their detail as
    ``key: value`` pairs; a missing value is an en dash, never ``None`` or ``nan``."""
    head = "".join(f"<th>{name}</th>" for name in _CAPTION_COLUMNS)
    body = []
    for row in rows.itertuples(index=False):
        cells = [
            row.severity,
            row.check,
            row.queue,
            row.subject,
            f"{int(row.bytes):,}" if not is_missing(row.bytes) else None,
            detail_of(row.detail),
        ]
        body.append(
            "<tr>" + "".join(f"<td>{html.escape(cell_text(c))}</td>" for c in cells) + "</tr>"
        )
    return f'<table class="mqf-findings"><tr>{head}</tr>{"".join(body)}</table>'


_CAPTION_COLUMNS = ("severity", "check", "queue", "subject", "bytes", "detail")


# --- pandas tables in notebooks ------------------------------------------------------------------

_DASHED_ROWS = 10_000  # a larger table is shown with pandas' own marks for missing values


def frame_html(frame: pd.DataFrame) -> str:
    """A pandas table as a notebook shows it (pandas' display options), each missing value (None,
    NaN, NaT, NA) an en dash instead of ``None``/``NaN``/``NaT``/``<NA>``."""
    shown = frame
    if len(frame) <= _DASHED_ROWS:
        columns = []
        for position in range(frame.shape[1]):
            column = frame.iloc[:, position]
            missing = column.map(is_missing).astype(bool)
            columns.append(
                column.astype(object).where(~missing, MISSING) if missing.any() else column
            )
        if columns:
            shown = pd.concat(columns, axis=1)
            shown.columns = frame.columns
    return str(
        shown.to_html(
            na_rep=MISSING,
            notebook=True,
            max_rows=pd.get_option("display.max_rows"),
            max_cols=pd.get_option("display.max_columns"),
            show_dimensions=pd.get_option("display.show_dimensions"),
        )
    )


def show_missing_as_dashes() -> None:
    """Make the running IPython kernel show every pandas table through `frame_html` (done when
    this module is imported in a notebook; nothing outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)


show_missing_as_dashes()
