"""Planning: an audit's findings and a retention policy in, a cleanup plan out (what
`mqforensics.plan` and the ``plan`` command run).

A plan is made from findings, never from the store: `plan_from_audit` reads the audit's
``findings.json`` and ``manifest.json`` (the system comes from the manifest); auditing a store
and planning at once (`mqforensics.api.audit_and_plan`, the ``plan <system> SOURCE`` command)
runs the same audit first and then this. The system's planner only selects findings by policy
and adds the preconditions the purger re-checks; every action cites the ids of the findings that
justify it, and every id it cites is one of the audit's. An audit older than the maximum age
(``--max-audit-age``) is refused: the store has moved on since.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics import subjects, systems
from mqforensics.audit_manifest import read_manifest
from mqforensics.errors import ConfigError
from mqforensics.findings import read_findings
from mqforensics.runner import check_out
from mqforensics.units import duration_text, parse_instant, utc_text

if TYPE_CHECKING:
    from mqforensics.retention.manifest import Plan
    from mqforensics.retention.policy import Policy
    from mqforensics.spec import PlanParts, System

DEFAULT_MAX_AUDIT_AGE = dt.timedelta(days=1)


def policy_of(path: Path | None, tombstone_budget: int | None = None) -> Policy:
    """The policy file `path` read against every system's rule kinds; `tombstone_budget`
    (when given) overrides its ``tombstone_budget_per_partition``."""
    if path is None:
        raise ConfigError("--policy FILE is required (policy= in Python)")
    policy = systems.load_policy(path)
    if tombstone_budget is not None:
        policy = dataclasses.replace(policy, tombstone_budget_per_partition=tombstone_budget)
    return policy


def check_plan_out(out: Path | None) -> Path:
    """`out`, a plan directory that does not exist (or is empty) and can be written; a
    ConfigError naming it otherwise (a read-only file system too), before anything is read."""
    if out is None:
        raise ConfigError("--out PLAN_DIR is required (out= in Python)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"plan {out} already exists and is not empty: choose another --out, or remove it"
        )
    check_out(out)
    return out


def check_policy_applies(policy: Policy, spec: System) -> None:
    """A ConfigError when no rule of `policy` is one `spec`'s planner acts on (a rule of one of
    its kinds, or ``erase_subject``, not restricted to other systems): its plan would be empty
    whatever the findings, which is a wrong policy, not a clean store."""
    from mqforensics.retention.policy import ERASE_SUBJECT

    kinds = [kind.name for kind in spec.rule_kinds] + [ERASE_SUBJECT]
    if any(r.kind in kinds and r.applies_to_system(spec.name) for r in policy.rules):
        return
    theirs = sorted({f"{r.kind} ({', '.join(r.systems)})" if r.systems else r.kind
                     for r in policy.rules})  # fmt: skip
    raise ConfigError(
        f"policy {policy.path}: no rule applies to {spec.name} (the audit's system): "
        f"{spec.name} plans rules of kind {', '.join(kinds)}; the policy's rules are "
        f"{', '.join(theirs) or 'none'}"
    )


def check_fresh(manifest: dict[str, Any], where: Path, max_age: dt.timedelta) -> None:
    created = parse_instant(manifest["created_at"])
    age = dt.datetime.now(dt.UTC) - created
    if age > max_age:
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
    check_policy_applies(policy, spec)
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
