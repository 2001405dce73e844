"""The canonical frames of a Postfix audit, all projections of the one files frame
(`files.FILES`), so that every file is read once.

- ``files``: one row per file, messages and logs;
- ``messages``: the queue files (``kind = 'message'``), without log columns;
- ``recipients``: one row per recipient record of a queue file: ``host``, ``queue``,
  ``queue_id``, ``path``, ``address``, ``original``, ``state``, ``offset``, ``domain`` (lower
  case; ``(none)`` for an address without one);
- ``logs``: the defer, bounce and trace logs (``kind = 'log'``; ``queue`` is the log's class),
  each with its ``log_entries``;
- ``content``: when an erasure policy's subjects are searched, one row per queue file with
  where they are in its envelope and message and what could not be searched
  (`content.CONTENT`, from `content.search_files`); None otherwise (the checks then search).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MESSAGE_COLUMNS = (
    "host", "queue_dir", "queue", "path", "queue_id", "id_kind", "size", "mode", "ready",
    "forced_expire", "modified", "inode", "digest", "read_error", "complete", "damage_offset",
    "damage", "problems", "content_size", "content_offset", "arrival", "sender",
    "recipient_count", "message_id", "attributes", "recipients",
)  # fmt: skip
LOG_COLUMNS = (
    "host", "queue_dir", "queue", "path", "queue_id", "id_kind", "size", "mode", "modified",
    "inode", "digest", "read_error", "problems", "log_entries",
)  # fmt: skip


@dataclass
class PostfixFrames:
    """The frames every check reads."""

    files: DataFrame
    content: DataFrame | None = None

    @property
    def messages(self) -> DataFrame:
        return self.files.where("kind = 'message'").select(*MESSAGE_COLUMNS)

    @property
    def logs(self) -> DataFrame:
        return self.files.where("kind = 'log'").select(*LOG_COLUMNS)

    @property
    def recipients(self) -> DataFrame:
        from pyspark.sql import functions as F

        exploded = self.messages.select(
            "host", "queue", "queue_id", "path", F.explode("recipients").alias("r")
        )
        address = F.col("r.address")
        domain = F.when(F.instr(address, "@") > 0, F.lower(F.substring_index(address, "@", -1)))
        return exploded.select(
            "host", "queue", "queue_id", "path", address.alias("address"),
            F.col("r.original").alias("original"), F.col("r.state").alias("state"),
            F.col("r.offset").alias("offset"), F.coalesce(domain, F.lit("(none)")).alias("domain"),
        )  # fmt: skip
