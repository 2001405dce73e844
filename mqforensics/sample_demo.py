"""The demo: a system's bundled sample audited and planned, local Spark, no server (what
``mqforensics demo``, `mqforensics.api.demo` and ``prepare-spark`` run).

The default is the first registered system, James: its sample (datasets/james/sample) is a
Parquet export of a James mail queue view with planted anomalies, its blob listing, and the
ground truth of what the checks must find. The demo runs the one audit runner on it, shows the
findings and whether they match that ground truth, then plans a cleanup from those findings
with the sample's retention policy, so the review loop (``report plan``, ``approve``) can be
tried on its plan; nothing is deleted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics import runner, systems
from mqforensics.errors import ConfigError
from mqforensics.spec import CommonOptions
from mqforensics.units import parse_instant, utc_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.spec import Sample, System


def compare_with_ground_truth(rows: list[dict], truth_file: Path) -> tuple[int, list, list]:
    """(expected count, missing findings, unexpected findings) against ground_truth.json."""
    truth = json.loads(truth_file.read_text())["findings"]
    expected = {(f["check"], f["severity"], f["queue"], f["subject"]) for f in truth}
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    return len(expected), sorted(expected - found, key=str), sorted(found - expected, key=str)


def sample_audit(spec: System, out: Path) -> tuple[Sample, CommonOptions]:
    """`spec`'s bundled sample (written under ``out/sample`` when it is generated) and the
    common options of its audit into `out`, checked as an audit's are before Spark starts."""
    if spec.sample is None:
        raise ConfigError(f"{spec.name} has no bundled sample")
    runner.check_out(out)
    sample = spec.sample(out / "sample")
    common = CommonOptions(
        out=out,
        as_of=parse_instant(sample.as_of) if sample.as_of else None,
        # The audit looks for the policy's data subjects, so the plan of its findings can erase.
        erasure_policy=sample.policy,
    )
    runner.check_before_spark(sample.options, common)
    return sample, common


def run_sample(spark: SparkSession, spec: System, sample: Sample, common: CommonOptions) -> int:
    """Audit `sample` (`sample_audit`), compare the findings with its ground truth and plan
    their cleanup with its policy into ``out/plan``, printing each step; 0 when the findings
    match the ground truth, else 1."""
    from mqforensics.findings import summarise, verdict_line
    from mqforensics.views.progress import spark_progress

    out = common.out
    with spark_progress(spark, f"demo audit {spec.name}"):
        result = runner.audit(spark, spec, sample.options, common)
    result.loaded.close()
    rows = result.findings
    print(f"{spec.title}: {result.loaded.source}, judged at {utc_text(result.as_of)}:")
    print(summarise(rows))
    skipped = len(result.loaded.not_run)
    print(verdict_line(rows, checks_run=len(spec.checks) - skipped, not_run=skipped))
    for why, checks in runner.partial_by_reason(result.loaded.not_run).items():
        print(f"not run: {', '.join(checks)}: {why}")
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
        plan_demo(spec, out, sample.policy, out / "plan")
    if sample.history is not None and sample.history.is_dir():
        history_demo(spark, sample.history)
    return status


def history_demo(spark: SparkSession, bundled: Path) -> None:
    """The sample's bundled run history: its runs, and the alerts the bundled rules give at
    its latest run (``mqforensics history alerts --history DIR``)."""
    from mqforensics.history import query
    from mqforensics.history.alerts import latest
    from mqforensics.history.rules import load_rules
    from mqforensics.history.store import location, read

    where = location(bundled)
    assert where is not None
    frame = read(spark, where)
    runs = query.runs(frame)
    rules = load_rules()
    firing = latest(query.alerts(frame, rules))
    first, last = runs["as_of"].min(), runs["as_of"].max()
    print(f"Run history {bundled} ({len(runs)} runs of the sample as it evolved, "
          f"{utc_text(first.to_pydatetime())} to {utc_text(last.to_pydatetime())}): "
          f"{len(firing)} alerts from the {len(rules)} bundled rules at its last run:")  # fmt: skip
    for alert in firing:
        print(f"  {alert.line()}")
    print(
        f"Trends: mqforensics history show --history {bundled} --metric NAME; the James "
        "notebook plots them"
    )


def plan_demo(spec: System, audit_dir: Path, policy_file: Path, out: Path) -> None:
    """Plan the cleanup of the demo's findings with the sample's policy into `out`, replacing
    the plan of a previous demo run (and nothing else)."""
    from mqforensics.planning import plan_from_audit, summarise
    from mqforensics.retention.manifest import PLAN_JSON
    from mqforensics.views.plan_report import render_html, render_text

    policy = systems.load_policy(policy_file)
    if out.exists():
        if not (out / PLAN_JSON).is_file() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out} exists and is not a plan: remove it or choose another --out")
        shutil.rmtree(out)
    written, parts = plan_from_audit(audit_dir, policy, out)
    print(f"Cleanup plan with policy {policy.path} (nothing is deleted):")
    print(summarise(written, parts))
    (out / "report.txt").write_text(render_text(written, hide_target=spec.hide_target))
    (out / "report.html").write_text(render_html(written, hide_target=spec.hide_target))
    print(f"Review it in {out / 'report.html'} (addresses pseudonymised)")
