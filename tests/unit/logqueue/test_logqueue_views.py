"""The logqueue notebook hooks (``SPEC.views``): the segments table of the garbage timeline and
its explorer, on the bundled sample."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from mqforensics import systems
from mqforensics.systems.logqueue import views
from mqforensics.systems.logqueue.checks import run_checks
from mqforensics.systems.logqueue.frames import read_state
from mqforensics.systems.logqueue.options import Settings
from mqforensics.systems.logqueue.sample import SAMPLE


@pytest.fixture(scope="module")
def state(spark):
    return read_state(spark, [SAMPLE / "outbound", SAMPLE / "inbound"])


def test_the_spec_names_this_module_and_importing_it_imports_no_spark() -> None:
    assert systems.get("logqueue").views is views
    code = (
        "import sys; import mqforensics.systems.logqueue.spec; "
        "print(sorted(m for m in ('pyspark', 'pandas', 'ipywidgets') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_segment_status_follows_the_garbage_end(state) -> None:
    segments = views.logqueue_segments(state)
    for queue in state.queues.collect():
        rows = segments[segments["queue"] == queue.queue]
        files = {s.segment: s.size for s in queue.segments}
        assert dict(zip(rows["segment"], rows["size"], strict=True)) == files
        end = queue.garbage_end_segment
        for row in rows.itertuples():
            wanted = "garbage" if row.segment < end else "live"
            if row.segment == end and queue.garbage_end_offset > 0:
                wanted = "partly_garbage"
            assert row.status == wanted, row
        assert rows["restart"].sum() == (queue.saved_suffix_segment in files)
    # The garbage segments are exactly the files the unreclaimed_segment check reports.
    meta = json.loads((SAMPLE / "sample.json").read_text())
    as_of = dt.datetime.fromisoformat(meta["as_of"].replace("Z", "+00:00"))
    findings = run_checks(state, Settings(as_of=as_of)).where("check = 'unreclaimed_segment'")
    assert sorted(r.subject for r in findings.collect()) == sorted(
        segments.loc[segments["status"] == "garbage", "file"]
    )
    assert segments["first_record"].notna().any()


def test_garbage_timeline_explorer_follows_the_queue(state) -> None:
    queues = {q.queue: q for q in state.queues.collect()}
    explorer = views.GarbageTimelineExplorer(state)
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
    assert title.endswith(f"in {len(garbage)} garbage segments") and len(garbage) > 1
    assert reclaimable > 0 and explorer.png() != first
    caption = explorer.caption_html()
    assert f"<td>{reclaimable}</td>" in caption
    assert views.GarbageTimelineExplorer is type(explorer)  # built once
    with pytest.raises(AttributeError):
        views.NoSuchExplorer  # noqa: B018


def test_records_dated_after_the_judged_instant_are_said_with_the_option_that_fixes_it(state):
    """The sample's records are dated in 2027: judged at a 2026 instant, the audit says how many,
    the newest, and --as-of; at the sample's own instant it says nothing."""
    from mqforensics.systems.logqueue.read import dated_after

    times = [r.time_us for r in state.records.select("time_us").collect() if r.time_us]
    before = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
    newest = dt.datetime.fromtimestamp(max(times) / 1_000_000, dt.UTC)
    later = sum(1 for t in times if t > before.timestamp() * 1_000_000)
    assert later == len(times) > 0
    assert dated_after(state, before) == (
        f"{later:,} records dated after the instant judged at (2026-11-28T00:00:00Z), the newest "
        f"{newest:%Y-%m-%dT%H:%M:%SZ}: none of them is judged stuck or old; give --as-of the "
        "instant the queues were copied"
    )
    sample_as_of = json.loads((SAMPLE / "sample.json").read_text())["as_of"]
    assert dated_after(state, dt.datetime.fromisoformat(sample_as_of)) is None
