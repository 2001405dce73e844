"""`mqforensics demo`: the James audit on the bundled sample, with local Spark and no server.

The sample (datasets/james/sample, made by datasets/james/make_sample.py) is a Parquet export of
a James mail queue view with planted anomalies, its blob listing, and the ground truth of what
the checks must find; the demo shows the findings and whether they match that ground truth.
It then plans a cleanup of the same state with the sample's retention policy (policy.toml), so
the whole review loop (``report plan``, ``approve``) can be tried on its plan; nothing is deleted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.errors import ConfigError, InputError

if TYPE_CHECKING:
    from mqforensics.systems.james.state import JamesState

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
        help="where findings.json, findings.parquet and the cleanup plan (plan/) go "
        "(default: %(default)s)",
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
    from mqforensics.progress import spark_progress
    from mqforensics.spark import describe, session
    from mqforensics.systems.james.audit import attach_blob_listing, summarise, write_findings
    from mqforensics.systems.james.checks import run_checks
    from mqforensics.systems.james.snapshot import read_snapshot

    if not args.dataset.is_dir():
        raise InputError(f"dataset directory {args.dataset} does not exist")
    started = time.monotonic()
    spark = session("mqforensics-demo")
    print(f"Spark {spark.version} ({describe(spark)}) started in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    with spark_progress(spark, "demo audit"):
        state = read_snapshot(spark, args.dataset)
        listing = args.dataset / "blob_inventory.parquet"
        if listing.exists():
            attach_blob_listing(spark, state, listing)
        elif (args.dataset / "blobs").is_dir():
            state.blobs = read_james_blobs(spark, location=str(args.dataset / "blobs"))
        rows = write_findings(run_checks(state), args.out)
    print(f"James mail queue snapshot {args.dataset}, judged at {state.as_of:%Y-%m-%dT%H:%M:%SZ}:")
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'} and {args.out / 'findings.parquet'}")
    status = 0
    truth = args.dataset / "ground_truth.json"
    if truth.exists():
        expected, missing, unexpected = compare_with_ground_truth(rows, truth)
        verdict = "match" if not missing and not unexpected else "DIFFER from"
        print(f"The {len(rows)} findings {verdict} the {expected} planted in {truth.name}.")
        for item in missing:
            print(f"  missing:    {item}")
        for item in unexpected:
            print(f"  unexpected: {item}")
        status = 0 if not missing and not unexpected else 1
    plan_demo(state, args.dataset, args.out / "plan")
    state.unpersist()
    return status


def plan_demo(state: JamesState, dataset: Path, out: Path) -> None:
    """Plan the cleanup of the demo's state with the dataset's policy (or the bundled one) into
    `out`, replacing the plan of a previous demo run (and nothing else)."""
    from mqforensics.retention.manifest import PLAN_JSON, utc_text, write_plan
    from mqforensics.retention.policy import load_policy
    from mqforensics.systems.james.plan_cli import summarise
    from mqforensics.systems.james.planner import SYSTEM, plan_cleanup
    from mqforensics.systems.james.schema import KEYSPACE

    policy_file = dataset / "policy.toml"
    policy = load_policy(policy_file if policy_file.exists() else BUNDLED / "policy.toml")
    if out.exists():
        if not (out / PLAN_JSON).is_file() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out} exists and is not a plan: remove it or choose another --out")
        shutil.rmtree(out)
    plan = plan_cleanup(state, policy, keyspace=KEYSPACE)
    listing = dataset / "blob_inventory.parquet"
    blobs = listing if listing.exists() else dataset / "blobs"
    inputs = {
        "source": state.source,
        "cassandra": None,
        "keyspace": KEYSPACE,
        "snapshot": str(dataset),
        "snapshot_time": utc_text(state.as_of),
        "blobs": str(blobs) if state.blobs is not None else None,
        "references_complete": state.references_complete,
    }
    written = write_plan(
        out,
        system=SYSTEM,
        as_of=state.as_of,
        policy=policy,
        inputs=inputs,
        actions=plan.actions,
        deferred=plan.deferred,
        notes=plan.notes,
    )
    print(f"Cleanup plan with policy {policy.path} (nothing is deleted):")
    print(summarise(plan, written))
    from mqforensics.retention.report import render_html, render_text

    (out / "report.txt").write_text(render_text(written))
    (out / "report.html").write_text(render_html(written))
    print(f"Review it in {out / 'report.html'} (addresses pseudonymised)")
