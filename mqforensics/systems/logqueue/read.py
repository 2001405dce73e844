"""What an audit of log queues reads (`options.LogQueueOptions`: ``dirs=[DIR...]``).

The loader the audit runner calls (`load`): every queue directory is read in Spark (one task
per segment file for the records, one for each file's size, SHA-256 and damage; one replay per
queue: `frames.read_state`) into the frames every check reads (`checks`, with `settings`). A
directory without any segment file is noted; nothing read at all is nothing to audit (exit 2).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.filenames import fs_path, is_odd, odd_names_note, shown, unescaped
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.options import LogQueueOptions, Settings
from mqforensics.units import plural, utc_now, utc_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.systems.logqueue.frames import LogQueueState


def fingerprint(directory: str, segments: list[Any], spool: dict[str, int] | None = None) -> str:
    """SHA-256 of a queue directory (escaped text) as the audit read it: each segment's name,
    size and SHA-256, ``restart.lq``'s bytes and the spool's names (their bytes) and sizes
    (`spool`: `frames.list_spool` of it, listed when not given)."""
    from mqforensics.systems.logqueue.frames import list_spool

    digest = hashlib.sha256()
    for row in sorted(segments, key=lambda r: r["file"]):
        digest.update(f"segment {row['file']} {row['size']} {row['sha256']}\n".encode())
    restart = Path(fs_path(directory)) / layout.RESTART_FILE
    try:
        data = restart.read_bytes()
        digest.update(f"restart {hashlib.sha256(data).hexdigest()}\n".encode())
    except FileNotFoundError:
        digest.update(b"restart none\n")
    except OSError as exc:
        digest.update(f"restart unreadable {exc.errno}\n".encode())
    if spool is None:
        spool = list_spool(Path(fs_path(directory)))
    for name, size in spool.items():
        digest.update(b"spool " + os.fsencode(name) + f" {size}\n".encode())
    return digest.hexdigest()


def load(spark: SparkSession, options: LogQueueOptions, common: AuditArgs) -> Loaded[LogQueueState]:
    """Every directory read and replayed (`frames.read_state`); objects: segment files and
    their whole records (a directory without any segment holds nothing to audit)."""
    from mqforensics.systems.logqueue.columnar import kernel_note
    from mqforensics.systems.logqueue.frames import list_spool, read_state

    state = read_state(spark, options.dirs)
    files = [r.asDict() for r in state.segment_files.drop("problems").collect()]
    inputs, notes = [], []
    odd = [directory for directory in state.dirs if is_odd(unescaped(directory))]
    for directory in state.dirs:
        mine = [r for r in files if r["queue"] == directory]
        if not mine:
            notes.append(f"{directory} holds no segment file (seg-<n>.lq): nothing read there")
        spool = list_spool(Path(fs_path(directory)))
        odd += [f"{directory}/{layout.SPOOL_DIR}/{shown(name)}" for name in spool if is_odd(name)]
        inputs.append(
            {
                "kind": "directory",
                "location": directory,
                "segments": len(mine),
                "bytes": sum(r["size"] for r in mine),
                "fingerprint": fingerprint(directory, mine, spool),
            }
        )
    odd_note = odd_names_note(odd)
    if odd_note is not None:
        notes.append(odd_note)
    as_of = common.as_of or utc_now()
    later = dated_after(state, as_of)
    if later is not None:
        notes.append(later)
    slower = kernel_note()  # the same answers, from the reference reader alone
    if slower is not None:
        notes.append(slower)
    return Loaded(
        frames=state,
        source=f"log queue(s) {', '.join(state.dirs)}",
        as_of=as_of,
        objects=len(files) + sum(r["records"] for r in files),
        inputs=inputs,
        plan_inputs={"queues": list(state.dirs)},
        notes=notes,
    )


def dated_after(state: LogQueueState, as_of: dt.datetime) -> str | None:
    """What to say when records are dated after the instant the queues are judged at (a copy
    judged at now, long after it was taken, is not; a future date is): their count and the
    newest, or None."""
    from pyspark.sql import functions as F

    cutoff = int(as_of.timestamp() * 1_000_000)
    later = state.records.where(F.col("time_us") > cutoff)
    count, newest = later.agg(F.count("*"), F.max("time_us")).first() or (0, None)
    if not count or newest is None:
        return None
    newest_at = dt.datetime.fromtimestamp(newest / 1_000_000, dt.UTC)
    return (
        f"{plural(count, 'record')} dated after the instant judged at ({utc_text(as_of)}), the "
        f"newest {utc_text(newest_at)}: none of them is judged stuck or old; give --as-of the "
        f"instant the queues were copied"
    )


def settings(
    options: LogQueueOptions, common: AuditArgs, loaded: Loaded[LogQueueState]
) -> Settings:
    """What every check judges against."""
    return Settings(
        as_of=loaded.as_of,
        retry_horizon=options.retry_horizon,
        restart_lag_bytes=options.restart_lag_bytes,
        subjects=common.subjects,
        subject_key=common.subject_key,
        full_subjects=common.full_subjects,
    )
