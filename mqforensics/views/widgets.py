"""ipywidgets explorers the notebooks use: pickers over findings, James partitions, Cyrus sharing
and segment garbage, each redrawing a static figure from `plots`.

An explorer is a `VBox` of its pickers and an `Image` of the current figure. Displayed in a
notebook it writes two outputs: the widget, then its static fallback (`Explorer.fallback_bundle`:
the figure as ``image/png`` and as HTML with the table under it, and a line saying to run the
cells again to explore). Widget outputs need JavaScript and the widget state: a notebook
reopened without them, or exported by a stock ``jupyter nbconvert --to html`` (whose widget
manager loads from a CDN), shows the fallback instead; where the widget does render (a live
JupyterLab, an export online) a style rule in the fallback hides it, all but the line to run the
cells again under a widget drawn from saved state with no kernel (`FALLBACK_STYLE`). Each
selection's figure is computed once (Spark work included) and kept, so moving a picker back
costs nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets
import numpy as np
import pandas as pd

from mqforensics.findings import SEVERITIES
from mqforensics.views import plots
from mqforensics.views.plot_data import MISSING, cell_text, detail_lines, is_missing

if TYPE_CHECKING:
    from matplotlib.figure import Figure


ALL = "(all)"
TABLE_ROWS = 200
PAGE_ROWS = 15  # a longer table scrolls in a box about this many rows high
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RERUN_NOTE = (
    "The explorer as its cell left it, not connected to a kernel: run the notebook's cells again "
    "to explore interactively."
)
# The fallback right after an explorer that rendered (its VBox view, in JupyterLab and Notebook 7,
# nbconvert's lab and classic templates): hidden when the explorer is live; when it is drawn from
# saved widget state with no kernel behind it (ipywidgets marks it disconnected), only the line
# saying to run the cells again shows. Where the explorer did not render, all of it shows.
_RENDERED = ("widget-vbox:not(.jupyter-widgets-disconnected)", "widget-vbox")
FALLBACK_STYLE = (
    "<style>"
    f".jp-OutputArea-child:has(.{_RENDERED[0]}) + .jp-OutputArea-child:has(.mqf-fallback), "
    f".output_area:has(.{_RENDERED[0]}) + .output_area:has(.mqf-fallback), "
    f".jp-OutputArea-child:has(.{_RENDERED[1]}) + .jp-OutputArea-child .mqf-static, "
    f".output_area:has(.{_RENDERED[1]}) + .output_area .mqf-static {{display: none;}}"
    "</style>"
)


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
        """The live widget (ipywidgets' view) and a one-line text of what it shows."""
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = f"{type(self).__name__}({self._chosen_text()})"
        return bundle

    def static_html(self) -> str:
        """The current view without JavaScript: its title and selection, the figure (PNG) and
        the table under it, then the line saying to run the cells again."""
        png, caption = self._render()
        encoded = base64.b64encode(png).decode("ascii")
        alt = html.escape(self._title or type(self).__name__)
        rerun = f'<p class="mqf-rerun"><small>{RERUN_NOTE}</small></p>'
        return (
            f'<div class="mqf-explorer mqf-fallback">{FALLBACK_STYLE}<div class="mqf-static">'
            f"<p><b>{html.escape(self._title)}</b> "
            f"<small>({html.escape(self._chosen_text())})</small></p>"
            f'<img alt="{alt}" style="max-width: 100%" src="data:image/png;base64,{encoded}"/>'
            f"{caption}</div>{rerun}</div>"
        )

    def fallback_bundle(self) -> dict[str, Any]:
        """The output shown where the widget cannot be: `static_html`, the figure alone as
        ``image/png`` (for viewers without HTML) and a line of text."""
        return {
            "text/html": self.static_html(),
            "image/png": base64.b64encode(self.png()).decode("ascii"),
            "text/plain": f"{self._title or type(self).__name__} ({self._chosen_text()}): "
            f"{RERUN_NOTE}",
        }

    def _ipython_display_(self) -> None:
        """Displayed (a cell's value, or ``display(explorer)``): the widget, then its static
        fallback as a second output (see the module's doc)."""
        from IPython.display import display

        widget, fallback = self._repr_mimebundle_(), self.fallback_bundle()
        model = (widget.get(WIDGET_VIEW) or {}).get("model_id")
        display(widget, raw=True)
        display(fallback, raw=True, metadata={"mqforensics": {"fallback_of": model}})


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
    """Some findings as an HTML table (`table_html`): severity, check, queue, the object each is
    about (the finding's ``subject``), bytes and its detail, one ``key: value`` line per key."""
    shown = pd.DataFrame(
        {
            "severity": rows["severity"],
            "check": rows["check"],
            "queue": rows["queue"],
            "object": rows["subject"],
            "bytes": rows["bytes"],
            "detail": rows["detail"].map(detail_lines),
        },
        columns=list(_CAPTION_COLUMNS),
    )
    return table_html(shown, classes="mqf-findings")


_CAPTION_COLUMNS = ("severity", "check", "queue", "object", "bytes", "detail")
_CELL = "padding: 0.25em 0.5em; vertical-align: top; "  # a widget's HTML has no table style
_LEFT = _CELL + "text-align: left; white-space: normal; overflow-wrap: break-word"
_RIGHT = _CELL + "text-align: right; white-space: nowrap"
# A column of long text (ids, paths, details) may break anywhere, so the table fits its width.
_LONG = _CELL + "text-align: left; white-space: normal; overflow-wrap: anywhere; min-width: 10em"
_HEAD = "position: sticky; top: 0; background: var(--jp-layout-color0, #fff); "
_LONG_TEXT = 30  # characters


def table_html(frame: pd.DataFrame, *, classes: str = "mqf-table") -> str:
    """`frame`'s columns (not its index) as an HTML table styled inline, so it reads the same in
    a live widget, an exported notebook and a viewer that drops style sheets: text left-aligned
    and wrapped (a column of long text breaking anywhere, so the table fits the page's width),
    numbers right-aligned (whole ones with thousands separators), a list one item per line, a
    missing value an en dash (never ``None`` or ``nan``). Over `PAGE_ROWS` rows it scrolls in a
    box that high, its header kept in view."""
    styles = [_column_style(frame.iloc[:, i]) for i in range(frame.shape[1])]
    head = "".join(
        f'<th style="{_HEAD}{style}">{html.escape(str(name))}</th>'
        for name, style in zip(frame.columns, styles, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td style="{style}">{_cell_html(value)}</td>'
            for value, style in zip(values, styles, strict=True)
        )
        + "</tr>"
        for values in frame.itertuples(index=False, name=None)
    )
    # JupyterLab's and nbconvert's style sheets lay tables out fixed: equal columns at 100%.
    width = "width: 100%; " if _LONG in styles else ""
    width = f' style="{width}table-layout: auto"'
    table = (
        f'<table class="{html.escape(classes)}"{width}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )
    if len(frame) <= PAGE_ROWS:
        return table
    return (
        f'<div class="mqf-scroll" style="max-height: {2 * PAGE_ROWS + 3}em; overflow: auto">'
        f"{table}</div>"
    )


def _column_style(column: pd.Series) -> str:
    if _is_number_column(column):
        return _RIGHT
    longest = max((len(_cell_html(value)) for value in column), default=0)
    return _LONG if longest > _LONG_TEXT else _LEFT


def _is_number_column(column: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column))


def _cell_html(value: Any) -> str:
    if isinstance(value, list):
        return "<br>".join(html.escape(str(line)) for line in value) if value else MISSING
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return f"{int(value):,}"
    return html.escape(cell_text(value))


# --- pandas tables in notebooks ------------------------------------------------------------------

_DASHED_ROWS = 10_000  # a larger table is shown with pandas' own marks for missing values


def frame_html(frame: pd.DataFrame) -> str:
    """A pandas table as a notebook shows it (pandas' display options for rows and columns) and
    as people read it: each missing value (None, NaN, NaT, NA) an en dash instead of
    ``None``/``NaN``/``NaT``/``<NA>``; text columns (and a text index) left-aligned and wrapped,
    never cut at ``display.max_colwidth`` characters; a column of mappings, or a ``detail``
    column of JSON objects (a finding's), one ``key: value`` line per key. Numbers stay
    right-aligned."""
    shown = frame
    if len(frame) <= _DASHED_ROWS:
        columns = []
        for position in range(frame.shape[1]):
            column = _readable(frame.columns[position], frame.iloc[:, position])
            missing = column.map(is_missing).astype(bool)
            columns.append(
                column.astype(object).where(~missing, MISSING) if missing.any() else column
            )
        if columns:
            shown = pd.concat(columns, axis=1)
            shown.columns = frame.columns
    ident = f"mqf-{uuid.uuid4().hex[:12]}"
    with pd.option_context("display.max_colwidth", None):
        table = shown.to_html(
            na_rep=MISSING,
            notebook=True,
            table_id=ident,
            max_rows=pd.get_option("display.max_rows"),
            max_cols=pd.get_option("display.max_columns"),
            show_dimensions=pd.get_option("display.show_dimensions"),
        )
    return _frame_style(ident, frame) + str(table).replace(_LINE, "<br>")


_PROSE = 60  # a text column with values longer than this (characters) gets room to wrap them
_LINE = "\u2028"  # between a cell's lines (pandas writes a newline as ``\n``): made ``<br>``


def _readable(name: Any, column: pd.Series) -> pd.Series:
    """`column` with each mapping (or, in a column named ``detail``, each JSON object) written as
    one ``key: value`` line per key; any other column as it is."""
    if column.dtype != object and not pd.api.types.is_string_dtype(column):
        return column
    present = [value for value in column if not is_missing(value)]
    if not present or not all(
        isinstance(value, dict)
        or (name == "detail" and isinstance(value, str) and value.lstrip().startswith("{"))
        for value in present
    ):
        return column
    return column.map(lambda value: value if is_missing(value) else _LINE.join(detail_lines(value)))


def _frame_style(ident: str, frame: pd.DataFrame) -> str:
    """The style rules of `frame`'s table (``id`` `ident`): which cells are text, by the position
    pandas shows each column at (`_shown_columns`)."""
    rules = [f"#{ident} td, #{ident} th {{vertical-align: top;}}"]
    levels = frame.index.nlevels
    if not all(_is_number_column(frame.index.get_level_values(i)) for i in range(levels)):
        rules.append(f"#{ident} tbody th {{text-align: left;}}")
    flat = not isinstance(frame.columns, pd.MultiIndex)
    for place, position in enumerate(_shown_columns(frame.shape[1]), start=1):
        if position is None:
            continue
        column = frame.iloc[:, position]
        if _is_number_column(column) or pd.api.types.is_datetime64_any_dtype(column):
            continue
        texts = column.head(_DASHED_ROWS).map(lambda v: "" if is_missing(v) else str(v))
        wrap = "white-space: normal; overflow-wrap: break-word;"
        if not texts.str.contains(r"\s").any():  # ids, paths, states: whole, never broken
            wrap = "white-space: nowrap;"
        elif (texts.str.len().max() or 0) > _PROSE:  # prose: room to wrap in lines, not words
            wrap += " min-width: 12em; max-width: 48em;"
        rules.append(f"#{ident} td:nth-of-type({place}) {{text-align: left; {wrap}}}")
        if flat:
            rules.append(
                f"#{ident} thead tr:first-child th:nth-of-type({place + levels}) "
                f"{{text-align: left;}}"
            )
    return "<style>" + " ".join(rules) + "</style>"


def _shown_columns(count: int) -> list[int | None]:
    """The column positions a pandas HTML table shows, in order, None for the ``...`` column it
    puts in the middle of one with more columns than ``display.max_columns``."""
    most = pd.get_option("display.max_columns")
    if not most or count <= most:
        return list(range(count))
    half = most // 2
    if half < 1:
        return list(range(most))
    return [*range(half), None, *range(count - half, count)]


def readable_tables() -> None:
    """Make the running IPython kernel show every pandas table through `frame_html` (done when
    this module is imported in a notebook; nothing outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)


readable_tables()
