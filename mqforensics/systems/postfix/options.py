"""The settings every Postfix check receives, and their defaults (no Spark here: the spec and
the command line import this)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from mqforensics.systems.postfix.postconf import Lifetimes
from mqforensics.units import utc_now

DEFAULT_INCOMPLETE_GRACE = dt.timedelta(hours=1)
DEFAULT_EXPIRY_GRACE = dt.timedelta(hours=1)
DEFAULT_HOLD_AGE = dt.timedelta(days=7)
DEFAULT_RETENTION = dt.timedelta(days=7)


@dataclass(frozen=True)
class AuditOptions:
    """What the checks judge against; `as_of` is every finding's ``observed_at``.

    `lifetimes`: the instance's ``maximal_queue_lifetime`` and ``bounce_queue_lifetime``.
    `expiry_grace`: how long past its lifetime a deferred message may stay before it counts as
    stuck (the queue manager bounces it at its next attempt, up to ``maximal_backoff_time``
    later). `incomplete_grace`: how old a file not marked ready must be to be a crashed writer's
    leftover rather than one being written. `hold_age`: how long mail may stay on hold.
    `retention`: how long queued mail may hold personal data. `subjects` / `subject_key`: the
    keyed hashes of the data subjects searched (``--erasure-policy``).
    """

    as_of: dt.datetime = field(default_factory=utc_now)
    lifetimes: Lifetimes = field(default_factory=Lifetimes)
    expiry_grace: dt.timedelta = DEFAULT_EXPIRY_GRACE
    incomplete_grace: dt.timedelta = DEFAULT_INCOMPLETE_GRACE
    hold_age: dt.timedelta = DEFAULT_HOLD_AGE
    retention: dt.timedelta = DEFAULT_RETENTION
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
