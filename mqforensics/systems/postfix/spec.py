"""Postfix queue directories as the shared layers see them: the one `System` spec
(docs/postfix.md).

One or more ``queue_directory`` trees (live, read only, or copies; ``--queue-dir [HOST=]DIR``)
are read (`read`) into the files frame and its projections (`frames`); the checks (`checks`)
judge them, the planner (`plan`) turns their findings into actions, and the executors
(`purge`) carry them out through Postfix's own ``postsuper -d``, each re-checked live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mqforensics.spec import SUBJECTS_SEARCHED, Check, Loaded, RuleKind, System, deferred
from mqforensics.systems.postfix import plan, sample, views
from mqforensics.systems.postfix.options import PostfixOptions, PurgeOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.postfix.frames import PostfixFrames

CHECKS_MODULE = "mqforensics.systems.postfix.checks"
READ_MODULE = "mqforensics.systems.postfix.read"


CHECKS = (
    Check(
        "damaged_queue_file",
        "error",
        deferred(CHECKS_MODULE, "damaged_queue_file"),
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
        deferred(CHECKS_MODULE, "corrupt_queue_file"),
        "A file in the corrupt queue: the queue manager found it unreadable and set it aside.",
        "Nothing delivers or expires it: it holds personal data until someone removes it.",
        "Inspect it with postcat, then plan its removal (damaged_mail).",
    ),
    Check(
        "incomplete_queue_file",
        "warning",
        deferred(CHECKS_MODULE, "incomplete_queue_file"),
        "A queue file never marked ready (mode 0600, not 0700) older than --incomplete-grace: "
        "cleanup or postdrop died while writing it.",
        "The queue manager ignores it for ever (postsuper -p removes such files only after 7 "
        "days, when run); the sender may believe the mail was accepted.",
        "Plan its removal (damaged_mail) or run postsuper -p; look for the crash in the log.",
    ),
    Check(
        "orphan_log",
        "warning",
        deferred(CHECKS_MODULE, "orphan_log"),
        "A defer, bounce or trace log whose message is in no message queue of its host.",
        "Left behind by a deletion outside Postfix (an rm in the queue): it keeps recipients "
        "and delivery errors of mail that is gone, and a reused short queue id inherits it.",
        "Plan its removal (orphan_logs): the only file the purger removes itself.",
    ),
    Check(
        "deferred_without_log",
        "warning",
        deferred(CHECKS_MODULE, "deferred_without_log"),
        "A deferred message with pending recipients but no defer log.",
        "Why it is delayed is lost: postqueue shows no reason, and a delay notice or bounce "
        "will not say what failed.",
        "Flush it (postqueue -i ID) so that the next attempt logs a reason; check for deletions "
        "outside Postfix.",
    ),
    Check(
        "expired_in_queue",
        "warning",
        deferred(CHECKS_MODULE, "expired_in_queue"),
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
        deferred(CHECKS_MODULE, "old_hold"),
        "A message on hold that arrived longer ago than --hold-age.",
        "Held mail never expires: it stays, with its personal data, until someone acts.",
        "Release it (postsuper -H ID) or plan its deletion (held_mail).",
    ),
    Check(
        "retention_exceeded",
        "warning",
        deferred(CHECKS_MODULE, "retention_exceeded"),
        "A queue file, in any queue, whose message arrived longer ago than --retention.",
        "It holds personal data past its retention period.",
        "Deliver or return it; plan its deletion (queued_mail).",
    ),
    Check(
        "personal_data",
        "info",
        deferred(CHECKS_MODULE, "personal_data"),
        "A queue file holding a data subject searched for (--erasure-policy): in its envelope "
        "sender or recipients (current or original), in its message's header fields, and for "
        'rules with search = "full" in its decoded bodies and attachments; detail.found says '
        "where, with subjects as keyed hashes only.",
        "An erasure request covers it.",
        "Plan the erasure (erase_subject): `plan --findings` with the same policy.",
        needs=SUBJECTS_SEARCHED,
    ),
    Check(
        "unreadable_content",
        "warning",
        deferred(CHECKS_MODULE, "unreadable_content"),
        "A queue file the search for data subjects could not read in full at the depth asked "
        "(detail.unreadable: where and why): an encrypted part (S/MIME, PGP) or one whose "
        "transfer encoding is damaged (bodies are searched at depth full only), the records "
        "after a damaged file's damage, or a file that cannot be read.",
        "What could not be searched is not known to be free of the subject: an erasure that "
        "skipped it would be claimed complete while the data may still be queued.",
        "Inspect it (postcat -bh); an erasure plan defers it under its erase_subject rules "
        "until someone decides; delete it by hand or with a rule that selects it otherwise.",
        needs=SUBJECTS_SEARCHED,
    ),
)


def validation_frames(loaded: Loaded[PostfixFrames]) -> Mapping[str, DataFrame]:
    """The messages and the recipients, checked with ``expectations/postfix_messages.json`` and
    ``expectations/postfix_recipients.json``; the logs with ``postfix_logs.json``."""
    frames: PostfixFrames = loaded.frames
    return {"messages": frames.messages, "recipients": frames.recipients, "logs": frames.logs}


def data_sources() -> Sequence[type]:
    from mqforensics.systems.postfix.fleet import PostfixFilesSource

    return [PostfixFilesSource]


SPEC = System(
    name="postfix",
    title="Postfix queue directories",
    options=PostfixOptions,
    load=deferred(READ_MODULE, "load"),
    settings=deferred(READ_MODULE, "settings"),
    checks=CHECKS,
    plan=plan.plan,
    rule_kinds=tuple(
        RuleKind(name, keys, needs_older_than=needs) for name, keys, needs in plan.RULE_KINDS
    ),
    executors=deferred("mqforensics.systems.postfix.purge", "build_executors"),
    purge_options=PurgeOptions,
    validation_frames=validation_frames,
    sample=sample.bundled,
    data_sources=data_sources,
    views=views,
    metrics=deferred("mqforensics.systems.postfix.metrics", "measure"),
)
