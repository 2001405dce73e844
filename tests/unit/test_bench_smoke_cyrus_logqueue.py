"""Smoke test of two benchmarks (bench/cyrus_twoskip.py, bench/logqueue_segments.py) at tiny
sizes: every subject runs in its own process and sees exactly what the generator wrote.

The Cyrus one needs Cyrus's ``cyr_dbtool`` (no server): it is installed from Debian when
missing, as the test services do, never skipped."""

from __future__ import annotations

from pathlib import Path

from bench import cyrus_twoskip, logqueue_segments

CYRUS_RECORDS = 2_000
LOGQUEUE_BYTES = 2_000_000


def test_cyrus_twoskip_smoke(tmp_path: Path) -> None:
    generated = sum(len(t) for t in cyrus_twoskip.generate_records(CYRUS_RECORDS))
    assert generated == CYRUS_RECORDS
    results = cyrus_twoskip.run(CYRUS_RECORDS, tmp_path)
    assert [m.role for m in results] == ["ours", "ours", "ours", "baseline", "baseline"]
    assert {m.output["records"] for m in results} == {CYRUS_RECORDS}
    assert results[0].output["data"]["records"] == CYRUS_RECORDS
    assert all(m.seconds > 0 for m in results)
    ours = results[0]
    # show prints key TAB value LF per record: the same pairs ours parsed.
    for baseline in results[3:]:
        shown = baseline.output["show_bytes"]
        assert shown == ours.output["key_value_bytes"] + 2 * CYRUS_RECORDS
    assert ours.output["problems"] == 0 and ours.output["kernel"]
    assert results[1].output["key_value_bytes"] == ours.output["key_value_bytes"]
    assert not results[1].output["kernel"]  # the reference reader, measured beside the kernel


def test_logqueue_segments_smoke(tmp_path: Path) -> None:
    results = logqueue_segments.run(LOGQUEUE_BYTES, tmp_path)
    assert [m.role for m in results] == ["ours", "ours", "baseline", "baseline"]
    assert "columnar" in results[0].subject and "reference" in results[1].subject
    data = results[0].output["data"]
    # The generator is deterministic: writing again gives the cached queue's counts.
    again = logqueue_segments.write_queue(tmp_path / "again", LOGQUEUE_BYTES)
    assert (again.records, again.segment_bytes) == (data["records"], data["segment_bytes"])
    assert data["segment_bytes"] >= LOGQUEUE_BYTES
    counted = [m.output["records"] for m in results if "records" in m.output]
    assert counted == [data["records"]] * 3
    assert {m.output["bytes"] for m in results} == {data["segment_bytes"]}
    assert results[0].output["problems"] == results[1].output["problems"] == 0
    assert all(m.seconds > 0 for m in results)
