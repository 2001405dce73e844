"""`mqforensics audit logqueue DIR...`: check log-structured queue directories.

Every directory is read by Spark, one task per segment file (`fleet`), and replayed per queue in
the executors (`state`); the checks (`checks`) are written as by `audit james` (findings.json and
findings.parquet, atomically) and summarised. Mail addresses are pseudonymised unless
``--reveal-addresses``. Exit status: 0, 1 when any finding is ``error`` or worse, 2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError
from mqforensics.findings import exit_status
from mqforensics.systems.james.audit import (
    add_findings_arguments,
    parse_duration,
    summarise,
    write_findings,
)
from mqforensics.systems.logqueue import checks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.systems.logqueue.state import LogQueueState


def parse_bytes(text: str) -> int:
    """A byte count: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"--restart-lag-bytes {text!r} is not a byte count")
    return value


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("logqueue", help="log-structured (crash-only) MTA queue dirs")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    add_findings_arguments(parser)
    parser.add_argument(
        "--retry-horizon", type=parse_duration, default=checks.DEFAULT_RETRY_HORIZON,
        help="a message not finished this long after its first envelope is stuck (default 5d)",
    )  # fmt: skip
    parser.add_argument(
        "--restart-lag-bytes", type=parse_bytes, default=checks.DEFAULT_RESTART_LAG_BYTES,
        help="segment bytes the saved restart suffix may lag the garbage end (default 64 MiB)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def audit(
    spark: SparkSession, args: argparse.Namespace
) -> tuple[LogQueueState, checks.AuditOptions, list[dict[str, Any]]]:
    """Read and replay the directories, run the checks and write the findings to ``args.out``."""
    from mqforensics.systems.logqueue.state import read_state

    as_of = args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0)
    state = read_state(spark, args.dirs)
    options = checks.AuditOptions(
        as_of=as_of,
        retry_horizon=args.retry_horizon,
        restart_lag_bytes=args.restart_lag_bytes,
        reveal_addresses=args.reveal_addresses,
    )
    return state, options, write_findings(checks.run_checks(state, options), args.out)


def run(args: argparse.Namespace) -> int:
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spark = session("mqforensics-audit-logqueue")
    with spark_progress(spark, "audit logqueue"):
        state, options, rows = audit(spark, args)
    as_of = options.as_of
    print(f"Log queues: {len(state.dirs)} dir(s), one Spark task per segment file; "
          f"judged at {as_of:%Y-%m-%dT%H:%M:%SZ}")  # fmt: skip
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'} and {args.out / 'findings.parquet'}")
    return exit_status(rows)
