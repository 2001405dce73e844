"""`mqforensics purge PLAN [--apply]`: dry-run or carry out an approved cleanup plan.

Without ``--apply`` nothing is changed and no journal is written: every action is re-verified
against live state and the command says what would happen, so a plan can be reviewed against
the store before anyone approves it. Credentials come from the environment only (see
docs/retention.md), never from the plan or the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mqforensics.errors import ConfigError
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
    read (same dest) is declared once, by the first, and listed in the others' help."""
    from mqforensics import systems

    declared: set[str] = set()
    for spec in systems.all_systems():
        fresh = [option for option in spec.purge_options if option.dest not in declared]
        if not fresh:
            continue
        group = parser.add_argument_group(f"{spec.title} plans")
        for option in fresh:
            option.add_to(group)
            declared.add(option.dest)


def refuse_other_systems_options(system: str, args: argparse.Namespace) -> None:
    """An option given that the plan's system does not read is a mistake, not something to
    ignore (a ``--imap`` on a James plan would otherwise do nothing, silently)."""
    from mqforensics import systems

    own = {option.dest for option in systems.get(system).purge_options}
    for spec in systems.all_systems():
        for option in spec.purge_options:
            if option.dest in own:
                continue
            flag_default = option.kwargs.get("action") == "store_true"
            default = option.kwargs.get("default", False if flag_default else None)
            if getattr(args, option.dest, default) != default:
                flag = max(option.flags, key=len)
                raise ConfigError(f"{flag} is for {spec.name} plans; this plan is a {system} plan")


def run(args: argparse.Namespace) -> int:
    """0: every action done or skipped; 1: the verification found problems; errors raise."""
    # Imported here so that building the command line parser stays cheap.
    from mqforensics.purge.engine import executors_for, run_purge
    from mqforensics.purge.retry import one_line
    from mqforensics.retention.manifest import read_plan
    from mqforensics.views.progress import purge_progress

    plan = read_plan(args.plan)
    refuse_other_systems_options(plan.system, args)
    executors = executors_for(plan, args)
    bar = purge_progress(int(plan.header.get("action_count") or 0))
    try:
        result = run_purge(
            plan, executors, apply=args.apply, journal_path=args.journal, rate=args.rate,
            on_action=bar, retries=args.retries,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
        for executor in executors:
            try:
                executor.close()
            except Exception as exc:  # must not hide the run's own outcome
                print(f"closing {type(executor).__name__}: {one_line(exc)}", file=sys.stderr)
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
