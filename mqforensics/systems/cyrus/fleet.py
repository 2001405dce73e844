"""Spark readers over a fleet of Cyrus `mailboxes.db` files (one backend's file per partition).

Two Python data sources, each planning one partition per input file and reading it with
`database.read_database`, so every input the audit accepts works (twoskip, skiplist, ``show``,
``flat`` and batch ``SHOW`` dumps; a ``ctl_mboxlist -d`` JSON dump has entries but no key/value
records):

- ``cyrus_fleet`` (`read_fleet`): one row per file (`READ`), what was read and nothing judged:
  format, size, SHA-256, the record count, the reader's integrity problems, the live records,
  a twoskip file's history and a ``ctl_mboxlist -d`` dump's entries. `read_fleet` computes it
  at once into the canonical frames (`CyrusFrames`), where the checks judge it (`perfile`).
- ``cyrus_mailboxes`` (`read_records`): one row per live record, `RECORDS`: ``seq`` is the
  record's 0-based position in its file (key order for twoskip/skiplist, file order for a dump);
  ``kind``, ``user`` and ``namespace`` (``U``/``S`` for RACL keys of either generation) come from
  `records.classify_key`; ``name`` is the intname (a 3.6+ dbname converted). Integrity problems
  are not rows here; they are the ``integrity`` findings.

Options: ``paths`` (JSON list) or ``path``, each file's escaped text (`filenames.shown`,
docs/filenames.md: a name that is not valid UTF-8 keeps its bytes as ``\\xNN``, and is opened by
exactly those bytes, `filenames.fs_path`); nothing else (the server settings the checks judge with
are theirs, `options.Settings`). The functions take paths as given, made absolute and escaped
(the ``file`` column and the findings' ``detail.file``). A missing or unreadable path
is an InputError on the driver before any job. A file that is no database (or a malformed dump)
fails in the executor with an InputError naming it: `read_fleet` computes its frame at once and
re-raises it on the driver as that InputError; `read_records` stays lazy, so it surfaces at the
action, wrapped, and `errors.explain` recovers the line. String columns show invalid UTF-8 as
U+FFFD; ``key`` and ``value`` keep the exact bytes.

Both yield Arrow record batches (`arrow_rows.ArrowRows`), the columns Spark's own conversion of
the tuple rows (`record_rows`, `read_row`) would give; `record_batches` builds the records'
columns a batch of records at a time, with no tuple per record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError
from mqforensics.filenames import fs_path, shown
from mqforensics.sources.arrow_rows import BATCH_ROWS, ArrowRows
from mqforensics.spark import computed
from mqforensics.systems.cyrus import dbchecks, records, twoskip
from mqforensics.systems.cyrus.database import (
    Database,
    checked_paths,
    entries_json,
    read_database,
)
from mqforensics.systems.cyrus.frames import READ, RECORDS, CyrusFrames

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass
class FilePartition(InputPartition):
    """One input file (its escaped text, `filenames.shown`), read whole by one Spark task."""

    path: str


def _paths(options: Any) -> list[str]:
    """The files named by the ``paths`` (JSON list) or ``path`` option, in order."""
    raw = options.get("paths")
    if raw:
        try:
            paths = json.loads(raw)
        except ValueError:
            paths = None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ConfigError("option 'paths' must be a JSON list of file paths")
    elif options.get("path"):
        paths = [options.get("path")]
    else:
        raise ConfigError("option 'paths' (JSON list) or 'path' is required")
    if not paths:
        raise ConfigError("option 'paths' lists no file")
    return paths


def _text(value: str | None) -> str | None:
    """`value` as a valid string: surrogate-escaped invalid UTF-8 becomes U+FFFD."""
    if value is None or value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def record_rows(db: Database) -> Iterator[tuple]:
    """The `RECORDS` rows of one loaded input (none for a ``ctl_mboxlist -d`` dump)."""
    for seq, (key, value) in enumerate(db.items or ()):
        yield (db.source, seq, key, value, *key_fields(key))


def key_fields(key: bytes) -> tuple[str, str | None, str | None, str | None]:
    """What a record's key says (`records.classify_key`): the `RECORDS` columns ``kind``,
    ``name`` (the intname), ``user`` and ``namespace``."""
    info = records.classify_key(key)
    name = info.name
    if name is not None and info.kind in ("mailbox", "racl"):
        name = records.dbname_to_intname(name)
    namespace = None if info.shared is None else ("S" if info.shared else "U")
    return info.kind, _text(name), _text(info.user), namespace


def record_batches(db: Database, arrow: ArrowRows) -> Iterator[pa.RecordBatch]:
    """`record_rows` of one loaded input as record batches of `RECORDS` (`arrow`), built column
    by column: one batch of records is held at a time, and no tuple is made per record."""
    import numpy as np
    import pyarrow as pa

    seq = 0
    for keys, values in _item_columns(db.items or ()):
        count = len(keys)
        fields = [key_fields(key) for key in keys]
        kinds, names, users, namespaces = ([f[i] for f in fields] for i in range(4))
        source = pa.repeat(pa.scalar(db.source, pa.string()), count)
        positions = pa.array(np.arange(seq, seq + count, dtype=np.int64), pa.int32())
        yield arrow.columns_batch([source, positions, keys, values, kinds, names, users,
                                   namespaces])  # fmt: skip
        seq += count


def _item_columns(
    items: Sequence[tuple[bytes, bytes]],
) -> Iterator[tuple[list[bytes], list[bytes]]]:
    """The keys and the values of `items`, a batch of records at a time: cut straight from the
    file at the fast reader's offsets (`columns.ItemsView`), or from a list of pairs."""
    # `columns` imports numpy: when a file is read, not when the command line's parser loads
    # this module (tests/unit/test_cli_startup.py).
    from mqforensics.systems.cyrus.columns import ItemsView

    if isinstance(items, ItemsView):
        data = items.rows.buffer.data
        for _, starts, key_ends, value_starts, value_ends in items.rows.spans():
            keys = [data[a:b] for a, b in zip(starts, key_ends, strict=True)]
            yield keys, [data[a:b] for a, b in zip(value_starts, value_ends, strict=True)]
        return
    for at in range(0, len(items), BATCH_ROWS):
        pairs = items[at : at + BATCH_ROWS]
        yield [key for key, _ in pairs], [value for _, value in pairs]


def read_row(db: Database) -> tuple:
    """The `READ` row of one loaded input: what was read, nothing judged. Its lists of every
    record are built with the cyclic garbage collector paused (it would walk them again and
    again: half the time at 1M records)."""
    with twoskip.no_cycle_collection():
        return _read_row(db)


def _read_row(db: Database) -> tuple:
    given = db.given_entries
    return (
        db.source,
        db.format,
        db.size,
        db.sha256,
        len(db.items) if db.items is not None else len(given or ()),
        [(p.kind, p.offset, p.detail) for p in db.problems],
        None if db.items is None else list(db.items),
        [(r.offset, r.type, r.level, r.key, r.length, r.committed) for r in db.history],
        None if given is None else entries_json(given),
    )


class _FilesReader(DataSourceReader):
    """One partition per file; `batches` turns one loaded file into record batches of the
    source's schema (`schema`, as Spark hands it to the reader)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[FilePartition]:  # type: ignore[override]
        return [FilePartition(path) for path in _paths(self.options)]

    def read(self, partition: FilePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        db = read_database(Path(fs_path(partition.path)))
        yield from self.batches(db, ArrowRows(self.schema))

    def batches(self, db: Database, arrow: ArrowRows) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError


class CyrusMailboxesReader(_FilesReader):
    def batches(self, db: Database, arrow: ArrowRows) -> Iterator[pa.RecordBatch]:
        return record_batches(db, arrow)


class CyrusFleetReader(_FilesReader):
    def batches(self, db: Database, arrow: ArrowRows) -> Iterator[pa.RecordBatch]:
        yield arrow.batch([read_row(db)])


class CyrusMailboxesSource(DataSource):
    """``spark.read.format("cyrus_mailboxes")``: the live records of `mailboxes.db` files."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_mailboxes"

    def schema(self) -> str:
        return RECORDS

    def reader(self, schema: StructType) -> CyrusMailboxesReader:
        return CyrusMailboxesReader(dict(self.options), schema)


class CyrusFleetSource(DataSource):
    """``spark.read.format("cyrus_fleet")``: one row per file, what it holds (`READ`)."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_fleet"

    def schema(self) -> str:
        return READ

    def reader(self, schema: StructType) -> CyrusFleetReader:
        return CyrusFleetReader(dict(self.options), schema)


SOURCES = (CyrusMailboxesSource, CyrusFleetSource)


# ---------------------------------------------------------------------------------------------


def _checked(paths: Sequence[str | Path]) -> list[str]:
    """`paths` made absolute, each a readable file named once, as escaped text
    (`filenames.shown`); InputError/ConfigError if not."""
    if isinstance(paths, str | Path):
        paths = [paths]
    return [shown(path.absolute()) for path in checked_paths(paths)]


def _load(spark: SparkSession, source: type[DataSource], options: dict[str, str]) -> DataFrame:
    for each in SOURCES:
        spark.dataSource.register(each)
    return spark.read.format(source.name()).options(**options).load()


def read_records(spark: SparkSession, paths: Sequence[str | Path]) -> DataFrame:
    """The live records of every file (`RECORDS`), one Spark partition per file; lazy."""
    return _records(spark, _checked(paths))


def _records(spark: SparkSession, checked: list[str]) -> DataFrame:
    """`read_records` of files already checked (`_checked`: escaped text)."""
    return _load(spark, CyrusMailboxesSource, {"paths": json.dumps(checked)})


def read_fleet(
    spark: SparkSession,
    paths: Sequence[str | Path],
    version: str = dbchecks.DEFAULT_VERSION,
    admins: Sequence[str] = dbchecks.DEFAULT_ADMINS,
    default_domain: str | None = None,
) -> CyrusFrames:
    """Every file read in the executors (one task per file), computed at once, as
    `CyrusFrames`. The reader is given the paths only: `version`, `admins` and
    `default_domain` are the server settings the frames' ``files``, ``acl`` and ``sharing`` are
    judged with (`CyrusFrames.judged`)."""
    checked = _checked(paths)
    read = computed(_load(spark, CyrusFleetSource, {"paths": json.dumps(checked)}))
    records = _records(spark, checked)
    return CyrusFrames(spark, read, checked, records, version, list(admins), default_domain)
