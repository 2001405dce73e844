"""``mqforensics history alerts | show | runs``: the run history for schedulers and people.

``history alerts`` prints every alert of the rules (default: the bundled ones) that fires at a
store's latest run, and exits 1 when one does, 0 when none does, 2 on bad input (a history that
holds no run, a rules file that is not valid): the exit status a scheduler acts on. ``history
show`` prints a metric's series, ``history runs`` the runs. Each reads the history with Spark,
after its inputs are checked.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics.api_history import Alerts, history_alerts, open_history, where_of
from mqforensics.history.rules import load_rules
from mqforensics.history.store import ENVIRONMENT, check_readable
from mqforensics.metrics import value_text
from mqforensics.units import utc_text

LABELS = ("system", "scope", "queue", "check", "item")


def add_parser(commands: argparse._SubParsersAction) -> None:
    history = commands.add_parser(
        "history", help="the run history: alerts, a metric's series, the runs",
        description="Read the run history audits and validations append to (--history on "
        "audit and validate; docs/history.md).",
    )  # fmt: skip
    kinds = history.add_subparsers(dest="history", required=True, metavar="WHAT")
    alerts = kinds.add_parser(
        "alerts", help="the alerts firing at each store's latest run (exit 1 when any)",
        description="Evaluate the alert rules over the history and print the alerts that fire "
        "at each store's latest run: rule, metric, store and labels, values, since when. Exit "
        "0: none; 1: some; 2: bad input.",
    )  # fmt: skip
    _history_option(alerts)
    alerts.add_argument(
        "--rules", type=Path, metavar="FILE",
        help="the alert rules, TOML (default: the bundled mqforensics/history/default_rules.toml)",
    )  # fmt: skip
    alerts.add_argument("--system", metavar="SYSTEM", help="only the stores of this system")
    alerts.add_argument(
        "--every-run", action="store_true",
        help="every run where a rule fired, not only the latest ones (the exit status still "
        "says whether one fires at a latest run)",
    )  # fmt: skip
    alerts.set_defaults(run=run_alerts)

    show = kinds.add_parser(
        "show", help="a metric's series over time",
        description="Print the points of a metric, one line per run and series, oldest first; "
        "the label options are shell-style patterns (--queue 'out*').",
    )  # fmt: skip
    _history_option(show)
    show.add_argument("--metric", required=True, metavar="NAME",
                      help="e.g. live_mails, browse_start_lag, reclaimable_bytes")  # fmt: skip
    for label in LABELS:
        show.add_argument(
            f"--{label}", metavar="PATTERN", help=f"only series whose {label} matches"
        )
    show.set_defaults(run=run_show)

    runs = kinds.add_parser("runs", help="the runs the history holds, per store")
    _history_option(runs)
    runs.set_defaults(run=run_runs)


def _history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history", metavar="DIR|URL",
        help=f"the run history (a directory, or a URL Spark reads); default: ${ENVIRONMENT}",
    )  # fmt: skip


def run_alerts(args: argparse.Namespace) -> int:
    load_rules(args.rules)  # a bad rules file, then a missing history, before Spark starts
    check_readable(where_of(args.history))
    found = history_alerts(args.history, rules=args.rules, system=args.system, every_run=True)
    firing = Alerts([alert for alert in found if alert.latest], found.rules, found.history)
    for alert in found if args.every_run else firing:
        print(alert.line())
        print(f"  why: {alert.why}")
    print(found.summary() if args.every_run else firing.summary())
    return 1 if firing else 0


def run_show(args: argparse.Namespace) -> int:
    check_readable(where_of(args.history))
    history = open_history(args.history)
    points = history.series(args.metric, **{label: getattr(args, label) for label in LABELS})
    if points.empty:
        print(f"no series of {args.metric} in the history {history.location}")
        return 0
    for (system, scope, queue, check, item), rows in points.groupby(
        ["system", "scope", "queue", "check", "item"], sort=False
    ):
        labels = " ".join(f"{k} {v}" for k, v in (("queue", queue), ("check", check),
                                                   ("item", item)) if v)  # fmt: skip
        print(f"{args.metric} of {system} {scope}" + (f" {labels}" if labels else ""))
        for row in rows.itertuples():
            print(f"  {utc_text(row.as_of.to_pydatetime())}  {value_text(row.value, row.unit)}")
    return 0


def run_runs(args: argparse.Namespace) -> int:
    check_readable(where_of(args.history))
    history = open_history(args.history)
    table = history.runs()
    for row in table.itertuples():
        print(f"{row.system} {row.scope}: {row.kind} judged at "
              f"{utc_text(row.as_of.to_pydatetime())}, run {row.run_id}, "
              f"{row.figures} figures")  # fmt: skip
    print(f"{len(table)} runs in the history {history.location}")
    return 0
