"""The log-structured (crash-only) queue system as the shared layers see it: ``SPEC``.

``audit logqueue DIR...`` (`options.LogQueueOptions`) reads every queue directory in Spark
(`read`: one task per segment file for the records, one for each file's size, SHA-256 and
damage; one replay per queue: `frames`), runs the checks (`checks`), and ``plan`` turns their
findings into segment deletions (`plan`), which the executor carries out (`purge`).
Importing this module imports no Spark: the checks and the readers are imported when they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mqforensics.spec import SUBJECTS_SEARCHED, Check, Loaded, Needs, RuleKind, System, deferred
from mqforensics.systems.logqueue import plan, sample, views
from mqforensics.systems.logqueue.options import LogQueueOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.logqueue.frames import LogQueueState

NAME = "logqueue"
CHECKS_MODULE = "mqforensics.systems.logqueue.checks"
READ_MODULE = "mqforensics.systems.logqueue.read"


def _check(
    name: str, severity: str, what: str, why: str, todo: str, needs: Needs | None = None
) -> Check:
    return Check(name, severity, deferred(CHECKS_MODULE, name), what, why, todo, needs)


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
        "A segment file whose records, or a spool file whose message, hold a data subject the "
        "audit looked for (--erasure-policy).",
        "An erasure request covers it; a segment cannot be edited, only deleted whole once no "
        "restart reads it; a spool file is its message's content.",
        "Plan the erasure: segments below the saved suffix are deleted, the others deferred "
        "until the queue is done with them; spool files of no unfinished message are deleted, "
        "those of waiting mail deferred.",
        SUBJECTS_SEARCHED,
    ),
    _check(
        "unreadable_content",
        "warning",
        "A spool file with a part that could not be searched at the depth asked: encrypted "
        "(S/MIME, PGP), a damaged transfer encoding, or a file that cannot be read.",
        "It is not known to be free of the subjects: an erasure that called it clean could "
        "leave a subject's data behind.",
        "Decide by hand: decrypt or inspect it, then delete it with the queue's own tools or "
        "name it in a plan.",
        SUBJECTS_SEARCHED,
    ),
)


def validation_frames(loaded: Loaded[LogQueueState]) -> Mapping[str, DataFrame]:
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


def data_sources() -> tuple[type, ...]:
    from mqforensics.systems.logqueue import fleet

    return fleet.SOURCES


SPEC = System(
    name=NAME,
    title="log-structured (crash-only) MTA queue directories",
    options=LogQueueOptions,
    load=deferred(READ_MODULE, "load"),
    settings=deferred(READ_MODULE, "settings"),
    checks=CHECKS,
    plan=plan.plan,
    rule_kinds=(RuleKind(plan.GARBAGE_SEGMENTS),),
    executors=deferred("mqforensics.systems.logqueue.purge", "build_executors"),
    validation_frames=validation_frames,
    sample=sample.bundled,
    data_sources=data_sources,
    views=views,
    metrics=deferred("mqforensics.systems.logqueue.metrics", "measure"),
)
