"""`mqforensics plan slimta --policy P (--disk DIR | --redis URL | --s3 s3://B) --out PLAN`."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from mqforensics.errors import ConfigError
from mqforensics.systems.slimta import checks
from mqforensics.systems.slimta.audit import add_store_arguments, parse_count, stores_of
from mqforensics.units import parse_instant


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("slimta", help="plan the cleanup of slimta queue storage")
    parser.add_argument(
        "--policy", type=Path, required=True, metavar="FILE", help="retention policy (.toml/.yaml)"
    )
    add_store_arguments(parser)
    parser.add_argument(
        "--out", type=Path, required=True, metavar="PLAN_DIR", help="the plan directory to create"
    )
    parser.add_argument("--as-of", type=parse_instant, help="the plan's as-of time (default now)")
    parser.add_argument(
        "--retry-maximum", type=parse_count, default=checks.DEFAULT_RETRY_MAXIMUM,
        help="the slimta app's retry: maximum, for queue_leftovers (default %(default)s)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def plan_inputs(stores, retry_maximum: int) -> dict:
    """The plan header's inputs: the stores (no credential) and the disk layout, which the
    executor's census needs to find each ``.meta``."""
    inputs: dict = {"stores": stores.describe(), "retry_maximum": retry_maximum}
    if stores.disk is not None:
        layout = stores.disk
        inputs["disk"] = {"env_dir": layout.env_dir, "meta_dir": layout.meta_dir,
                          "tmp_dir": layout.tmp_dir}  # fmt: skip
    return inputs


def run(args: argparse.Namespace) -> int:
    from mqforensics.retention.manifest import write_plan
    from mqforensics.retention.policy import load_policy
    from mqforensics.spark import computed, session
    from mqforensics.systems.slimta.fleet import read_items
    from mqforensics.systems.slimta.items import SYSTEM
    from mqforensics.systems.slimta.planner import plan_cleanup

    policy = load_policy(args.policy)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise ConfigError(f"plan {args.out} already exists and is not empty: choose another --out")
    stores = stores_of(args)
    as_of = args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0)
    spark = session("mqforensics-plan-slimta")
    items = computed(read_items(spark, stores))
    parts = plan_cleanup(items, stores, policy, as_of, args.retry_maximum)
    written = write_plan(
        args.out,
        system=SYSTEM,
        as_of=as_of,
        policy=policy,
        inputs=plan_inputs(stores, args.retry_maximum),
        actions=parts.actions,
        deferred=parts.deferred,
        notes=parts.notes,
    )
    total = sum(a.bytes for a in parts.actions)
    print(f"{len(parts.actions)} action(s), {total:,} bytes; {len(parts.deferred)} deferred")
    for note in parts.notes:
        print(f"note: {note}")
    print(f"Wrote plan {written.directory} (plan hash {written.sha256})")
    return 0
