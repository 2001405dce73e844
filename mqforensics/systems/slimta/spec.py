"""python-slimta queue storage as the shared layers see it: the one `System` spec (docs/slimta.md).

Stores: a DiskStorage (``--disk``, ``--meta-dir``, ``--tmp-dir``), a RedisStorage (``--redis``),
slimta's cloud storage (``--s3`` with an optional ``--sqs-export``), any combination. They are
read into one canonical frame, the items (`items.ITEMS`); the checks (`checks`) judge it, the
planner (`planner`) turns their findings into actions, the executors (`purge_executor`) carry
them out, each re-checked live.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import AWS_LOGIN, Login
from mqforensics.spec import Check, Loaded, Option, RuleKind, Sample, System
from mqforensics.systems.slimta import audit, planner
from mqforensics.systems.slimta.redis_server import REDIS_LOGIN
from mqforensics.units import utc_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.retention.manifest import Plan
    from mqforensics.systems.slimta.options import AuditOptions


def _run(name: str) -> Callable[[DataFrame, AuditOptions], DataFrame]:
    """The check `name` of `checks`, imported when it runs (importing a spec imports no Spark)."""

    def run(items: DataFrame, options: AuditOptions) -> DataFrame:
        from mqforensics.systems.slimta import checks

        check: Callable[[DataFrame, AuditOptions], DataFrame] = checks.CHECKS[name]
        return check(items, options)

    run.__name__ = name
    return run


CHECKS = (
    Check(
        "torn_write",
        "error",
        _run("torn_write"),
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
        _run("stale_tmp"),
        "A file in DiskStorage's tmp_dir older than --stale-tmp: the mkstemp file of a failed "
        "write, which slimta never unlinks.",
        "It may hold a whole envelope (detail.holds): personal data nobody will ever deliver.",
        "Plan its removal (queue_leftovers); give --tmp-dir so that it is checked at all.",
    ),
    Check(
        "corrupt_meta",
        "error",
        _run("corrupt_meta"),
        "A meta that does not decode or has no timestamp, or a Redis key under the prefix that "
        "is not a hash.",
        "slimta's restart stops at it: every message listed after it (detail.blocks_later) is "
        "not loaded until it is fixed.",
        "Repair or move the meta by hand (a copy first), then restart the queue.",
    ),
    Check(
        "unreadable_envelope",
        "error",
        _run("unreadable_envelope"),
        "An envelope that is truncated, not a pickle, not an Envelope, or cannot be read.",
        "slimta's get fails on every attempt: the message is never delivered.",
        "Recover the message from its sender or a backup, then remove it by hand.",
    ),
    Check(
        "unsafe_pickle",
        "critical",
        _run("unsafe_pickle"),
        "A stored pickle naming a global outside the allow-list (a command, an import); it was "
        "never loaded here.",
        "slimta unpickles with plain pickle.loads and would run it: evidence of tampering.",
        "Preserve it and investigate; it is never planned for deletion.",
    ),
    Check(
        "retry_exhausted",
        "warning",
        _run("retry_exhausted"),
        "A message with more attempts than the app's retry maximum (--retry-maximum).",
        "slimta's backoff gave up, so it should have been bounced and removed; it still holds "
        "the mail.",
        "Check why the remove failed or the retry settings changed; plan it (queue_leftovers).",
    ),
    Check(
        "delivered_indexes_unreliable",
        "warning",
        _run("delivered_indexes_unreliable"),
        "A message recording delivered recipients by index (detail.reasons: relative to the "
        "reduced list, stored as a set, repeated, out of range: an error).",
        "The next attempt may skip or repeat recipients, or fail on every attempt.",
        "Check the recipients delivered in the delivery logs before the queue retries it.",
    ),
    Check(
        "retention_exceeded",
        "warning",
        _run("retention_exceeded"),
        "A queued message, or a tmp_dir envelope, that arrived longer ago than --retention.",
        "It holds personal data past its retention period.",
        "Bounce or deliver it; plan its deletion (queued_mail).",
    ),
    Check(
        "dangling_queue_entry",
        "warning",
        _run("dangling_queue_entry"),
        "A Redis queue entry or SQS message naming a message the store does not hold; one that "
        "does not decode is an error.",
        "slimta pops it and fails; an undecodable one stops its wait loop.",
        "Plan its removal (queue_leftovers); SQS messages are deleted with the SQS API.",
    ),
    Check(
        "queue_list_blocks_load",
        "error",
        _run("queue_list_blocks_load"),
        "A non-empty RedisStorage notification list (<prefix>queue).",
        "slimta 5.0.5's restart reads the list as a message hash and fails (WRONGTYPE): it "
        "loads nothing while the list holds entries.",
        "Let the running queue drain it before a restart, or restart with a fixed slimta.",
    ),
    Check(
        "personal_data",
        "info",
        _run("personal_data"),
        "A message or tmp_dir envelope whose envelope sender or recipients include a data "
        "subject searched for (--erasure-policy); subjects as keyed hashes only.",
        "An erasure request covers it.",
        "Plan the erasure (erase_subject): `plan --findings` with the same policy.",
    ),
)

PURGE_OPTIONS = (
    Option(
        ("--redis",),
        {
            "metavar": "URL",
            "help": "Redis of a RedisStorage plan, redis://HOST[:PORT][/DB] or rediss:// "
            "(default: the plan's); login from MQF_REDIS_USERNAME/_PASSWORD",
        },
        login=Login(REDIS_LOGIN, host=True),
    ),
    Option(
        ("--s3-endpoint",),
        {"metavar": "URL", "help": "S3 endpoint of the blob store (or MQF_S3_ENDPOINT)"},
        login=Login(AWS_LOGIN),
    ),
)


def executors(plan: Plan, args: argparse.Namespace) -> list[Any]:
    from mqforensics.systems.slimta.purge_executor import build_executors

    return build_executors(plan, args)


def validation_frames(loaded: Loaded) -> Mapping[str, DataFrame]:
    """The one canonical frame, checked with ``expectations/slimta_items.json``."""
    return {"items": loaded.frames}


def sample(workdir: Path) -> Sample:
    """The bundled DiskStorage copied under ``workdir/store`` with its recorded mtimes (git keeps
    none), judged a minute after it was written; its ground truth written beside it."""
    from mqforensics.systems.slimta.sample import BUNDLED, materialize, write_ground_truth

    store = Path(workdir) / "store"
    shutil.rmtree(store, ignore_errors=True)
    copy = materialize(store)
    layout = copy.layout
    assert layout.tmp_dir is not None
    truth = write_ground_truth(copy, Path(workdir) / "ground_truth.json")
    return Sample(
        argv=["--disk", layout.env_dir, "--meta-dir", layout.meta_dir, "--tmp-dir", layout.tmp_dir],
        as_of=utc_text(copy.as_of),
        ground_truth=truth,
        policy=BUNDLED / "policy.toml",
    )


def data_sources() -> Sequence[type]:
    from mqforensics.systems.slimta.fleet import SlimtaItemsSource

    return [SlimtaItemsSource]


SPEC = System(
    name="slimta",
    title="python-slimta queue storage (disk, Redis, S3)",
    add_source_options=audit.add_source_options,
    check_inputs=audit.check_inputs,
    load=audit.load,
    settings=audit.settings,
    checks=CHECKS,
    plan=planner.plan,
    rule_kinds=(
        RuleKind("queued_mail", ("older_than",), needs_older_than=True),
        RuleKind("queue_leftovers", ("older_than",), needs_older_than=True),
    ),
    executors=executors,
    purge_options=PURGE_OPTIONS,
    validation_frames=validation_frames,
    sample=sample,
    data_sources=data_sources,
)
