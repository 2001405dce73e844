"""Postfix queue directories as the shared layers see them: the one `System` spec
(docs/postfix.md).

One or more ``queue_directory`` trees (live, read only, or copies; ``--queue-dir [HOST=]DIR``)
are read into the files frame and its projections (`frames`); the checks (`checks`) judge them,
the planner (`planner`) turns their findings into actions, and the executors
(`purge_executor`) carry them out through Postfix's own ``postsuper -d``, each re-checked live.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.spec import Check, Loaded, Option, RuleKind, Sample, System
from mqforensics.systems.postfix import audit, planner, views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.retention.manifest import Plan
    from mqforensics.systems.postfix.frames import PostfixFrames
    from mqforensics.systems.postfix.options import AuditOptions


def _run(name: str) -> Callable[[PostfixFrames, AuditOptions], DataFrame]:
    """The check `name` of `checks`, imported when it runs (importing a spec imports no Spark)."""

    def run(frames: PostfixFrames, options: AuditOptions) -> DataFrame:
        from mqforensics.systems.postfix import checks

        return checks.CHECKS[name](frames, options)

    run.__name__ = name
    return run


CHECKS = (
    Check(
        "damaged_queue_file",
        "error",
        _run("damaged_queue_file"),
        "A queue file marked ready whose records do not read to their end record: truncated, a "
        "length past the end of the file, a broken pointer, a size or time record that is not "
        "numbers, or a file that cannot be read (detail.offset: where reading stopped); or one "
        "without a record the queue manager requires (detail.missing).",
        "The queue manager cannot deliver it and moves it to corrupt/ when it tries: the mail "
        "is lost, while the file keeps its personal data.",
        "Recover what postcat can still show, then plan its removal (damaged_mail).",
    ),
    Check(
        "corrupt_queue_file",
        "error",
        _run("corrupt_queue_file"),
        "A file in the corrupt queue: the queue manager found it unreadable and set it aside.",
        "Nothing delivers or expires it: it holds personal data until someone removes it.",
        "Inspect it with postcat, then plan its removal (damaged_mail).",
    ),
    Check(
        "incomplete_queue_file",
        "warning",
        _run("incomplete_queue_file"),
        "A queue file never marked ready (mode 0600, not 0700) older than --incomplete-grace: "
        "cleanup or postdrop died while writing it.",
        "The queue manager ignores it for ever (postsuper -p removes such files only after 7 "
        "days, when run); the sender may believe the mail was accepted.",
        "Plan its removal (damaged_mail) or run postsuper -p; look for the crash in the log.",
    ),
    Check(
        "orphan_log",
        "warning",
        _run("orphan_log"),
        "A defer, bounce or trace log whose message is in no message queue of its host.",
        "Left behind by a deletion outside Postfix (an rm in the queue): it keeps recipients "
        "and delivery errors of mail that is gone, and a reused short queue id inherits it.",
        "Plan its removal (orphan_logs): the only file the purger removes itself.",
    ),
    Check(
        "deferred_without_log",
        "warning",
        _run("deferred_without_log"),
        "A deferred message with pending recipients but no defer log.",
        "Why it is delayed is lost: postqueue shows no reason, and a delay notice or bounce "
        "will not say what failed.",
        "Flush it (postqueue -i ID) so that the next attempt logs a reason; check for deletions "
        "outside Postfix.",
    ),
    Check(
        "expired_in_queue",
        "warning",
        _run("expired_in_queue"),
        "A deferred message older than its lifetime (maximal_queue_lifetime, or "
        "bounce_queue_lifetime for a bounce) by more than --expiry-grace.",
        "The queue manager should have returned it: a stopped queue manager, a clock change or "
        "a lifetime raised later keeps mail and its personal data past the promised time.",
        "Check that qmgr runs and the lifetimes; postsuper -f ID returns it, or plan it "
        "(queued_mail).",
    ),
    Check(
        "old_hold",
        "warning",
        _run("old_hold"),
        "A message on hold that arrived longer ago than --hold-age.",
        "Held mail never expires: it stays, with its personal data, until someone acts.",
        "Release it (postsuper -H ID) or plan its deletion (held_mail).",
    ),
    Check(
        "retention_exceeded",
        "warning",
        _run("retention_exceeded"),
        "A queue file, in any queue, whose message arrived longer ago than --retention.",
        "It holds personal data past its retention period.",
        "Deliver or return it; plan its deletion (queued_mail).",
    ),
    Check(
        "personal_data",
        "info",
        _run("personal_data"),
        "A queue file whose envelope sender or recipients (current or original) include a "
        "data subject searched for (--erasure-policy); subjects as keyed hashes only.",
        "An erasure request covers it.",
        "Plan the erasure (erase_subject): `plan --findings` with the same policy.",
    ),
)

PURGE_OPTIONS = (
    Option(
        ("--postfix-config",),
        {
            "metavar": "DIR",
            "type": Path,
            "help": "Postfix config directory postsuper -c uses (default: the audit's "
            "--config-dir, from the plan); its queue_directory must be the plan's",
        },
    ),
)


def executors(plan: Plan, args: argparse.Namespace) -> list[Any]:
    from mqforensics.systems.postfix.purge_executor import build_executors

    return build_executors(plan, args)


def validation_frames(loaded: Loaded) -> Mapping[str, DataFrame]:
    """The messages and the recipients, checked with ``expectations/postfix_messages.json`` and
    ``expectations/postfix_recipients.json``; the logs with ``postfix_logs.json``."""
    frames: PostfixFrames = loaded.frames
    return {"messages": frames.messages, "recipients": frames.recipients, "logs": frames.logs}


SAMPLE_HOST = "sample"  # what the bundled queue directory is called in findings and notebooks


def sample(workdir: Path) -> Sample:
    """The bundled queue directory (written by the real Postfix, anomalies planted in the
    copy) under ``workdir/queue`` with its recorded modes and mtimes (git keeps neither)."""
    from mqforensics.systems.postfix.sample import BUNDLED, materialize

    queue = Path(workdir) / "queue"
    shutil.rmtree(queue, ignore_errors=True)
    copy = materialize(queue, Path(workdir) / "ground_truth.json")
    return Sample(
        argv=[
            "--queue-dir",
            f"{SAMPLE_HOST}={copy.queue_dir}",
            "--main-cf",
            str(BUNDLED / "postconf.txt"),
        ],
        as_of=copy.as_of,
        ground_truth=copy.ground_truth,
        policy=BUNDLED / "policy.toml",
    )


def data_sources() -> Sequence[type]:
    from mqforensics.systems.postfix.fleet import PostfixFilesSource

    return [PostfixFilesSource]


SPEC = System(
    name="postfix",
    title="Postfix queue directories",
    add_source_options=audit.add_source_options,
    check_inputs=audit.check_inputs,
    load=audit.load,
    settings=audit.settings,
    checks=CHECKS,
    plan=planner.plan,
    rule_kinds=tuple(
        RuleKind(name, keys, needs_older_than=needs) for name, keys, needs in planner.RULE_KINDS
    ),
    executors=executors,
    purge_options=PURGE_OPTIONS,
    validation_frames=validation_frames,
    sample=sample,
    data_sources=data_sources,
    views=views,
)
