"""The log-structured queue's notebook hooks (``SPEC.views``): the segments table the garbage
timeline draws, and its explorer.

Importing this module imports neither Spark, pandas nor ipywidgets: `logqueue_segments` imports
them when it runs, and `GarbageTimelineExplorer` (a `mqforensics.views.widgets.Explorer`) is
built on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mqforensics.systems.logqueue.frames import LogQueueState

SEGMENT_COLUMNS = [
    "queue", "segment", "file", "size", "first_record", "last_record", "status", "restart",
    "garbage_end_segment", "garbage_end_offset", "saved_suffix_segment", "saved_suffix_offset",
]  # fmt: skip


def logqueue_segments(state: LogQueueState) -> pd.DataFrame:
    """One row per segment file of each queue: its size, the time of its first and last record
    (UTC; NaT when it holds none readable), and its ``status``: ``garbage`` (wholly before the
    garbage end: reclaimable), ``partly_garbage`` (holds the garbage end) or ``live``; ``restart``
    marks the segment of the saved restart position (the working suffix's start)."""
    import pandas as pd
    from pyspark.sql import functions as F

    queues = state.queues.select(
        "queue",
        "garbage_end_segment",
        "garbage_end_offset",
        "saved_suffix_segment",
        "saved_suffix_offset",
        F.explode("segments").alias("s"),
    ).select(
        "queue",
        F.col("s.segment").alias("segment"),
        F.col("s.file").alias("file"),
        F.col("s.size").alias("size"),
        "garbage_end_segment",
        "garbage_end_offset",
        "saved_suffix_segment",
        "saved_suffix_offset",
    )
    times = state.records.groupBy("queue", "segment").agg(
        F.min("time_us").alias("first_us"), F.max("time_us").alias("last_us")
    )
    joined = queues.join(times, ["queue", "segment"], "left").orderBy("queue", "segment")
    table: pd.DataFrame = joined.toPandas()  # type: ignore[assignment]
    if table.empty:
        return pd.DataFrame(columns=SEGMENT_COLUMNS)
    table["first_record"] = pd.to_datetime(table["first_us"], unit="us", utc=True)
    table["last_record"] = pd.to_datetime(table["last_us"], unit="us", utc=True)
    end = table["garbage_end_segment"]
    table["status"] = "live"
    holds_end = (table["segment"] == end) & (table["garbage_end_offset"] > 0)
    table.loc[holds_end, "status"] = "partly_garbage"
    table.loc[table["segment"] < end, "status"] = "garbage"
    table["restart"] = table["segment"] == table["saved_suffix_segment"]
    return table[SEGMENT_COLUMNS].reset_index(drop=True)


def _explorer_class() -> type:
    from mqforensics.views import plots, widgets

    class GarbageTimelineExplorer(widgets.Explorer):
        """A queue's segments along the log: garbage, the garbage end, the restart position."""

        def __init__(self, state: LogQueueState) -> None:
            self.segments = logqueue_segments(state)
            queues = sorted(set(self.segments["queue"])) if not self.segments.empty else []
            self.queue = widgets.dropdown(queues, "queue")
            super().__init__([self.queue], "Segment garbage timeline")

        def selection(self) -> dict[str, Any]:
            return {"queue": self.queue.value}

        def figure(self) -> Any:
            queue = self.queue.value
            if queue is None:
                return plots.nothing_to_show("Segments", "no queue")
            return plots.garbage_timeline(self.segments, queue=queue)

        def caption_html(self) -> str:
            rows = self.segments[self.segments["queue"] == self.queue.value]
            summary = rows.groupby("status")["size"].agg(["count", "sum"]).reset_index()
            summary.columns = ["status", "segments", "bytes"]
            return str(summary.to_html(index=False, border=0))

    GarbageTimelineExplorer.__module__ = __name__
    return GarbageTimelineExplorer


_built: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    """``GarbageTimelineExplorer``, built (importing ipywidgets) on first use."""
    if name == "GarbageTimelineExplorer":
        if name not in _built:
            _built[name] = _explorer_class()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
