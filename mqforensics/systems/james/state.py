"""A James mail queue state: the canonical frames (schema.py), and the instant it is judged at."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class JamesState:
    """Every reader (live, cqlsh CSV, Parquet) returns one of these; checks only see this.

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
    # Every blob id the queue view references (column `key`), when it is read more completely
    # than `entries` (a live enumeration reads only some partitions, but orphan detection needs
    # every reference: James's own MailQueueViewBlobReferenceSource scans the whole table).
    blob_references: DataFrame | None = None
    # False when the blob references read are not all of the view's (a live `--scan` limited
    # to some queues): orphans cannot then be told from blobs of the queues not read.
    references_complete: bool = True
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def persist(self) -> JamesState:
        """Keep the frames once read: every check reads them again, and a live source would
        otherwise be queried (thousands of Cassandra partitions) once per check."""
        from pyspark import StorageLevel

        for frame in self._all_frames():
            if not frame.storageLevel.useMemory and not frame.storageLevel.useDisk:
                frame.persist(StorageLevel.MEMORY_AND_DISK)
        return self

    def unpersist(self) -> None:
        for frame in self._all_frames():
            frame.unpersist()

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
        return named
