"""Where a James state is read from: the options of `audit james` (and `plan james`,
`validate james`), what is checked before Spark starts, and the loader into a `JamesState`.

Sources: a live cluster (``--cassandra``), a directory of table exports (``--snapshot``) or
of SSTables (``--sstables``, read by a private node: sstables.py);
the default blob bucket optionally, as a live listing (``--blobs``), an S3 Inventory report
(``--blob-inventory``), a local copy (``--blob-dir``) or a saved listing (``--blob-listing``).
Options that only mean something for a live read (``--scan``, ``--since``, ``--queue``,
``--consistency``, ``--partitions-per-query``) are refused with the offline sources, never
ignored,
and a missing local path is an InputError before Spark starts. The plan header gets where the
state was read from, as ``host:port`` and ``s3://bucket`` only: never a credential.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from mqforensics.credentials import AWS_LOGIN, CASSANDRA_LOGIN, RABBITMQ_LOGIN, declare_login
from mqforensics.errors import ConfigError, InputError
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.james.schema import PARTITIONS_PER_QUERY
from mqforensics.units import counter, parse_duration, parse_instant, plural, utc_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.sources.blobstore import S3Endpoint
    from mqforensics.systems.james.state import JamesState

DEFAULT_KEYSPACE = "apache_james"
DEFAULT_CONSISTENCY = "LOCAL_QUORUM"
# Options that only a live read uses: (dest, flag).
LIVE_ONLY = (("scan", "--scan"), ("since", "--since"), ("queue", "--queue"),
             ("consistency", "--consistency"),
             ("partitions_per_query", "--partitions-per-query"))  # fmt: skip


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """The options naming a James state and the thresholds of its checks."""
    source = parser.add_argument_group("the mail queue view (one of)")
    where = source.add_mutually_exclusive_group(required=True)
    cassandra = where.add_argument(
        "--cassandra", metavar="HOST[:PORT]",
        help="a live cluster (contact points, comma-separated); login from "
        "MQF_CASSANDRA_USERNAME/_PASSWORD",
    )  # fmt: skip
    declare_login(cassandra, CASSANDRA_LOGIN, host=True)
    where.add_argument(
        "--snapshot", type=Path, metavar="DIR",
        help="a directory of table exports: cqlsh COPY TO CSV, DSBulk unloads or Parquet "
        "(<table>.csv, <table>/, <table>.parquet)",
    )  # fmt: skip
    where.add_argument(
        "--sstables", type=Path, metavar="DIR",
        help="the tables' SSTables as nodetool snapshot writes them, read by a private "
        "Cassandra node started on 127.0.0.1 (never the cluster)",
    )  # fmt: skip
    live = parser.add_argument_group("live reads (not with --snapshot or --sstables)")
    live.add_argument(
        "--scan", action="store_true",
        help="read the enqueued table by a token-range full scan instead of enumerating the "
        "slices James would (finds partitions no enumeration predicts)",
    )  # fmt: skip
    live.add_argument(
        "--since", type=parse_instant, metavar="INSTANT",
        help="enumerate slices from this instant, ISO-8601 (default: 7 days before each "
        "queue's contentStart or browseStart)",
    )  # fmt: skip
    live.add_argument(
        "--queue", action="append", default=[], metavar="NAME",
        help="read only this queue (repeat for several; default: every queue)",
    )  # fmt: skip
    live.add_argument(
        "--consistency", metavar="LEVEL",
        help=f"Cassandra consistency level of the reads (default: {DEFAULT_CONSISTENCY})",
    )  # fmt: skip
    live.add_argument(
        "--partitions-per-query", metavar="N",
        type=counter("--partitions-per-query", "a positive integer", minimum=1),
        help=f"enumerated partitions one query reads with IN (default: "
        f"{PARTITIONS_PER_QUERY}); lower it if the cluster's guardrail refuses the reads",
    )  # fmt: skip
    parser.add_argument(
        "--keyspace", default=DEFAULT_KEYSPACE, metavar="NAME",
        help="the keyspace of the mail queue view; with --snapshot, the live keyspace a plan's "
        "actions target (default: %(default)s)",
    )  # fmt: skip
    blobs = parser.add_argument_group("the default blob bucket (at most one; optional)")
    one = blobs.add_mutually_exclusive_group()
    bucket = one.add_argument(
        "--blobs", metavar="s3://BUCKET[/PREFIX]",
        help="list the bucket (endpoint from MQF_S3_ENDPOINT, keys from AWS_*)",
    )  # fmt: skip
    inventory = one.add_argument(
        "--blob-inventory", metavar="MANIFEST",
        help="an S3 Inventory report of the bucket: its manifest.json (or its directory), "
        "local or s3://",
    )  # fmt: skip
    declare_login(bucket, AWS_LOGIN)
    declare_login(inventory, AWS_LOGIN)
    one.add_argument(
        "--blob-dir", type=Path, metavar="DIR", help="a local copy of the bucket (key = file path)"
    )  # fmt: skip
    one.add_argument(
        "--blob-listing", type=Path, metavar="PARQUET",
        help="a listing saved as Parquet with the mqf_blobs columns (bucket, key, size, "
        "last_modified, etag, storage_class)",
    )  # fmt: skip
    blobs.add_argument(
        "--blob-split", choices=["prefix", "hex"],
        help="list --blobs in parallel by top-level prefix (default), or by 17 key ranges "
        "(hex: for flat buckets of UUID or hash keys, such as passthrough blob ids)",
    )  # fmt: skip
    broker = parser.add_argument_group(
        "RabbitMQ, James's delivery side (at most one; optional): read only, never consumed"
    )
    one_broker = broker.add_mutually_exclusive_group()
    rabbitmq = one_broker.add_argument(
        "--rabbitmq", metavar="URL",
        help="the broker's management API (http://HOST:15672), read with GET requests only: "
        "per queue the messages ready and unacknowledged, and the consumers; login from "
        "MQF_RABBITMQ_USERNAME/_PASSWORD",
    )  # fmt: skip
    declare_login(rabbitmq, RABBITMQ_LOGIN, host=True)
    one_broker.add_argument(
        "--broker-export", type=Path, metavar="DIR",
        help="queues.json (GET /api/queues) and, per broker queue, messages/<queue>.json "
        "(the management API's get-messages reply, taken on a copy of the broker): the "
        "mails are then reconciled one by one",
    )  # fmt: skip
    broker.add_argument(
        "--rabbitmq-vhost", default="/", metavar="NAME",
        help="the virtual host of James's queues (default: %(default)s)",
    )  # fmt: skip
    checks = parser.add_argument_group("thresholds")
    checks.add_argument(
        "--stuck-after", type=parse_duration, default=dt.timedelta(days=1), metavar="AGE",
        help="a live mail enqueued longer ago than this is stuck_mail (default: 1d)",
    )  # fmt: skip
    checks.add_argument(
        "--blob-grace", type=parse_duration, default=dt.timedelta(hours=1), metavar="AGE",
        help="an unreferenced blob younger than this is not an orphan: James writes a mail's "
        "blobs before its view row (default: 1h)",
    )  # fmt: skip
    checks.add_argument(
        "--broker-grace", type=parse_duration, default=dt.timedelta(hours=1), metavar="AGE",
        help="a live mail enqueued more recently than this is not judged missing from the "
        "broker: the broker and the view are not read at one instant (default: 1h)",
    )  # fmt: skip
    checks.add_argument(
        "--references-complete", action="store_true",
        help="the mail queue is the only referrer of the blob bucket (no mailbox shares it): "
        "orphaned passthrough blobs are then deletable",
    )  # fmt: skip


def check_inputs(args: argparse.Namespace) -> None:
    """What fails before Spark starts: live-only options with a snapshot, a bad contact point
    or one that does not answer, a snapshot directory without its tables or with an export
    file that cannot be what it claims (`snapshot.check_export`), a local blob source that is
    not there or not of its kind."""
    offline = _offline(args)
    if offline is not None:
        for dest, flag in LIVE_ONLY:
            if getattr(args, dest, None):
                raise ConfigError(
                    f"{flag} is for a live read (--cassandra): it cannot be given with {offline}"
                )
    if getattr(args, "sstables", None) is not None:
        from mqforensics.systems.james.sstables import locate

        locate(args.sstables)
    elif args.snapshot is not None:
        from mqforensics.systems.james.snapshot import check_export, locate_tables

        if not args.snapshot.is_dir():
            raise InputError(
                f"snapshot directory {args.snapshot} does not exist or is not a directory"
            )
        check_export(locate_tables(args.snapshot))
    else:
        from mqforensics.sources.cassandra_connection import CassandraEndpoint
        from mqforensics.sources.reachable import check_reachable

        endpoint = CassandraEndpoint.parse(args.cassandra)
        check_reachable(
            [(host, endpoint.port) for host in endpoint.hosts], "Cassandra", where=endpoint.where
        )
    if args.blob_split is not None and not args.blobs:
        raise ConfigError("--blob-split is how --blobs s3://BUCKET is listed: give it with --blobs")
    if args.blob_dir is not None and not args.blob_dir.is_dir():
        raise InputError(f"--blob-dir {args.blob_dir} does not exist or is not a directory")
    if args.blob_listing is not None:
        from mqforensics.systems.james.snapshot import check_parquet

        if not args.blob_listing.exists():
            raise InputError(f"blob listing {args.blob_listing} does not exist")
        check_parquet(args.blob_listing)
    inventory = args.blob_inventory
    if inventory and not _is_s3(inventory) and not Path(inventory).exists():
        raise InputError(f"--blob-inventory {inventory} does not exist")
    if getattr(args, "broker_export", None) is not None:
        from mqforensics.systems.james.broker import check_export as check_broker_export

        check_broker_export(args.broker_export)
    if getattr(args, "rabbitmq", None):
        from mqforensics.sources.reachable import check_reachable

        api = rabbitmq_api(args.rabbitmq)
        url = urlparse(api.url)
        port = url.port or (443 if url.scheme == "https" else 80)
        check_reachable([(url.hostname or "", port)], "RabbitMQ", where=api.where)


def _offline(args: argparse.Namespace) -> str | None:
    """The flag of the offline source the options name, if any."""
    if getattr(args, "sstables", None) is not None:
        return "--sstables"
    return "--snapshot" if args.snapshot is not None else None


def _is_s3(location: str) -> bool:
    return urlparse(location).scheme in ("s3", "s3a")


def load(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """The state the options name, kept for the checks (`JamesState.persist`)."""
    state = read_state(spark, args, as_of=common.as_of)
    state.persist()
    try:
        objects = count_objects(args, state)
        inputs = manifest_inputs(args)
        partial: dict[str, str] = {}
        if state.table_partitions is not None:
            unread = unread_partitions(state)
            if unread:
                why = unread_text(unread, state)
                state.notes.append(why)
                partial = {check: why for check in ROW_CHECKS}
        live_notes = list(state.notes) if args.cassandra or getattr(args, "rabbitmq", None) else []
        if live_notes:  # how the live read went: the slice grids an enumeration walked
            inputs[0]["notes"] = live_notes
    except BaseException:
        state.unpersist()
        raise
    return Loaded(
        frames=state,
        source=state.source,
        as_of=state.as_of,
        objects=objects,
        inputs=inputs,
        plan_inputs=plan_inputs(args, state),
        notes=live_notes,
        partial=partial,
        close=state.unpersist,
    )


# Checks that read the view's rows: incomplete when some partitions were not read. The others
# read the configuration history, the full reference scan or the broker's counts only.
ROW_CHECKS = (
    "unreclaimed_slice", "stale_browse_start", "invisible_mail", "stuck_mail", "consumed_blob",
    "dangling_blob_ref", "bucket_mismatch", "slice_mismatch", "config_advice", "personal_data",
    "broker_missing_mail", "broker_orphan_message", "dead_lettered_mail",
    "broker_count_mismatch",
)  # fmt: skip


def unread_partitions(state: JamesState) -> list[tuple[str, int, int]]:
    """The partitions of the enqueued table (`JamesState.table_partitions`) an enumerated read
    did not reach: off every slice grid of the history, beyond its bucket count, or before the
    enumeration's start (7 days before the queue's contentStart or browseStart, or --since)."""
    from pyspark.sql import functions as F

    assert state.table_partitions is not None
    millis = (F.col("timerangestart").cast("double") * 1000).cast("long")
    read = {
        (r[0], int(r[1]), int(r[2]))
        for r in state.entries.select("queuename", millis, "bucketid").distinct().collect()
    }
    return sorted(set(state.table_partitions) - read)


def unread_text(unread: list[tuple[str, int, int]], state: JamesState) -> str:
    """Why the checks are partial: how many partitions, and what kept the walk from them."""
    history = state.config_history.collect()
    windows = {int(r.slice_window_seconds) * 1000 for r in history}
    buckets = max((int(r.bucket_count) for r in history), default=1)
    off_grid = sum(1 for _, start, _ in unread if all(start % w for w in windows))
    beyond = sum(1 for _, _, bucket in unread if not 0 <= bucket < buckets)
    other = len(unread) - off_grid - beyond
    parts = [
        f"{off_grid} off every slice grid of the configuration history" if off_grid else "",
        f"{beyond} in buckets beyond {buckets - 1}" if beyond else "",
        f"{other} outside the enumerated time range" if other else "",
    ]
    queues = sorted({queue for queue, _, _ in unread})
    return (
        f"the slice enumeration did not read {plural(len(unread), 'partition')} of the "
        f"enqueued table ({', '.join(p for p in parts if p)}; queues {', '.join(queues)}): "
        "checks of the view's rows are partial; --scan reads every partition"
    )


def read_state(
    spark: SparkSession, args: argparse.Namespace, *, as_of: dt.datetime | None = None
) -> JamesState:
    """The James state (and blob listing) the options name, judged at `as_of` (default: the
    snapshot's time, or now for a live read)."""
    from mqforensics.sources.blobstore import S3Endpoint

    if args.cassandra:
        from mqforensics.systems.james.live import LiveOptions, read_live

        options = LiveOptions(
            keyspace=args.keyspace,
            mode="scan" if args.scan else "enumerate",
            queues=tuple(args.queue),
            since=args.since,
            consistency=args.consistency or DEFAULT_CONSISTENCY,
            partitions_per_query=args.partitions_per_query or PARTITIONS_PER_QUERY,
        )
        state = read_live(spark, cassandra_endpoint(args.cassandra), options, as_of=as_of)
    elif getattr(args, "sstables", None) is not None:
        from mqforensics.systems.james.sstables import read_sstables

        state = read_sstables(spark, args.sstables, as_of=as_of)
    else:
        from mqforensics.systems.james.snapshot import read_snapshot

        state = read_snapshot(spark, args.snapshot, as_of=as_of)
        state.source = state.source or f"snapshot {args.snapshot}"
    if args.blobs:
        state.blobs = read_james_blobs(
            spark, location=args.blobs, endpoint=S3Endpoint.from_env(),
            split=args.blob_split or "prefix",
        )  # fmt: skip
    elif args.blob_inventory:
        state.blobs = read_james_blobs(
            spark, inventory=args.blob_inventory, endpoint=S3Endpoint.from_env()
        )
    elif args.blob_dir:
        state.blobs = read_james_blobs(spark, location=str(args.blob_dir))
    elif args.blob_listing:
        attach_blob_listing(spark, state, args.blob_listing)
    broker = read_broker(args)
    if broker is not None:
        state.broker_queues, state.broker_messages = broker.frames(spark)
        if not broker.messages and not any(q.messages_read for q in broker.queues):
            state.broker_messages = None
        state.notes.extend(broker.notes)
    return state


def rabbitmq_api(url: str) -> Any:
    """The management API at `url`, with the login of the environment."""
    from mqforensics.systems.james.broker import Management

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"--rabbitmq {url}: give the management API as http[s]://HOST[:PORT]")
    return Management(
        url,
        username=os.environ.get("MQF_RABBITMQ_USERNAME") or None,
        password=os.environ.get("MQF_RABBITMQ_PASSWORD") or None,
    )


def read_broker(args: argparse.Namespace) -> Any:
    """What the options name of the broker (a `broker.BrokerRead`), or None."""
    from mqforensics.systems.james import broker

    vhost = getattr(args, "rabbitmq_vhost", "/")
    if getattr(args, "rabbitmq", None):
        return broker.read_management(rabbitmq_api(args.rabbitmq), vhost)
    if getattr(args, "broker_export", None) is not None:
        return broker.read_export(args.broker_export, vhost)
    return None


def cassandra_endpoint(where: str) -> Any:
    """The cluster at `where`, with the login of the environment."""
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    return CassandraEndpoint.parse(
        where,
        username=os.environ.get("MQF_CASSANDRA_USERNAME") or None,
        password=os.environ.get("MQF_CASSANDRA_PASSWORD") or None,
        local_dc=os.environ.get("MQF_CASSANDRA_LOCAL_DC") or None,
    )


def read_james_blobs(
    spark: SparkSession,
    *,
    location: str | None = None,
    inventory: str | None = None,
    endpoint: S3Endpoint | None = None,
    split: str = "prefix",
) -> DataFrame:
    """James's default bucket as the `BLOBS` frame, from exactly one of a live listing
    (`location`: ``s3://bucket[/prefix]`` or a directory; `split` as in `blobstore`) or an S3
    Inventory report.
    """
    from mqforensics.sources.blob_inventory import read_inventory
    from mqforensics.sources.blobstore import read_blobs
    from mqforensics.systems.james.blob_ids import with_parsed_blob_ids
    from mqforensics.systems.james.schema import BLOBS

    if (location is None) == (inventory is None):
        raise ConfigError("give exactly one of location (a live listing) or inventory (a report)")
    if location is not None:
        frame = read_blobs(spark, location, endpoint, split)
    else:
        frame = read_inventory(spark, inventory or "", endpoint)
    columns = [c.split()[0] for c in BLOBS.split(", ")]
    return with_parsed_blob_ids(frame).select(*columns)


def attach_blob_listing(spark: SparkSession, state: JamesState, path: Path) -> None:
    """Give `state` the listing saved at `path` (`read_blob_listing`), read again by each check
    that needs it rather than kept (`JamesState.blobs_rereadable`)."""
    from mqforensics.sources import parquet_footer

    state.blobs = read_blob_listing(spark, path)
    state.blobs_rereadable = True
    state.blob_rows = parquet_footer.row_count(path)


def read_blob_listing(spark: SparkSession, path: Path) -> DataFrame:
    """A listing saved as Parquet with the `mqf_blobs` columns, with blob ids parsed."""
    from mqforensics.sources import parquet_footer
    from mqforensics.sources.blobstore import SCHEMA
    from mqforensics.systems.james.blob_ids import with_parsed_blob_ids

    if not path.exists():
        raise InputError(f"blob listing {path} does not exist")
    frame = parquet_footer.read(spark, path)
    wanted = [c.split()[0] for c in SCHEMA.split(", ")]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InputError(f"blob listing {path} lacks column(s) {', '.join(missing)}")
    return with_parsed_blob_ids(frame.select(*wanted))


def count_objects(args: argparse.Namespace, state: JamesState) -> int:
    """What the state holds to audit: its view rows and its queues (browseStart rows). A
    Parquet export's rows are counted from its footers; otherwise by a job over the kept
    frame (which the checks then read from memory).

    Every frame kept in memory (a live read, a CSV export, a listing of the bucket) is read
    here, once: an input that cannot be read (a malformed CSV line, a server gone) fails now,
    as the InputError it is (exit 2), and never inside a check or as a failed expectation."""
    rows = None
    if args.snapshot is not None:
        from mqforensics.sources import parquet_footer
        from mqforensics.systems.james.snapshot import locate_tables

        enqueued = locate_tables(args.snapshot)["enqueued"]
        if enqueued is not None and enqueued.kind == "parquet":
            rows = parquet_footer.row_count(enqueued.path)
    kept = [
        frame
        for frame in (state.entries, state.deleted, state.blobs, state.blob_references)
        if frame is not None and (frame.storageLevel.useMemory or frame.storageLevel.useDisk)
    ]
    if rows is None:
        rows = state.entries.count()
        kept = [frame for frame in kept if frame is not state.entries]
    for frame in kept:
        frame.count()
    # The queues' starts are held in the query plan: collected with no job.
    queues = len(state.browse_start.select("queuename").collect())
    return rows + queues


def manifest_inputs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The run manifest's inputs: where each was read, local files and directories with a
    fingerprint."""
    inputs: list[dict[str, Any]] = []
    if args.cassandra:
        inputs.append({
            "kind": "cassandra", "location": cassandra_endpoint(args.cassandra).where,
            "keyspace": args.keyspace, "read": "scan" if args.scan else "enumerate",
        })  # fmt: skip
    else:
        offline = args.snapshot if args.snapshot is not None else args.sstables
        inputs.append({"kind": "snapshot" if args.snapshot is not None else "sstables",
                       "location": str(offline.resolve()), **fingerprint(offline)})  # fmt: skip
    if args.blobs:
        inputs.append({"kind": "s3 listing", "location": _s3_location(args.blobs)})
    elif args.blob_inventory:
        if _is_s3(args.blob_inventory):
            inputs.append({"kind": "s3 inventory", "location": _s3_location(args.blob_inventory)})
        else:
            path = Path(args.blob_inventory)
            inputs.append({"kind": "s3 inventory", "location": str(path.resolve()),
                           **fingerprint(path)})  # fmt: skip
    elif args.blob_dir:
        inputs.append({"kind": "blob directory", "location": str(args.blob_dir.resolve()),
                       **fingerprint(args.blob_dir)})  # fmt: skip
    elif args.blob_listing:
        inputs.append({"kind": "blob listing", "location": str(args.blob_listing.resolve()),
                       **fingerprint(args.blob_listing)})  # fmt: skip
    if getattr(args, "rabbitmq", None):
        inputs.append({"kind": "rabbitmq management", "location": rabbitmq_api(args.rabbitmq).where,
                       "vhost": args.rabbitmq_vhost, "read": "counts"})  # fmt: skip
    elif getattr(args, "broker_export", None) is not None:
        export = args.broker_export
        inputs.append({"kind": "broker export", "location": str(export.resolve()),
                       "vhost": args.rabbitmq_vhost, **fingerprint(export)})  # fmt: skip
    return inputs


def fingerprint(path: Path) -> dict[str, Any]:
    """A file's or a directory's fingerprint: SHA-256 over every file's relative name, size and
    modification time (contents are not read: a snapshot may hold gigabytes), with the number
    of files and their bytes. A change of any file changes it."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    total = 0
    for file in files:
        stat = file.stat()
        name = file.name if file == path else file.relative_to(path).as_posix()
        digest.update(f"{name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
        total += stat.st_size
    return {"fingerprint": f"sha256:{digest.hexdigest()}", "files": len(files), "bytes": total}


def _s3_location(location: str) -> str:
    """``s3://bucket/prefix``: a user or secret in the URL (refused by the parser anyway) cut."""
    url = urlparse(location)
    bucket = url.netloc.rpartition("@")[2]
    return f"s3://{bucket}{url.path}"


def _blob_source(args: argparse.Namespace) -> str | None:
    """Where the blob listing came from, as ``s3://bucket`` or a path: never a credential."""
    if getattr(args, "blobs", None):
        return "s3://" + urlparse(args.blobs).netloc.rpartition("@")[2]
    for name in ("blob_inventory", "blob_dir", "blob_listing"):
        value = getattr(args, name, None)
        if value:
            return str(value)
    return None


def plan_inputs(args: argparse.Namespace, state: JamesState) -> dict[str, Any]:
    """What a plan header keeps of the read, and what the purger reads from it: the cluster
    (``host:port``; none for a snapshot: the purge names it), the keyspace the actions target,
    the snapshot, the blob source, and whether every blob reference of the view was read."""
    cassandra = cassandra_endpoint(args.cassandra).where if args.cassandra else None
    return {
        "source": state.source,
        "cassandra": cassandra,
        "keyspace": args.keyspace,
        "snapshot": str(args.snapshot or getattr(args, "sstables", None) or "") or None,
        "snapshot_time": utc_text(state.as_of) if _offline(args) else None,
        "blobs": _blob_source(args),
        "references_complete": state.references_complete,
    }
