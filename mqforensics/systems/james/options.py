"""James's options (where the mail queue view, the blob bucket and the broker are read, the
thresholds of the checks), its purge options, and the settings every check receives; no Spark
here (the spec imports this).

Sources: a live cluster (``cassandra``), a directory of table exports (``snapshot``) or of
SSTables (``sstables``, read by a private node: sstables.py); the default blob bucket
optionally, as a live listing (``blobs``), an S3 Inventory report (``blob_inventory``), a local
copy (``blob_dir``) or a saved listing (``blob_listing``). Options that only mean something for
a live read (``scan``, ``since``, ``queue``, ``consistency``, ``partitions_per_query``) are
refused with the offline sources, never ignored, and a missing local path is an InputError
before Spark starts (`JamesOptions.check`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mqforensics.content_search import Searched
from mqforensics.credentials import AWS_LOGIN, CASSANDRA_LOGIN, RABBITMQ_LOGIN, Login
from mqforensics.errors import ConfigError, InputError
from mqforensics.options import Options, check_exclusive, option
from mqforensics.systems.james.schema import BROWSE_TRACE_QUERIES, PARTITIONS_PER_QUERY
from mqforensics.units import counter, parse_duration, parse_instant

DEFAULT_KEYSPACE = "apache_james"
DEFAULT_CONSISTENCY = "LOCAL_QUORUM"
DEFAULT_STUCK_AFTER = dt.timedelta(days=1)
DEFAULT_BLOB_GRACE = dt.timedelta(hours=1)
DEFAULT_BROKER_GRACE = dt.timedelta(hours=1)
# Options that only a live read uses: (field, flag).
LIVE_ONLY = (("scan", "--scan"), ("since", "--since"), ("queue", "--queue"),
             ("consistency", "--consistency"),
             ("partitions_per_query", "--partitions-per-query"))  # fmt: skip

VIEW = "the mail queue view (one of --cassandra, --snapshot, --sstables)"
LIVE = "live reads (not with --snapshot or --sstables)"
BUCKET = "the default blob bucket (at most one; optional)"
BROKER = "RabbitMQ, James's delivery side (at most one; optional): read only, never consumed"
THRESHOLDS = "thresholds"


@dataclass(frozen=True)
class ConfigEvent:
    """One configuration event of the mail queue view (the eventstore's history)."""

    eventid: int
    window: int
    bucket_count: int
    pace: int


@dataclass(frozen=True)
class Settings:
    """What the checks judge against (`read.settings`).

    `stuck_after`: a live mail enqueued longer ago is stuck. `blob_grace`: an unreferenced blob
    younger than this is not an orphan. `references_complete`: whether the blob reference
    sources given (the mail queue view) are all of James's referrers of the default bucket
    (mailbox messages share it, so by default they are not). `subjects` / `subject_key`: the
    data subjects searched (keyed hashes, `mqforensics.subjects`) and their key: every view row
    holding one is a `personal_data` finding; none searched, no such finding. `broker_grace`: a
    live mail enqueued this recently may not be in the broker read yet (broker_checks.py).
    `history`: the view's configuration events, oldest first (None: read from the frames when
    the checks are prepared, `context.prepared`). `full_subjects`: those of `subjects` also
    searched in message bodies and attachments (an erase rule's ``search = "full"``).
    """

    stuck_after: dt.timedelta = DEFAULT_STUCK_AFTER
    blob_grace: dt.timedelta = DEFAULT_BLOB_GRACE
    references_complete: bool = False
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    broker_grace: dt.timedelta = DEFAULT_BROKER_GRACE
    history: tuple[ConfigEvent, ...] | None = None
    full_subjects: frozenset[str] = frozenset()

    @property
    def searched(self) -> Searched:
        """What the content search looks for (`content_search.Searched`)."""
        return Searched(self.subject_key, self.subjects, self.full_subjects & self.subjects)


@dataclass(frozen=True, kw_only=True)
class JamesOptions(Options):
    """Which James mail queue view to read (exactly one of ``cassandra``, ``snapshot``,
    ``sstables``), its blob bucket and its broker (optional), and the thresholds of the checks
    (``mqforensics audit james``: the same names with dashes)."""

    cassandra: str | None = option(
        None, exclusive="view", exclusive_required=True,
        metavar="HOST[:PORT]", group=VIEW, login=Login(CASSANDRA_LOGIN, host=True),
        help="a live cluster (contact points, comma-separated); login from "
        "MQF_CASSANDRA_USERNAME/_PASSWORD",
    )  # fmt: skip
    snapshot: Path | None = option(
        None, exclusive="view", exclusive_required=True,
        parse=Path, metavar="DIR", group=VIEW,
        help="a directory of table exports: cqlsh COPY TO CSV, DSBulk unloads or Parquet "
        "(<table>.csv, <table>/, <table>.parquet)",
    )  # fmt: skip
    sstables: Path | None = option(
        None, exclusive="view", exclusive_required=True,
        parse=Path, metavar="DIR", group=VIEW,
        help="the tables' SSTables as nodetool snapshot writes them, read by a private "
        "Cassandra node started on 127.0.0.1 (never the cluster)",
    )  # fmt: skip
    scan: bool = option(
        False, group=LIVE,
        help="read the enqueued table by a token-range full scan instead of enumerating the "
        "slices James would (finds partitions no enumeration predicts)",
    )  # fmt: skip
    since: dt.datetime | None = option(
        None, parse=parse_instant, metavar="INSTANT", group=LIVE,
        help="enumerate slices from this instant, ISO-8601 (default: 7 days before each "
        "queue's contentStart or browseStart)",
    )  # fmt: skip
    queue: list[str] = option(
        [], repeat=True, metavar="NAME", group=LIVE,
        help="read only this queue (repeat for several; default: every queue)",
    )  # fmt: skip
    consistency: str | None = option(
        None, metavar="LEVEL", group=LIVE,
        help=f"Cassandra consistency level of the reads (default: {DEFAULT_CONSISTENCY})",
    )  # fmt: skip
    partitions_per_query: int | None = option(
        None, parse=counter("--partitions-per-query", "a positive integer", minimum=1),
        metavar="N", group=LIVE,
        help=f"enumerated partitions one query reads with IN (default: "
        f"{PARTITIONS_PER_QUERY}); lower it if the cluster's guardrail refuses the reads",
    )  # fmt: skip
    keyspace: str = option(
        DEFAULT_KEYSPACE, metavar="NAME", group=VIEW,
        help="the keyspace of the mail queue view; with --snapshot, the live keyspace a plan's "
        f"actions target (default: {DEFAULT_KEYSPACE})",
    )  # fmt: skip
    blobs: str | None = option(
        None, exclusive="bucket",
        metavar="s3://BUCKET[/PREFIX]", group=BUCKET, login=Login(AWS_LOGIN),
        help="list the bucket (endpoint from MQF_S3_ENDPOINT, keys from AWS_*)",
    )  # fmt: skip
    blob_inventory: str | None = option(
        None, exclusive="bucket",
        metavar="MANIFEST", group=BUCKET, login=Login(AWS_LOGIN),
        help="an S3 Inventory report of the bucket: its manifest.json (or its directory), "
        "local or s3://",
    )  # fmt: skip
    blob_dir: Path | None = option(
        None, exclusive="bucket",
        parse=Path, metavar="DIR", group=BUCKET,
        help="a local copy of the bucket (key = file path)",
    )  # fmt: skip
    blob_listing: Path | None = option(
        None, exclusive="bucket",
        parse=Path, metavar="PARQUET", group=BUCKET,
        help="a listing saved as Parquet with the mqf_blobs columns (bucket, key, size, "
        "last_modified, etag, storage_class)",
    )  # fmt: skip
    blob_split: str | None = option(
        None, choices=("prefix", "hex"), group=BUCKET,
        help="list --blobs in parallel by top-level prefix (default), or by 17 key ranges "
        "(hex: for flat buckets of UUID or hash keys, such as passthrough blob ids)",
    )  # fmt: skip
    rabbitmq: str | None = option(
        None, exclusive="broker",
        metavar="URL", group=BROKER, login=Login(RABBITMQ_LOGIN, host=True),
        help="the broker's management API (http://HOST:15672), read with GET requests only: "
        "per queue the messages ready and unacknowledged, and the consumers; login from "
        "MQF_RABBITMQ_USERNAME/_PASSWORD",
    )  # fmt: skip
    broker_export: Path | None = option(
        None, exclusive="broker",
        parse=Path, metavar="DIR", group=BROKER,
        help="queues.json (GET /api/queues) and, per broker queue, messages/<queue>.json "
        "(the management API's get-messages reply, taken on a copy of the broker): the "
        "mails are then reconciled one by one",
    )  # fmt: skip
    rabbitmq_vhost: str = option(
        "/", metavar="NAME", group=BROKER,
        help="the virtual host of James's queues (default: /)",
    )  # fmt: skip
    stuck_after: dt.timedelta = option(
        DEFAULT_STUCK_AFTER, parse=parse_duration, metavar="AGE", group=THRESHOLDS,
        help="a live mail enqueued longer ago than this is stuck_mail (default: 1d)",
    )  # fmt: skip
    blob_grace: dt.timedelta = option(
        DEFAULT_BLOB_GRACE, parse=parse_duration, metavar="AGE", group=THRESHOLDS,
        help="an unreferenced blob younger than this is not an orphan: James writes a mail's "
        "blobs before its view row (default: 1h)",
    )  # fmt: skip
    broker_grace: dt.timedelta = option(
        DEFAULT_BROKER_GRACE, parse=parse_duration, metavar="AGE", group=THRESHOLDS,
        help="a live mail enqueued more recently than this is not judged missing from the "
        "broker: the broker and the view are not read at one instant (default: 1h)",
    )  # fmt: skip
    references_complete: bool = option(
        False, group=THRESHOLDS,
        help="the mail queue is the only referrer of the blob bucket (no mailbox shares it): "
        "orphaned passthrough blobs are then deletable",
    )  # fmt: skip

    def offline(self) -> str | None:
        """The flag of the offline source the options name, if any."""
        if self.sstables is not None:
            return "--sstables"
        return "--snapshot" if self.snapshot is not None else None

    def check(self) -> None:
        """What fails before Spark starts: two sources of one kind (or no view), live-only
        options with a snapshot, a bad contact point or one that does not answer, a snapshot
        directory without its tables or with an export file that cannot be what it claims
        (`snapshot.check_export`), a local blob source that is not there or not of its kind."""
        check_exclusive(self)
        offline = self.offline()
        if offline is not None:
            for name, flag in LIVE_ONLY:
                if getattr(self, name):
                    raise ConfigError(
                        f"{flag} is for a live read (--cassandra): it cannot be given with "
                        f"{offline}"
                    )
        if self.sstables is not None:
            from mqforensics.systems.james.sstables import locate

            locate(self.sstables)
        elif self.snapshot is not None:
            from mqforensics.systems.james.snapshot import check_export, locate_tables

            if not self.snapshot.is_dir():
                raise InputError(
                    f"snapshot directory {self.snapshot} does not exist or is not a directory"
                )
            tables = locate_tables(self.snapshot)
            check_export(tables)
            _check_not_empty(self.snapshot, tables)
        else:
            from mqforensics.sources.cassandra_connection import CassandraEndpoint
            from mqforensics.sources.reachable import check_reachable

            endpoint = CassandraEndpoint.parse(self.cassandra or "")
            check_reachable(
                [(host, endpoint.port) for host in endpoint.hosts], "Cassandra",
                where=endpoint.where,
            )  # fmt: skip
        if self.blob_split is not None and not self.blobs:
            raise ConfigError(
                "--blob-split is how --blobs s3://BUCKET is listed: give it with --blobs"
            )
        if self.blob_dir is not None and not self.blob_dir.is_dir():
            raise InputError(f"--blob-dir {self.blob_dir} does not exist or is not a directory")
        if self.blob_listing is not None:
            from mqforensics.systems.james.snapshot import check_parquet

            if not self.blob_listing.exists():
                raise InputError(f"blob listing {self.blob_listing} does not exist")
            check_parquet(self.blob_listing)
        inventory = self.blob_inventory
        if inventory and not is_s3(inventory) and not Path(inventory).exists():
            raise InputError(f"--blob-inventory {inventory} does not exist")
        if self.broker_export is not None:
            from mqforensics.systems.james.broker import check_export as check_broker_export

            check_broker_export(self.broker_export)
        if self.rabbitmq:
            from mqforensics.sources.reachable import check_reachable

            api = rabbitmq_api(self.rabbitmq)
            url = urlparse(api.url)
            port = url.port or (443 if url.scheme == "https" else 80)
            check_reachable([(url.hostname or "", port)], "RabbitMQ", where=api.where)


def is_s3(location: str) -> bool:
    return urlparse(location).scheme in ("s3", "s3a")


def rabbitmq_api(url: str) -> Any:
    """The management API at `url`, with the login of the environment."""
    import os

    from mqforensics.systems.james.broker import Management

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"--rabbitmq {url}: give the management API as http[s]://HOST[:PORT]")
    return Management(
        url,
        username=os.environ.get("MQF_RABBITMQ_USERNAME") or None,
        password=os.environ.get("MQF_RABBITMQ_PASSWORD") or None,
    )


def _check_not_empty(snapshot: Path, tables: dict[str, Any]) -> None:
    """A Parquet snapshot whose view and queue starts hold no row is nothing to audit, said
    before Spark starts from the footers alone (in the words of the runner's own refusal,
    `runner.load`, which the read would give); other exports are counted when read."""
    from mqforensics.sources.parquet_footer import row_count
    from mqforensics.systems.james.schema import BROWSE_START_TABLE

    enqueued, starts = tables.get("enqueued"), tables.get(BROWSE_START_TABLE)
    if enqueued is None or starts is None or {enqueued.kind, starts.kind} != {"parquet"}:
        return
    if row_count(enqueued.path) == 0 and row_count(starts.path) == 0:
        raise InputError(
            f"nothing to audit: snapshot {snapshot} ({enqueued.table}) holds nothing james keeps"
        )


@dataclass(frozen=True, kw_only=True)
class PurgeOptions(Options):
    """What the purge of a James plan takes beyond the plan."""

    cassandra: str | None = option(
        None, metavar="HOST[:PORT]", group="James plans", login=Login(CASSANDRA_LOGIN, host=True),
        help="live cluster (default: the plan's); login from MQF_CASSANDRA_USERNAME/_PASSWORD",
    )  # fmt: skip
    s3_endpoint: str | None = option(
        None, metavar="URL", group="James plans", login=Login(AWS_LOGIN),
        help="S3 endpoint of the blob store (or MQF_S3_ENDPOINT)",
    )  # fmt: skip
    consistency: str = option(
        DEFAULT_CONSISTENCY, metavar="LEVEL", group="James plans",
        help=f"Cassandra consistency level (default: {DEFAULT_CONSISTENCY})",
    )  # fmt: skip
    trace_queries: int = option(
        BROWSE_TRACE_QUERIES, parse=counter("--trace-queries", "a positive integer", minimum=1),
        metavar="N", group="James plans",
        help="traced queries of each measurement of James's browse, before and after the purge "
        f"(default: {BROWSE_TRACE_QUERIES}): partitions holding rows first, then empty ones "
        "from browseStart",
    )  # fmt: skip
