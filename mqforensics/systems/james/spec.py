"""Apache James's distributed mail queue, as the shared layers see it (`mqforensics.spec`).

Its store is the mail queue view in Cassandra (``enqueuedMailsV4``/``V3``, ``deletedMailsV2``,
``browseStart``, ``contentStart``, the configuration events) and the blob bucket; docs/james.md
says what each check detects, exactly. Importing this module imports no Spark: the loader,
the checks, the planner and the executors are imported when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import AWS_LOGIN, CASSANDRA_LOGIN, Login
from mqforensics.spec import AuditArgs, Check, Loaded, Option, PlanParts, RuleKind, Sample, System
from mqforensics.systems.james import views
from mqforensics.systems.james.source import add_source_options, check_inputs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.retention.manifest import Plan
    from mqforensics.retention.policy import Policy
    from mqforensics.systems.james.checks import Context

NAME = "james"
SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"


def _load(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    from mqforensics.systems.james.source import load

    return load(spark, args, common)


def _settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> Context:
    """The facts every check needs, computed once: the configuration history, the live rows,
    the rows some check reads one by one, the partitions' row counts (checks.Context)."""
    from mqforensics.systems.james.checks import AuditOptions, Context, config_events

    options = AuditOptions(
        stuck_after=args.stuck_after,
        blob_grace=args.blob_grace,
        references_complete=args.references_complete,
        subjects=common.subjects,
        subject_key=common.subject_key,
        broker_grace=args.broker_grace,
    )
    state = loaded.frames
    return Context(state, options, config_events(state))


def _run(name: str) -> Any:
    """The check `name` of checks.py, called with the Context (`settings`) alone."""

    def run(_frames: Any, ctx: Context) -> DataFrame:
        from mqforensics.systems.james import checks

        return checks.CHECKS[name](ctx)

    return run


def _check(name: str, severity: str, what: str, why: str, todo: str) -> Check:
    return Check(name, severity, _run(name), what, why, todo)


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
    ),
    _check(
        "dangling_blob_ref",
        "error",
        "A live mail whose header or body blob is not in the bucket.",
        "James cannot deliver or browse it (ObjectNotFoundException): the mail is "
        "dead-lettered, its content lost.",
        "Restore the blob from a backup if there is one; otherwise delete the mail through "
        "James and tell its sender.",
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
    ),
    _check(
        "queue_without_consumer",
        "error",
        "A James work queue with no consumer (--rabbitmq or --broker-export).",
        "Nothing delivers its mail: it piles up (James's MailQueueConsumers health check).",
        "Restart the James nodes' mail queue consumers (a James restart); look for channel "
        "closures (consumer timeout) in the broker's log.",
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
    ),
    _check(
        "personal_data",
        "info",
        "A view row holding a data subject an erasure policy names (--erasure-policy), as "
        "keyed hashes only.",
        "An erasure request covers it: the row's addresses and headers, and its content, must go.",
        "Plan the erasure (`plan` with the policy): consumed rows before browseStart are "
        "deleted, live mail is deleted through James.",
    ),
)


def _plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    from mqforensics.systems.james.planner import plan

    return plan(findings, policy, manifest)


def _executors(plan: Plan, args: argparse.Namespace) -> list[Any]:
    from mqforensics.systems.james.purge_executor import build_executors

    return list(build_executors(plan, args))


def _validation_frames(loaded: Loaded) -> Mapping[str, DataFrame]:
    frames: Mapping[str, DataFrame] = loaded.frames.frames()
    return frames


def _data_sources() -> list[type]:
    from mqforensics.systems.james.live import JamesEnqueuedSource

    return [JamesEnqueuedSource]


def _sample(workdir: Path) -> Sample:
    """The bundled sample: a Parquet export with planted anomalies, its blob listing and its
    broker export (RabbitMQ's own, made by datasets/james/make_broker_sample.py), judged
    at its own snapshot time; audited (by the demo and the notebooks) for the subjects of its
    policy's erasure request, which its ground truth lists as personal_data findings."""
    argv = ["--snapshot", str(SAMPLE), "--blob-listing", str(SAMPLE / "blob_inventory.parquet"),
            "--broker-export", str(SAMPLE / "broker")]  # fmt: skip
    return Sample(
        argv=argv,
        as_of=None,
        ground_truth=SAMPLE / "ground_truth.json",
        policy=SAMPLE / "policy.toml",
    )


PURGE_OPTIONS = (
    Option(
        ("--cassandra",),
        {
            "metavar": "HOST[:PORT]",
            "help": "live cluster (default: the plan's); login from "
            "MQF_CASSANDRA_USERNAME/_PASSWORD",
        },
        login=Login(CASSANDRA_LOGIN, host=True),
    ),
    Option(
        ("--s3-endpoint",),
        {"metavar": "URL", "help": "S3 endpoint of the blob store (or MQF_S3_ENDPOINT)"},
        login=Login(AWS_LOGIN),
    ),
    Option(
        ("--consistency",),
        {
            "default": "LOCAL_QUORUM",
            "metavar": "LEVEL",
            "help": "Cassandra consistency level (default: %(default)s)",
        },
    ),
)

SPEC = System(
    name=NAME,
    title="Apache James distributed mail queue",
    add_source_options=add_source_options,
    check_inputs=check_inputs,
    load=_load,
    settings=_settings,
    checks=CHECKS,
    plan=_plan,
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
    executors=_executors,
    purge_options=PURGE_OPTIONS,
    validation_frames=_validation_frames,
    sample=_sample,
    data_sources=_data_sources,
    views=views,
)
