"""What an audit of Postfix reads (`options.PostfixOptions`: ``queue_dir=[HOST=]DIR...``).

The loader the audit runner calls (`load`): every queue directory is listed on the driver
and its files read by Spark tasks (`fleet`), into the files frame and its projections
(`frames.PostfixFrames`) every check reads (`checks`, with `settings`). A live queue directory
is only ever read; an empty one is nothing to audit (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.file_digest import listing_fingerprint
from mqforensics.filenames import is_odd, odd_names_note, shown, unescaped
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import PostfixOptions, Settings
from mqforensics.systems.postfix.postconf import lifetimes
from mqforensics.units import utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def load(spark: SparkSession, options: PostfixOptions, common: AuditArgs) -> Loaded[PostfixFrames]:
    """The queue directories read into the files frame (computed now: every check reads it)."""
    from pyspark.sql import functions as F

    from mqforensics.spark import computed
    from mqforensics.systems.postfix import fast
    from mqforensics.systems.postfix.content import search_files
    from mqforensics.systems.postfix.fleet import read_queue_dirs

    dirs = options.queue_dirs()
    files = computed(read_queue_dirs(spark, dirs))
    searched = common.searched
    # The queue files' envelopes and messages searched once, for personal_data and
    # unreadable_content alike (`content.search_files`).
    content = computed(search_files(files, searched)) if searched else None
    escaped = F.when(F.col("path").contains("\\x"), F.struct("queue_dir", "path"))
    grouped = (
        files.groupBy("kind", "queue")
        .agg(F.count("*").alias("count"), F.collect_list(escaped).alias("escaped"))
        .collect()
    )
    counts = {(r["kind"], r["queue"]): r["count"] for r in grouped}
    odd = [shown(d.path) for d in dirs if is_odd(d.path)]
    odd += [
        e["path"] for r in grouped for e in r["escaped"] if _odd_below(e["queue_dir"], e["path"])
    ]
    messages = sum(n for (kind, _), n in counts.items() if kind == "message")
    logs = sum(n for (kind, _), n in counts.items() if kind == "log")
    from mqforensics.units import plural

    def per_queue(kind: str) -> str:  # "6 in deferred, 2 in hold": the files of one kind
        found = [f"{n:,} in {queue}" for (of, queue), n in sorted(counts.items()) if of == kind]
        return f" ({', '.join(found)})" if found else ""

    notes = [
        f"files: {plural(messages, 'queue file')}{per_queue('message')}, "
        f"{plural(logs, 'log file')}{per_queue('log')}"
    ]
    odd_note = odd_names_note(odd)
    if odd_note is not None:
        notes.append(odd_note)
    slower = fast.kernel_note()  # the same answers, from the reference reader alone
    if slower is not None:
        notes.append(slower)
    config_dir = (
        shown(Path(options.config_dir).resolve()) if options.config_dir is not None else None
    )
    main_cf = options.main_cf_file()
    inputs: list[dict[str, Any]] = [
        {
            "kind": "Postfix queue_directory",
            "location": shown(d.path),
            "host": shown(d.host),
            # What the queue held when it was read (a live queue's changes as mail moves).
            "fingerprint": listing_fingerprint([d.path]),
        }
        for d in dirs
    ]
    if main_cf is not None:
        inputs.append({"kind": "Postfix main.cf", "location": shown(main_cf.resolve())})
    return Loaded(
        frames=PostfixFrames(files, content),
        source="; ".join(
            f"postfix {shown(d.host)}: {shown(d.path)}"
            if d.host != d.path
            else f"postfix {shown(d.path)}"
            for d in dirs
        ),
        as_of=common.as_of or utc_now(),
        objects=messages + logs,
        inputs=inputs,
        plan_inputs={
            "queue_dirs": [{"host": shown(d.host), "path": shown(d.path)} for d in dirs],
            "config_dir": config_dir,
        },
        notes=notes,
    )


def _odd_below(queue_dir: str, path: str) -> bool:
    """Whether the escaped `path` names an odd file below the escaped `queue_dir` (an odd queue
    directory itself is named once, not in each of its files)."""
    return is_odd(unescaped(path[len(queue_dir) :]))


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
        full_subjects=common.full_subjects,
    )
