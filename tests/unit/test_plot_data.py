"""What the plots draw, counted in Spark, checked against counts made here from the raw files."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mqforensics.demo import BUNDLED
from mqforensics.privacy import pseudonymize_address
from mqforensics.views import plot_data
from mqforensics.views.notebook_sources import DATASETS

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
    cells = plot_data.james_slice_cells(james, "spool")
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
    cells = plot_data.james_slice_cells(james, "spool", start=start, end=end)
    expected = {k for k in _direct_cells("spool") if start <= k[0] <= end}
    assert {(r.timerangestart.to_pydatetime(), r.bucketid) for r in cells.itertuples()} == expected
    slices = sorted({k[0] for k in _direct_cells("spool")})
    bounded = plot_data.james_slice_cells(james, "spool", max_slices=5)
    assert sorted({t.to_pydatetime() for t in bounded["timerangestart"]}) == slices[-5:]
    assert bounded.attrs["note"] == f"the newest 5 of {len(slices)} slices shown"
    assert plot_data.james_slice_cells(james, "no-such-queue").empty


def test_marks_and_queues(james) -> None:
    assert plot_data.james_marks(james, "spool") == {
        "browse_start": dt.datetime(2026, 10, 26, 9, tzinfo=UTC),
        "content_start": dt.datetime(2026, 10, 26, 6, tzinfo=UTC),
    }
    assert plot_data.james_marks(james, "nothing") == {"browse_start": None, "content_start": None}
    rows = Counter(
        r["queuename"] for r in pq.read_table(BUNDLED / "enqueuedmailsv4.parquet").to_pylist()
    )
    assert plot_data.james_queues(james) == sorted(rows, key=lambda q: (-rows[q], q))


def test_findings_table_hides_addresses_unless_revealed() -> None:
    rows = [
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": "spool",
         "scope": "mail", "subject": "mail from alice@example.org",
         "observed_at": "2026-11-03T12:00:00Z",
         "bytes": 10, "detail": {"recipients": ["bob@example.net"]}},
        {"check": "orphaned_blob", "severity": "info", "system": "james", "queue": None,
         "scope": "blob", "subject": "k1", "observed_at": None, "bytes": None, "detail": {}},
    ]  # fmt: skip
    table = plot_data.findings_table(rows)
    assert table["check"].tolist() == ["stuck_mail", "orphaned_blob"]  # worst severity first
    text = table.to_string()
    assert "alice@example.org" not in text and "bob@example.net" not in text
    assert pseudonymize_address("alice@example.org") in table["subject"][0]
    assert pseudonymize_address("bob@example.net") in table["detail"][0]
    assert table["bytes"].tolist() == [10, 0]
    shown = plot_data.findings_table(rows, reveal=True)
    assert shown["subject"][0] == "mail from alice@example.org"


def test_logqueue_segment_status_follows_the_garbage_end(spark) -> None:
    from mqforensics.systems.logqueue.state import read_state

    sample = DATASETS / "logqueue" / "sample"
    state = read_state(spark, [sample / "outbound", sample / "inbound"])
    segments = plot_data.logqueue_segments(state)
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
    from mqforensics.systems.logqueue.checks import AuditOptions, run_checks

    meta = json.loads((sample / "sample.json").read_text())
    as_of = dt.datetime.fromisoformat(meta["as_of"].replace("Z", "+00:00"))
    findings = run_checks(state, AuditOptions(as_of=as_of)).where("check = 'unreclaimed_segment'")
    assert sorted(r.subject for r in findings.collect()) == sorted(
        segments.loc[segments["status"] == "garbage", "file"]
    )
    assert segments["first_record"].notna().any()


def test_sharing_edges_group_grants_and_hide_identities() -> None:
    from mqforensics.systems.cyrus import checks
    from mqforensics.systems.cyrus.audit import load

    db = load(Path(DATASETS / "cyrus" / "sample" / "backend1" / "mailboxes.db"))
    rows = checks.sharing_report(db.entries, checks.DEFAULT_ADMINS, "example.org")
    edges = plot_data.cyrus_sharing_edges(rows, reveal=True)
    pairs = {((r["owner"] or "(shared)"), r["grantee"]) for r in rows}
    assert set(zip(edges["owner"], edges["grantee"], strict=True)) == pairs
    for edge in edges.itertuples():
        mine = [
            r
            for r in rows
            if (r["owner"] or "(shared)") == edge.owner and r["grantee"] == edge.grantee
        ]
        assert edge.mailboxes == len({r["mailbox"] for r in mine})
    hidden = plot_data.cyrus_sharing_edges(rows)
    text = hidden.to_string()
    assert "bob" not in text and "alice" not in text
    assert pseudonymize_address("bob") in set(hidden["grantee"]) | set(hidden["owner"])
    assert len(hidden) == len(edges)
    # The rows `audit cyrus` hands back are already hidden: they come out the same, not re-hashed.
    from mqforensics.systems.cyrus.audit import hide_sharing_row

    already = [hide_sharing_row(r, list(checks.DEFAULT_ADMINS)) for r in rows]
    assert plot_data.cyrus_sharing_edges(already).equals(hidden)
