"""Smoke test of two benchmarks (bench/postfix_queue.py, bench/slimta_spool.py) at tiny sizes:
every subject runs in its own process and finds what the real Postfix or python-slimta wrote.

Postfix (Debian's package; the benchmark starts a private instance to write the queue, then
runs ``postqueue -j`` with it stopped) and the python-slimta runtime are installed by the
project's harness when missing, as the test services do, never skipped."""

from __future__ import annotations

from pathlib import Path

from bench import postfix_queue, slimta_spool

POSTFIX_MESSAGES = 100
SLIMTA_ENVELOPES = 100


def test_postfix_queue_smoke(tmp_path: Path) -> None:
    results = postfix_queue.run(POSTFIX_MESSAGES, tmp_path)
    assert [m.role for m in results] == ["ours", "baseline"]
    data = results[0].output["data"]
    assert data["messages"] == POSTFIX_MESSAGES == data["real_messages"]
    assert set(data["per_queue"]) <= {"deferred", "incoming", "active", "hold"}
    assert data["recipients"] >= POSTFIX_MESSAGES
    for m in results:
        for answer in postfix_queue.ANSWERS:
            assert m.output[answer] == data[answer], (m.subject, answer)
    assert results[0].output["logs"] == data["per_queue"].get("deferred", 0)
    assert results[0].output["problems"] == 0
    assert all(m.seconds > 0 for m in results)


def test_slimta_spool_smoke(tmp_path: Path) -> None:
    results = slimta_spool.run(SLIMTA_ENVELOPES, tmp_path)
    assert [m.role for m in results] == ["ours", "baseline", "baseline"]
    data = results[0].output["data"]
    assert data["envelopes"] == SLIMTA_ENVELOPES
    for m in results[:2]:
        for answer in slimta_spool.ANSWERS:
            assert m.output[answer] == data[answer], (m.subject, answer)
    assert results[2].output["envelopes"] == SLIMTA_ENVELOPES
    assert results[0].output["items"] == SLIMTA_ENVELOPES
    assert results[0].output["problems"] == 0
    assert all(m.seconds > 0 for m in results)
