"""What the James notebook draws (`systems/james/views.py`), counted in Spark, checked against
counts made here from the raw files; the slices x buckets explorer."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mqforensics.systems.james import views

BUNDLED = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"
UTC = dt.UTC


@pytest.fixture(scope="module")
def james(spark):
    from mqforensics.systems.james.snapshot import read_snapshot

    return read_snapshot(spark, BUNDLED)


def _direct_cells(queue: str) -> dict[tuple[dt.datetime, int], tuple[int, int]]:
    entries = pq.read_table(BUNDLED / "enqueuedmailsv4.parquet").to_pylist()
    deleted = {
        (r["queuename"], r["enqueueid"])
        for r in pq.read_table(BUNDLED / "deletedmailsv2.parquet").to_pylist()
    }
    live: Counter = Counter()
    consumed: Counter = Counter()
    for row in entries:
        if row["queuename"] != queue:
            continue
        key = (row["timerangestart"].astimezone(UTC), row["bucketid"])
        if (queue, row["enqueueid"]) in deleted:
            consumed[key] += 1
        else:
            live[key] += 1
    return {k: (live[k], consumed[k]) for k in set(live) | set(consumed)}


def test_heatmap_cells_are_the_partitions_live_and_consumed_rows(james) -> None:
    cells = views.slice_cells(james, "spool")
    found = {
        (r.timerangestart.to_pydatetime(), r.bucketid): (r.live, r.consumed)
        for r in cells.itertuples()
    }
    assert found == _direct_cells("spool")
    assert cells.attrs["note"] == ""
    # ANOMALIES.md #10: a partition with consumed rows only, before contentStart.
    assert found[(dt.datetime(2026, 10, 26, 4, tzinfo=UTC), 0)][0] == 0
    assert found[(dt.datetime(2026, 10, 26, 4, tzinfo=UTC), 0)][1] > 0


def test_heatmap_range_and_bound(james) -> None:
    start, end = dt.datetime(2026, 11, 1, tzinfo=UTC), dt.datetime(2026, 11, 2, tzinfo=UTC)
    cells = views.slice_cells(james, "spool", start=start, end=end)
    expected = {k for k in _direct_cells("spool") if start <= k[0] <= end}
    assert {(r.timerangestart.to_pydatetime(), r.bucketid) for r in cells.itertuples()} == expected
    slices = sorted({k[0] for k in _direct_cells("spool")})
    bounded = views.slice_cells(james, "spool", max_slices=5)
    assert sorted({t.to_pydatetime() for t in bounded["timerangestart"]}) == slices[-5:]
    assert bounded.attrs["note"] == f"the newest 5 of {len(slices)} slices shown"
    empty = views.slice_cells(james, "no-such-queue")
    assert empty.empty and list(empty.columns) == ["timerangestart", "bucketid", "live", "consumed"]


def test_marks_queues_and_slice_range(james) -> None:
    assert views.marks(james, "spool") == {
        "browse_start": dt.datetime(2026, 10, 26, 9, tzinfo=UTC),
        "content_start": dt.datetime(2026, 10, 26, 6, tzinfo=UTC),
    }
    assert views.marks(james, "nothing") == {"browse_start": None, "content_start": None}
    rows = Counter(
        r["queuename"] for r in pq.read_table(BUNDLED / "enqueuedmailsv4.parquet").to_pylist()
    )
    assert views.queues(james) == sorted(rows, key=lambda q: (-rows[q], q))
    slices = sorted({k[0] for k in _direct_cells("spool")})
    assert views.slice_range(james, "spool") == (slices[0], slices[-1])
    assert views.slice_range(james, "nothing") is None


def test_heatmap_explorer_follows_the_queue_and_computes_each_view_once(james, monkeypatch):
    calls: list[tuple] = []
    real = views.slice_cells

    def counted(state, queue, **kwargs):
        calls.append((queue, kwargs["start"], kwargs["end"]))
        return real(state, queue, **kwargs)

    monkeypatch.setattr(views, "slice_cells", counted)
    explorer = views.SliceHeatmapExplorer(james)
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


def test_the_spec_imports_no_heavy_module():
    """The registry imports every system's spec: the James views it names import neither
    Spark, pandas nor ipywidgets until used."""
    import subprocess

    code = (
        "import sys; import mqforensics.systems.james.spec; "
        "print(sorted(m for m in ('pyspark', 'pandas', 'ipywidgets', 'cassandra', 'boto3') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
