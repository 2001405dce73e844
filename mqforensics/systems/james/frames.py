"""James's canonical frames (`JamesState`): the tables of the mail queue view (schema.py), the
blob listing and the broker's queues and messages when read, and the instant they are judged
at; what every check receives (`checks`, with `options.Settings`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class JamesState:
    """Every reader (live, cqlsh CSV, Parquet) returns one of these; checks only see this.

    The frames (columns: schema.py, as the tables James writes them): `entries` (the enqueued
    table's view rows: ``queuename``, ``timerangestart``, ``bucketid``, ``enqueueid``,
    ``enqueuedtime``, ``name``, the blob ids, the envelope, ``table_version``), `deleted` (the
    ``deletedmailsv2`` markers: ``queuename``, ``enqueueid``), `browse_start` and
    `content_start` (one row per queue: ``queuename``, ``browsestart`` / ``contentstart``),
    `config_history` (the configuration events: ``eventid``, ``slice_window_seconds``,
    ``bucket_count``, ``update_browse_start_pace``), `blobs` (the bucket's listing, schema.BLOBS:
    ``bucket``, ``key``, ``size``, ``last_modified``, ``etag``, ``storage_class``, ``id_kind``),
    `broker_queues` and `broker_messages` (broker.py) and `blob_references` (``key``).

    `as_of` is the instant age-based checks are judged at: the snapshot time for an export, now
    for a live read (the CLI's ``--as-of`` overrides it). `source` describes where it came from.
    """

    entries: DataFrame
    deleted: DataFrame
    browse_start: DataFrame
    content_start: DataFrame
    config_history: DataFrame
    as_of: dt.datetime
    blobs: DataFrame | None = None
    # RabbitMQ's side (broker.py), when read: a row per broker queue of a James queue, and a
    # row per message read from an export (none from a live read: counts only).
    broker_queues: DataFrame | None = None
    broker_messages: DataFrame | None = None
    # Every blob id the queue view references (column `key`), when it is read more completely
    # than `entries` (a live enumeration reads only some partitions, but orphan detection needs
    # every reference: James's own MailQueueViewBlobReferenceSource scans the whole table).
    blob_references: DataFrame | None = None
    # False when the blob references read are not all of the view's (a live `--scan` limited
    # to some queues, a browse-only read): orphans cannot then be told from blobs of the rows
    # not read.
    references_complete: bool = True
    source: str = ""
    notes: list[str] = field(default_factory=list)
    # Every partition of the enqueued table (queue, slice start in epoch milliseconds, bucket),
    # from a SELECT DISTINCT of its partition keys, when a live enumeration read it to know
    # which partitions its walk of the slice grids did not reach (source.unread_partitions).
    table_partitions: list[tuple[str, int, int]] | None = None
    # The enqueued table the view was read from (``enqueuedmailsv4`` or ``enqueuedmailsv3``),
    # when the reader knows it.
    table: str | None = None
    # True when every frame is a plain scan of columnar files (a Parquet snapshot): scanning
    # them again costs less than caching them (bench/: caching 1M wide view rows took longer
    # than reading every table of the snapshot), so `persist` leaves them alone.
    rereadable: bool = False
    # The same for `blobs`, which an audit may read from elsewhere than the snapshot: a saved
    # Parquet listing is rereadable, a listing of the bucket (S3, an inventory, a directory)
    # is not, and is kept, so that every check sees one listing and the bucket is listed once.
    blobs_rereadable: bool = False
    # How many rows `blobs` has, when known without a job (a saved listing's Parquet footers).
    blob_rows: int | None = None
    # Frames computed from this state by `keep` (an audit's classified rows).
    derived: list[DataFrame] = field(default_factory=list)
    # Where the queued mails' header and body blobs are read for the content search
    # (`content.BlobContent`: a local copy of the bucket or the bucket), when given.
    content: Any = None
    # The facts every check needs, computed once per audit (`context.prepared`: a
    # `context.Context` for these frames and one `Settings`); let go of by `unpersist`.
    context: Any = field(default=None, repr=False, compare=False)

    def persist(self) -> JamesState:
        """Keep the frames once read: every check reads them again, and a live source would
        otherwise be queried (thousands of Cassandra partitions) once per check."""
        frames = [] if self.rereadable else self._all_frames()
        if self.rereadable and self.blobs is not None and not self.blobs_rereadable:
            frames.append(self.blobs)
        for frame in frames:
            _persist(frame)
        return self

    def keep(self, frame: DataFrame) -> DataFrame:
        """`frame`, derived from this state, computed now and kept on the executors as rows (a
        local checkpoint: bench/ measured it cheaper to build than the columnar cache, and an
        error in a source surfaces here, typed). Spark drops its blocks once the frame is
        garbage collected; `unpersist` lets go of it."""
        from pyspark.sql import functions as F

        from mqforensics.spark import computed

        kept = computed(frame)
        self.derived.append(kept)
        # Fresh column identities: the checkpoint's columns are the source's, and a join of the
        # two (a check joining kept rows with the view) must not see one column on both sides.
        return kept.select(*[F.col(f"`{c}`").alias(c) for c in kept.columns])

    def unpersist(self) -> None:
        for frame in self._all_frames():
            frame.unpersist()
        self.derived.clear()
        self.context = None

    def _all_frames(self) -> list[DataFrame]:
        extra = [self.blob_references] if self.blob_references is not None else []
        return [*self.frames().values(), *extra]

    def frames(self) -> dict[str, DataFrame]:
        named = {
            "entries": self.entries,
            "deleted": self.deleted,
            "browse_start": self.browse_start,
            "content_start": self.content_start,
            "config_history": self.config_history,
        }
        if self.blobs is not None:
            named["blobs"] = self.blobs
        if self.broker_queues is not None:
            named["broker_queues"] = self.broker_queues
        if self.broker_messages is not None:
            named["broker_messages"] = self.broker_messages
        return named


def _persist(frame: DataFrame) -> None:
    from pyspark import StorageLevel

    if not frame.storageLevel.useMemory and not frame.storageLevel.useDisk:
        frame.persist(StorageLevel.MEMORY_AND_DISK)
