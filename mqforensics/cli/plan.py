"""``mqforensics plan``: an audit's findings and a retention policy in, a cleanup plan out.

``plan --findings AUDIT_DIR`` plans an audit already made; ``plan <system> SOURCE`` audits the
store first (into ``--audit-out``, by default ``<PLAN_DIR>.audit``). Both call the API.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mqforensics import api, planning, systems
from mqforensics.cli.arguments import add_options, options_from
from mqforensics.errors import ConfigError
from mqforensics.options import flag_parser
from mqforensics.spec import CommonOptions
from mqforensics.units import counter, parse_duration


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
        "--max-audit-age", type=flag_parser("--max-audit-age", parse_duration),
        default=planning.DEFAULT_MAX_AUDIT_AGE,
        metavar="AGE",
        help="refuse findings older than this (default 1d): the store has moved on since",
    )  # fmt: skip
    subparsers = parser.add_subparsers(dest="system", metavar="SYSTEM")
    for spec in systems.all_systems():
        sub = subparsers.add_parser(
            spec.name, help=f"audit and plan: {spec.title}", description=spec.title
        )
        add_options(sub, spec.options)
        add_options(
            sub, CommonOptions, skip=("erasure_policy",),
            help_of={"out": "the plan directory to create (must not exist, or empty)"},
        )  # fmt: skip
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


def run(args: argparse.Namespace) -> int:
    policy_path = getattr(args, "policy", None)
    budget = getattr(args, "tombstone_budget", None)
    if args.system is None:
        policy = planning.policy_of(policy_path, budget)
        out = planning.check_plan_out(getattr(args, "out", None))
        if args.findings is None:
            raise ConfigError("name an audit (--findings AUDIT_DIR) or a system to audit")
        written, parts = planning.plan_from_audit(
            args.findings, policy, out, max_age=args.max_audit_age
        )
        plan = api.Plan(written, list(parts.notes))
    else:
        if getattr(args, "findings", None) is not None:
            raise ConfigError("--findings plans an audit already made: name no system with it")
        spec = systems.get(args.system)
        common = {name: getattr(args, name) for name in ("as_of", "reveal_addresses")}
        plan = api.audit_and_plan(
            spec.name, policy=policy_path, out=getattr(args, "out", None), audit_out=args.audit_out,
            options=options_from(spec.options, args), tombstone_budget=budget, **common,
        )  # fmt: skip
    policy_file = plan.files.header
    print(f"Policy {policy_file['policy']['path']} (sha256 {policy_file['policy']['sha256']})")
    print(plan.summary())
    return 0
