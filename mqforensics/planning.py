"""`mqforensics plan`: an audit's findings and a retention policy in, a cleanup plan out.

A plan is made from findings, never from the store: ``plan --findings AUDIT_DIR`` reads the
audit's ``findings.json`` and ``manifest.json`` (the system comes from the manifest), and
``plan <system> SOURCE`` runs the same audit first (into ``--audit-out``, by default
``<PLAN_DIR>.audit``) and then the same planning. The system's planner only selects findings by
policy and adds the preconditions the purger re-checks; every action cites the ids of the
findings that justify it, and every id it cites is one of the audit's. An audit older than
``--max-audit-age`` is refused: the store has moved on since.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics import subjects, systems
from mqforensics.errors import ConfigError
from mqforensics.findings import read_findings
from mqforensics.runner import add_common_options, check_before_spark, check_out, read_manifest
from mqforensics.units import counter, parse_duration, parse_instant, utc_text

if TYPE_CHECKING:
    from mqforensics.retention.manifest import Plan
    from mqforensics.retention.policy import Policy
    from mqforensics.spec import PlanParts

DEFAULT_MAX_AUDIT_AGE = dt.timedelta(days=1)


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "plan", help="plan a retention cleanup from an audit's findings (deletes nothing)",
        description="Turn an audit's findings and a retention policy into a cleanup plan: "
        "`plan --findings AUDIT_DIR --policy FILE --out PLAN_DIR`, or `plan SYSTEM SOURCE... "
        "--policy FILE --out PLAN_DIR` to audit and plan in one go. Every action cites the "
        "findings that justify it. Nothing is deleted: review the plan with `report plan`, "
        "approve it with `approve`, carry it out with `purge`.",
    )  # fmt: skip
    parser.add_argument(
        "--findings", type=Path, metavar="AUDIT_DIR",
        help="the directory an `audit` wrote (findings.json and manifest.json)",
    )  # fmt: skip
    _add_plan_options(parser, default=None)
    parser.add_argument(
        "--max-audit-age", type=parse_duration, default=DEFAULT_MAX_AUDIT_AGE, metavar="AGE",
        help="refuse findings older than this (default 1d): the store has moved on since",
    )  # fmt: skip
    subparsers = parser.add_subparsers(dest="system", metavar="SYSTEM")
    for spec in systems.all_systems():
        sub = subparsers.add_parser(
            spec.name, help=f"audit and plan: {spec.title}", description=spec.title
        )
        spec.add_source_options(sub)
        add_common_options(sub, out_help="the plan directory to create (must not exist, or empty)")
        _add_plan_options(sub, default=argparse.SUPPRESS, out=False)
        sub.add_argument(
            "--audit-out", type=Path, metavar="DIR",
            help="where the audit's findings go (default: PLAN_DIR.audit)",
        )  # fmt: skip
        sub.set_defaults(run=run)
    parser.set_defaults(run=run, system=None)


def _add_plan_options(parser: argparse.ArgumentParser, *, default: Any, out: bool = True) -> None:
    parser.add_argument(
        "--policy", type=Path, metavar="FILE", default=default,
        help="retention policy (.toml, .yaml or .yml)",
    )  # fmt: skip
    if out:
        parser.add_argument(
            "--out", type=Path, metavar="PLAN_DIR", default=default,
            help="the plan directory to create (must not exist or be empty)",
        )  # fmt: skip
    parser.add_argument(
        "--tombstone-budget", type=counter("--tombstone-budget", "an integer >= 0"),
        metavar="N", default=default,
        help="rows deleted one by one per partition at most (overrides the policy's "
        "tombstone_budget_per_partition)",
    )  # fmt: skip


def load_policy_of(args: argparse.Namespace) -> Policy:
    from mqforensics.retention.policy import load_policy

    if getattr(args, "policy", None) is None:
        raise ConfigError("--policy FILE is required")
    policy = load_policy(args.policy)
    if getattr(args, "tombstone_budget", None) is not None:
        policy = dataclasses.replace(policy, tombstone_budget_per_partition=args.tombstone_budget)
    return policy


def check_plan_out(out: Path | None) -> Path:
    if out is None:
        raise ConfigError("--out PLAN_DIR is required")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"plan {out} already exists and is not empty: choose another --out, or remove it"
        )
    return out


def check_fresh(manifest: dict[str, Any], where: Path, max_age: dt.timedelta) -> None:
    created = parse_instant(manifest["created_at"])
    age = dt.datetime.now(dt.UTC) - created
    if age > max_age:
        from mqforensics.retention.policy import duration_text

        raise ConfigError(
            f"audit {where} was made {utc_text(created)}, more than --max-audit-age "
            f"{duration_text(max_age)} ago: audit the store again (or raise --max-audit-age)"
        )


def plan_from_audit(
    directory: Path,
    policy: Policy,
    out: Path,
    *,
    max_age: dt.timedelta = DEFAULT_MAX_AUDIT_AGE,
) -> tuple[Plan, PlanParts]:
    """The plan of the audit in `directory` under `policy`, written to `out`."""
    from mqforensics.retention.manifest import write_plan

    manifest = read_manifest(directory)
    check_fresh(manifest, directory, max_age)
    spec = systems.get(manifest["system"])
    findings = read_findings(directory, raw=True)
    keyed = subjects.keyed_policy(policy, subjects.read_key(directory))
    searched = set(manifest.get("subjects_searched") or ())
    for rule in keyed.rules:
        if (
            rule.subjects
            and not set(rule.subjects) <= searched
            and rule.applies_to_system(spec.name)
        ):
            raise ConfigError(
                f"audit {directory} did not look for the data subjects of rule {rule.id!r}: "
                f"audit again with --erasure-policy {policy.path}"
            )
    parts = spec.plan(findings, keyed, manifest)
    known = {row["id"] for row in findings}
    cited = [a.findings for a in parts.actions] + [d.findings for d in parts.deferred]
    for index, ids in enumerate(cited):
        unknown = [ident for ident in ids if ident not in known]
        if unknown:
            raise ValueError(f"{spec.name} planner: item {index} cites no finding {unknown[0]}")
    inputs = {
        **manifest["plan_inputs"],
        "audit": {
            "directory": str(Path(directory).resolve()),
            "created_at": manifest["created_at"],
            "findings_sha256": manifest["findings"]["sha256"],
            "source": manifest["source"],
        },
    }
    written = write_plan(
        out,
        system=spec.name,
        as_of=parse_instant(manifest["as_of"]),
        policy=policy,
        inputs=inputs,
        actions=parts.actions,
        deferred=parts.deferred,
        notes=parts.notes,
    )
    return written, parts


def summarise(written: Plan, parts: PlanParts) -> str:
    """What the plan does per kind, what it would not do per reason, and the next step."""
    header = written.header
    lines = [f"{'action':<32}{'actions':>10}{'bytes':>16}{'tombstones':>12}"]
    for kind, total in sorted(header["totals"].items()):
        lines.append(
            f"{kind:<32}{total['actions']:>10,}{total['bytes']:>16,}{total['tombstones']:>12,}"
        )
    if not header["totals"]:
        lines.append("(no action)")
    deferred = header["deferred"]
    lines.append(f"deferred (not planned): {sum(deferred.values()):,}")
    for reason, count in sorted(deferred.items()):
        lines.append(f"{count:>8,}  {reason}")
    lines.extend(f"note: {note}" for note in parts.notes)
    directory = written.directory
    lines.append(f"Wrote plan {directory} (plan hash {written.sha256})")
    lines.append(
        f"Next: review it with `mqforensics report plan {directory}`, then approve it with "
        f"`mqforensics approve {directory} --by NAME`"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    policy = load_policy_of(args)
    out = check_plan_out(getattr(args, "out", None))
    if args.system is None:
        if args.findings is None:
            raise ConfigError("name an audit (--findings AUDIT_DIR) or a system to audit")
        written, parts = plan_from_audit(args.findings, policy, out, max_age=args.max_audit_age)
    else:
        if getattr(args, "findings", None) is not None:
            raise ConfigError("--findings plans an audit already made: name no system with it")
        audit_dir = args.audit_out or out.with_name(out.name + ".audit")
        written, parts = audit_and_plan(args, policy, out, audit_dir)
    print(f"Policy {policy.path} (sha256 {policy.sha256})")
    print(summarise(written, parts))
    return 0


def audit_and_plan(
    args: argparse.Namespace, policy: Policy, out: Path, audit_dir: Path
) -> tuple[Plan, PlanParts]:
    """`plan <system> SOURCE`: the audit (as `audit <system>` runs it) into `audit_dir`, then
    the plan of its findings."""
    from mqforensics import runner
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spec = systems.get(args.system)
    check_out(audit_dir, "--audit-out")
    audit_args = argparse.Namespace(
        **{**vars(args), "out": audit_dir, "erasure_policy": args.policy}
    )
    check_before_spark(spec, audit_args)
    spark = session(f"mqforensics-plan-{spec.name}")
    with spark_progress(spark, f"audit {spec.name}"):
        result = runner.audit(spark, spec, audit_args)
    result.loaded.close()
    print(f"{spec.title}: {result.loaded.source}; audited into {audit_dir}")
    return plan_from_audit(audit_dir, policy, out)
