"""`mqforensics demo`: the James audit on the bundled sample, with local Spark and no server.

The sample (datasets/james/sample, made by datasets/james/make_sample.py) is a Parquet export of
a James mail queue view with planted anomalies, its blob listing, and the ground truth of what
the checks must find; the demo shows the findings and whether they match that ground truth.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mqforensics.errors import InputError

BUNDLED = Path(__file__).resolve().parent.parent / "datasets" / "james" / "sample"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("demo", help="audit the bundled James sample with local Spark")
    parser.add_argument(
        "--dataset",
        type=Path,
        default=BUNDLED,
        help="James snapshot directory (default: the bundled sample)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/demo"),
        help="where findings.json and findings.parquet go (default: %(default)s)",
    )
    parser.set_defaults(run=run)  # fmt: skip


def compare_with_ground_truth(rows: list[dict], truth_file: Path) -> tuple[int, list, list]:
    """(expected count, missing findings, unexpected findings) against ground_truth.json."""
    truth = json.loads(truth_file.read_text())["findings"]
    expected = {(f["check"], f["severity"], f["queue"], f["subject"]) for f in truth}
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    return len(expected), sorted(expected - found, key=str), sorted(found - expected, key=str)


def run(args: argparse.Namespace) -> int:
    from mqforensics.blob_inventory import read_james_blobs
    from mqforensics.spark import describe, session
    from mqforensics.systems.james.audit import read_blob_listing, summarise, write_findings
    from mqforensics.systems.james.checks import run_checks
    from mqforensics.systems.james.snapshot import read_snapshot

    if not args.dataset.is_dir():
        raise InputError(f"dataset directory {args.dataset} does not exist")
    started = time.monotonic()
    spark = session("mqforensics-demo")
    print(f"Spark {spark.version} ({describe(spark)}) started in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    state = read_snapshot(spark, args.dataset)
    listing = args.dataset / "blob_inventory.parquet"
    if listing.exists():
        state.blobs = read_blob_listing(spark, listing)
    elif (args.dataset / "blobs").is_dir():
        state.blobs = read_james_blobs(spark, location=str(args.dataset / "blobs"))
    rows = write_findings(run_checks(state), args.out)
    print(f"James mail queue snapshot {args.dataset}, judged at {state.as_of:%Y-%m-%dT%H:%M:%SZ}:")
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'} and {args.out / 'findings.parquet'}")
    truth = args.dataset / "ground_truth.json"
    if truth.exists():
        expected, missing, unexpected = compare_with_ground_truth(rows, truth)
        verdict = "match" if not missing and not unexpected else "DIFFER from"
        print(f"The {len(rows)} findings {verdict} the {expected} planted in {truth.name}.")
        for item in missing:
            print(f"  missing:    {item}")
        for item in unexpected:
            print(f"  unexpected: {item}")
        return 0 if not missing and not unexpected else 1
    return 0
