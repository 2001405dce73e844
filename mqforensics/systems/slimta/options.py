"""The settings every slimta check receives, and their defaults (no Spark here: the spec and the
command line import this)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from mqforensics.units import utc_now

DEFAULT_RETRY_MAXIMUM = 0  # the slimta app's default: no `retry` section means no retry at all
DEFAULT_RETENTION = dt.timedelta(days=7)
DEFAULT_STALE_TMP = dt.timedelta(hours=1)


@dataclass(frozen=True)
class AuditOptions:
    """What the checks judge against (the settings of every check); `as_of` is every finding's
    ``observed_at``.

    `retry_maximum` is the slimta app's ``retry: maximum`` (its backoff gives up once
    ``attempts > maximum``). `retention`: how long a queued message may hold personal data.
    `sqs_export`: an SQS export was read, so an object no SQS message names was never queued.
    `env_dir`, `meta_dir`, `tmp_dir`: the DiskStorage read (if any), which names the files of
    its items. `subjects` are the keyed hashes of the data subjects searched (``--erasure-policy``)
    under `subject_key` (`mqforensics.subjects`); none: `personal_data` finds nothing.
    """

    as_of: dt.datetime = field(default_factory=utc_now)
    retry_maximum: int = DEFAULT_RETRY_MAXIMUM
    retention: dt.timedelta = DEFAULT_RETENTION
    stale_tmp: dt.timedelta = DEFAULT_STALE_TMP
    sqs_export: bool = False
    env_dir: str | None = None
    meta_dir: str | None = None
    tmp_dir: str | None = None
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
