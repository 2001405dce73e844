"""The log-structured (crash-only) queue system as the shared layers see it: ``SPEC``.

``audit logqueue DIR...`` reads every queue directory in Spark (one task per segment file for
the records, one for each file's size, SHA-256 and damage; one replay per queue: `state`), runs
the checks (`checks`), and ``plan`` turns their findings into segment deletions (`reclaim`).
Importing this module imports no Spark: the checks and the readers are imported when they run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import InputError
from mqforensics.spec import AuditArgs, Check, Loaded, RuleKind, Sample, System
from mqforensics.systems.logqueue import layout, reclaim, views
from mqforensics.units import counter, parse_duration, utc_now

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.systems.logqueue.checks import AuditOptions
    from mqforensics.systems.logqueue.state import LogQueueState

NAME = "logqueue"
SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "logqueue" / "sample"
DEFAULT_RETRY_HORIZON = dt.timedelta(days=5)
DEFAULT_RESTART_LAG_BYTES = 64 * 1024 * 1024


def add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dirs", nargs="+", type=Path, metavar="DIR",
        help="queue directories, each holding seg-<n>.lq segment files, restart.lq and spool/",
    )  # fmt: skip
    parser.add_argument(
        "--retry-horizon", type=parse_duration, default=DEFAULT_RETRY_HORIZON, metavar="AGE",
        help="a message not finished this long after its first envelope is stuck (30s, 5m, "
        "12h, 5d, 2w; default 5d)",
    )  # fmt: skip
    parser.add_argument(
        "--restart-lag-bytes", type=counter("--restart-lag-bytes", "a byte count"),
        default=DEFAULT_RESTART_LAG_BYTES, metavar="BYTES",
        help="segment bytes the saved restart suffix may lag the garbage end before it is a "
        "restart_lag finding (default 64 MiB)",
    )  # fmt: skip


def check_inputs(args: argparse.Namespace) -> None:
    """Every DIR exists, is a directory, can be listed, and is given once (before Spark)."""
    from mqforensics.errors import ConfigError

    seen: set[Path] = set()
    for given in args.dirs:
        path = Path(given)
        if not path.exists():
            raise InputError(f"{path}: no such queue directory")
        if not path.is_dir():
            raise InputError(f"{path}: not a directory (a queue is a directory of segments)")
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{path}: not readable")
        resolved = path.resolve()
        if resolved in seen:
            raise ConfigError(f"{resolved} is given twice")
        seen.add(resolved)


def _fingerprint(directory: str, segments: list[Any]) -> str:
    """SHA-256 of a queue directory as the audit read it: each segment's name, size and SHA-256,
    ``restart.lq``'s bytes and the spool's names and sizes."""
    from mqforensics.systems.logqueue.state import list_spool

    digest = hashlib.sha256()
    for row in sorted(segments, key=lambda r: r["file"]):
        digest.update(f"segment {row['file']} {row['size']} {row['sha256']}\n".encode())
    restart = Path(directory) / layout.RESTART_FILE
    try:
        data = restart.read_bytes()
        digest.update(f"restart {hashlib.sha256(data).hexdigest()}\n".encode())
    except FileNotFoundError:
        digest.update(b"restart none\n")
    except OSError as exc:
        digest.update(f"restart unreadable {exc.errno}\n".encode())
    for name, size in list_spool(Path(directory)).items():
        digest.update(f"spool {name} {size}\n".encode())
    return digest.hexdigest()


def load(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """Every directory read and replayed (`state.read_state`); objects: segment files and
    their whole records (a directory without any segment holds nothing to audit)."""
    from mqforensics.systems.logqueue.state import read_state

    state = read_state(spark, args.dirs)
    files = [r.asDict() for r in state.segment_files.drop("problems").collect()]
    inputs, notes = [], []
    for directory in state.dirs:
        mine = [r for r in files if r["queue"] == directory]
        if not mine:
            notes.append(f"{directory} holds no segment file (seg-<n>.lq): nothing read there")
        inputs.append(
            {
                "kind": "directory",
                "location": directory,
                "segments": len(mine),
                "bytes": sum(r["size"] for r in mine),
                "fingerprint": _fingerprint(directory, mine),
            }
        )
    return Loaded(
        frames=state,
        source=f"log queue(s) {', '.join(state.dirs)}",
        as_of=common.as_of or utc_now(),
        objects=len(files) + sum(r["records"] for r in files),
        inputs=inputs,
        plan_inputs={"queues": list(state.dirs)},
        notes=notes,
    )


def settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> AuditOptions:
    from mqforensics.systems.logqueue.checks import AuditOptions

    return AuditOptions(
        as_of=loaded.as_of,
        retry_horizon=args.retry_horizon,
        restart_lag_bytes=args.restart_lag_bytes,
        subjects=common.subjects,
        subject_key=common.subject_key,
    )


def _run(name: str) -> Callable[[LogQueueState, AuditOptions], DataFrame]:
    """Check `name` of `checks`, imported when it runs (importing the spec imports no Spark)."""

    def run(state: LogQueueState, options: AuditOptions) -> DataFrame:
        from mqforensics.systems.logqueue import checks

        check: Callable[[LogQueueState, AuditOptions], DataFrame] = getattr(checks, name)
        return check(state, options)

    run.__name__ = name
    return run


def _check(name: str, severity: str, what: str, why: str, todo: str) -> Check:
    return Check(name, severity, _run(name), what, why, todo)


CHECKS = (
    _check(
        "torn_tail",
        "warning",
        "A record cut off by the end of its segment file: the queue crashed during its last write.",
        "The write was never acknowledged and the restart drops it; in a segment that is not "
        "the newest it means records were appended after a crash without starting a new file.",
        "Nothing for the newest segment (its restart starts a new one); otherwise check the "
        "writer's restart procedure.",
    ),
    _check(
        "crc_mismatch",
        "error",
        "A whole record whose CRC does not match: its bytes changed after they were written.",
        "The restart skips it, so its envelope, start, outcome or finish is lost: a message may "
        "be delivered twice or never.",
        "Check the disk and any copy of the queue; compare the message's state with the MTA's "
        "logs before the next restart.",
    ),
    _check(
        "corrupt_segment",
        "critical",
        "Other damage: a bad segment header, undecodable bytes or payload, a record of a type "
        "the format does not define, any damage to restart.lq, or a segment of the working "
        "suffix without a file.",
        "Records the restart procedure needs are gone or cannot be trusted: messages may be "
        "lost or delivered again.",
        "Stop the queue before its next restart, keep a copy of the directory and restore the "
        "missing or damaged files from a backup.",
    ),
    _check(
        "orphan_delivery",
        "error",
        "A DELIVERY record whose START is not the message's live one.",
        "Recipients were handed to a server by an attempt the queue does not know of: it may "
        "deliver them again.",
        "Check the recipients' mailboxes for duplicates and the runners for a stale copy of "
        "the queue.",
    ),
    _check(
        "orphan_record",
        "warning",
        "Any other record replay cannot attach to a live message (a start, finish or envelope "
        "that refers to nothing live).",
        "A lost envelope or start, or a runner working from a stale copy: the message's state "
        "is not what its records say.",
        "Look the message up in the MTA's logs; nothing to delete.",
    ),
    _check(
        "duplicate_delivery",
        "error",
        "A recipient with two or more DELIVERED outcomes for one message.",
        "The recipient got the message twice: a retry that did not know of the first delivery.",
        "Tell the recipient if it matters; check the retry path of the MTA.",
    ),
    _check(
        "stuck_message",
        "warning",
        "A message not finished more than --retry-horizon after its first envelope.",
        "A queue bounces after its retry horizon: its runners forgot it or its expiry does not "
        "work, and its content stays in the spool.",
        "Bounce or requeue it in the MTA.",
    ),
    _check(
        "unreclaimed_segment",
        "warning",
        "A segment file whose every record is garbage but which is still on disk.",
        "Storage, and the envelopes (addresses) of finished messages kept after they left the "
        "queue.",
        "Plan its deletion with a garbage_segments rule; if it is not below the saved suffix "
        "yet, let the queue save newer restart positions first.",
    ),
    _check(
        "restart_lag",
        "warning",
        "The saved restart suffix is more than --restart-lag-bytes of segments behind the "
        "garbage end.",
        "A crash now makes the restart rescan all of it, and none of those segments can be "
        "reclaimed until the queue saves newer positions.",
        "Have the queue save its restart positions more often.",
    ),
    _check(
        "lost_envelope",
        "error",
        "Spool and envelopes disagree: a spool file no unfinished message refers to, or an "
        "unfinished message whose spool file is missing.",
        "Content (often with addresses) kept for ever, or a message that can never be delivered.",
        "Remove a leftover spool file after checking it; bounce a message without content.",
    ),
    _check(
        "personal_data",
        "info",
        "A segment file whose records hold a data subject the audit looked for (--erasure-policy).",
        "An erasure request covers it; a segment cannot be edited, only deleted whole once no "
        "restart reads it.",
        "Plan the erasure: segments below the saved suffix are deleted, the others deferred "
        "until the queue is done with them.",
    ),
)


def validation_frames(loaded: Loaded) -> Mapping[str, DataFrame]:
    """The canonical frames, each checked with ``expectations/logqueue_<frame>.json``."""
    state = loaded.frames
    return {
        "records": state.records,
        "segment_files": state.segment_files,
        "messages": state.messages,
        "queues": state.queues,
        "orphans": state.orphans,
        "spool": state.spool,
    }


def sample(workdir: Path) -> Sample:
    """The two bundled queue directories, judged at the instant ``sample.json`` names."""
    meta = json.loads((SAMPLE / "sample.json").read_text())
    policy = SAMPLE / "policy.toml"
    return Sample(
        argv=[str(SAMPLE / name) for name in meta["queues"]],
        as_of=meta["as_of"],
        policy=policy if policy.exists() else None,
    )


def data_sources() -> tuple[type, ...]:
    from mqforensics.systems.logqueue import fleet

    return fleet.SOURCES


def build_executors(plan: Any, args: argparse.Namespace) -> list[Any]:
    return reclaim.build_executors(plan, args)


SPEC = System(
    name=NAME,
    title="log-structured (crash-only) MTA queue directories",
    add_source_options=add_source_options,
    check_inputs=check_inputs,
    load=load,
    settings=settings,
    checks=CHECKS,
    plan=reclaim.plan,
    rule_kinds=(RuleKind(reclaim.GARBAGE_SEGMENTS),),
    executors=build_executors,
    validation_frames=validation_frames,
    sample=sample,
    data_sources=data_sources,
    views=views,
)
