"""The tombstones a James deletion writes, per table: stated once, for the planner (an action's
``tombstones``) and the purger (the per-table prediction it journals beside what Cassandra
reports, docs/retention.md "Tombstones, measured").

A partition delete writes 1 partition tombstone in the enqueued table and 1 per
``deletedmailsv2`` marker (each marker is a partition of its own there); a row delete 1 row
tombstone and 1 for its marker; contentStart advances and blob deletes none.
"""

from __future__ import annotations

DELETED_TABLE = "deletedmailsv2"


def partition_delete(table: str, markers: int) -> dict[str, int]:
    return {table: 1, DELETED_TABLE: markers}


def row_delete(table: str) -> dict[str, int]:
    return {table: 1, DELETED_TABLE: 1}
