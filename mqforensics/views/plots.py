"""Static figures of findings, James partitions, Cyrus sharing, segment garbage and plans.

Every function takes a small pandas table (`plot_data`) and returns a matplotlib `Figure` made
without pyplot's global state (so it is safe in threads, headless runs and the HTML report);
`png_bytes` and `data_uri` turn one into an image, and a notebook cell ending with one shows its
PNG (`NotebookFigure`). An empty table gives a figure that says there is nothing to show, never
an exception.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap

# A Figure made directly (not through pyplot) renders to PNG with no backend chosen, so these
# work headless and never change the backend a notebook user picked.
from matplotlib.figure import Figure

from mqforensics.units import plural

SEVERITY_COLOURS = {
    "info": "#8fb3d9",
    "warning": "#f0b429",
    "error": "#d64545",
    "critical": "#7a0d0d",
}
STATUS_COLOURS = {"garbage": "#d64545", "partly_garbage": "#f0b429", "live": "#3f9142"}
STATUS_LABELS = {
    "garbage": "garbage (reclaimable)",
    "partly_garbage": "holds the garbage end",
    "live": "live",
}
# Share of rows still live in a partition: 0 = all consumed (grey-blue) to 1 = all live (red).
LIVE_SHARE = LinearSegmentedColormap.from_list("live_share", ["#9fb8cf", "#f6e8a6", "#c0392b"])


class NotebookFigure(Figure):
    """A `Figure` a notebook cell shows as its picture whether or not matplotlib's inline backend
    is on: a PNG, and the same PNG in HTML with the figure's title as its alternative text, so
    a notebook exported (``jupyter nbconvert --to html``) or shared keeps it."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        encoded = base64.b64encode(png_bytes(self)).decode("ascii")
        title = figure_title(self)
        return {
            "image/png": encoded,
            "text/html": f'<img alt="{html.escape(title)}" style="max-width: 100%" '
            f'src="data:image/png;base64,{encoded}"/>',
            "text/plain": f"<figure: {title}>",
        }


def figure_title(fig: Figure) -> str:
    """The first line of a figure's title (its first axes' title), or ``figure``."""
    suptitle = getattr(fig, "_suptitle", None)
    titles = [suptitle.get_text()] if suptitle is not None else []
    titles += [ax.get_title() for ax in fig.axes]
    return next((t.splitlines()[0] for t in titles if t.strip()), "figure")


def _figure(width: float = 9.0, height: float = 4.5) -> Figure:
    return NotebookFigure(figsize=(width, height), dpi=100, layout="constrained")


def nothing_to_show(title: str, message: str = "nothing to show") -> Figure:
    fig = _figure(6, 2)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, color="#555")
    ax.set_axis_off()
    return fig


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count}"


def _count_axis(ax: Any, largest: float, label: str) -> None:
    """An x axis of whole counts from 0, with thousands separators and room for bar labels."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:,.0f}"))
    ax.set_xlim(0, max(1.0, float(largest)) * 1.15)
    ax.set_xlabel(label)


def _bytes_axis(ax: Any, values: pd.Series, label: str, nothing: str) -> None:
    """Bars of bytes from 0, the axis in B/KiB/MiB..., each bar labelled with its size; when every
    value is zero, no axis at all but `nothing` written in the panel."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    total = float(values.sum())
    if total <= 0:
        ax.text(0.5, 0.5, nothing, transform=ax.transAxes, ha="center", va="center",
                fontsize=10, color="#555")  # fmt: skip
        ax.set_xticks([])
        ax.set_xlim(0, 1)
        ax.set_xlabel(label)
        return
    ax.barh(values.index, values.values, color="#6c7a89")
    for y, value in enumerate(values.values):
        if value:
            ax.text(value, y, " " + _size(float(value)), va="center", fontsize=8)
    ax.xaxis.set_major_locator(MultipleLocator(_byte_step(float(values.max()))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: _tick_size(x)))
    ax.set_xlim(0, float(values.max()) * 1.45)
    ax.set_xlabel(label)


_NICE_STEPS = (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500)


def _byte_step(largest: float) -> float:
    """A tick step for a bytes axis up to `largest`: a round number of B, KiB, MiB... (about
    four ticks), so ticks read 2 KiB, 4 KiB, not 2.4 KiB, 4.9 KiB."""
    unit = 1.0
    while largest / unit >= 1024 and unit < 1024**4:
        unit *= 1024
    wanted = largest / unit / 4
    step = next((nice for nice in _NICE_STEPS if nice >= wanted), _NICE_STEPS[-1])
    return max(step * unit, 1.0)


def _tick_size(count: float) -> str:
    if count <= 0:
        return "0" if count == 0 else ""
    text = _size(count)
    return text.replace(".0 ", " ")


def _label_bars(ax: Any, totals: pd.Series) -> None:
    for y, value in enumerate(totals.values):
        ax.text(value, y, f" {int(value):,}", va="center", fontsize=8)


def size_text(count: float) -> str:
    """A number of bytes as people read it: ``870 B``, ``2.1 KiB``, ``3.4 GiB``."""
    return _size(count)


def findings_overview(table: pd.DataFrame, *, title: str = "Findings") -> Figure:
    """Findings per check stacked by severity (left) and the bytes they hold per check (right,
    no total: see `findings.verdict_line`): counted per check, so 100,000 findings draw as few
    bars as one; the legend sits below the axes."""
    if table.empty:
        return nothing_to_show(title, "no findings")
    counts = table.pivot_table(
        index="check", columns="severity", values="subject", aggfunc="size", fill_value=0
    )
    severities = [s for s in SEVERITY_COLOURS if s in counts.columns]
    counts = counts[severities]
    counts = counts.loc[counts.sum(axis=1).sort_values(kind="stable").index]
    held = table.groupby("check")["bytes"].sum().reindex(counts.index).fillna(0)
    fig = _figure(10, 1.6 + 0.38 * len(counts))
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    base = pd.Series(0, index=counts.index)
    for severity in severities:
        left.barh(counts.index, counts[severity], left=base, label=severity,
                  color=SEVERITY_COLOURS[severity])  # fmt: skip
        base = base + counts[severity]
    _label_bars(left, base)
    _count_axis(left, float(base.max()), "findings")
    left.set_ylim(-0.6, len(counts) - 0.4)
    left.set_title(f"{title}: {plural(len(table), 'finding')}")
    fig.legend(title="severity", loc="outside lower center", ncol=len(severities), fontsize=8)
    # Per check, no total: an object two checks found is in both bars; the verdict
    # (`findings.verdict_line`) counts each stored object once.
    right.set_title("bytes held per check" if float(held.sum()) > 0 else "no bytes held")
    _bytes_axis(right, held, "bytes held", "these findings hold no bytes")
    return fig


def slice_bucket_heatmap(
    cells: pd.DataFrame,
    *,
    queue: str,
    browse_start: Any = None,
    content_start: Any = None,
    note: str | None = None,
) -> Figure:
    """One cell per (slice, bucket) partition on a time axis, coloured by the share of its rows
    still live; blank where no partition exists. A cell spans from its slice start to the next
    slice start of the queue (slice windows may change over the configuration history).
    browseStart and contentStart are vertical lines."""
    import matplotlib.dates as mdates
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    title = f"Queue {queue}: rows live vs consumed per slice x bucket"
    if cells.empty:
        return nothing_to_show(title, "no rows in this range")
    starts = sorted(pd.Timestamp(t) for t in cells["timerangestart"].unique())
    steps = [b - a for a, b in itertools.pairwise(starts)]
    smallest = min(steps) if steps else pd.Timedelta(hours=1)
    width = {t: min(step, smallest * 4) for t, step in zip(starts, steps, strict=False)}
    width[starts[-1]] = smallest
    buckets = sorted(int(b) for b in cells["bucketid"].unique())
    row_of = {b: i for i, b in enumerate(buckets)}
    fig = _figure(12, 3.4 + 0.4 * len(buckets))
    ax = fig.add_subplot()
    norm = Normalize(0, 1)
    annotate = len(cells) <= 60
    for row in cells.itertuples(index=False):
        start = pd.Timestamp(row.timerangestart)
        total = int(row.live) + int(row.consumed)
        share = row.live / total if total else 0.0
        left = mdates.date2num(start)
        span = mdates.date2num(start + width[start]) - left
        y = row_of[int(row.bucketid)]
        ax.broken_barh([(left, span)], (y - 0.45, 0.9), facecolors=LIVE_SHARE(norm(share)),
                       edgecolors="white", linewidth=0.3)  # fmt: skip
        if annotate:
            ax.text(left + span / 2, y, f"{row.live}/{row.consumed}", ha="center",
                    va="center", fontsize=6, rotation=90)  # fmt: skip
    fig.colorbar(ScalarMappable(norm=norm, cmap=LIVE_SHARE), ax=ax, fraction=0.03,
                 label="share of rows still live")  # fmt: skip
    edges = [starts[0], starts[-1] + width[starts[-1]]]
    for label, instant, colour, style in (
        ("browseStart", browse_start, "#1f4e79", "-"),
        ("contentStart", content_start, "#6a1b9a", "--"),
    ):
        if instant is None:
            continue
        stamp = pd.Timestamp(instant)
        edges.append(stamp)
        ax.axvline(mdates.date2num(stamp), color=colour, linestyle=style, linewidth=2,
                   label=f"{label} {stamp:%Y-%m-%d %H:%M}")  # fmt: skip
    margin = (max(edges) - min(edges)) * 0.02
    ax.set_xlim(mdates.date2num(min(edges) - margin), mdates.date2num(max(edges) + margin))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=12))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_yticks(range(len(buckets)))
    ax.set_yticklabels([str(b) for b in buckets])
    ax.set_ylim(-0.6, len(buckets) - 0.4)
    ax.set_xlabel("slice start (timerangestart, UTC)")
    ax.set_ylabel("bucket")
    lines = [title, f"{len(cells):,} partitions, {len(starts):,} slices"]
    if annotate:
        lines[-1] += "; cells: live/consumed rows"
    if note:
        lines.append(note)
    ax.set_title("\n".join(lines))
    if browse_start is not None or content_start is not None:
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)
    return fig


def sharing_graph(edges: pd.DataFrame, *, focus: str | None = None) -> Figure:
    """Owners → grantees on a circle, each arrow labelled with the rights granted; with `focus`,
    only that identity's edges (what it shares and what is shared with it)."""
    title = "Who can see whose mailboxes" + (f": {focus}" if focus else "")
    if focus:
        edges = edges[(edges["owner"] == focus) | (edges["grantee"] == focus)]
    if edges.empty:
        return nothing_to_show(title, "no sharing")
    names = sorted(set(edges["owner"]) | set(edges["grantee"]))
    angle = {n: 2 * math.pi * i / len(names) for i, n in enumerate(names)}
    where = {n: (math.cos(a), math.sin(a)) for n, a in angle.items()}
    fig = _figure(8, 7)
    ax = fig.add_subplot()
    for row in edges.itertuples(index=False):
        (x0, y0), (x1, y1) = where[row.owner], where[row.grantee]
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops={"arrowstyle": "-|>", "color": "#6c7a89", "shrinkA": 14,
                                "shrinkB": 14, "connectionstyle": "arc3,rad=0.12"})  # fmt: skip
        label = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{row.rights} ({row.mailboxes})",
                fontsize=7, ha="center", va="center", color="#333", bbox=label)  # fmt: skip
    owners = set(edges["owner"])
    for name, (x, y) in where.items():
        colour = "#1f4e79" if name in owners else "#3f9142"
        ax.scatter([x], [y], s=260, color=colour, zorder=3)
        ax.text(x * 1.16, y * 1.16, name, ha="center", va="center", fontsize=8)
    ax.scatter([], [], color="#1f4e79", label="owner (shares)")
    ax.scatter([], [], color="#3f9142", label="grantee only")
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(title + "\narrows: owner → grantee, labelled rights (mailboxes)")
    ax.set_xlim(-1.5, 1.5)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return fig


def garbage_timeline(segments: pd.DataFrame, *, queue: str) -> Figure:
    """A queue's segment files in write order: bar height their bytes, colour what the restart
    procedure makes of them; the restart segment and the garbage end are marked."""
    title = f"Segments of {queue}"
    rows = segments[segments["queue"] == queue] if not segments.empty else segments
    if rows.empty:
        return nothing_to_show(title, "no segment files")
    rows = rows.sort_values("segment")
    reclaimable = int(rows.loc[rows["status"] == "garbage", "size"].sum())
    # Wide enough for the title: a queue is a directory's whole path.
    fig = _figure(max(10.0, min(16, 4 + 0.3 * len(rows))), 4.5)
    ax = fig.add_subplot()
    x = list(range(len(rows)))
    for status, colour in STATUS_COLOURS.items():
        chosen = [i for i, s in zip(x, rows["status"], strict=True) if s == status]
        if chosen:  # an empty bar set would still get a legend entry, in the default colour
            ax.bar(chosen, rows["size"].iloc[chosen], color=colour, label=STATUS_LABELS[status])
    restart = [i for i, r in zip(x, rows["restart"], strict=True) if r]
    for i in restart:
        ax.axvline(i - 0.5, color="#1f4e79", linestyle="--", linewidth=2,
                   label="saved restart position (segment start)")  # fmt: skip
    ends = rows["garbage_end_segment"].dropna()
    if not ends.empty:
        positions = [i for i, s in zip(x, rows["segment"], strict=True) if s == ends.iloc[0]]
        if positions:
            ax.axvline(positions[0] - 0.5, color="#7a0d0d", linewidth=2, label="garbage end")
    labels = []
    for row in rows.itertuples(index=False):
        when = "" if pd.isna(row.first_record) else f"\n{row.first_record:%m-%d %H:%M}"
        labels.append(f"{int(row.segment)}{when}")
    step = max(1, len(rows) // 20)
    ax.set_xticks(x[::step])
    ax.set_xticklabels(labels[::step], fontsize=7)
    ax.set_xlabel("segment (and its first record, UTC), in write order")
    ax.set_ylabel("bytes")
    garbage = plural(int((rows["status"] == "garbage").sum()), "garbage segment")
    ax.set_title(f"{title}: {_size(reclaimable)} reclaimable in {garbage}")
    fig.legend(fontsize=8, loc="outside lower center", ncol=3)  # below the axes, not on them
    return fig


def plan_overview(actions: pd.DataFrame, *, title: str = "Plan") -> Figure:
    """A plan's actions per kind, stacked by rule (left), and the bytes they free (right)."""
    if actions.empty:
        return nothing_to_show(title, "the plan deletes nothing")
    counts = actions.pivot_table(
        index="kind", columns="rule", values="bytes", aggfunc="size", fill_value=0
    )
    freed = actions.groupby("kind")["bytes"].sum().reindex(counts.index).fillna(0)
    fig = _figure(10, 1.8 + 0.45 * len(counts))
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    base = pd.Series(0, index=counts.index)
    colours = matplotlib.colormaps["tab10"]
    for i, rule in enumerate(counts.columns):
        left.barh(counts.index, counts[rule], left=base, label=rule, color=colours(i % 10))
        base = base + counts[rule]
    _label_bars(left, base)
    _count_axis(left, float(base.max()), "actions")
    left.set_ylim(-0.6, len(counts) - 0.4)
    left.set_title(f"{title}: {plural(len(actions), 'action')}")
    fig.legend(title="rule", loc="outside lower center", ncol=min(len(counts.columns), 4),
               fontsize=8)  # fmt: skip
    total = float(freed.sum())
    right.set_title(f"{_size(total)} freed" if total > 0 else "no bytes freed")
    _bytes_axis(right, freed, "bytes", "these actions free no bytes")
    return fig


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return buffer.getvalue()


def data_uri(fig: Figure, dpi: int = 100) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (self-contained HTML)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig, dpi)).decode("ascii")
