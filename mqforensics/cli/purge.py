"""``mqforensics purge PLAN [--apply]``: dry-run or carry out an approved cleanup plan.

Without ``--apply`` nothing is changed and no journal is written: every action is re-verified
against live state and the command says what would happen. Credentials come from the
environment only (docs/retention.md), never from the plan or the command line. Every system's
purge options are declared here (an option two systems read is one option); one that the plan's
system does not read is refused, not ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics import api, systems
from mqforensics.cli.arguments import add_options
from mqforensics.errors import ConfigError
from mqforensics.options import fields_of
from mqforensics.purge.retry import DEFAULT_RETRIES
from mqforensics.units import counter, plural

MAX_PRINTED_SKIPS = 50


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"--rate {text!r}: must be a positive number of operations per second")
    return value


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "purge",
        help="dry-run or apply a cleanup plan (journaled, resumable)",
        description="Re-verify every action of a plan against live state; with --apply, "
        "carry out an approved plan, journaled so that a rerun resumes after any failure.",
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="plan directory")
    parser.add_argument(
        "--apply", action="store_true", help="delete (default: dry run, nothing is changed)"
    )
    parser.add_argument(
        "--journal", type=Path, metavar="FILE", help="journal file (default: PLAN/journal.jsonl)"
    )
    parser.add_argument(
        "--rate",
        type=_rate,
        metavar="N",
        help="at most N destructive operations per second (each waits before its last check, "
        "never between the check and the delete)",
    )
    parser.add_argument(
        "--retries",
        type=counter("--retries", "a count of retries (0 or more)"),
        default=DEFAULT_RETRIES,
        metavar="N",
        help="try a call that failed on a transient server error (a timeout, a refused "
        "connection, an unavailable replica) again up to N times, waiting 0.5 s, 1 s, 2 s, ... "
        "before each, then stop the run resumably; 0: stop at the first (default: "
        f"{DEFAULT_RETRIES}). A retried delete goes through its wait and last check again",
    )
    add_system_options(parser)
    parser.set_defaults(run=run)


def add_system_options(parser: argparse.ArgumentParser) -> None:
    """Every registered system's purge options, in a group per system; an option several systems
    read (same name) is declared once, by the first."""
    declared: set[str] = set()
    for spec in systems.all_systems():
        names = [item.name for item in fields_of(spec.purge_options)]
        fresh = [name for name in names if name not in declared]
        if not fresh:
            continue
        group = parser.add_argument_group(f"{spec.title} plans")
        add_options(
            parser, spec.purge_options, skip=set(names) - set(fresh),
            groups={item.given.group: group for item in fields_of(spec.purge_options)},
        )  # fmt: skip
        declared.update(fresh)


def refuse_other_systems_options(system: str, args: argparse.Namespace) -> None:
    """An option given that the plan's system does not read is a mistake, not something to
    ignore (a ``--imap`` on a James plan would otherwise do nothing, silently)."""
    own = {item.name for item in fields_of(systems.get(system).purge_options)}
    for spec in systems.all_systems():
        for item in fields_of(spec.purge_options):
            if item.name not in own and getattr(args, item.name, item.default) != item.default:
                raise ConfigError(
                    f"{item.flag} is for {spec.name} plans; this plan is a {system} plan"
                )


def run(args: argparse.Namespace) -> int:
    """0: every action done or skipped; 1: the verification found problems; errors raise."""
    from mqforensics.cli.arguments import options_from
    from mqforensics.retention.manifest import read_plan
    from mqforensics.views.progress import purge_progress

    plan = read_plan(args.plan)
    spec = api.system_of_plan(plan)
    refuse_other_systems_options(spec.name, args)
    options = options_from(spec.purge_options, args)
    bar = purge_progress(int(plan.header.get("action_count") or 0))
    try:
        result = api.purge_plan(
            args.plan, apply=args.apply, journal=args.journal, rate=args.rate,
            retries=args.retries, on_action=bar, options=options,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    if result.skips:
        verb = "would be skipped" if not result.applied else "skipped"
        print(f"{plural(len(result.skips), 'action')} {verb}:")
        for seq, kind, reason in result.skips[:MAX_PRINTED_SKIPS]:
            print(f"  {seq} {kind}: {reason}")
        if len(result.skips) > MAX_PRINTED_SKIPS:
            where = result.journal or "the output above"
            print(f"  ... {len(result.skips) - MAX_PRINTED_SKIPS} more (see {where})")
    if result.verification is not None and not result.verification.get("ok"):
        return 1
    return 0
