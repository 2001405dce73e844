"""`mqforensics plan cyrus`: read one `mailboxes.db` (or dump), apply a policy, write a plan.

The input is read as `audit cyrus` reads it; a database with integrity problems is refused (a
plan made from a partial read could miss keys or grants). The plan header records the Cyrus
version, admins and default domain the rules were applied with: the purger re-checks every
action with the same ones. Nothing is changed here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics.errors import ConfigError, InputError
from mqforensics.systems.cyrus import checks
from mqforensics.systems.cyrus.audit import add_server_arguments
from mqforensics.units import parse_instant


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser(
        "cyrus", help="plan RACL repairs and DELETEACLs for a Cyrus IMAP mailboxes.db"
    )
    parser.add_argument(
        "--policy", type=Path, required=True, metavar="FILE", help="retention policy (.toml/.yaml)"
    )
    parser.add_argument("input", type=Path, metavar="DB_OR_DUMP", help="mailboxes.db or a dump")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="PLAN_DIR", help="the plan directory to create"
    )
    add_server_arguments(parser)
    parser.add_argument("--as-of", type=parse_instant, help="the plan's as-of time (default now)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    from mqforensics.retention.manifest import write_plan
    from mqforensics.retention.policy import load_policy
    from mqforensics.systems.cyrus.audit import load
    from mqforensics.systems.cyrus.planner import KINDS, SYSTEM, plan_cleanup

    policy = load_policy(args.policy)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise ConfigError(
            f"plan {args.out} already exists and is not empty: choose another --out, or remove it"
        )
    db = load(args.input)
    if db.problems:
        first = db.problems[0]
        raise InputError(
            f"{db.source}: {len(db.problems)} integrity problem(s), first {first.kind} at offset "
            f"{first.offset:#x} ({first.detail}): run `mqforensics audit cyrus` and plan from a "
            "whole copy"
        )
    if db.undecodable:
        raise InputError(
            f"{db.source}: {len(db.undecodable)} mailbox record(s) do not decode (first key "
            f"{checks.visible(db.undecodable[0][0])}): their ACLs are unknown, so no plan is made"
        )
    admins = args.admin if args.admin is not None else list(checks.DEFAULT_ADMINS)
    plan = plan_cleanup(
        db,
        policy,
        version=args.cyrus_version,
        admins=admins,
        default_domain=args.default_domain,
    )
    as_of = args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0)
    written = write_plan(
        args.out,
        system=SYSTEM,
        as_of=as_of,
        policy=policy,
        inputs={
            "source": str(args.input),
            "version": args.cyrus_version,
            "admins": admins,
            "default_domain": args.default_domain,
        },
        actions=plan.actions,
        deferred=plan.deferred,
        notes=plan.notes,
    )
    totals = written.header["totals"]
    for kind in KINDS:
        print(f"{kind:<22}{(totals.get(kind) or {}).get('actions', 0):>8,}")
    for reason, count in sorted(written.header["deferred"].items()):
        print(f"deferred {count:>6,}  {reason}")
    for note in plan.notes:
        print(f"note: {note}")
    print(f"Wrote plan {written.directory} (plan hash {written.sha256})")
    print(
        f"Next: review it with `mqforensics report plan {written.directory}`, then approve it "
        f"with `mqforensics approve {written.directory} --by NAME`"
    )
    return 0
