"""What a Cyrus operator trends (`measure`), per ``mailboxes.db``, from the frames of
`frames.CyrusFrames` (docs/history.md). A mailboxes database queues no mail: there are no
``live_mails`` or ages here, only what the database holds and how far its reverse ACLs (RACLs)
have drifted from its ACLs.

``queue`` is the file as the frames name it (its absolute path as escaped text, the ``file``
column) when the audit read several (a murder's backends, a fleet), so that each file has its
own series; ``""`` when it read one (the run's store is then the file already).

- ``rows`` (count): the live key/value records of the file (a ``ctl_mboxlist -d`` dump's
  entries), as the manifest's inputs count them.
- ``mailboxes`` (count): its mailbox records (tombstones and intermediates included, and those
  whose value does not decode).
- ``acl_entries`` (count): the entries of every mailbox record's ACL (`frames.CyrusFrames.acl`:
  negative ones, tombstones' and intermediates' too).
- ``racl_entries`` (count): the reverse-ACL keys it holds, of either key generation (``AU``/``AS``
  of 3.6+, ``$RACL$U$``/``$RACL$S$`` before it; not the marker).
- ``racl_drift`` (count; ``item`` = the kind): reverse-ACL keys that disagree with the ACLs,
  under the RACL rule of the frames' Cyrus version and admins (the audit's, those its checks
  judge with), each kind always given, zeros included:

  - ``missing``: keys a grant needs that the file lacks, counted only when the version's RACL
    marker says RACLs are on (without it Cyrus neither reads nor writes them);
  - ``stale``: keys no grant needs: no such mailbox, no grant, rights too weak for the
    version's rule, the other namespace letter or the other version's key format;
  - ``forbidden``: keys Cyrus never writes: for the owner, an admin, a tombstone or an
    intermediate mailbox.

  The kinds are those of the checks ``racl_missing``, ``racl_stale`` and ``racl_forbidden``,
  computed by the same rules (`dbchecks`) on each file's read (`CyrusFrames.read`, one Spark
  task per file), not taken from the findings. A key of a mailbox whose record does not
  decode is in no kind (it cannot be judged: ``undecodable_record``).

A ``ctl_mboxlist -d`` dump holds mailbox entries but no keys: its file has no ``racl_entries``
and no ``racl_drift``.

Two Spark jobs, each one row per file: the judged files (already computed by the loader) and
the RACL rules over the read frame (computed too).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mqforensics.metrics import Metric
from mqforensics.systems.cyrus import dbchecks, records

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import DataFrame

    from mqforensics.spec import Loaded
    from mqforensics.systems.cyrus.database import Database
    from mqforensics.systems.cyrus.frames import CyrusFrames

__all__ = ["measure"]

DRIFT_KINDS = ("missing", "stale", "forbidden")
_RACL_KINDS = ("racl", "legacy_racl")
_DRIFT = "file string, racl_entries bigint, missing bigint, stale bigint, forbidden bigint"


def _racl_figures(db: Database, version: str, admins: Sequence[str]) -> dict[str, int] | None:
    """The RACL keys of one file and its drift by kind (see the module docstring); None for a
    file without key/value records (a ``ctl_mboxlist -d`` dump)."""
    if db.items is None:
        return None
    unexpected = dbchecks.racl_unexpected(db, version, admins)
    return {
        "racl_entries": sum(records.classify_key(k).kind in _RACL_KINDS for k, _ in db.items),
        "missing": len(dbchecks.racl_missing(db, version, admins)),
        "stale": sum(f.check == "racl_stale" for f in unexpected),
        "forbidden": sum(f.check == "racl_forbidden" for f in unexpected),
    }


def _drift(read: DataFrame, version: str, admins: Sequence[str]) -> DataFrame:
    """`_racl_figures` of every file of `read` (`frames.READ`), one task per file."""
    from mqforensics.systems.cyrus.perfile import database_of

    admins = tuple(admins)

    def figures(batches: Iterable[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            rows: list[dict[str, Any]] = []
            for row in batch.to_pylist():
                found = _racl_figures(database_of(row), version, admins)
                rows.append({"file": row["file"], **(found or {})})
            names = ["file", "racl_entries", *DRIFT_KINDS]
            yield pa.RecordBatch.from_pylist(
                rows, schema=pa.schema([(n, pa.string() if n == "file" else pa.int64())
                                        for n in names])
            )  # fmt: skip

    return read.mapInArrow(figures, _DRIFT)


def measure(loaded: Loaded[CyrusFrames]) -> list[Metric]:
    """The figures of every file (see the module docstring), in the order the audit read them."""
    from pyspark.sql import functions as F

    from mqforensics.spark import typed_errors

    frames = loaded.frames
    with typed_errors():
        judged = frames.own.select(
            "file", "records", "mailboxes", F.size("acl").alias("acl_entries")
        ).collect()
        drift = {r["file"]: r for r in _drift(frames.read, frames.version, frames.admins).collect()}
    by_file = {r["file"]: r for r in judged}
    order = [f for f in frames.paths if f in by_file] + sorted(set(by_file) - set(frames.paths))
    several = len(by_file) > 1
    found: list[Metric] = []
    for file in order:
        row, racl = by_file[file], drift.get(file)
        queue = file if several else ""
        found += [
            Metric("rows", row["records"], "count", queue=queue),
            Metric("mailboxes", row["mailboxes"], "count", queue=queue),
            Metric("acl_entries", row["acl_entries"], "count", queue=queue),
        ]
        if racl is None or racl["racl_entries"] is None:
            continue
        found.append(Metric("racl_entries", racl["racl_entries"], "count", queue=queue))
        found += [
            Metric("racl_drift", racl[kind], "count", queue=queue, item=kind)
            for kind in DRIFT_KINDS
        ]
    return found
