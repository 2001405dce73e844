"""What the James notebook draws: a queue's partitions (slice x bucket), live versus consumed,
with browseStart and contentStart, and the explorer that picks the queue and the slices.

Reductions are done in Spark and collected as small pandas tables (a heatmap keeps at most
`max_slices` slices); the figures come from `mqforensics.views.plots`. Nothing here decides
what is wrong (the checks do). Importing this module imports neither Spark, pandas nor
ipywidgets (the system's spec imports it): `SliceHeatmapExplorer` is built on first use.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mqforensics.systems.james.frames import JamesState


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)  # type: ignore[no-any-return]
    return value.astimezone(dt.UTC)  # type: ignore[no-any-return]


def queues(state: JamesState) -> list[str]:
    """Every queue of the state (those with rows and those with only a browseStart), the one
    with the most rows first, then by name."""
    from pyspark.sql import functions as F

    rows = state.entries.groupBy("queuename").agg(F.count(F.lit(1)).alias("n"))
    names = state.browse_start.select("queuename").join(rows, "queuename", "full")
    ranked = names.select("queuename", F.coalesce("n", F.lit(0)).alias("n")).collect()
    return [r.queuename for r in sorted(ranked, key=lambda r: (-r.n, r.queuename))]


def marks(state: JamesState, queue: str) -> dict[str, dt.datetime | None]:
    """The queue's ``browse_start`` and ``content_start`` (UTC), None when it has none."""
    browse = state.browse_start.where(state.browse_start.queuename == queue).first()
    content = state.content_start.where(state.content_start.queuename == queue).first()
    return {
        "browse_start": _utc(browse.browsestart) if browse is not None else None,
        "content_start": _utc(content.contentstart) if content is not None else None,
    }


def _empty_cells() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "timerangestart": pd.Series([], dtype="datetime64[ns, UTC]"),
            "bucketid": pd.Series([], dtype="int64"),
            "live": pd.Series([], dtype="int64"),
            "consumed": pd.Series([], dtype="int64"),
        }
    )


def slice_cells(
    state: JamesState,
    queue: str,
    *,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    max_slices: int = 2000,
) -> pd.DataFrame:
    """Rows still live and consumed per (slice, bucket) of one queue's ``enqueuedMails``: one
    cell per Cassandra partition. Only slices in [`start`, `end`] are counted; when more than
    `max_slices` remain the newest are kept and ``attrs["note"]`` says how many were left out."""
    import pandas as pd
    from pyspark.sql import functions as F

    from mqforensics.systems.james.context import classify

    rows = classify(state).where(F.col("queuename") == queue)
    if start is not None:
        rows = rows.where(F.col("timerangestart") >= F.lit(_utc(start)))
    if end is not None:
        rows = rows.where(F.col("timerangestart") <= F.lit(_utc(end)))
    cells = rows.groupBy("timerangestart", "bucketid").agg(
        F.sum(F.when(F.col("consumed"), 0).otherwise(1)).alias("live"),
        F.sum(F.when(F.col("consumed"), 1).otherwise(0)).alias("consumed"),
    )
    slices = cells.select("timerangestart").distinct()
    total = slices.count()
    note = ""
    if total > max_slices:
        newest = slices.orderBy(F.col("timerangestart").desc()).limit(max_slices)
        cells = cells.join(newest, "timerangestart")
        note = f"the newest {max_slices} of {total} slices shown"
    table: pd.DataFrame = cells.orderBy("timerangestart", "bucketid").toPandas()  # type: ignore[assignment]
    if table.empty:
        table = _empty_cells()
    else:
        table["timerangestart"] = pd.to_datetime(table["timerangestart"], utc=True)
        for column in ("bucketid", "live", "consumed"):
            table[column] = table[column].astype("int64")
    table.attrs["note"] = note
    table.attrs["queue"] = queue
    return table


def slice_range(state: JamesState, queue: str) -> tuple[dt.datetime, dt.datetime] | None:
    """The first and last slice start of the queue's rows (None when it has no row)."""
    from pyspark.sql import functions as F

    row = (
        state.entries.where(F.col("queuename") == queue)
        .agg(F.min("timerangestart").alias("lo"), F.max("timerangestart").alias("hi"))
        .first()
    )
    if row is None or row.lo is None:
        return None
    return _utc(row.lo), _utc(row.hi)  # type: ignore[return-value]


def _slice_heatmap_explorer() -> type:
    """`SliceHeatmapExplorer`, a `widgets.Explorer` (ipywidgets imported here, on first use)."""
    from mqforensics.views import plots, widgets

    class SliceHeatmapExplorer(widgets.Explorer):  # type: ignore[misc]
        """One James queue's partitions (slice x bucket), live versus consumed, with
        browseStart and contentStart; pick the queue and the slice range."""

        def __init__(
            self, state: JamesState, *, queue: str | None = None, max_slices: int = 2000
        ) -> None:
            self.state = state
            self.max_slices = max_slices
            self.queue = widgets.dropdown(queues(state), "queue", queue)
            self.period = widgets.range_slider(self._slices(self.queue.value), "slices")
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
            fresh = widgets.range_slider(self._slices(self.queue.value), "slices")
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

        def figure(self) -> Any:
            chosen = self.selection()
            queue = chosen["queue"]
            if queue is None:
                return plots.nothing_to_show("Slices x buckets", "no queue")
            start, end = chosen["slices"]
            cells = slice_cells(self.state, queue, start=start, end=end, max_slices=self.max_slices)
            return plots.slice_bucket_heatmap(
                cells, queue=queue, note=cells.attrs.get("note") or None,
                **marks(self.state, queue),
            )  # fmt: skip

    SliceHeatmapExplorer.__module__ = __name__
    return SliceHeatmapExplorer


def __getattr__(name: str) -> Any:
    """``SliceHeatmapExplorer`` is made on first use, so that importing this module (the spec
    does) imports no ipywidgets."""
    if name == "SliceHeatmapExplorer":
        cls = _slice_heatmap_explorer()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
