"""The benchmark page: ratios point the right way and targets are judged by their bounds."""

from __future__ import annotations

from bench import report


def _row(benchmark: str, subject: str, seconds: float, size: str = "1M", role: str = "ours"):
    return {"benchmark": benchmark, "subject": subject, "role": role, "size": size,
            "seconds": seconds, "python_peak_rss": 2**20, "jvm_peak_rss": None,
            "output": {"rows": 5}, "command": f"python -m bench.x {subject}"}  # fmt: skip


def test_ratios_and_verdicts() -> None:
    rows = [
        _row("james_audit", "mqforensics audit james", 30.0),
        _row("james_audit", "bare Spark scan (noop write)", 16.0, role="baseline"),
        _row("james_audit", "pandas, one process", 90.0, role="baseline"),
        _row("getsize", "Spark read + browse.sizes", 10.0),
        _row("getsize", "James's browse + per-row isStillEnqueued", 150.0, role="baseline"),
        _row("live_read", "our Cassandra source (Spark)", 20.0),
        _row("live_read", "cqlsh COPY TO", 19.0, role="baseline"),
        _row("james_audit", "mqforensics audit james", 250.0, size="10M"),
        _row("james_audit", "bare Spark scan (noop write)", 50.0, size="10M", role="baseline"),
    ]
    lines = {(line["goal"].split()[0], line["size"]): line for line in report.ratios(rows)}
    audit = lines[("full", "1M")]
    assert audit["ratio"] == 1.875 and audit["met"] is True  # 30 / 16 within 2x
    assert lines[("full", "10M")]["met"] is False  # 250 / 50 = 5x
    assert lines[("pandas", "1M")]["ratio"] == 3.0 and lines[("pandas", "1M")]["met"] is True
    assert lines[("getSize", "1M")]["ratio"] == 15.0 and lines[("getSize", "1M")]["met"] is False
    assert lines[("live", "1M")]["met"] is False  # cqlsh 19 s is faster than our 20 s
    assert ("twoskip", "1M") not in lines  # not measured: not shown


def test_page_keeps_the_hand_written_part(tmp_path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nHow to run.\n\n{report.MARKER}\nold numbers\n")
    document = {
        "measured_at": "2026-11-22T19:00:00Z", "command": "python -m bench.run",
        "total_seconds": 100.0,
        "machine": {"cpu": "X", "cores": 2, "memory_gib": 23.5, "java": "openjdk 17",
                    "python": "3.11.7", "pyspark": "4.1.1", "kernel": "6"},
        "measurements": [_row("james_audit", "mqforensics audit james", 30.0),
                         _row("james_audit", "bare Spark scan", 12.0, role="baseline")],
    }  # fmt: skip
    report.write_doc(page, document)
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\nHow to run.\n") and "old numbers" not in text
    assert (
        "| full James audit within 2x of a bare Spark scan of the same files | 1M | 2.50x |" in text
    )
    assert "X, 2 cores, 23.5 GiB" in text and "`python -m bench.x bare Spark scan`" in text


def test_partial_rerun_replaces_its_rows_and_keeps_the_runs_of_the_others(
    tmp_path, monkeypatch
) -> None:
    from bench import measure
    from bench import run as bench_run

    monkeypatch.setattr(bench_run, "RESULTS", tmp_path)
    machine = {"cpu": "X", "cores": 2, "memory_gib": 23.5, "java": "openjdk 17",
               "python": "3.11.7", "pyspark": "4.1.1", "kernel": "6"}  # fmt: skip
    monkeypatch.setattr(measure, "machine", lambda: machine)

    def measured(benchmark: str, subject: str, seconds: float) -> measure.Measurement:
        return measure.Measurement(benchmark, subject, "ours", "1M", seconds, 2**20)

    first = [measured("james_audit", "mqforensics audit james", 30.0),
             measured("cyrus_twoskip", "mqforensics twoskip.read", 5.0)]  # fmt: skip
    bench_run.save(first, "full", ["--all"], 100.0)
    path = bench_run.save(
        [measured("james_audit", "mqforensics audit james", 20.0)], "full", ["--only", "x"], 50.0
    )
    import json

    document = json.loads(path.read_text())
    seconds = {m["benchmark"]: m["seconds"] for m in document["measurements"]}
    assert seconds == {"james_audit": 20.0, "cyrus_twoskip": 5.0}
    assert [r["command"] for r in document["runs"]] == [
        "python -m bench.run --all",
        "python -m bench.run --only x",
    ]
    text = report.render(document)
    assert "`python -m bench.run --all` (100 s)" in text
    assert "`python -m bench.run --only x` (50 s)" in text


def test_runs_on_different_machines_each_name_theirs() -> None:
    def machine(cpu: str) -> dict:
        return {"cpu": cpu, "cores": 2, "memory_gib": 23.5, "java": "openjdk 17",
                "python": "3.11.7", "pyspark": "4.1.4", "kernel": "6"}  # fmt: skip

    rows = [_row("james_audit", "mqforensics audit james", 30.0),
            _row("james_audit", "bare Spark scan", 12.0, role="baseline")]  # fmt: skip
    runs = [
        {"measured_at": "T1", "command": "python -m bench.run", "total_seconds": 10.0,
         "machine": machine("AMD EPYC")},
        {"measured_at": "T2", "command": "python -m bench.run --only x", "total_seconds": 5.0,
         "machine": machine("Intel Xeon")},
        {"measured_at": "T0", "command": "python -m bench.run --old", "total_seconds": 1.0},
    ]  # fmt: skip
    text = report.render({"machine": machine("Intel Xeon"), "runs": runs, "measurements": rows})
    assert "- T1: `python -m bench.run` (10 s); AMD EPYC, 2 cores" in text
    assert "- T2: `python -m bench.run --only x` (5 s); Intel Xeon, 2 cores" in text
    assert "- T0: `python -m bench.run --old` (1 s); machine not recorded" in text
    assert "Machine:" not in text
    same = report.render({"machine": machine("X"), "runs": runs[:1], "measurements": rows})
    assert "Machine: AMD EPYC, 2 cores" in same and "(10 s);" not in same
