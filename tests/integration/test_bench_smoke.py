"""The James benchmarks in smoke mode: every subject runs for real, on tiny data, and each pair
must agree on its answer (the benchmark raises otherwise). Numbers are not asserted, and the
Spark subjects compile with C1 alone (`james_audit.spark_env`), as the suite's own Spark does."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench import james_audit, james_live, report

pytestmark = pytest.mark.integration


def test_james_audit_ours_scan_and_pandas_agree_on_a_generated_snapshot(tmp_path):
    results = james_audit.run(3_000, tmp_path / "work", cache=tmp_path / "cache", quick_jit=True)
    assert [(m.subject, m.role) for m in results] == [
        ("mqforensics audit james", "ours"),
        ("bare Spark scan (noop write)", "baseline"),
        (james_audit.HISTORY_SUBJECT, "ours"),
        ("pandas, one process", "baseline"),
    ]
    snapshot = tmp_path / "cache" / f"james-3000-v{james_audit.GENERATOR_VERSION}"
    truth = json.loads((snapshot / "ground_truth.json").read_text())["findings"]
    ours, scan, appending, pandas = results
    assert ours.output["findings"] == pandas.output["findings"] == len(truth)
    assert appending.output["findings"] == len(truth)
    history = pd.read_parquet(tmp_path / "work" / "history")  # the run it appended
    assert history["run_id"].nunique() == 1 and set(history["scope"]) == {"bench"}
    # The scan read every row of every table: 3,000 normal mails plus the planted ones.
    assert scan.output["rows"]["enqueuedmailsv4.parquet"] > 3_000
    assert ours.jvm_peak_rss and ours.python_peak_rss and pandas.jvm_peak_rss is None


def test_getsize_and_live_read_agree_with_james_and_cqlsh(cassandra, tmp_path):
    results = james_live.run(2_000, cassandra=cassandra, cache=tmp_path / "cache", quick_jit=True)
    by_subject = {m.subject: m for m in results}
    ours = by_subject["Spark read + browse.sizes"].output["sizes"]
    james = by_subject["James's browse + per-row isStillEnqueued"].output
    assert ours == james["sizes"] and sum(ours.values()) > 0
    assert james["queries"] > sum(ours.values())  # one query per row and per bucket visited
    rows = by_subject["our Cassandra source (Spark)"].output["rows"]
    assert rows == by_subject["cqlsh COPY TO"].output["rows"] > 2_000
    # Credentials never reach a command line (ps) or the results.
    for m in results:
        assert cassandra["password"] not in m.command.split() and "-p" not in m.command.split()
        assert cassandra["password"] not in json.dumps(m.output).replace('"', " ").split()
    page = report.render(
        {"measured_at": "now", "command": "smoke", "total_seconds": 1.0,
         "machine": {"cpu": "c", "cores": 2, "memory_gib": 1, "java": "j", "python": "p",
                     "pyspark": "s", "kernel": "k"},
         "measurements": [vars(m) for m in results]}
    )  # fmt: skip
    assert "getSize at least 50x faster" in page and "live read at least as fast" in page
