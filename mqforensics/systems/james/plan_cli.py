"""`mqforensics plan james`: read a James state, apply a retention policy, write a cleanup plan.

Nothing is deleted here: the plan directory (docs/retention.md) is reviewed with
``mqforensics report plan``, approved with ``mqforensics approve`` and only then carried out by
``mqforensics purge``. The plan records where the state was read from, never a credential.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError
from mqforensics.systems.james.audit import add_state_arguments

if TYPE_CHECKING:
    from mqforensics.retention.manifest import Plan
    from mqforensics.systems.james.planner import JamesPlan
    from mqforensics.systems.james.state import JamesState


def _budget(text: str) -> int:
    if not text.isdigit():
        raise ConfigError(f"--tombstone-budget {text!r} is not an integer >= 0")
    return int(text)


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser(
        "james", help="plan the cleanup of an Apache James distributed mail queue"
    )
    parser.add_argument(
        "--policy", type=Path, required=True, metavar="FILE", help="retention policy (.toml/.yaml)"
    )
    add_state_arguments(parser)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="PLAN_DIR",
        help="the plan directory to create (must not exist or be empty)",
    )
    parser.add_argument(
        "--tombstone-budget",
        type=_budget,
        metavar="N",
        help="erased rows deleted one by one per partition (overrides the policy's "
        "tombstone_budget_per_partition)",
    )
    parser.set_defaults(run=run)  # fmt: skip


def _blob_source(args: argparse.Namespace) -> str | None:
    """Where the blob listing came from, as ``s3://bucket`` or a path: never a credential (an
    ``s3://user:secret@bucket`` URL is cut to its bucket)."""
    if getattr(args, "blobs", None):
        from mqforensics.sources.blobstore import Location

        bucket = Location.parse(args.blobs).bucket.rpartition("@")[2]
        return f"s3://{bucket}"
    for name in ("blob_inventory", "blob_dir", "blob_listing"):
        value = getattr(args, name, None)
        if value:
            return str(value)
    return None


def plan_inputs(args: argparse.Namespace, state: JamesState) -> dict[str, Any]:
    """The plan header's `inputs`: what was read, as ``host:port`` and ``s3://bucket`` only."""
    from mqforensics.retention.manifest import utc_text
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    cassandra = CassandraEndpoint.parse(args.cassandra).where if args.cassandra else None
    return {
        "source": state.source,
        "cassandra": cassandra,
        "keyspace": args.keyspace,
        "snapshot": str(args.snapshot) if args.snapshot else None,
        "snapshot_time": utc_text(state.as_of) if args.snapshot else None,
        "blobs": _blob_source(args),
        "references_complete": state.references_complete,
    }


def summarise(plan: JamesPlan, written: Plan) -> str:
    """What the plan does, per kind; what it would not do, per reason; and the next step."""
    from mqforensics.systems.james.planner import KINDS, plan_summary

    summary = plan_summary(plan)
    totals = summary["totals"]
    lines = [f"{'action':<30}{'actions':>10}{'bytes':>16}{'tombstones':>12}"]
    for kind in KINDS:
        t = totals.get(kind, {"actions": 0, "bytes": 0, "tombstones": 0})
        lines.append(f"{kind:<30}{t['actions']:>10,}{t['bytes']:>16,}{t['tombstones']:>12,}")
    deferred = summary["deferred"]
    lines.append(f"deferred (not planned): {sum(deferred.values()):,}")
    for reason, count in sorted(deferred.items()):
        lines.append(f"{count:>8,}  {reason}")
    if plan.notes:
        lines.append("notes:")
        lines.extend(f"  - {note}" for note in plan.notes)
    directory = written.directory
    lines.append(f"Wrote plan {directory} (plan hash {written.sha256})")
    lines.append(
        f"Next: review it with `mqforensics report plan {directory}`, then approve it with "
        f"`mqforensics approve {directory} --by NAME`"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from mqforensics.retention.manifest import write_plan
    from mqforensics.retention.policy import load_policy
    from mqforensics.spark import session
    from mqforensics.systems.james.audit import load_state
    from mqforensics.systems.james.planner import SYSTEM, plan_cleanup

    policy = load_policy(args.policy)
    if args.tombstone_budget is not None:
        policy = dataclasses.replace(policy, tombstone_budget_per_partition=args.tombstone_budget)
    # Refuse a used --out before reading the store, which can take long (write_plan checks too).
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise ConfigError(
            f"plan {args.out} already exists and is not empty: choose another --out, or remove it"
        )
    spark = session("mqforensics-plan-james")
    state = load_state(spark, args)
    plan = plan_cleanup(state, policy, keyspace=args.keyspace)
    written = write_plan(
        args.out,
        system=SYSTEM,
        as_of=state.as_of,
        policy=policy,
        inputs=plan_inputs(args, state),
        actions=plan.actions,
        deferred=plan.deferred,
        notes=plan.notes,
    )
    state.unpersist()
    print(f"James queue state: {state.source}; as of {state.as_of:%Y-%m-%dT%H:%M:%SZ}")
    print(f"Policy {policy.path} (sha256 {policy.sha256})")
    print(summarise(plan, written))
    return 0
