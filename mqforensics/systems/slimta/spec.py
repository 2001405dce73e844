"""python-slimta queue storage as the shared layers see it: the one `System` spec (docs/slimta.md).

Stores: a DiskStorage (``--disk``, ``--meta-dir``, ``--tmp-dir``), a RedisStorage (``--redis``),
slimta's cloud storage (``--s3`` with an optional ``--sqs-export``), any combination. They are
read (`read`) into one canonical frame, the items (`frames.SlimtaFrames`, `items.ITEMS`); the
checks (`checks`) judge it, the planner (`plan`) turns their findings into actions, the
executors (`purge`) carry them out, each re-checked live.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mqforensics.spec import SUBJECTS_SEARCHED, Check, Loaded, Needs, RuleKind, System, deferred
from mqforensics.systems.slimta import plan, sample
from mqforensics.systems.slimta.options import PurgeOptions, SlimtaOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.slimta.frames import SlimtaFrames

CHECKS_MODULE = "mqforensics.systems.slimta.checks"
READ_MODULE = "mqforensics.systems.slimta.read"


CHECKS = (
    Check(
        "torn_write",
        "error",
        deferred(CHECKS_MODULE, "torn_write"),
        "A message with one half missing: an .env without .meta (error) or a .meta without .env "
        "on disk, a Redis hash without envelope or timestamp, an S3 object no exported SQS "
        "message names (error).",
        "slimta never delivers nor removes it: mail silently lost (an .env without .meta, an "
        "unqueued object), or a leftover holding personal data forever.",
        "Find the crash that tore the write; plan the leftover's removal (queue_leftovers).",
    ),
    Check(
        "stale_tmp",
        "warning",
        deferred(CHECKS_MODULE, "stale_tmp"),
        "A file in DiskStorage's tmp_dir older than --stale-tmp: the mkstemp file of a failed "
        "write, which slimta never unlinks.",
        "It may hold a whole envelope (detail.holds): personal data nobody will ever deliver.",
        "Plan its removal (queue_leftovers); give --tmp-dir so that it is checked at all.",
        needs=Needs("no DiskStorage tmp_dir", ("tmp_dir",)),
    ),
    Check(
        "corrupt_meta",
        "error",
        deferred(CHECKS_MODULE, "corrupt_meta"),
        "A meta that does not decode or has no timestamp, or a Redis key under the prefix that "
        "is not a hash.",
        "slimta's restart stops at it: every message listed after it (detail.blocks_later) is "
        "not loaded until it is fixed.",
        "Repair or move the meta by hand (a copy first), then restart the queue.",
    ),
    Check(
        "unreadable_envelope",
        "error",
        deferred(CHECKS_MODULE, "unreadable_envelope"),
        "An envelope that is truncated, not a pickle, not an Envelope, or cannot be read.",
        "slimta's get fails on every attempt: the message is never delivered.",
        "Recover the message from its sender or a backup, then remove it by hand.",
    ),
    Check(
        "unsafe_pickle",
        "critical",
        deferred(CHECKS_MODULE, "unsafe_pickle"),
        "A stored pickle naming a global outside the allow-list (a command, an import); it was "
        "never loaded here.",
        "slimta unpickles with plain pickle.loads and would run it: evidence of tampering.",
        "Preserve it and investigate; it is never planned for deletion.",
    ),
    Check(
        "retry_exhausted",
        "warning",
        deferred(CHECKS_MODULE, "retry_exhausted"),
        "A message with more attempts than the app's retry maximum (--retry-maximum).",
        "slimta's backoff gave up, so it should have been bounced and removed; it still holds "
        "the mail.",
        "Check why the remove failed or the retry settings changed; plan it (queue_leftovers).",
    ),
    Check(
        "delivered_indexes_unreliable",
        "warning",
        deferred(CHECKS_MODULE, "delivered_indexes_unreliable"),
        "A message recording delivered recipients by index (detail.reasons: relative to the "
        "reduced list, stored as a set, repeated, out of range: an error).",
        "The next attempt may skip or repeat recipients, or fail on every attempt.",
        "Check the recipients delivered in the delivery logs before the queue retries it.",
    ),
    Check(
        "retention_exceeded",
        "warning",
        deferred(CHECKS_MODULE, "retention_exceeded"),
        "A queued message, or a tmp_dir envelope, that arrived longer ago than --retention.",
        "It holds personal data past its retention period.",
        "Bounce or deliver it; plan its deletion (queued_mail).",
    ),
    Check(
        "dangling_queue_entry",
        "warning",
        deferred(CHECKS_MODULE, "dangling_queue_entry"),
        "A Redis queue entry or SQS message naming a message the store does not hold; one that "
        "does not decode is an error.",
        "slimta pops it and fails; an undecodable one stops its wait loop.",
        "Plan its removal (queue_leftovers); SQS messages are deleted with the SQS API.",
        needs=Needs("no queue list", ("redis", "sqs_export")),
    ),
    Check(
        "queue_list_blocks_load",
        "error",
        deferred(CHECKS_MODULE, "queue_list_blocks_load"),
        "A non-empty RedisStorage notification list (<prefix>queue).",
        "slimta 5.0.5's restart reads the list as a message hash and fails (WRONGTYPE): it "
        "loads nothing while the list holds entries.",
        "Let the running queue drain it before a restart, or restart with a fixed slimta.",
        needs=Needs("no RedisStorage", ("redis",)),
    ),
    Check(
        "personal_data",
        "info",
        deferred(CHECKS_MODULE, "personal_data"),
        "A message or tmp_dir envelope holding a data subject searched for (--erasure-policy): "
        'in its envelope sender or recipients, its header fields, and for search = "full" '
        "rules its body and attachments (detail.found: where); subjects as keyed hashes only.",
        "An erasure request covers it.",
        "Plan the erasure (erase_subject): `plan --findings` with the same policy.",
        needs=SUBJECTS_SEARCHED,
    ),
    Check(
        "unreadable_content",
        "warning",
        deferred(CHECKS_MODULE, "unreadable_content"),
        "A message or tmp_dir envelope with places that could not be searched at the depth "
        "asked (detail.unreadable: an envelope that does not decode, an encrypted or damaged "
        "part).",
        "It may hold a data subject the search could not see: it is not known to be clean.",
        "Open it by hand (decrypt with the recipient's key, recover the envelope); the plan "
        "defers it under each erase_subject rule, never deletes it blindly.",
        needs=SUBJECTS_SEARCHED,
    ),
)


def validation_frames(loaded: Loaded[SlimtaFrames]) -> Mapping[str, DataFrame]:
    """The one canonical frame, checked with ``expectations/slimta_items.json``."""
    frames: SlimtaFrames = loaded.frames
    return {"items": frames.items}


def data_sources() -> Sequence[type]:
    from mqforensics.systems.slimta.fleet import SlimtaItemsSource

    return [SlimtaItemsSource]


SPEC = System(
    name="slimta",
    title="python-slimta queue storage (disk, Redis, S3)",
    options=SlimtaOptions,
    load=deferred(READ_MODULE, "load"),
    settings=deferred(READ_MODULE, "settings"),
    checks=CHECKS,
    plan=plan.plan,
    rule_kinds=(
        RuleKind("queued_mail", ("older_than",), needs_older_than=True),
        RuleKind("queue_leftovers", ("older_than",), needs_older_than=True),
    ),
    executors=deferred("mqforensics.systems.slimta.purge", "build_executors"),
    purge_options=PurgeOptions,
    validation_frames=validation_frames,
    sample=sample.bundled,
    data_sources=data_sources,
    metrics=deferred("mqforensics.systems.slimta.metrics", "measure"),
)
