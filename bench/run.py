"""Run the benchmarks and write their results: ``bench/results/<name>.json`` and, from it, the
generated part of ``docs/benchmarks.md``.

    python -m bench.run                 # full: James 1M and 10M, live 1M, Cyrus 1M, 1 GB segments,
                                        # a Postfix queue and a slimta spool of 100k messages
    python -m bench.run --smoke         # every benchmark on tiny data (what `make test` runs)
    python -m bench.run --only james_audit --james-entries 1000000
    python -m bench.run --only james_content   # the content search of 5,000 James mails
    python -m bench.run --with-100m     # full, and the James audit at 100M too (over an hour)
    python -m bench.run --render-only   # re-render docs/benchmarks.md from the saved results

Each measured subject runs in a fresh process (`bench.measure`); every benchmark checks that
ours and its baseline produced the same answer before any number is kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from bench import measure, report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
BENCHMARKS = (
    "james_audit",
    "james_live",
    "james_content",
    "cyrus_twoskip",
    "logqueue_segments",
    "postfix_queue",
    "slimta_spool",
)
# The audit and its scan differ by seconds from one run to the next on a 2-core machine (the
# scan at 10M took 12.0 s in one run and 15.3 s in another): each is run this many times,
# alternately, and the medians compared.
AUDIT_REPEATS = 3
FULL = {
    "james_entries": [1_000_000, 10_000_000],
    "live_entries": 1_000_000,
    "cyrus_records": 1_000_000,
    "segment_bytes": 1 << 30,
    "postfix_messages": 100_000,
    "slimta_envelopes": 100_000,
    "james_content_mails": 5_000,
    "audit_repeats": AUDIT_REPEATS,
}
# The James audit at 100M entries (`--with-100m`, or `--james-entries 100000000`): above
# `REPEATED_MAX_ENTRIES` the audit and its scan run once each, without the history subject (the
# same audit again): one round took about as long as the rest of `make bench` (6.5 min since
# 2026-12-06, plus about 10 min to generate the snapshot once).
HUGE_ENTRIES = 100_000_000
REPEATED_MAX_ENTRIES = 10_000_000
# pandas holds the tables it reads in one process: its peak (VmHWM) was 2.8 GiB at 1M entries
# and 5.2 GiB at 2M (2026-12-06), 2.5 GiB more per million, so about 25 GiB at 10M: more than
# the benchmark machine's 23.5 GiB. Above this size only ours and the scan run.
PANDAS_MAX_ENTRIES = 2_000_000
SMOKE = {
    "james_entries": [2_000, 20_000],
    "live_entries": 2_000,
    "cyrus_records": 2_000,
    "segment_bytes": 2 << 20,
    "postfix_messages": 100,
    "slimta_envelopes": 100,
    "james_content_mails": 100,
}


def run_all(
    sizes: dict[str, Any],
    only: list[str],
    workdir: Path,
    *,
    cassandra: dict[str, Any] | None = None,
) -> list[measure.Measurement]:
    from bench import (
        cyrus_twoskip,
        james_audit,
        james_content,
        james_live,
        logqueue_segments,
        postfix_queue,
        slimta_spool,
    )

    results: list[measure.Measurement] = []
    if "james_audit" in only:
        for entries in sizes["james_entries"]:
            results += james_audit.run(
                entries,
                workdir / f"james_audit-{entries}",
                with_pandas=entries <= PANDAS_MAX_ENTRIES,
                repeats=sizes.get("audit_repeats", 1) if entries <= REPEATED_MAX_ENTRIES else 1,
                with_history=entries <= REPEATED_MAX_ENTRIES,
            )
    if "james_live" in only:
        results += james_live.run(sizes["live_entries"], cassandra=cassandra)
    if "james_content" in only:
        results += james_content.run(sizes["james_content_mails"], workdir / "james_content")
    if "cyrus_twoskip" in only:
        results += cyrus_twoskip.run(sizes["cyrus_records"], workdir / "cyrus")
    if "logqueue_segments" in only:
        results += logqueue_segments.run(sizes["segment_bytes"], workdir / "logqueue")
    if "postfix_queue" in only:
        results += postfix_queue.run(sizes["postfix_messages"], workdir / "postfix")
    if "slimta_spool" in only:
        results += slimta_spool.run(sizes["slimta_envelopes"], workdir / "slimta")
    return results


def save(results: list[measure.Measurement], name: str, argv: list[str], seconds: float) -> Path:
    """Write the results; measurements of the same benchmark and size saved before are replaced,
    the others kept (a partial rerun updates its rows only)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    fresh = [{**asdict(m), "measured_at": now} for m in results]
    redone = {(m["benchmark"], m["size"]) for m in fresh}
    kept: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    if path.exists():
        previous = json.loads(path.read_text())
        kept = [m for m in previous["measurements"] if (m["benchmark"], m["size"]) not in redone]
        runs = previous.get("runs") or [
            {k: previous[k] for k in ("measured_at", "command", "total_seconds")}
        ]
    this_run = {
        "measured_at": now,
        "command": "python -m bench.run " + " ".join(argv),
        "total_seconds": round(seconds, 1),
        "machine": measure.machine(),
    }
    measurements = kept + fresh
    still_shown = {m["measured_at"] for m in measurements}
    document = {
        **this_run,
        "machine": measure.machine(),
        # Every run some kept measurement comes from; both sides of a ratio always come from
        # the same run, since a rerun replaces a benchmark's rows of that size together.
        "runs": [r for r in runs if r["measured_at"] in still_shown] + [this_run],
        "measurements": measurements,
    }
    path.write_text(json.dumps(document, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny data: checks, not numbers")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, default=[])
    parser.add_argument("--james-entries", type=int, action="append", default=[])
    parser.add_argument(
        "--with-100m", action="store_true", help="the James audit at 100M entries too"
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "out" / "bench")
    parser.add_argument("--name", help="results file name (default: full or smoke)")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    name = args.name or ("smoke" if args.smoke else "full")
    if not args.render_only:
        sizes = dict(SMOKE if args.smoke else FULL)
        if args.james_entries:
            sizes["james_entries"] = args.james_entries
        james_entries = cast(list[int], sizes["james_entries"])
        if args.with_100m and HUGE_ENTRIES not in james_entries:
            sizes["james_entries"] = [*james_entries, HUGE_ENTRIES]
        started = time.perf_counter()
        results = run_all(sizes, args.only or list(BENCHMARKS), args.workdir)
        path = save(results, name, argv, time.perf_counter() - started)
        print(f"wrote {path}")
        for m in results:
            print(f"{m.benchmark:<18} {m.size:<28} {m.subject:<48} {m.seconds:>9.2f} s")
    if name == "full":
        document = json.loads((RESULTS / "full.json").read_text())
        report.write_doc(DOC, document)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
