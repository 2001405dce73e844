"""What `mqforensics audit postfix --queue-dir [HOST=]DIR... --out DIR` reads.

The source options and their checks before Spark starts (`add_source_options`, `check_inputs`),
and the loader the audit runner calls (`load`): every queue directory is listed on the driver
and its files read by Spark tasks (`fleet`), into the files frame and its projections
(`frames.PostfixFrames`) every check reads (`checks`, with `settings`). A live queue directory
is only ever read; an empty one is nothing to audit (exit 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.postfix import options as defaults
from mqforensics.systems.postfix.options import AuditOptions
from mqforensics.systems.postfix.postconf import lifetimes
from mqforensics.systems.postfix.queue_dir import QueueDir
from mqforensics.units import parse_duration, utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAIN_CF = "main.cf"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """The queue directories to read, where the instance's settings are, and the thresholds."""
    source = parser.add_argument_group("queues")
    source.add_argument(
        "--queue-dir", action="append", required=True, metavar="[HOST=]DIR",
        help="a Postfix queue_directory (live: read only; or a copy), repeatable for a fleet; "
        "HOST names it in findings (default: the directory)",
    )  # fmt: skip
    source.add_argument(
        "--config-dir", type=Path, metavar="DIR",
        help="the instance's Postfix config directory (postconf -c): its main.cf gives the "
        "queue lifetimes, and a plan purges through postsuper -c DIR",
    )  # fmt: skip
    source.add_argument(
        "--main-cf", type=Path, metavar="FILE",
        help="a main.cf or `postconf -n` output giving maximal_queue_lifetime and "
        "bounce_queue_lifetime (default: --config-dir's main.cf, else Postfix's 5d)",
    )  # fmt: skip
    thresholds = parser.add_argument_group("thresholds")
    thresholds.add_argument(
        "--expiry-grace", type=parse_duration, default=defaults.DEFAULT_EXPIRY_GRACE,
        metavar="AGE", help="how long past its lifetime deferred mail may stay (default 1h)",
    )  # fmt: skip
    thresholds.add_argument(
        "--incomplete-grace", type=parse_duration, default=defaults.DEFAULT_INCOMPLETE_GRACE,
        metavar="AGE",
        help="age after which a queue file not marked ready is a dead writer's (default 1h)",
    )  # fmt: skip
    thresholds.add_argument(
        "--hold-age", type=parse_duration, default=defaults.DEFAULT_HOLD_AGE, metavar="AGE",
        help="how long mail may stay on hold (default 7d)",
    )  # fmt: skip
    thresholds.add_argument(
        "--retention", type=parse_duration, default=defaults.DEFAULT_RETENTION, metavar="AGE",
        help="how long queued mail may hold personal data (default 7d)",
    )  # fmt: skip


def queue_dirs_of(args: argparse.Namespace) -> list[QueueDir]:
    """The queue directories named, checked; a ConfigError for one named twice."""
    dirs = [QueueDir.parse(given) for given in args.queue_dir]
    for what in ("host", "path"):
        values = [getattr(d, what) for d in dirs]
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ConfigError(f"--queue-dir names the {what} {repeated[0]} twice")
    return dirs


def main_cf_of(args: argparse.Namespace) -> Path | None:
    """The file the lifetimes come from: --main-cf, else --config-dir's main.cf, else none."""
    if args.main_cf is not None:
        return Path(args.main_cf)
    if args.config_dir is not None:
        return Path(args.config_dir) / MAIN_CF
    return None


def check_inputs(args: argparse.Namespace) -> None:
    """Everything that can be checked before Spark starts: the directories are queue
    directories, the config directory is one, the lifetimes read."""
    queue_dirs_of(args)
    if args.config_dir is not None and not Path(args.config_dir).is_dir():
        raise InputError(f"--config-dir {args.config_dir}: no such directory")
    main_cf = main_cf_of(args)
    if main_cf is not None:
        if main_cf.is_dir():
            raise InputError(f"{main_cf}: a directory, not a main.cf")
        if not main_cf.is_file():
            raise InputError(f"{main_cf}: no such main.cf")
        lifetimes(main_cf)


def load(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """The queue directories read into the files frame (computed now: every check reads it)."""
    from mqforensics.spark import computed
    from mqforensics.systems.postfix.fleet import read_queue_dirs
    from mqforensics.systems.postfix.frames import PostfixFrames

    dirs = queue_dirs_of(args)
    files = computed(read_queue_dirs(spark, dirs))
    counts = {
        (r["kind"], r["queue"]): r["count"]
        for r in files.groupBy("kind", "queue").count().collect()
    }
    messages = sum(n for (kind, _), n in counts.items() if kind == "message")
    logs = sum(n for (kind, _), n in counts.items() if kind == "log")
    by_queue = ", ".join(f"{n} {queue}" for (_, queue), n in sorted(counts.items()))
    config_dir = str(Path(args.config_dir).resolve()) if args.config_dir is not None else None
    main_cf = main_cf_of(args)
    inputs: list[dict[str, Any]] = [
        {"kind": "Postfix queue_directory", "location": d.path, "host": d.host} for d in dirs
    ]
    if main_cf is not None:
        inputs.append({"kind": "Postfix main.cf", "location": str(main_cf.resolve())})
    return Loaded(
        frames=PostfixFrames(files),
        source="; ".join(
            f"postfix {d.host}: {d.path}" if d.host != d.path else f"postfix {d.path}" for d in dirs
        ),
        as_of=common.as_of or utc_now(),
        objects=messages + logs,
        inputs=inputs,
        plan_inputs={
            "queue_dirs": [{"host": d.host, "path": d.path} for d in dirs],
            "config_dir": config_dir,
        },
        notes=[f"files: {messages} queue files, {logs} logs ({by_queue or 'none'})"],
    )


def settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> AuditOptions:
    """What every check judges against."""
    return AuditOptions(
        as_of=loaded.as_of,
        lifetimes=lifetimes(main_cf_of(args)),
        expiry_grace=args.expiry_grace,
        incomplete_grace=args.incomplete_grace,
        hold_age=args.hold_age,
        retention=args.retention,
        subjects=common.subjects,
        subject_key=common.subject_key,
    )
