"""The full James audit on a Parquet snapshot, against a bare Spark scan of the same files and
against the same checks in pandas (`bench.james_pandas`).

    python -m bench.james_audit run --entries 1000000          # all three, prints JSON lines
    python -m bench.james_audit measure ours --snapshot DIR    # one subject (a child process)

Snapshots come from the project's generator (`datasets.james.columnar.write_parquet`, the
vectorised writer of the row-by-row generator's tables, `GENERATOR_WORKERS` processes; the
planted anomalies of the bundled sample, a blob inventory instead of blob files) and are cached
under ``~/.cache/mqforensics/bench/`` (100M entries: about 12 GB). Every subject runs in a
fresh process; Spark subjects get the same fixed driver heap (`DRIVER_MEMORY`) at every size, so
a flat peak shows streaming, and their session start-up is not timed (it is the same for both).
The run fails when our findings differ from the ground truth or from pandas': a baseline that
checks less is no baseline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import measure
from mqforensics.services import process

DRIVER_MEMORY = "3g"
# The audit again, appending its figures to a run history (issue 46: at most 5% more).
HISTORY_SUBJECT = "history: the same audit appending to a run history"
# The C1 compiler alone: quicker for the tiny data of smoke runs (the tests), where the numbers
# are not read; measurements use the JVM's default JIT.
QUICK_JIT = f"--conf spark.driver.defaultJavaOptions={process.QUICK_JIT}"


def spark_env(*, quick_jit: bool = False) -> dict[str, str]:
    """The environment of a measured Spark subject: the fixed driver heap, and C1 alone if
    `quick_jit` (smoke runs only)."""
    jit = f"{QUICK_JIT} " if quick_jit else ""
    return {"PYSPARK_SUBMIT_ARGS": f"--driver-memory {DRIVER_MEMORY} {jit}pyspark-shell"}


CACHE = Path(os.environ.get("MQF_BENCH_CACHE") or Path.home() / ".cache" / "mqforensics" / "bench")
# Bump when the generated data changes. The vectorised writer (datasets.james.columnar) writes
# the row-by-row generator's tables, so its snapshots keep version 1.
GENERATOR_VERSION = "1"
CHUNK_ROWS = 200_000  # normal rows per part file (and per chunk of the generator's seeds)
# Processes writing chunks. One: on the shared 2-core machine two were slower (10M entries:
# 75.5 s against 42.0 s, 2026-12-06), the two getting less CPU time together than one alone.
GENERATOR_WORKERS = 1
TABLES = (
    "enqueuedmailsv4.parquet", "deletedmailsv2.parquet", "browsestart.parquet",
    "contentstart.parquet", "eventstore.parquet", "blob_inventory.parquet",
)  # fmt: skip


def snapshot(entries: int, cache: Path | None = None) -> Path:
    """A generated snapshot with `entries` normal mails (plus the planted ones), made once."""
    from datasets.james import columnar
    from datasets.james.make_sample import SAMPLE_SPEC

    target = (cache or CACHE) / f"james-{entries}-v{GENERATOR_VERSION}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    spec = replace(SAMPLE_SPEC, normal_mails=entries, chunk_size=CHUNK_ROWS)
    workers = max(1, min(GENERATOR_WORKERS, os.cpu_count() or 1))
    slow = columnar.unavailable(spec, blob_files=False)
    if slow is not None:
        print(f"james_audit: the row-by-row generator writes {entries:,} entries: {slow}")
    started = time.perf_counter()
    columnar.write_parquet(spec, target, blob_files=False, workers=workers)
    seconds = round(time.perf_counter() - started, 1)
    made = {"generated_in_seconds": seconds, "workers": workers, "vectorised": slow is None}
    (target / ".complete").write_text(json.dumps(made) + "\n")
    return target


def _as_of(directory: Path) -> dt.datetime:
    taken = json.loads((directory / "snapshot.json").read_text())["taken_at"]
    return dt.datetime.fromisoformat(taken.replace("Z", "+00:00"))


def _spark() -> Any:
    from mqforensics import systems
    from mqforensics.spark import session

    spark = session("mqf-bench", ui=False, data_sources=systems.data_sources())
    spark.range(1).count()  # the JVM and the Python workers are up before timing starts
    return spark


def measure_ours(directory: Path, out: Path, history: Path | None = None) -> dict[str, Any]:
    """`mqforensics audit james` as the CLI runs it (the one audit runner: inputs checked,
    loaded, every check, findings and the manifest written), Spark already started; with
    `history`, its figures appended to that run history too (``--history``)."""
    import mqforensics

    spark = _spark()
    started = time.perf_counter()
    audit = mqforensics.audit(
        "james", snapshot=directory, blob_listing=directory / "blob_inventory.parquet", out=out,
        spark=spark, history=str(history) if history is not None else None,
        history_scope="bench" if history is not None else None,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    audit.close()
    rows = audit.rows
    found = [[r["check"], r["queue"], r["subject"], r["bytes"]] for r in rows]
    (out / "compared.json").write_text(json.dumps(found))
    measure.report({"findings": len(rows)}, seconds)
    return {}


def measure_scan(directory: Path) -> None:
    """Every row and column of every table read and materialised, nothing computed."""
    spark = _spark()
    started = time.perf_counter()
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    counts = {}
    for table in TABLES:
        seen = Observation(table)
        frame = spark.read.parquet(str(directory / table))
        frame.observe(seen, F.count(F.lit(1)).alias("rows")).write.format("noop").mode(
            "overwrite"
        ).save()
        counts[table] = int(seen.get["rows"])
    measure.report({"rows": counts}, time.perf_counter() - started)


def measure_pandas(directory: Path, out: Path) -> None:
    from bench.james_pandas import audit

    started = time.perf_counter()
    found = audit(directory, _as_of(directory))
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    (out / "compared.json").write_text(json.dumps([list(f) for f in found]))
    measure.report({"findings": len(found)}, seconds)


def _compared(out: Path, with_bytes: set[str]) -> list[tuple]:
    rows = json.loads((out / "compared.json").read_text())
    return sorted((c, q, s, b if c in with_bytes else None) for c, q, s, b in rows)


def run(
    entries: int,
    workdir: Path,
    *,
    with_pandas: bool = True,
    cache: Path | None = None,
    repeats: int = 1,
    quick_jit: bool = False,
    with_history: bool = True,
) -> list[measure.Measurement]:
    """Generate (or reuse) the snapshot and measure ours, the bare scan, the audit appending to
    a run history (`with_history`) and pandas (`with_pandas`). Ours and the scan run `repeats`
    times each, one after the other (so a machine busier for a while slows both alike), and
    their medians are kept. `quick_jit`: see `spark_env`."""
    directory = snapshot(entries, cache)
    size = f"{entries:,} entries"
    env = spark_env(quick_jit=quick_jit)
    ours_out, pandas_out = workdir / "ours", workdir / "pandas"
    history_out, history = workdir / "ours-history", workdir / "history"
    shutil.rmtree(history, ignore_errors=True)
    module = ["-m", "bench.james_audit", "measure"]
    subjects = [
        ("mqforensics audit james", "ours",
         [*module, "ours", "--snapshot", str(directory), "--out", str(ours_out)]),
        ("bare Spark scan (noop write)", "baseline",
         [*module, "scan", "--snapshot", str(directory)]),
    ]  # fmt: skip
    if with_history:
        subjects.append(
            (HISTORY_SUBJECT, "ours",
             [*module, "ours", "--snapshot", str(directory), "--out", str(history_out),
              "--history", str(history)])
        )  # fmt: skip
    timed: list[list[measure.Measurement]] = [[] for _ in subjects]
    for _ in range(repeats):
        for runs, (subject, role, argv) in zip(timed, subjects, strict=True):
            runs.append(measure.run_subject("james_audit", subject, role, size, argv, env=env))
    results = [measure.median_of(runs) for runs in timed]
    truth = json.loads((directory / "ground_truth.json").read_text())["findings"]
    ours = _compared(ours_out, {"unreclaimed_slice", "orphaned_blob"})
    expected = sorted((f["check"], f["subject"]) for f in truth)
    if sorted((c, s) for c, _q, s, _b in ours) != expected:
        raise AssertionError(f"our audit of {directory} does not match its ground truth")
    if with_pandas:
        results.append(
            measure.run_subject(
                "james_audit", "pandas, one process", "baseline", size,
                [*module, "pandas", "--snapshot", str(directory), "--out", str(pandas_out)],
            )
        )  # fmt: skip
        theirs = _compared(pandas_out, {"unreclaimed_slice", "orphaned_blob"})
        if theirs != ours:
            missing = sorted(set(ours) - set(theirs))[:5]
            extra = sorted(set(theirs) - set(ours))[:5]
            raise AssertionError(f"pandas findings differ: missing {missing}, extra {extra}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("measure")
    one.add_argument("subject", choices=["ours", "scan", "pandas"])
    one.add_argument("--snapshot", type=Path, required=True)
    one.add_argument("--out", type=Path)
    one.add_argument("--history", type=Path)
    many = sub.add_parser("run")
    many.add_argument("--entries", type=int, default=10_000)
    many.add_argument("--workdir", type=Path, default=Path("out/bench/james_audit"))
    many.add_argument("--no-pandas", action="store_true")
    many.add_argument("--no-history", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "measure":
        if args.subject == "ours":
            measure_ours(args.snapshot, args.out, args.history)
        elif args.subject == "scan":
            measure_scan(args.snapshot)
        else:
            measure_pandas(args.snapshot, args.out)
        return 0
    runs = run(
        args.entries, args.workdir, with_pandas=not args.no_pandas, with_history=not args.no_history
    )
    for m in runs:
        print(json.dumps(measure.as_dict(m)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
