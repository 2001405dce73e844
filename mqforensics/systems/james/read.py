"""What an audit of James reads (`options.JamesOptions`: ``snapshot=DIR``, ``cassandra=HOST``
or ``sstables=DIR``, optionally a blob listing and a broker), the loader into the frames
(`frames.JamesState`) every check reads (`checks`), and the settings they judge with
(`settings`, which prepares the facts every check needs, once: `context.prepare`).

The plan header gets where the state was read from, as ``host:port`` and ``s3://bucket`` only:
never a credential.

Local files and directories are named by their escaped text (docs/filenames.md) in
the source, the inputs, the plan header and every message; one whose name is not valid UTF-8 (or
holds a control character) is read like any other, and the audit says so in one note
(`odd_names`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import is_odd, odd_names_note, shown
from mqforensics.sources.s3_endpoint import S3Endpoint
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.james.content import BlobContent
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.options import (
    DEFAULT_CONSISTENCY,
    JamesOptions,
    Settings,
    is_s3,
    rabbitmq_api,
)
from mqforensics.systems.james.schema import PARTITIONS_PER_QUERY
from mqforensics.units import plural, utc_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# Why the content of the queued mails was not searched for the erasure policy's subjects.
NO_CONTENT = (
    "content not searched: no blob store given to read the mails' header and body blobs "
    "from (--blob-dir DIR or --blobs s3://BUCKET); only the view rows' envelopes were searched"
)
# The checks that need the broker's messages, not only its queues' counts.
MESSAGE_CHECKS = ("broker_missing_mail", "broker_orphan_message")


def load(spark: SparkSession, options: JamesOptions, common: AuditArgs) -> Loaded[JamesState]:
    """The state the options name, kept for the checks (`JamesState.persist`)."""
    state = read_state(spark, options, as_of=common.as_of)
    state.persist()
    try:
        objects = count_objects(options, state)
        inputs = manifest_inputs(options)
        partial: dict[str, str] = {}
        if state.table_partitions is not None:
            unread = unread_partitions(state)
            if unread:
                why = unread_text(unread, state)
                state.notes.append(why)
                partial = {check: why for check in ROW_CHECKS}
        not_run: dict[str, str] = {}
        if options.broker_export is not None and state.broker_messages is None:
            why = f"{options.broker_export} holds no queue's messages (docs/james.md, The broker)"
            not_run = {check: why for check in MESSAGE_CHECKS}
        if common.subjects:
            if options.blob_dir is not None:
                state.content = BlobContent.directory(options.blob_dir)
            elif options.blobs:
                state.content = BlobContent.s3(options.blobs, S3Endpoint.from_env())
            else:
                partial["personal_data"] = NO_CONTENT
                not_run["unreadable_content"] = NO_CONTENT
        live_notes = list(state.notes) if options.cassandra or options.rabbitmq else []
        if live_notes:  # how the live read went: the slice grids an enumeration walked
            inputs[0]["notes"] = live_notes
        odd = odd_names_note(odd_names(options))
        notes = live_notes + ([odd] if odd is not None else [])
    except BaseException:
        state.unpersist()
        raise
    return Loaded(
        frames=state,
        source=state.source,
        as_of=state.as_of,
        objects=objects,
        inputs=inputs,
        plan_inputs=plan_inputs(options, state),
        notes=notes,
        partial=partial,
        not_run=not_run,
        close=state.unpersist,
    )


def settings(options: JamesOptions, common: AuditArgs, loaded: Loaded[JamesState]) -> Settings:
    """What every check judges against, with the view's configuration history; the facts every
    check needs (the live rows, the rows some check reads one by one, the partitions' row
    counts: `context.Context`) are computed here, once, and kept with the frames."""
    from mqforensics.systems.james.context import config_events, prepare

    state = loaded.frames
    made = Settings(
        stuck_after=options.stuck_after,
        blob_grace=options.blob_grace,
        references_complete=options.references_complete,
        subjects=common.subjects,
        subject_key=common.subject_key,
        broker_grace=options.broker_grace,
        history=tuple(config_events(state)),
        full_subjects=common.full_subjects,
    )
    prepare(state, made)
    return made


# Checks that read the view's rows: incomplete when some partitions were not read. The others
# read the configuration history, the full reference scan or the broker's counts only.
ROW_CHECKS = (
    "unreclaimed_slice", "stale_browse_start", "invisible_mail", "stuck_mail", "consumed_blob",
    "dangling_blob_ref", "bucket_mismatch", "slice_mismatch", "config_advice", "personal_data",
    "unreadable_content",
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
    spark: SparkSession, options: JamesOptions, *, as_of: dt.datetime | None = None
) -> JamesState:
    """The James state (and blob listing) the options name, judged at `as_of` (default: the
    snapshot's time, or now for a live read)."""
    if options.cassandra:
        from mqforensics.systems.james.live import LiveOptions, read_live

        live = LiveOptions(
            keyspace=options.keyspace,
            mode="scan" if options.scan else "enumerate",
            queues=tuple(options.queue),
            since=options.since,
            consistency=options.consistency or DEFAULT_CONSISTENCY,
            partitions_per_query=options.partitions_per_query or PARTITIONS_PER_QUERY,
        )
        state = read_live(spark, cassandra_endpoint(options.cassandra), live, as_of=as_of)
    elif options.sstables is not None:
        from mqforensics.systems.james.sstables import read_sstables

        state = read_sstables(spark, options.sstables, as_of=as_of)
    else:
        from mqforensics.systems.james.snapshot import read_snapshot

        assert options.snapshot is not None  # exactly one source: JamesOptions.check
        state = read_snapshot(spark, options.snapshot, as_of=as_of)
        state.source = state.source or f"snapshot {shown(options.snapshot)}"
    if options.blobs:
        state.blobs = read_james_blobs(
            spark, location=options.blobs, endpoint=S3Endpoint.from_env(),
            split=options.blob_split or "prefix",
        )  # fmt: skip
    elif options.blob_inventory:
        state.blobs = read_james_blobs(
            spark, inventory=options.blob_inventory, endpoint=S3Endpoint.from_env()
        )
    elif options.blob_dir:
        state.blobs = read_james_blobs(spark, location=str(options.blob_dir))
    elif options.blob_listing:
        attach_blob_listing(spark, state, options.blob_listing)
    broker = read_broker(options)
    if broker is not None:
        state.broker_queues, state.broker_messages = broker.frames(spark)
        if not broker.messages and not any(q.messages_read for q in broker.queues):
            state.broker_messages = None
        state.notes.extend(broker.notes)
    return state


def read_broker(options: JamesOptions) -> Any:
    """What the options name of the broker (a `broker.BrokerRead`), or None."""
    from mqforensics.systems.james import broker

    vhost = options.rabbitmq_vhost
    if options.rabbitmq:
        return broker.read_management(rabbitmq_api(options.rabbitmq), vhost)
    if options.broker_export is not None:
        return broker.read_export(options.broker_export, vhost)
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
        raise InputError(f"blob listing {shown(path)} does not exist")
    frame = parquet_footer.read(spark, path)
    wanted = [c.split()[0] for c in SCHEMA.split(", ")]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InputError(f"blob listing {shown(path)} lacks column(s) {', '.join(missing)}")
    return with_parsed_blob_ids(frame.select(*wanted))


def count_objects(options: JamesOptions, state: JamesState) -> int:
    """What the state holds to audit: its view rows and its queues (browseStart rows). A
    Parquet export's rows are counted from its footers; otherwise by a job over the kept
    frame (which the checks then read from memory).

    Every frame kept in memory (a live read, a CSV export, a listing of the bucket) is read
    here, once: an input that cannot be read (a malformed CSV line, a server gone) fails now,
    as the InputError it is (exit 2), and never inside a check or as a failed expectation."""
    rows = None
    if options.snapshot is not None:
        from mqforensics.sources import parquet_footer
        from mqforensics.systems.james.snapshot import locate_tables

        enqueued = locate_tables(options.snapshot)["enqueued"]
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


def manifest_inputs(options: JamesOptions) -> list[dict[str, Any]]:
    """The run manifest's inputs: where each was read, local files and directories with a
    fingerprint."""
    inputs: list[dict[str, Any]] = []
    if options.cassandra:
        inputs.append({
            "kind": "cassandra", "location": cassandra_endpoint(options.cassandra).where,
            "keyspace": options.keyspace, "read": "scan" if options.scan else "enumerate",
        })  # fmt: skip
    else:
        offline = options.snapshot if options.snapshot is not None else options.sstables
        assert offline is not None  # JamesOptions.check: exactly one view source
        inputs.append({"kind": "snapshot" if options.snapshot is not None else "sstables",
                       "location": shown(offline.resolve()), **fingerprint(offline)})  # fmt: skip
    if options.blobs:
        inputs.append({"kind": "s3 listing", "location": _s3_location(options.blobs)})
    elif options.blob_inventory:
        if is_s3(options.blob_inventory):
            inputs.append(
                {"kind": "s3 inventory", "location": _s3_location(options.blob_inventory)}
            )
        else:
            path = Path(options.blob_inventory)
            inputs.append({"kind": "s3 inventory", "location": shown(path.resolve()),
                           **fingerprint(path)})  # fmt: skip
    elif options.blob_dir:
        inputs.append({"kind": "blob directory", "location": shown(options.blob_dir.resolve()),
                       **fingerprint(options.blob_dir)})  # fmt: skip
    elif options.blob_listing:
        inputs.append({"kind": "blob listing", "location": shown(options.blob_listing.resolve()),
                       **fingerprint(options.blob_listing)})  # fmt: skip
    if options.rabbitmq:
        where = rabbitmq_api(options.rabbitmq).where
        inputs.append({"kind": "rabbitmq management", "location": where,
                       "vhost": options.rabbitmq_vhost, "read": "counts"})  # fmt: skip
    elif options.broker_export is not None:
        export = options.broker_export
        inputs.append({"kind": "broker export", "location": shown(export.resolve()),
                       "vhost": options.rabbitmq_vhost, **fingerprint(export)})  # fmt: skip
    return inputs


def fingerprint(path: Path) -> dict[str, Any]:
    """A file's or a directory's fingerprint: SHA-256 over every file's relative name, size and
    modification time (contents are not read: a snapshot may hold gigabytes), with the number
    of files and their bytes. A change of any file changes it. A name is hashed as its bytes
    (one that is not valid UTF-8 too)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    total = 0
    for file in files:
        stat = file.stat()
        name = file.name if file == path else file.relative_to(path).as_posix()
        digest.update(
            f"{name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape")
        )
        total += stat.st_size
    return {"fingerprint": f"sha256:{digest.hexdigest()}", "files": len(files), "bytes": total}


def odd_names(options: JamesOptions) -> list[str]:
    """The escaped names (`filenames.shown`) of the local inputs and files the audit read whose
    names are odd (`filenames.is_odd`): each input given (snapshot, SSTables, blob listing or
    directory, S3 Inventory report, broker export), each file of the snapshot's tables and of
    the broker export; a name below an odd one listed is not listed again."""
    from mqforensics.sources import parquet_footer
    from mqforensics.systems.james.snapshot import locate_tables

    given = [options.snapshot, options.sstables, options.blob_listing, options.blob_dir,
             options.broker_export]  # fmt: skip
    if options.blob_inventory and not is_s3(options.blob_inventory):
        given.append(Path(options.blob_inventory))
    read = [Path(path).resolve() for path in given if path is not None]
    if options.snapshot is not None:
        for table in locate_tables(options.snapshot).values():
            for file in table.files if table is not None else ():
                parts = parquet_footer.data_files(file) if file.is_dir() else None
                read += [part.resolve() for part in parts or [file]]
    if options.broker_export is not None:
        read += [p.resolve() for p in options.broker_export.rglob("*.json")]
    odd = [path for path in dict.fromkeys(read) if is_odd(path)]
    return [shown(path) for path in odd if not any(other in path.parents for other in odd)]


def _s3_location(location: str) -> str:
    """``s3://bucket/prefix``: a user or secret in the URL (refused by the parser anyway) cut."""
    url = urlparse(location)
    bucket = url.netloc.rpartition("@")[2]
    return f"s3://{bucket}{url.path}"


def _blob_source(options: JamesOptions) -> str | None:
    """Where the blob listing came from, as ``s3://bucket`` or a path: never a credential."""
    if options.blobs:
        return "s3://" + urlparse(options.blobs).netloc.rpartition("@")[2]
    for name in ("blob_inventory", "blob_dir", "blob_listing"):
        value = getattr(options, name)
        if value:
            return shown(value)
    return None


def plan_inputs(options: JamesOptions, state: JamesState) -> dict[str, Any]:
    """What a plan header keeps of the read, and what the purger reads from it: the cluster
    (``host:port``; none for a snapshot: the purge names it), the keyspace the actions target,
    the snapshot, the blob source, and whether every blob reference of the view was read."""
    cassandra = cassandra_endpoint(options.cassandra).where if options.cassandra else None
    return {
        "source": state.source,
        "cassandra": cassandra,
        "keyspace": options.keyspace,
        "snapshot": shown(options.snapshot or options.sstables or "") or None,
        "snapshot_time": utc_text(state.as_of) if options.offline() else None,
        "blobs": _blob_source(options),
        "references_complete": state.references_complete,
    }
