"""Apache James's distributed mail queue, as the shared layers see it (`mqforensics.spec`).

Its store is the mail queue view in Cassandra (``enqueuedMailsV4``/``V3``, ``deletedMailsV2``,
``browseStart``, ``contentStart``, the configuration events) and the blob bucket; docs/james.md
says what each check detects, exactly. The store is read (`read`) into the frames (`frames`);
the checks (`checks`, `broker_checks`) judge them, the planner (`plan`) turns their findings
into actions, and the executors (`purge`) carry them out, each re-checked live. Importing this
module imports no Spark: the loader, the checks, the planner and the executors are imported
when they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mqforensics.spec import SUBJECTS_SEARCHED, Check, Loaded, Needs, RuleKind, System, deferred
from mqforensics.systems.james import sample, views
from mqforensics.systems.james.options import JamesOptions, PurgeOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.james.frames import JamesState

NAME = "james"
CHECKS_MODULE = "mqforensics.systems.james.checks"
READ_MODULE = "mqforensics.systems.james.read"


# What the blob and broker checks need beyond the view.
BLOB_LISTING = Needs(
    "no listing of the blob bucket", ("blobs", "blob_inventory", "blob_dir", "blob_listing")
)
BROKER = Needs("no RabbitMQ", ("rabbitmq", "broker_export"))
BROKER_MESSAGES = Needs("no export of RabbitMQ's messages", ("broker_export",))


def _check(
    name: str, severity: str, what: str, why: str, todo: str, needs: Needs | None = None
) -> Check:
    return Check(name, severity, deferred(CHECKS_MODULE, name), what, why, todo, needs)


CHECKS = (
    _check(
        "unreclaimed_slice",
        "warning",
        "A Cassandra partition (queue, slice, bucket) James should have deleted: rows before "
        "the queue's contentStart, or fully consumed rows before its browseStart.",
        "It costs storage and tombstone reads, and keeps the addresses and headers of mail "
        "that left the queue long ago (personal data past its use).",
        "Plan its deletion with a consumed_mail rule (`plan`); look at why James's cleanup "
        "failed (its logs around the slice's time).",
    ),
    _check(
        "stale_browse_start",
        "warning",
        "A queue's browseStart more than 7 days old, or more than one slice window behind its "
        "oldest live mail (pinned by stuck mail, or never moved on an empty queue).",
        "Every browse, getSize and delete reads all the slices (and tombstones) from "
        "browseStart on, and nothing after it is cleaned up.",
        "Deliver or delete the pinning mails (detail.pinning) through James's WebAdmin; James "
        "then moves browseStart on at its next update.",
    ),
    _check(
        "invisible_mail",
        "error",
        "A live (not consumed) mail in a slice before its queue's browseStart.",
        "James can no longer browse, count, delete or republish it, yet keeps its data and "
        "blobs: the mail is lost to its recipients.",
        "Move browseStart back before it (a manual CQL update), then republish it; or deliver "
        "it by hand from its blobs.",
    ),
    _check(
        "stuck_mail",
        "error",
        "A live mail enqueued longer ago than --stuck-after (default 1 day).",
        "Most likely lost from RabbitMQ: it will never be delivered, and it pins browseStart.",
        "Republish it: detail.republish is the WebAdmin call "
        "(RepublishNotProcessedMails); an invisible one needs browseStart moved first.",
    ),
    _check(
        "orphaned_blob",
        "info",
        "An object of the blob bucket older than --blob-grace that no view row references.",
        "Storage, and mail content kept with nothing pointing at it (a privacy liability).",
        "When the queue is the bucket's only referrer (--references-complete) and the id is "
        "a passthrough one, plan its deletion with an orphaned_blobs rule; never delete a "
        "deduplicated blob (mailboxes may share it).",
        BLOB_LISTING,
    ),
    _check(
        "consumed_blob",
        "warning",
        "A blob with a passthrough id that only consumed mails reference: James deletes these "
        "when the mail is dequeued, so its delete failed.",
        "Storage, and the content (headers, body) of mail that has left the queue: personal "
        "data kept past its use.",
        "Plan its deletion with a consumed_mail (or erase_subject) rule; the purger re-checks "
        "that no live mail references it.",
        BLOB_LISTING,
    ),
    _check(
        "dangling_blob_ref",
        "error",
        "A live mail whose header or body blob is not in the bucket.",
        "James cannot deliver or browse it (ObjectNotFoundException): the mail is "
        "dead-lettered, its content lost.",
        "Restore the blob from a backup if there is one; otherwise delete the mail through "
        "James and tell its sender.",
        BLOB_LISTING,
    ),
    _check(
        "bucket_mismatch",
        "warning",
        "A view row in a bucket James never computes for its name under any bucket count of "
        "the configuration history.",
        "Browse may miss it; it reveals a foreign writer, corruption, or a configuration "
        "history this audit does not know.",
        "Find the writer; check the eventstore's configuration events against the cluster's "
        "settings.",
    ),
    _check(
        "slice_mismatch",
        "warning",
        "A view row whose slice start is no multiple of any slice window of the history, or "
        "whose mail was enqueued outside that slice.",
        "Browse may never visit its partition: the mail is invisible to James.",
        "Find the writer (a foreign tool, a clock jump); re-enqueue the mail through James.",
    ),
    _check(
        "config_violation",
        "error",
        "A configuration change James forbids: a slice window that grew or does not divide "
        "the previous one, or a bucket count that shrank.",
        "Slices or buckets written under it cannot be enumerated correctly: mail becomes "
        "invisible, and James refuses to start with it.",
        "Restore a permitted configuration (windows only shrink to a divisor, bucket counts "
        "only grow) before James restarts.",
    ),
    _check(
        "config_advice",
        "info",
        "Settings that fit each queue's observed peak: slices of about 10,000 mails, a "
        "browse-start update about once per slice.",
        "Slices too large make every browse slow; too small, many empty partitions and tombstones.",
        "Consider the recommended window, bucket count and updateBrowseStartPace "
        "(a window may only shrink to a divisor, buckets only grow).",
    ),
    _check(
        "broker_missing_mail",
        "error",
        "A visible live mail enqueued before --broker-grace that neither the work queue nor "
        "the dead-letter queue holds (--broker-export with both queues' messages).",
        "RabbitMQ will never deliver it: the mail is lost to its recipients while James still "
        "counts it, and it pins browseStart.",
        "Republish it: detail.republish is the one WebAdmin call (RepublishNotProcessedMails, "
        "exact olderThan) for its queue's missing mails; `plan` lists it.",
        BROKER_MESSAGES,
    ),
    _check(
        "broker_orphan_message",
        "warning",
        "A work-queue message whose view row is consumed (deletedmailsv2), absent, or whose "
        "body is no MailReferenceDTO (detail.view).",
        "A consumed one is a wasted delivery James drops; an absent one is mail James cannot "
        "browse, count or delete; an unreadable one is dead-lettered.",
        "Nothing through James removes it: a consumed one goes when consumed; look for the "
        "writer of an absent or unreadable one.",
        BROKER_MESSAGES,
    ),
    _check(
        "dead_lettered_mail",
        "error",
        "A message in a James dead-letter queue, with its view row and whether its blobs are "
        "listed (detail); a dead-letter queue whose messages were not read, with its count.",
        "James's Dequeuer gave up on it (missing blobs, an unreadable body, a rejection): it "
        "is never delivered, and James's dead-letter health check stays degraded.",
        "Blobs present and the view row live: republish (RepublishNotProcessedMails). Blobs "
        "missing: delete it through James (detail.delete) and tell its sender.",
        BROKER,
    ),
    _check(
        "queue_without_consumer",
        "error",
        "A James work queue with no consumer (--rabbitmq or --broker-export).",
        "Nothing delivers its mail: it piles up (James's MailQueueConsumers health check).",
        "Restart the James nodes' mail queue consumers (a James restart); look for channel "
        "closures (consumer timeout) in the broker's log.",
        BROKER,
    ),
    _check(
        "broker_count_mismatch",
        "warning",
        "A queue whose live view mails differ in number from the broker's messages (work "
        "queue ready + unacknowledged, plus dead-letter queue), when messages were not read.",
        "More in the view: mail RabbitMQ lost (never delivered). More in the broker: "
        "messages whose view rows are consumed or gone.",
        "Export the queues' messages from a copy of the broker (--broker-export) to know "
        "which mails; RepublishNotProcessedMails republishes the lost ones.",
        BROKER,
    ),
    _check(
        "personal_data",
        "info",
        "A view row holding a data subject an erasure policy names (--erasure-policy) in its "
        "envelope or its content (the header blob; the body blob too at depth full), as keyed "
        "hashes only, with where each was found.",
        "An erasure request covers it: the row's addresses and headers, and its content, must go.",
        "Plan the erasure (`plan` with the policy): consumed rows before browseStart are "
        "deleted, live mail is deleted through James.",
        SUBJECTS_SEARCHED,
    ),
    _check(
        "unreadable_content",
        "warning",
        "A view row whose content could not be searched for the erasure policy's subjects at "
        "the depth asked: a header or body blob missing or undecodable, an AES-encrypted blob, "
        "an encrypted (S/MIME, PGP) or damaged MIME part (detail.unreadable).",
        "The row is not known to be free of the subjects: an erasure cannot be said complete "
        "while it stays.",
        "Look at the row's blobs (restore a missing one, decrypt with James's key); the plan "
        "defers the row under each erase_subject rule, never deletes it blindly.",
        SUBJECTS_SEARCHED,
    ),
)


def validation_frames(loaded: Loaded[JamesState]) -> Mapping[str, DataFrame]:
    frames: Mapping[str, DataFrame] = loaded.frames.frames()
    return frames


def data_sources() -> list[type]:
    from mqforensics.systems.james.live import JamesEnqueuedSource

    return [JamesEnqueuedSource]


SPEC = System(
    name=NAME,
    title="Apache James distributed mail queue",
    options=JamesOptions,
    load=deferred(READ_MODULE, "load"),
    settings=deferred(READ_MODULE, "settings"),
    checks=CHECKS,
    plan=deferred("mqforensics.systems.james.plan", "plan"),
    rule_kinds=(
        RuleKind("consumed_mail", ("older_than",), needs_older_than=True),
        RuleKind(
            "orphaned_blobs",
            ("older_than", "references_complete"),
            needs_older_than=True,
            queueless=True,
        ),
        RuleKind("broker_reconcile"),
    ),
    executors=deferred("mqforensics.systems.james.purge", "build_executors"),
    purge_options=PurgeOptions,
    validation_frames=validation_frames,
    sample=sample.bundled,
    data_sources=data_sources,
    views=views,
    metrics=deferred("mqforensics.systems.james.metrics", "measure"),
)
