"""`mqforensics demo`: a system's bundled sample audited and planned, local Spark, no server.

The default is the first registered system, James: its sample (datasets/james/sample) is a
Parquet export of a James mail queue view with planted anomalies, its blob listing, and the
ground truth of what the checks must find. The demo runs the one audit runner on it, shows the
findings and whether they match that ground truth, then plans a cleanup from those findings
with the sample's retention policy, so the review loop (``report plan``, ``approve``) can be
tried on its plan; nothing is deleted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics import systems
from mqforensics.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.spec import Sample, System


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo", help="audit and plan a bundled sample with local Spark (no server)"
    )
    parser.add_argument(
        "--system", choices=systems.names(), default=systems.names()[0],
        help="whose bundled sample (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("out/demo"), metavar="DIR",
        help="where findings.json, findings.parquet, manifest.json and the cleanup plan (plan/) "
        "go (default: %(default)s)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def compare_with_ground_truth(rows: list[dict], truth_file: Path) -> tuple[int, list, list]:
    """(expected count, missing findings, unexpected findings) against ground_truth.json."""
    truth = json.loads(truth_file.read_text())["findings"]
    expected = {(f["check"], f["severity"], f["queue"], f["subject"]) for f in truth}
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    return len(expected), sorted(expected - found, key=str), sorted(found - expected, key=str)


def run(args: argparse.Namespace) -> int:
    from mqforensics import runner
    from mqforensics.spark import describe, session

    spec = systems.get(args.system)
    runner.check_out(args.out)
    sample, audit_args = sample_audit(spec, args.out)
    started = time.monotonic()
    spark = session("mqforensics-demo")
    print(f"Spark {spark.version} ({describe(spark)}) started in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    return run_sample(spark, spec, sample, audit_args, args.out)


def sample_audit(spec: System, out: Path) -> tuple[Sample, argparse.Namespace]:
    """`spec`'s bundled sample (written under ``out/sample`` when it is generated) and the
    arguments of its audit into `out`, checked as an audit's are before Spark starts."""
    from mqforensics import runner
    from mqforensics.cli import build_parser

    if spec.sample is None:
        raise ConfigError(f"{spec.name} has no bundled sample")
    sample = spec.sample(out / "sample")
    argv = ["audit", spec.name, *sample.argv, "--out", str(out)]
    if sample.as_of:
        argv += ["--as-of", sample.as_of]
    if sample.policy is not None:
        # The audit looks for the policy's data subjects, so the plan of its findings can erase.
        argv += ["--erasure-policy", str(sample.policy)]
    audit_args = build_parser().parse_args(argv)
    runner.check_before_spark(spec, audit_args)
    return sample, audit_args


def run_sample(
    spark: SparkSession, spec: System, sample: Sample, audit_args: argparse.Namespace, out: Path
) -> int:
    """Audit `sample` (`sample_audit`), compare the findings with its ground truth and plan
    their cleanup with its policy into ``out/plan``, printing each step; 0 when the findings
    match the ground truth, else 1."""
    from mqforensics import runner
    from mqforensics.findings import summarise
    from mqforensics.units import utc_text
    from mqforensics.views.progress import spark_progress

    with spark_progress(spark, f"demo audit {spec.name}"):
        result = runner.audit(spark, spec, audit_args)
    result.loaded.close()
    rows = result.findings
    print(f"{spec.title}: {result.loaded.source}, judged at {utc_text(result.as_of)}:")
    print(summarise(rows))
    print(f"Wrote {out / 'findings.json'}, findings.parquet and manifest.json")
    status = 0
    if sample.ground_truth is not None and sample.ground_truth.exists():
        expected, missing, unexpected = compare_with_ground_truth(rows, sample.ground_truth)
        verdict = "match" if not missing and not unexpected else "DIFFER from"
        print(f"The {len(rows)} findings {verdict} the {expected} planted in "
              f"{sample.ground_truth.name}.")  # fmt: skip
        for item in missing:
            print(f"  missing:    {item}")
        for item in unexpected:
            print(f"  unexpected: {item}")
        status = 0 if not missing and not unexpected else 1
    if sample.policy is not None:
        plan_demo(out, sample.policy, out / "plan")
    return status


def plan_demo(audit_dir: Path, policy_file: Path, out: Path) -> None:
    """Plan the cleanup of the demo's findings with the sample's policy into `out`, replacing
    the plan of a previous demo run (and nothing else)."""
    from mqforensics.planning import plan_from_audit, summarise
    from mqforensics.retention.manifest import PLAN_JSON
    from mqforensics.retention.policy import load_policy
    from mqforensics.views.plan_report import render_html, render_text

    policy = load_policy(policy_file)
    if out.exists():
        if not (out / PLAN_JSON).is_file() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out} exists and is not a plan: remove it or choose another --out")
        shutil.rmtree(out)
    written, parts = plan_from_audit(audit_dir, policy, out)
    print(f"Cleanup plan with policy {policy.path} (nothing is deleted):")
    print(summarise(written, parts))
    (out / "report.txt").write_text(render_text(written))
    (out / "report.html").write_text(render_html(written))
    print(f"Review it in {out / 'report.html'} (addresses pseudonymised)")
