"""`mqforensics plan logqueue`: plan the deletion of segment files no restart will read again."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from mqforensics.errors import ConfigError
from mqforensics.units import parse_instant


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser(
        "logqueue", help="plan the reclamation of garbage segments of log-structured queues"
    )
    parser.add_argument(
        "--policy", type=Path, required=True, metavar="FILE", help="retention policy (.toml/.yaml)"
    )
    parser.add_argument("dirs", nargs="+", type=Path, metavar="QUEUE_DIR")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="PLAN_DIR", help="the plan directory to create"
    )
    parser.add_argument("--as-of", type=parse_instant, help="the plan's as-of time (default now)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mqforensics.retention.manifest import write_plan
    from mqforensics.retention.policy import load_policy
    from mqforensics.systems.logqueue.reclaim import SYSTEM, plan_reclamation

    policy = load_policy(args.policy)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise ConfigError(f"plan {args.out} already exists and is not empty: choose another --out")
    dirs = [Path(d) for d in args.dirs]
    actions, deferred, notes = plan_reclamation(dirs, policy)
    written = write_plan(
        args.out,
        system=SYSTEM,
        as_of=args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0),
        policy=policy,
        inputs={"queues": [str(d.resolve()) for d in dirs]},
        actions=actions,
        deferred=deferred,
        notes=notes,
    )
    total = sum(a.bytes for a in actions)
    print(f"{len(actions)} segment(s) to delete, {total:,} bytes; {len(deferred)} deferred")
    for note in notes:
        print(f"note: {note}")
    print(f"Wrote plan {written.directory} (plan hash {written.sha256})")
    return 0
