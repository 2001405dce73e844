"""What an audit of Postfix reads (`options.PostfixOptions`: ``queue_dir=[HOST=]DIR...``).

The loader the audit runner calls (`load`): every queue directory is listed on the driver
and its files read by Spark tasks (`fleet`), into the files frame and its projections
(`frames.PostfixFrames`) every check reads (`checks`, with `settings`). A live queue directory
is only ever read; an empty one is nothing to audit (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import PostfixOptions, Settings
from mqforensics.systems.postfix.postconf import lifetimes
from mqforensics.units import utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def load(spark: SparkSession, options: PostfixOptions, common: AuditArgs) -> Loaded[PostfixFrames]:
    """The queue directories read into the files frame (computed now: every check reads it)."""
    from mqforensics.spark import computed
    from mqforensics.systems.postfix.fleet import read_queue_dirs

    dirs = options.queue_dirs()
    files = computed(read_queue_dirs(spark, dirs))
    counts = {
        (r["kind"], r["queue"]): r["count"]
        for r in files.groupBy("kind", "queue").count().collect()
    }
    messages = sum(n for (kind, _), n in counts.items() if kind == "message")
    logs = sum(n for (kind, _), n in counts.items() if kind == "log")
    by_queue = ", ".join(f"{n} {queue}" for (_, queue), n in sorted(counts.items()))
    config_dir = str(Path(options.config_dir).resolve()) if options.config_dir is not None else None
    main_cf = options.main_cf_file()
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


def settings(options: PostfixOptions, common: AuditArgs, loaded: Loaded[PostfixFrames]) -> Settings:
    """What every check judges against."""
    return Settings(
        as_of=loaded.as_of,
        lifetimes=lifetimes(options.main_cf_file()),
        expiry_grace=options.expiry_grace,
        incomplete_grace=options.incomplete_grace,
        hold_age=options.hold_age,
        retention=options.retention,
        subjects=common.subjects,
        subject_key=common.subject_key,
    )
