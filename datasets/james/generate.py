"""Synthetic James mail-queue states with planted, documented anomalies and exact ground truth.

Normal rows follow James exactly (apache/james-project, server/queue/queue-rabbitmq, ``QV`` =
``view/cassandra``): ``timeRangeStart`` is the slice of the enqueue instant under the window active
then (``CassandraMailQueueMailStore``), ``bucketId = Math.abs(name.hashCode() % bucketCount)``
(``BucketedSlices``), a consumed mail has a ``deletedMailsV2`` row and, with the passthrough blob
store, its blobs deleted (``CassandraMailQueueMailDelete``; ``DeDuplicationBlobStore.delete`` is a
no-op), browseStart is the slice of the oldest live mail and contentStart equals it after the
cleanup, which deleted every partition before it (``updateBrowseStartReactive``).

Planted anomalies are a handful of rows each; every finding they cause (docs/james.md) is derived
from the rows with the checks' own rules, so the ground truth is exact even when one row causes
two findings (a stuck mail in a slice before browseStart is also invisible). Normal rows never
cause a finding except ``config_advice``. The normal rows are produced in chunks, so
`write_parquet` streams 10M entries without holding them in memory.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mqforensics.systems.james.java_hash import bucket_id, slice_start

UTC = dt.UTC
DAY = 86_400
HOUR = 3_600
STUCK_AFTER = DAY  # docs/james.md: stuck_after default 1 day
BLOB_GRACE = HOUR  # docs/james.md: blob_grace default 1 hour
BROWSE_START_GRACE = 7 * DAY  # BrowseStartHealthCheck.GRACE_PERIOD = Duration.ofDays(7)
CONFIG_AGGREGATE = "CassandraMailQueueViewConfiguration"
STRATEGY_AGGREGATE = "BlobStoreStorageStrategyConfiguration"
BLOB_BUCKET = "default"  # BucketName.DEFAULT when no objectstorage.namespace is set
_ALNUM = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8
)


@dataclass(frozen=True)
class ConfigEvent:
    """One ``ConfigurationChanged`` event; `active_from` is when James started using it
    (None for the first event: it applies to everything before the next one)."""

    slice_window_seconds: int
    bucket_count: int
    update_browse_start_pace: int = 1000
    active_from: dt.datetime | None = None


@dataclass(frozen=True)
class AnomalyCounts:
    """How many of each anomaly to plant (queue-level ones count queues)."""

    unreclaimed_partitions: int = 0  # V4: partitions with rows before contentStart
    cleanup_pending_partitions: int = 0  # V4: fully consumed partitions in [contentStart, B)
    never_cleaned_partitions: int = 0  # V3: fully consumed partitions before browseStart
    pinned_browse_start: int = 0  # queues whose B is pinned > 7 days back by stuck live mails
    empty_queue_old_browse_start: int = 0  # queues with no live mail and B > 7 days old
    lagging_browse_start: int = 0  # queues whose B is more than a window behind the oldest live
    invisible_mails: int = 0  # live mails in a slice before browseStart
    stuck_mails: int = 0  # visible live mails enqueued more than 1 day before as_of
    orphaned_blobs: int = 0  # unreferenced objects older than the grace (reported)
    young_orphaned_blobs: int = 0  # unreferenced objects younger than the grace (not reported)
    dangling_blob_refs: int = 0  # live mails whose header and/or body object is missing
    bucket_mismatches: int = 0  # consumed mails whose bucketid fits no bucket count
    slice_mismatches: int = 0  # consumed mails with a misaligned or far timerangestart
    config_violations: int = 0  # eventstore events that break James's change rules


DEFAULT_AS_OF = dt.datetime(2026, 11, 3, 12, 0, 0, tzinfo=UTC)


def _default_history() -> tuple[ConfigEvent, ...]:
    return (
        ConfigEvent(3600, 1, 1000),
        ConfigEvent(900, 4, 1000, DEFAULT_AS_OF - dt.timedelta(hours=12)),
    )


@dataclass(frozen=True)
class GenerationSpec:
    """What to generate. Times are UTC; `as_of` is the instant the state is judged at."""

    seed: int = 0
    table_version: str = "v4"
    queues: tuple[str, ...] = ("spool", "outgoing", "bounces")
    as_of: dt.datetime = DEFAULT_AS_OF
    config_history: tuple[ConfigEvent, ...] = field(default_factory=_default_history)
    blob_strategy: str = "passthrough"
    normal_mails: int = 300
    anomalies: AnomalyCounts = field(default_factory=AnomalyCounts)
    live_fraction: float = 0.05
    dedup_family: int = 1  # deduplication.gc.generation.family, default 1
    dedup_generation_seconds: int = 30 * DAY  # deduplication.gc.generation.duration, 30 days
    pinning_mails: int = 2
    chunk_size: int = 100_000

    def validate(self) -> None:
        """Raise ValueError for a spec that cannot be generated."""
        a = self.anomalies
        if self.table_version not in ("v4", "v3"):
            raise ValueError(f"table_version must be 'v4' or 'v3', not {self.table_version!r}")
        if self.blob_strategy not in ("passthrough", "deduplication"):
            raise ValueError(f"blob_strategy {self.blob_strategy!r} is not supported")
        if not self.queues or len(set(self.queues)) != len(self.queues):
            raise ValueError("queues must be distinct and not empty")
        if self.as_of.tzinfo is None:
            raise ValueError("as_of must be timezone-aware")
        if not self.config_history:
            raise ValueError("config_history needs at least one event")
        if self.table_version == "v3" and (
            a.unreclaimed_partitions or a.cleanup_pending_partitions
        ):
            raise ValueError("V3 has no contentStart: use never_cleaned_partitions")
        if self.table_version == "v4" and a.never_cleaned_partitions:
            raise ValueError("never_cleaned_partitions needs table_version 'v3'")
        levels = a.pinned_browse_start + a.empty_queue_old_browse_start + a.lagging_browse_start
        if levels > len(self.queues):
            raise ValueError(f"{levels} queue-level anomalies need as many queues")
        if not 1 <= self.pinning_mails <= 20:
            raise ValueError("pinning_mails must be 1..20")
        if self.normal_mails < 0:
            raise ValueError("normal_mails must be >= 0")


@dataclass
class GeneratedState:
    """Plain rows per canonical table (Cassandra's lower-case column names), blobs, ground truth.

    `entries` rows carry ``table_version``; timestamps are UTC datetimes with millisecond
    precision; ``enqueueid`` is a uuid string; ``attributes`` maps str to bytes;
    ``perrecipientspecificheaders`` is a list of 3-tuples. `content_start` is empty for V3.
    """

    spec: GenerationSpec
    as_of: dt.datetime
    table_version: str
    entries: list[dict[str, Any]]
    deleted: list[dict[str, Any]]
    browse_start: list[dict[str, Any]]
    content_start: list[dict[str, Any]]
    event_store: list[dict[str, Any]]
    blobs: dict[str, bytes]
    blob_last_modified: dict[str, dt.datetime]
    ground_truth: list[dict[str, Any]]
    planted: list[dict[str, Any]]

    @property
    def enqueued_table(self) -> str:
        return f"enqueuedmails{self.table_version}"

    def write_ground_truth(self, directory: str | os.PathLike[str]) -> None:
        """``ground_truth.json`` and ``ANOMALIES.md`` into `directory`."""
        _write_truth(Path(directory), self.spec, self.ground_truth, self.planted)


# ---------------------------------------------------------------------------------------------
# time and configuration helpers


def _ms_to_dt(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms // 1000, tz=UTC).replace(microsecond=(ms % 1000) * 1000)


def _iso(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def partition_subject(queue: str, timerangestart_s: int, bucket: int) -> str:
    """docs/james.md partition subject: ``q/2026-11-01T10:00:00Z/3``."""
    return f"{queue}/{_iso(timerangestart_s)}/{bucket}"


def config_event_json(eventid: int, event: ConfigEvent) -> str:
    """The exact JSON James's ConfigurationChangedDTO writes (sliceWindow as decimal seconds)."""
    return (
        '{"type":"cassandra-mail-queue-view-configuration",'
        f'"eventId":{eventid},"aggregateKey":"{CONFIG_AGGREGATE}",'
        f'"bucketCount":{event.bucket_count},'
        f'"updateBrowseStartPace":{event.update_browse_start_pace},'
        f'"sliceWindow":{event.slice_window_seconds}.000000000}}'
    )


def _strategy_event_json(strategy: str) -> str:
    # StorageStrategyChangedDTO: type storage-strategy-changed, storageStrategy PASSTHROUGH|...
    return (
        '{"type":"storage-strategy-changed","eventId":0,'
        f'"aggregateKey":"{STRATEGY_AGGREGATE}","storageStrategy":"{strategy.upper()}"}}'
    )


def parse_event_for_tests(event_json: str) -> tuple[int, int]:
    """(sliceWindow seconds, bucketCount) of a configuration event JSON."""
    event = json.loads(event_json)
    return int(float(event["sliceWindow"])), int(event["bucketCount"])


def config_violates(previous: ConfigEvent, event: ConfigEvent) -> bool:
    """James's validateConfigurationChange, inverted: window grew or is no divisor, or fewer
    buckets."""
    pw, w = previous.slice_window_seconds, event.slice_window_seconds
    return w > pw or pw % w != 0 or event.bucket_count < previous.bucket_count


def _with_violations(history: tuple[ConfigEvent, ...], count: int) -> list[ConfigEvent]:
    events = list(history)
    for k in range(count):
        prev = events[-1]
        w, b = prev.slice_window_seconds, prev.bucket_count
        kind = k % 3
        if kind == 1:  # window that does not divide the previous one
            candidate = next((c for c in (w * 2 // 3, w - 1, w + 1) if c > 0 and w % c), 2 * w)
            new = ConfigEvent(candidate, b, prev.update_browse_start_pace)
        elif kind == 2 and b >= 2:  # bucket count decrease
            new = ConfigEvent(w, b - 1, prev.update_browse_start_pace)
        else:  # window increase
            new = ConfigEvent(w * 2, b, prev.update_browse_start_pace)
        events.append(new)
    return events


class _Config:
    """The configuration active at an instant (violating events are never active)."""

    def __init__(self, spec: GenerationSpec) -> None:
        self.history = list(spec.config_history)
        self.events = _with_violations(spec.config_history, spec.anomalies.config_violations)
        self.starts = [
            (int(e.active_from.timestamp()) if e.active_from else -(2**62)) for e in self.history
        ]
        self.windows = sorted({e.slice_window_seconds for e in self.events})
        self.bucket_counts = sorted({e.bucket_count for e in self.events})
        self.largest_window = max(self.windows)
        self.current_window = self.events[-1].slice_window_seconds

    def at(self, epoch_s: int) -> ConfigEvent:
        active = self.history[0]
        for start, event in zip(self.starts, self.history, strict=True):
            if start <= epoch_s:
                active = event
        return active

    def slice_of(self, epoch_s: int) -> int:
        return slice_start(epoch_s, self.at(epoch_s).slice_window_seconds)

    def slice_mismatch(self, trs: int, enqueued_ms: int) -> bool:
        aligned = any(trs % w == 0 for w in self.windows)
        inside = (trs - 60) * 1000 <= enqueued_ms < (trs + self.largest_window) * 1000
        return not aligned or not inside

    def bucket_mismatch(self, name: str, bucket: int) -> bool:
        return all(bucket != bucket_id(name, n) for n in self.bucket_counts)


# ---------------------------------------------------------------------------------------------
# realistic content

_USERS = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
    "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe",
]  # fmt: skip
_DOMAINS = ["example.org", "example.com", "mail.example.net", "lists.example.edu"]
_HOSTS = [
    ("mx1.example.com", "192.0.2.10"),
    ("mx2.example.net", "192.0.2.25"),
    ("smtp.example.edu", "198.51.100.7"),
    ("localhost", "127.0.0.1"),
    ("relay.example.org", "203.0.113.42"),
]
_SUBJECTS = [
    "Quarterly report",
    "Re: meeting notes",
    "Invoice 2026-114",
    "Your order has shipped",
    "Weekly digest",
    "Fwd: travel plans",
    "Password reset",
    "Welcome to the list",
]
_STATES = {"spool": ["root", "root", "transport"], "outgoing": ["relay"], "bounces": ["error"]}
_BODIES = [
    (
        "Hello,\r\n\r\nPlease find the quarterly figures below.\r\n\r\n"
        + "Region  Q3      Q4\r\n" * 8
        + "\r\nRegards,\r\n-- \r\nFinance\r\n"
    ),
    "Hi all,\r\n\r\nNotes from today's meeting are attached inline.\r\n\r\n"
    + "- action item: follow up with the vendor\r\n" * 12,
    "Dear customer,\r\n\r\nYour order has shipped and will arrive within 3 days.\r\n" * 4,
    "This week's digest\r\n==================\r\n\r\n" + "* an article summary line\r\n" * 20,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\r\n" * 15,
    "Click the link below to reset your password. It expires in one hour.\r\n\r\n"
    "https://example.org/reset?token=ZXhhbXBsZQ\r\n",
]


def _address(r: random.Random) -> str:
    return f"{r.choice(_USERS)}@{r.choice(_DOMAINS)}"


def _header_bytes(
    name: str, sender: str | None, recipients: list[str], host: tuple[str, str], t_ms: int, r: Any
) -> bytes:
    """Header blob: each header line ends with CRLF and one more CRLF follows the last
    (InternetHeadersInputStream), US-ASCII."""
    message_id = r.randrange(10**9)
    return header_text(
        name, sender, recipients, host, t_ms, message_id, r.randrange(len(_SUBJECTS))
    )


def header_text(
    name: str,
    sender: str | None,
    recipients: list[str],
    host: tuple[str, str],
    t_ms: int,
    message_id: int,
    subject: int,
) -> bytes:
    """The header blob of `_header_bytes` from its two random draws (`subject` indexes
    `_SUBJECTS`)."""
    date = _ms_to_dt(t_ms).strftime("%a, %d %b %Y %H:%M:%S +0000")
    lines = [
        f"Return-Path: <{sender or ''}>",
        f"Received: from {host[0]} ([{host[1]}]) by mx.example.org (JAMES SMTP Server) "
        f"with ESMTP ID {name[-8:].lower()}; {date}",
        f"Message-ID: <{name}.{message_id}@{host[0]}>",
        f"Date: {date}",
        f"From: {sender or 'MAILER-DAEMON@example.org'}",
        f"To: {', '.join(recipients)}",
        f"Subject: {_SUBJECTS[subject]}",
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=UTF-8",
        "Content-Transfer-Encoding: 7bit",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _body_bytes(index: int, unique: str | None) -> bytes:
    body = _BODIES[index % len(_BODIES)]
    if unique is not None:
        body += f"\r\nReference: {unique}\r\n"
    return body.encode("ascii")


def dedup_blob_id(content: bytes, write_ms: int, family: int, generation_seconds: int) -> str:
    """GenerationAwareBlobId: ``<family>_<generation>_<base64url(sha256)>`` (with padding, as
    Guava's BaseEncoding.base64Url()); generation = epochSecond / generationDuration."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).decode("ascii")
    return f"{family}_{(write_ms // 1000) // generation_seconds}_{digest}"


def _hash_names(codes: np.ndarray) -> np.ndarray:
    """Java String.hashCode of equal-length ASCII names given as an (n, len) uint8 array."""
    h = np.zeros(codes.shape[0], dtype=np.uint64)
    for column in range(codes.shape[1]):
        h = (h * np.uint64(31) + codes[:, column].astype(np.uint64)) & np.uint64(0xFFFFFFFF)
    return h.astype(np.uint32).view(np.int32).astype(np.int64)


def _buckets(hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    # Math.abs(h % n): Java's % truncates toward zero (np.fmod does too).
    return np.abs(np.fmod(hashes, counts))


# ---------------------------------------------------------------------------------------------
# the plan: queue profiles, browseStart/contentStart, planted rows and their findings


@dataclass
class _Queue:
    name: str
    index: int
    profile: str  # normal | pinned | lagging | empty
    live_start_s: int = 0  # L: first normal live mail
    browse_start_s: int = 0
    content_start_s: int | None = None
    normal_count: int = 0
    has_stuck: bool = False
    has_invisible: bool = False


@dataclass
class _Plan:
    spec: GenerationSpec
    config: _Config
    T: int
    queues: list[_Queue]
    planted_rows: list[dict[str, Any]]
    planted_deleted: list[dict[str, Any]]
    planted_blobs: dict[str, tuple[bytes, int]]
    orphan_keys: set[str]
    planted: list[dict[str, Any]]


class _Maker:
    """Builds single mails (rows plus blobs) for the planted anomalies."""

    def __init__(self, spec: GenerationSpec, config: _Config, r: random.Random) -> None:
        self.spec, self.config, self.r = spec, config, r
        self.rows: list[dict[str, Any]] = []
        self.deleted: list[dict[str, Any]] = []
        self.blobs: dict[str, tuple[bytes, int]] = {}

    def name_at(self, t_ms: int) -> str:
        suffix = "".join(
            self.r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            for _ in range(20)
        )
        return f"Mail{t_ms - self.r.randint(5, 2000)}-{suffix}"

    def mail(
        self,
        queue: _Queue,
        t_ms: int,
        *,
        live: bool,
        bucket_count: int | None = None,
        want_bucket: int | None = None,
        trs: int | None = None,
        bucket: int | None = None,
        missing: tuple[bool, bool] = (False, False),
    ) -> dict[str, Any]:
        r = self.r
        active = self.config.at(t_ms // 1000)
        n = bucket_count or active.bucket_count
        name = self.name_at(t_ms)
        while want_bucket is not None and bucket_id(name, n) != want_bucket:
            name = self.name_at(t_ms)
        row = _base_row(r, queue.name, name, t_ms)
        row["timerangestart"] = _ms_to_dt(
            1000 * (trs if trs is not None else self.config.slice_of(t_ms // 1000))
        )
        row["bucketid"] = bucket if bucket is not None else bucket_id(name, n)
        row["enqueueid"] = str(uuid.UUID(int=r.getrandbits(128), version=4))
        row["table_version"] = self.spec.table_version
        host = (row["remotehost"], row["remoteaddr"])
        header = _header_bytes(name, row.get("sender"), row["recipients"], host, t_ms, r)
        body = _body_bytes(r.randrange(len(_BODIES)), row["enqueueid"])  # unique: never shared
        write_ms = t_ms - 40
        for column, content, gone in (
            ("headerblobid", header, missing[0]),
            ("bodyblobid", body, missing[1]),
        ):
            key = self.blob_key(content, write_ms)
            row[column] = key
            keep = live or self.spec.blob_strategy == "deduplication"
            if keep and not gone:
                self.blobs[key] = (content, write_ms)
        self.rows.append(row)
        if not live:
            self.deleted.append({"queuename": queue.name, "enqueueid": row["enqueueid"]})
        return row

    def blob_key(self, content: bytes, write_ms: int) -> str:
        if self.spec.blob_strategy == "deduplication":
            spec = self.spec
            return dedup_blob_id(
                content, write_ms, spec.dedup_family, spec.dedup_generation_seconds
            )
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))


def _base_row(r: Any, queue: str, name: str, t_ms: int) -> dict[str, Any]:
    """Columns that do not depend on slicing; absent values are simply missing keys' None."""
    bounce = queue == "bounces"
    recipients = [_address(r) for _ in range(1 + r.randrange(3))]
    host = _HOSTS[r.randrange(len(_HOSTS))]
    attributes = {
        "org.apache.james.rrt.Origin": b'{"serializer":"StringSerializer","value":"smtp"}'
    }
    if r.randrange(4) == 0:
        attributes["AuthenticatedUser"] = (
            b'{"serializer":"StringSerializer","value":"%s"}' % recipients[0].encode()
        )
    headers: list[tuple[str, str, str]] = []
    if r.randrange(5) == 0:
        headers = [(recipients[0], "Delivered-To", recipients[0])]
    states = _STATES.get(queue, ["root"])
    return {
        "queuename": queue,
        "enqueuedtime": _ms_to_dt(t_ms),
        "name": name,
        "state": states[r.randrange(len(states))],
        "attributes": attributes,
        "errormessage": "550 5.1.1 mailbox unavailable" if bounce else None,
        "sender": None if bounce else _address(r),  # null sender <> for bounces: column unset
        "recipients": recipients,
        "remotehost": host[0],
        "remoteaddr": host[1],
        "lastupdated": _ms_to_dt(t_ms - r.randint(1, 4)),
        "perrecipientspecificheaders": headers,
    }


def _assign_profiles(spec: GenerationSpec) -> list[_Queue]:
    a = spec.anomalies
    profiles = ["normal"] * len(spec.queues)
    position = len(spec.queues) - 1
    for profile, count in (
        ("empty", a.empty_queue_old_browse_start),
        ("lagging", a.lagging_browse_start),
        ("pinned", a.pinned_browse_start),
    ):
        for _ in range(count):
            profiles[position] = profile
            position -= 1
    weights = [max(1, 8 - 3 * i) for i in range(len(spec.queues))]
    counts = [spec.normal_mails * w // sum(weights) for w in weights]
    counts[0] += spec.normal_mails - sum(counts)
    return [
        _Queue(name, i, profiles[i], normal_count=max(2, counts[i]))
        for i, name in enumerate(spec.queues)
    ]


def _round_robin(hosts: list[_Queue], count: int) -> list[_Queue]:
    return [hosts[k % len(hosts)] for k in range(count)] if hosts else []


def _plan(spec: GenerationSpec) -> _Plan:
    spec.validate()
    a = spec.anomalies
    config = _Config(spec)
    T = int(spec.as_of.timestamp())
    r = random.Random(f"james-plan-{spec.seed}")
    queues = _assign_profiles(spec)
    live_queues = [q for q in queues if q.profile != "empty"]
    normal = [q for q in queues if q.profile == "normal"]
    pinned = [q for q in queues if q.profile == "pinned"]

    # Stuck (visible) mails prefer pinned queues; invisible ones normal queues without stuck.
    stuck_hosts = _round_robin(pinned or normal[::-1], a.stuck_mails)
    for q in stuck_hosts:
        q.has_stuck = True
    inv_pool = [q for q in normal if not q.has_stuck] or normal or pinned
    if a.invisible_mails and not inv_pool:
        raise ValueError("invisible mails need a normal or pinned queue")
    if a.stuck_mails and not stuck_hosts:
        raise ValueError("stuck mails need a normal or pinned queue")
    inv_hosts = _round_robin(inv_pool, a.invisible_mails)
    for q in inv_hosts:
        q.has_invisible = True

    stuck_times: dict[int, list[int]] = {}
    for k, q in enumerate(stuck_hosts):
        step = k // max(1, len(set(id(h) for h in stuck_hosts)))
        base = T - 2 * DAY if q.profile == "pinned" else T - 26 * HOUR
        stuck_times.setdefault(q.index, []).append((base - step * 600) * 1000)

    for q in queues:
        q.live_start_s = T - 18 * HOUR
        if q.profile == "pinned":
            q.browse_start_s = config.slice_of(T - 8 * DAY - 3 * HOUR)
        elif q.profile == "lagging":
            q.browse_start_s = config.slice_of(T - 3 * DAY)
        elif q.profile == "empty":
            q.browse_start_s = config.slice_of(T - 9 * DAY)
        else:
            oldest = min([q.live_start_s * 1000, *stuck_times.get(q.index, [])]) // 1000
            q.browse_start_s = config.slice_of(oldest)
            lazy = q.index % 2 == 1 and not a.config_violations
            if lazy and q.browse_start_s % config.current_window == 0:
                # James updates browseStart lazily (probability 1/pace per deletion): it may
                # trail the oldest live slice, by at most one window without being "lagging".
                q.browse_start_s -= config.current_window

    maker = _Maker(spec, config, r)
    planted: list[dict[str, Any]] = []

    def record(kind: str, queue: str | None, rows: list[dict[str, Any]], **extra: Any) -> None:
        planted.append({"anomaly": kind, "queue": queue, "rows": rows, **extra})

    # Pinned queues: the pinning live mails sit in the slice browseStart, > 7 days ago.
    for q in pinned:
        rows = [
            maker.mail(q, (q.browse_start_s + 30 + 61 * i) * 1000, live=True)
            for i in range(spec.pinning_mails)
        ]
        record("pinned_browse_start", q.name, rows)
    for q in queues:
        if q.profile in ("lagging", "empty"):
            record(
                f"{q.profile}_browse_start"
                if q.profile == "lagging"
                else "empty_queue_old_browse_start",
                q.name,
                [],
            )

    # Stuck visible mails.
    for q in queues:
        for t_ms in stuck_times.get(q.index, []):
            record("stuck_mail", q.name, [maker.mail(q, t_ms, live=True)])

    # Invisible mails: live, enqueued before browseStart (not stuck when B allows it).
    inv_counter: dict[int, int] = {}
    for q in inv_hosts:
        k = inv_counter.get(q.index, 0)
        inv_counter[q.index] = k + 1
        t = q.browse_start_s - 600 - 420 * k
        record("invisible_mail", q.name, [maker.mail(q, t * 1000, live=True)])

    # Partition anomalies, placed below everything else of their queue, a slice apart.
    spacing = config.largest_window + 600

    def lowest(q: _Queue) -> int:
        trs = [
            int(row["timerangestart"].timestamp())
            for row in maker.rows
            if row["queuename"] == q.name
        ]
        return min([q.browse_start_s, *trs])

    def partition(q: _Queue, t: int) -> list[dict[str, Any]]:
        first = maker.mail(q, t * 1000, live=False)
        rows = [first]
        for j in range(r.randrange(3)):
            rows.append(
                maker.mail(
                    q,
                    (t + 20 * (j + 1)) * 1000,
                    live=False,
                    want_bucket=first["bucketid"],
                    trs=int(first["timerangestart"].timestamp()),
                )
            )
        return rows

    pending_hosts = _round_robin(queues, a.cleanup_pending_partitions)
    never_hosts = _round_robin(queues, a.never_cleaned_partitions)
    for kind, hosts in (("cleanup_pending", pending_hosts), ("never_cleaned", never_hosts)):
        for q in hosts:
            t = lowest(q) - spacing
            rows = partition(q, t)
            record(kind, q.name, rows)
    if spec.table_version == "v4":
        for q in queues:
            q.content_start_s = lowest(q)  # C <= invisible and pending slices, C <= B
    for q in _round_robin(queues, a.unreclaimed_partitions):
        assert q.content_start_s is not None
        t = min(q.content_start_s, lowest(q)) - spacing
        record("unreclaimed_partition", q.name, partition(q, t))

    # Dangling blob references: recent live mails in queues with live mails.
    for k, q in enumerate(_round_robin(live_queues, a.dangling_blob_refs)):
        t = T - 30 * 60 - 97 * k
        missing = [(False, True), (True, False), (True, True)][k % 3]
        record("dangling_blob_ref", q.name, [maker.mail(q, t * 1000, live=True, missing=missing)])

    # Bucket and slice mismatches: consumed mails a few hours old.
    for k, q in enumerate(_round_robin(queues, a.bucket_mismatches)):
        t = T - 6 * HOUR - 300 * k
        name_probe = maker.mail(q, t * 1000, live=False)
        wrong = next(b for b in range(64) if config.bucket_mismatch(name_probe["name"], b))
        name_probe["bucketid"] = wrong
        record("bucket_mismatch", q.name, [name_probe])
    for k, q in enumerate(_round_robin(queues, a.slice_mismatches)):
        t = T - 7 * HOUR - 300 * k
        aligned = config.slice_of(t)
        if k % 2 == 0:  # timeRangeStart aligned to no window of the history
            offset = next(
                o for o in range(7, 600) if all((aligned + o) % w for w in config.windows)
            )
            row = maker.mail(q, (aligned + offset + 30) * 1000, live=False, trs=aligned + offset)
        else:  # enqueuedTime far after its slice (outside [trs - 60 s, trs + largest window))
            row = maker.mail(
                q, (aligned + config.largest_window + 120) * 1000, live=False, trs=aligned
            )
        record("slice_mismatch", q.name, [row])

    # Orphaned blobs: objects no row references; half passthrough ids, half dedup ids.
    orphan_keys: set[str] = set()
    for k in range(a.orphaned_blobs + a.young_orphaned_blobs):
        young = k >= a.orphaned_blobs
        age = (5 + 3 * k) * 60 if young else 2 * HOUR + 37 * 60 * k
        write_ms = (T - age) * 1000
        content = _body_bytes(k, f"orphan-{k}-{r.getrandbits(64):x}")
        if (k % 2 == 0) == (spec.blob_strategy == "passthrough"):
            key = str(uuid.UUID(int=r.getrandbits(128), version=4))
        else:
            key = dedup_blob_id(content, write_ms, spec.dedup_family, spec.dedup_generation_seconds)
        maker.blobs[key] = (content, write_ms)
        orphan_keys.add(key)
        record("young_orphaned_blob" if young else "orphaned_blob", None, [], key=key)

    for k in range(len(spec.config_history), len(config.events)):
        record("config_violation", None, [], key=f"eventid {k}")
    for q in queues:
        if q.content_start_s is None and spec.table_version == "v4":
            q.content_start_s = q.browse_start_s
    return _Plan(
        spec, config, T, queues, maker.rows, maker.deleted, maker.blobs, orphan_keys, planted
    )


def _finding(check: str, severity: str, queue: str | None, subject: str) -> dict[str, Any]:
    return {"check": check, "severity": severity, "queue": queue, "subject": subject}


def _findings(plan: _Plan, with_blobs: bool = True) -> list[dict[str, Any]]:
    """Every finding of the state, from the planted rows with the checks' rules (normal rows
    cause none but config_advice)."""
    cfg, T = plan.config, plan.T
    out: list[dict[str, Any]] = []
    queues = {q.name: q for q in plan.queues}
    deleted = {(d["queuename"], d["enqueueid"]) for d in plan.planted_deleted}
    blob_keys = set(plan.planted_blobs)
    oldest_live: dict[str, int] = {
        q.name: plan.config.slice_of(q.live_start_s) for q in plan.queues if q.profile != "empty"
    }
    partitions: dict[tuple[str, int, int], list[bool]] = {}
    for row in plan.planted_rows:
        q = queues[row["queuename"]]
        trs = int(row["timerangestart"].timestamp())
        t_ms = int(row["enqueuedtime"].timestamp() * 1000)
        live = (q.name, row["enqueueid"]) not in deleted
        partitions.setdefault((q.name, trs, row["bucketid"]), []).append(live)
        eid = row["enqueueid"]
        if live:
            oldest_live[q.name] = min(oldest_live.get(q.name, trs), trs)
            if trs < q.browse_start_s:
                out.append(_finding("invisible_mail", "error", q.name, eid))
            if t_ms < (T - STUCK_AFTER) * 1000:
                out.append(_finding("stuck_mail", "error", q.name, eid))
            missing = {row["headerblobid"], row["bodyblobid"]} - blob_keys
            if with_blobs and missing:
                out.append(_finding("dangling_blob_ref", "error", q.name, eid))
        if cfg.bucket_mismatch(row["name"], row["bucketid"]):
            out.append(_finding("bucket_mismatch", "warning", q.name, eid))
        if cfg.slice_mismatch(trs, t_ms):
            out.append(_finding("slice_mismatch", "warning", q.name, eid))
    for (name, trs, bucket), lives in partitions.items():
        q = queues[name]
        subject = partition_subject(name, trs, bucket)
        C, B = q.content_start_s, q.browse_start_s
        if C is not None and trs < C:
            out.append(_finding("unreclaimed_slice", "warning", name, subject))
        elif C is not None and C <= trs < B and not any(lives):
            out.append(_finding("unreclaimed_slice", "info", name, subject))
        elif C is None and trs < B and not any(lives):
            out.append(_finding("unreclaimed_slice", "warning", name, subject))
    for q in plan.queues:
        B = q.browse_start_s
        oldest = oldest_live.get(q.name)
        lagging = oldest is not None and oldest - cfg.current_window > B
        if T - B > BROWSE_START_GRACE or lagging:
            out.append(_finding("stale_browse_start", "warning", q.name, q.name))
        out.append(_finding("config_advice", "info", q.name, q.name))
    if with_blobs:
        for key in plan.orphan_keys:
            if plan.planted_blobs[key][1] < (T - BLOB_GRACE) * 1000:
                out.append(_finding("orphaned_blob", "info", None, key))
    for i in range(1, len(cfg.events)):
        if config_violates(cfg.events[i - 1], cfg.events[i]):
            out.append(_finding("config_violation", "error", None, f"eventid {i}"))
    return sorted(out, key=lambda f: (f["check"], f["queue"] or "", f["subject"]))


# primary finding of each planted anomaly: (check, severity)
_PRIMARY = {
    "pinned_browse_start": ("stale_browse_start", "warning"),
    "lagging_browse_start": ("stale_browse_start", "warning"),
    "empty_queue_old_browse_start": ("stale_browse_start", "warning"),
    "stuck_mail": ("stuck_mail", "error"),
    "invisible_mail": ("invisible_mail", "error"),
    "cleanup_pending": ("unreclaimed_slice", "info"),
    "never_cleaned": ("unreclaimed_slice", "warning"),
    "unreclaimed_partition": ("unreclaimed_slice", "warning"),
    "dangling_blob_ref": ("dangling_blob_ref", "error"),
    "bucket_mismatch": ("bucket_mismatch", "warning"),
    "slice_mismatch": ("slice_mismatch", "warning"),
    "orphaned_blob": ("orphaned_blob", "info"),
    "config_violation": ("config_violation", "error"),
}


def _annotate(plan: _Plan, truth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Planted anomalies as JSON-able records with their primary finding and every finding
    their rows cause."""
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for f in truth:
        by_subject.setdefault(f["subject"], []).append(f)
    records = []
    deleted = {(d["queuename"], d["enqueueid"]) for d in plan.planted_deleted}
    for p in plan.planted:
        kind = p["anomaly"]
        subjects: list[str] = []
        if kind.endswith("browse_start"):
            primary_subject = p["queue"]
            subjects = [p["queue"]] + [row["enqueueid"] for row in p["rows"]]
        elif kind in ("cleanup_pending", "never_cleaned", "unreclaimed_partition"):
            row = p["rows"][0]
            primary_subject = partition_subject(
                row["queuename"], int(row["timerangestart"].timestamp()), row["bucketid"]
            )
            subjects = [primary_subject] + [row["enqueueid"] for row in p["rows"]]
        elif "key" in p:
            primary_subject = p["key"]
            subjects = [primary_subject]
        else:
            primary_subject = p["rows"][0]["enqueueid"]
            subjects = [primary_subject]
        caused = [
            f for s in subjects for f in by_subject.get(s, []) if f["check"] != "config_advice"
        ]
        check = _PRIMARY.get(kind)
        records.append(
            {
                "anomaly": kind,
                "queue": p["queue"],
                "subject": primary_subject,
                "primary": None
                if check is None
                else _finding(check[0], check[1], p["queue"], primary_subject),
                "findings": caused,
                "rows": [
                    {
                        "enqueueid": row["enqueueid"],
                        "timerangestart": row["timerangestart"].strftime("%Y-%m-%dT%H:%M:%S.%f")[
                            :-3
                        ]
                        + "Z",
                        "bucketid": row["bucketid"],
                        "live": (row["queuename"], row["enqueueid"]) not in deleted,
                    }
                    for row in p["rows"]
                ],
            }
        )
    return records


# ---------------------------------------------------------------------------------------------
# normal rows, in chunks

ENTRY_COLUMNS = [
    "queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name", "state",
    "headerblobid", "bodyblobid", "attributes", "errormessage", "sender", "recipients",
    "remotehost", "remoteaddr", "lastupdated", "perrecipientspecificheaders",
]  # fmt: skip


@dataclass
class _Chunk:
    entries: dict[str, list[Any]]  # column -> values
    deleted: list[dict[str, Any]]
    blobs: dict[str, tuple[bytes, int]]  # key -> (content, last_modified ms)


@dataclass
class _Drawn:
    """The numpy-drawn columns of a chunk of normal rows (shared by the row-by-row reference
    and the vectorised writer, `datasets.james.columnar`)."""

    live: np.ndarray  # bool
    t_ms: np.ndarray  # int64 enqueue instants
    names: np.ndarray  # (n, 38) uint8: "Mail<13-digit ms>-<20 alphanumerics>"
    trs: np.ndarray  # int64 timeRangeStart seconds
    buckets: np.ndarray  # int64
    ids: np.ndarray  # (n, 16) uint8: the enqueue ids' uuid4 bytes


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """ASCII decimal digits of non-negative `values`, `width` of them, as an (n, width) array."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] // powers) % 10 + ord("0")).astype(np.uint8)


def _draw_chunk(plan: _Plan, q: _Queue, chunk: int, start: int, n: int) -> _Drawn:
    spec, cfg, T = plan.spec, plan.config, plan.T
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, q.index, chunk]))
    if q.profile == "empty":
        live = np.zeros(n, dtype=bool)
    else:
        live = rng.random(n) < spec.live_fraction
        if start == 0:
            live[0] = True
    lo_consumed = q.browse_start_s + cfg.largest_window
    t_ms = np.where(
        live,
        rng.integers(q.live_start_s * 1000, T * 1000, n),
        rng.integers(lo_consumed * 1000, T * 1000, n),
    )
    if start == 0 and q.profile != "empty":
        t_ms[0] = q.live_start_s * 1000  # the oldest live mail: browseStart is its slice
    name_ms = t_ms - rng.integers(5, 2000, n)
    if n and (name_ms.min() < 10**12 or name_ms.max() >= 10**13):
        raise ValueError("mail names must have 13-digit millisecond stamps")
    names = np.empty((n, 38), dtype=np.uint8)
    names[:, :4] = np.frombuffer(b"Mail", dtype=np.uint8)
    names[:, 4:17] = _digits(name_ms, 13)
    names[:, 17] = ord("-")
    names[:, 18:] = _ALNUM[rng.integers(0, len(_ALNUM), (n, 20))]
    hashes = _hash_names(names)
    t_s = t_ms // 1000
    starts = np.array(cfg.starts, dtype=np.int64)
    era = np.searchsorted(starts, t_s, side="right") - 1
    era = np.maximum(era, 0)
    windows = np.array([e.slice_window_seconds for e in cfg.history], dtype=np.int64)[era]
    counts = np.array([e.bucket_count for e in cfg.history], dtype=np.int64)[era]
    trs = (t_s // windows) * windows
    buckets = _buckets(hashes, counts)
    ids = np.frombuffer(rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    ids[:, 6] = (ids[:, 6] & 0x0F) | 0x40
    ids[:, 8] = (ids[:, 8] & 0x3F) | 0x80
    return _Drawn(live, t_ms, names, trs, buckets, ids)


def _normal_chunk(
    plan: _Plan, q: _Queue, chunk: int, start: int, n: int, with_blobs: bool
) -> _Chunk:
    spec = plan.spec
    drawn = _draw_chunk(plan, q, chunk, start, n)
    r = random.Random(f"james-{spec.seed}-{q.index}-{chunk}")
    joined = drawn.names.tobytes().decode("ascii")
    names = [joined[38 * i : 38 * i + 38] for i in range(n)]
    ids = [str(uuid.UUID(bytes=drawn.ids[i].tobytes())) for i in range(n)]
    t_ms, trs, live, buckets = drawn.t_ms, drawn.trs, drawn.live, drawn.buckets
    cols: dict[str, list[Any]] = {c: [] for c in ENTRY_COLUMNS}
    deleted: list[dict[str, Any]] = []
    blobs: dict[str, tuple[bytes, int]] = {}
    dedup = spec.blob_strategy == "deduplication"
    t_list, trs_list, live_list = t_ms.tolist(), trs.tolist(), live.tolist()
    for i in range(n):
        base = _base_row(r, q.name, names[i], t_list[i])
        base["timerangestart"] = _ms_to_dt(trs_list[i] * 1000)
        base["bucketid"] = int(buckets[i])
        base["enqueueid"] = ids[i]
        write_ms = t_list[i] - 40  # blobs are saved before the view row (MimeMessageStore)
        keep = live_list[i] or dedup
        if dedup:
            host = (base["remotehost"], base["remoteaddr"])
            header = _header_bytes(names[i], base["sender"], base["recipients"], host, t_list[i], r)
            body = _body_bytes(r.randrange(len(_BODIES)), ids[i] if r.random() < 0.3 else None)
            hkey = dedup_blob_id(header, write_ms, spec.dedup_family, spec.dedup_generation_seconds)
            bkey = dedup_blob_id(body, write_ms, spec.dedup_family, spec.dedup_generation_seconds)
        else:
            hkey = str(uuid.UUID(int=r.getrandbits(128), version=4))
            bkey = str(uuid.UUID(int=r.getrandbits(128), version=4))
            if keep and with_blobs:
                host = (base["remotehost"], base["remoteaddr"])
                header = _header_bytes(
                    names[i], base["sender"], base["recipients"], host, t_list[i], r
                )
                body = _body_bytes(r.randrange(len(_BODIES)), ids[i])
        base["headerblobid"], base["bodyblobid"] = hkey, bkey
        if keep and with_blobs:
            for key, content in ((hkey, header), (bkey, body)):
                previous = blobs.get(key)
                blobs[key] = (content, max(write_ms, previous[1] if previous else 0))
        if not live_list[i]:
            deleted.append({"queuename": q.name, "enqueueid": ids[i]})
        for c in ENTRY_COLUMNS:
            cols[c].append(base[c])
    return _Chunk(cols, deleted, blobs)


def _rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {c: [row.get(c) for row in rows] for c in ENTRY_COLUMNS}


def _iter_chunks(plan: _Plan, with_blobs: bool) -> Iterator[_Chunk]:
    size = max(1, plan.spec.chunk_size)
    for q in plan.queues:
        for chunk, start in enumerate(range(0, q.normal_count, size)):
            n = min(size, q.normal_count - start)
            yield _normal_chunk(plan, q, chunk, start, n, with_blobs)
    blobs = plan.planted_blobs if with_blobs else {}
    yield _Chunk(_rows_to_columns(plan.planted_rows), list(plan.planted_deleted), dict(blobs))


def _small_tables(plan: _Plan) -> dict[str, list[dict[str, Any]]]:
    spec = plan.spec
    browse = [
        {"queuename": q.name, "browsestart": _ms_to_dt(q.browse_start_s * 1000)}
        for q in plan.queues
    ]
    content = [
        {"queuename": q.name, "contentstart": _ms_to_dt(q.content_start_s * 1000)}
        for q in plan.queues
        if spec.table_version == "v4" and q.content_start_s is not None
    ]
    events = [
        {
            "aggregateid": CONFIG_AGGREGATE,
            "eventid": i,
            "snapshot": None,
            "event": config_event_json(i, e),
        }
        for i, e in enumerate(plan.config.events)
    ]
    events.append(
        {
            "aggregateid": STRATEGY_AGGREGATE,
            "eventid": 0,
            "snapshot": None,
            "event": _strategy_event_json(spec.blob_strategy),
        }
    )
    return {"browse_start": browse, "content_start": content, "event_store": events}


def generate(spec: GenerationSpec) -> GeneratedState:
    """The whole state in memory (use `write_parquet` for large specs)."""
    plan = _plan(spec)
    entries: list[dict[str, Any]] = []
    deleted: list[dict[str, Any]] = []
    blobs: dict[str, bytes] = {}
    times: dict[str, dt.datetime] = {}
    for chunk in _iter_chunks(plan, with_blobs=True):
        cols = chunk.entries
        for values in zip(*(cols[c] for c in ENTRY_COLUMNS), strict=True):
            row = dict(zip(ENTRY_COLUMNS, values, strict=True))
            row["table_version"] = spec.table_version
            entries.append(row)
        deleted.extend(chunk.deleted)
        for key, (content, ms) in chunk.blobs.items():
            blobs[key] = content
            moment = _ms_to_dt(ms)
            times[key] = max(moment, times.get(key, moment))
    truth = _findings(plan)
    small = _small_tables(plan)
    return GeneratedState(
        spec=spec,
        as_of=_ms_to_dt(plan.T * 1000),
        table_version=spec.table_version,
        entries=entries,
        deleted=deleted,
        browse_start=small["browse_start"],
        content_start=small["content_start"],
        event_store=small["event_store"],
        blobs=blobs,
        blob_last_modified=times,
        ground_truth=truth,
        planted=_annotate(plan, truth),
    )


# ---------------------------------------------------------------------------------------------
# Parquet snapshot


def _arrow_schemas() -> dict[str, Any]:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    header = pa.struct([("_1", pa.string()), ("_2", pa.string()), ("_3", pa.string())])
    return {
        "entries": pa.schema(
            [
                ("queuename", pa.string()),
                ("timerangestart", ts),
                ("bucketid", pa.int32()),
                ("enqueueid", pa.string()),
                ("enqueuedtime", ts),
                ("name", pa.string()),
                ("state", pa.string()),
                ("headerblobid", pa.string()),
                ("bodyblobid", pa.string()),
                ("attributes", pa.map_(pa.string(), pa.binary())),
                ("errormessage", pa.string()),
                ("sender", pa.string()),
                ("recipients", pa.list_(pa.string())),
                ("remotehost", pa.string()),
                ("remoteaddr", pa.string()),
                ("lastupdated", ts),
                ("perrecipientspecificheaders", pa.list_(header)),
            ]
        ),
        "deleted": pa.schema([("queuename", pa.string()), ("enqueueid", pa.string())]),
        "browse_start": pa.schema([("queuename", pa.string()), ("browsestart", ts)]),
        "content_start": pa.schema([("queuename", pa.string()), ("contentstart", ts)]),
        "event_store": pa.schema(
            [
                ("aggregateid", pa.string()),
                ("eventid", pa.int32()),
                ("snapshot", pa.int32()),
                ("event", pa.string()),
            ]
        ),
        "blob_inventory": pa.schema(
            [
                ("bucket", pa.string()),
                ("key", pa.string()),
                ("size", pa.int64()),
                ("last_modified", ts),
                ("etag", pa.string()),
                ("storage_class", pa.string()),
            ]
        ),
    }


def _entries_table(cols: dict[str, list[Any]], schema: Any) -> Any:
    import pyarrow as pa

    arrays = []
    for f in schema:
        values = cols[f.name]
        if f.name == "attributes":
            values = [list(v.items()) if v is not None else None for v in values]
        elif f.name == "perrecipientspecificheaders":
            values = [
                [{"_1": a, "_2": b, "_3": c} for a, b, c in v] if v is not None else None
                for v in values
            ]
        arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_part(directory: Path, table_name: str, index: int, table: Any) -> None:
    import pyarrow.parquet as pq

    target = directory / f"{table_name}.parquet"
    target.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target / f"part-{index:05d}.parquet", compression="zstd")


def write_small_tables(
    out: Path, plan: _Plan, spec: GenerationSpec, schemas: dict[str, Any]
) -> None:
    """browseStart, contentStart (v4 only) and the event store, one part each."""
    import pyarrow as pa

    small = _small_tables(plan)
    for name, table_name in (
        ("browse_start", "browsestart"),
        ("content_start", "contentstart"),
        ("event_store", "eventstore"),
    ):
        if name == "content_start" and spec.table_version != "v4":
            continue
        _write_part(out, table_name, 0, pa.Table.from_pylist(small[name], schema=schemas[name]))


def write_parquet(
    spec: GenerationSpec,
    directory: str | os.PathLike[str],
    *,
    blobs: bool = True,
    blob_files: bool = True,
) -> list[dict[str, Any]]:
    """Stream the state into a Parquet snapshot at `directory`; returns the ground truth.

    Writes ``<table>.parquet/part-*.parquet`` for the Cassandra tables (``enqueuedmailsv4`` or
    ``enqueuedmailsv3``, ``deletedmailsv2``, ``browsestart``, ``contentstart`` (V4 only),
    ``eventstore``), ``snapshot.json``, ``ground_truth.json``, ``ANOMALIES.md`` and, with
    `blobs`, ``blobs/<key>`` (file mtime = the object's last_modified) plus
    ``blob_inventory.parquet`` (the exact inventory, as git does not keep mtimes). Without
    `blob_files` only the inventory is written (benchmarks: millions of small files would measure
    the file system). Without `blobs` the ground truth leaves out the blob checks (they need an
    inventory).
    """
    import pyarrow as pa

    plan = _plan(spec)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    schemas = _arrow_schemas()
    enqueued = f"enqueuedmails{spec.table_version}"
    blob_dir = out / "blobs"
    inventory: dict[str, tuple[int, int, str]] = {}
    for index, chunk in enumerate(_iter_chunks(plan, with_blobs=blobs)):
        if chunk.entries["queuename"]:
            _write_part(out, enqueued, index, _entries_table(chunk.entries, schemas["entries"]))
        if chunk.deleted:
            table = pa.Table.from_pylist(chunk.deleted, schema=schemas["deleted"])
            _write_part(out, "deletedmailsv2", index, table)
        for key, (content, ms) in chunk.blobs.items():
            if blob_files:
                blob_dir.mkdir(parents=True, exist_ok=True)
            path = blob_dir / key
            known = inventory.get(key)
            ms = max(ms, known[1]) if known else ms
            if blob_files:
                if known is None:
                    path.write_bytes(content)
                os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))
            inventory[key] = (len(content), ms, hashlib.md5(content).hexdigest())
    write_small_tables(out, plan, spec, schemas)
    if blobs:
        rows = [
            {
                "bucket": BLOB_BUCKET,
                "key": k,
                "size": size,
                "last_modified": _ms_to_dt(ms),
                "etag": etag,
                "storage_class": "STANDARD",
            }
            for k, (size, ms, etag) in sorted(inventory.items())
        ]
        table = pa.Table.from_pylist(rows, schema=schemas["blob_inventory"])
        _write_part(out, "blob_inventory", 0, table)
    as_of = _ms_to_dt(plan.T * 1000).strftime("%Y-%m-%dT%H:%M:%SZ")
    (out / "snapshot.json").write_text(json.dumps({"taken_at": as_of}) + "\n")
    truth = _findings(plan, with_blobs=blobs)
    planted = _annotate(plan, truth)
    if not blobs:
        planted = [p for p in planted if "blob" not in p["anomaly"]]
    _write_truth(out, spec, truth, planted)
    return truth


# ---------------------------------------------------------------------------------------------
# ground_truth.json and ANOMALIES.md


def _spec_json(spec: GenerationSpec) -> dict[str, Any]:
    return {
        "seed": spec.seed,
        "table_version": spec.table_version,
        "queues": list(spec.queues),
        "as_of": spec.as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config_history": [
            {
                "slice_window_seconds": e.slice_window_seconds,
                "bucket_count": e.bucket_count,
                "update_browse_start_pace": e.update_browse_start_pace,
                "active_from": e.active_from.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                if e.active_from
                else None,
            }
            for e in spec.config_history
        ],
        "blob_strategy": spec.blob_strategy,
        "normal_mails": spec.normal_mails,
        "anomalies": {k: v for k, v in vars(spec.anomalies).items()},
    }


_DESCRIPTIONS = {
    "pinned_browse_start": "browseStart pinned more than 7 days back by live mails in its slice "
    "(they are stuck too)",
    "lagging_browse_start": "browseStart more than one window behind the oldest live mail "
    "(James's lazy update never ran); consumed mails in between",
    "empty_queue_old_browse_start": "no live mail, browseStart more than 7 days old: James never "
    "moves it when browsing finds nothing",
    "stuck_mail": "live mail enqueued more than 1 day before as_of, visible (slice >= browseStart)",
    "invisible_mail": "live mail in a slice before browseStart (contentStart kept below it); also "
    "stuck when enqueued more than 1 day ago",
    "cleanup_pending": "fully consumed partition between contentStart and browseStart",
    "never_cleaned": "V3: fully consumed partition before browseStart (no contentStart, "
    "no cleanup)",
    "unreclaimed_partition": "partition with consumed rows before contentStart (failed cleanup)",
    "dangling_blob_ref": "live mail whose header and/or body object is missing",
    "bucket_mismatch": "consumed mail whose bucketid fits no bucket count of the history",
    "slice_mismatch": "consumed mail whose timerangestart is misaligned, or whose enqueuedtime is "
    "far after it",
    "orphaned_blob": "object referenced by no row, older than the 1-hour grace",
    "young_orphaned_blob": "object referenced by no row, younger than the grace: NOT reported",
    "config_violation": "eventstore event breaking James's rules (window grew or is no divisor, "
    "or fewer buckets)",
}


def _write_truth(
    out: Path, spec: GenerationSpec, truth: list[dict[str, Any]], planted: list[dict[str, Any]]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "spec": _spec_json(spec),
        "as_of": spec.as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notes": [
            "orphaned_blob severity is 'info' (the audit is not told its references are "
            "complete); config_advice numbers are computed by the check",
            "exactly these findings, and no others, are expected",
        ],
        "findings": truth,
        "planted": planted,
    }
    (out / "ground_truth.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    lines = [
        "# Planted anomalies",
        "",
        f"Generated by `datasets.james.generate` (seed {spec.seed}, "
        f"{spec.table_version}, {spec.blob_strategy} blobs, as_of "
        f"{document['as_of']}). Every finding expected from the checks of docs/james.md is in "
        f"`ground_truth.json` ({len(truth)} findings); normal rows cause only `config_advice`.",
        "",
        "Configuration history: "
        + ", ".join(
            f"{e.slice_window_seconds}s/{e.bucket_count} buckets"
            + (f" from {e.active_from.strftime('%Y-%m-%dT%H:%M:%SZ')}" if e.active_from else "")
            for e in spec.config_history
        )
        + ".",
        "",
        "| # | Anomaly | Queue | What | Findings it causes |",
        "|---|---|---|---|---|",
    ]
    for i, p in enumerate(planted, 1):
        caused = "; ".join(
            f"`{f['check']}` {f['severity']} `{f['subject']}`" for f in p["findings"]
        )
        lines.append(
            f"| {i} | {p['anomaly']} | {p['queue'] or '-'} | {_DESCRIPTIONS[p['anomaly']]} "
            f"| {caused or 'none (by design)'} |"
        )
    (out / "ANOMALIES.md").write_text("\n".join(lines) + "\n")
