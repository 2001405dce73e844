"""The per-file checks of Cyrus run on the frames: each file's read (a row of `frames.READ`)
rebuilt into its `database.Database` in a Spark task (`mapInArrow`, one task per file as read),
and judged there with the server settings by the pure functions of `dbchecks`.

`judge` returns one `frames.JUDGED` row per file, computed at once: `FILES` (what the file is,
its mailbox records that decode or not, and its bare userids under the default domain), the
findings of `dbchecks.run_checks` and the ACL entries of `dbchecks.acl_report`. The checks
(`checks`) select their findings from it, and `frames.CyrusFrames` its ``files``, ``acl`` and
``sharing``; the reader (`fleet`) judges nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mqforensics.spark import computed
from mqforensics.systems.cyrus import dbchecks
from mqforensics.systems.cyrus.database import Database, entries_from_json
from mqforensics.systems.cyrus.problems import Problem
from mqforensics.systems.cyrus.twoskip import Record, no_cycle_collection

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import DataFrame


def database_of(row: dict[str, Any]) -> Database:
    """The `Database` a `frames.READ` row was read from (history without values or pointers,
    which no check reads), built with the cyclic garbage collector paused (`fleet.read_row`)."""
    with no_cycle_collection():
        return _database_of(row)


def _database_of(row: dict[str, Any]) -> Database:
    items = row["items"]
    given = row["given_entries"]
    return Database(
        row["file"],
        None if items is None else [(item["key"], item["value"]) for item in items],
        tuple(Problem(p["kind"], p["offset"], p["detail"]) for p in row["read_problems"] or ()),
        given_entries=None if given is None else entries_from_json(given),
        history=tuple(_record(h) for h in row["history"] or ()),
        format=row["format"],
        size=row["size"],
        sha256=row["sha256"],
    )


def _record(fields: dict[str, Any]) -> Record:
    """A history record of a `frames.READ` row (its value and pointers left out)."""
    offset, kind, level, key, length = (
        fields[name] for name in ("offset", "type", "level", "key", "length")
    )
    return Record(offset, kind, level, key, b"", (), length, fields["committed"])


def _text(value: Any) -> Any:
    """A string as a valid one: surrogate-escaped invalid UTF-8 becomes U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def judged_row(
    db: Database, version: str, admins: Sequence[str], default_domain: str | None
) -> dict[str, Any]:
    """The `frames.JUDGED` row of one file (as a dict)."""
    found = dbchecks.run_checks(db, version, admins, None, default_domain)
    acl = dbchecks.acl_report(db.entries, admins, default_domain)
    entries = len(db.entries) + len(db.undecodable)
    return {
        "file": db.source,
        "format": db.format,
        "size": db.size,
        "sha256": db.sha256,
        "records": len(db.items) if db.items is not None else entries,
        "mailboxes": entries,
        "problems": len(db.problems),
        "undecodable": len(db.undecodable),
        "complete": not db.problems,
        "bare_userids": dbchecks.bare_userids(acl),
        "findings": [
            {
                "check": f.check,
                "severity": f.severity,
                "scope": f.scope,
                "subject": f.subject,
                "bytes": f.bytes,
                "detail": f.as_row()[-1],
            }
            for f in found
        ],
        "acl": [{name: _text(value) for name, value in entry.items()} for entry in acl],
    }


def judge(
    read: DataFrame,
    schema: str,
    version: str,
    admins: Sequence[str],
    default_domain: str | None,
) -> DataFrame:
    """Every file of `read` (`frames.READ`) judged in the executors, one task per file,
    computed at once, as `schema` (`frames.JUDGED`)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = StructType.fromDDL(schema)
    assert isinstance(struct, StructType)
    arrow_schema = to_arrow_schema(struct)
    admins = tuple(admins)

    def judge_batches(batches: Iterable[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            rows = [
                judged_row(database_of(row), version, admins, default_domain)
                for row in batch.to_pylist()
            ]
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    return computed(read.mapInArrow(judge_batches, schema))
