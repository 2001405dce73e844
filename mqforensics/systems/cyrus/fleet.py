"""Spark readers over a fleet of Cyrus `mailboxes.db` files (one backend's file per partition).

Two Python data sources, each planning one partition per input file and reading it with
`database.read_database`, so every input the audit accepts works (twoskip, skiplist, ``show``,
``flat`` and batch ``SHOW`` dumps; a ``ctl_mboxlist -d`` JSON dump has entries but no key/value
records):

- ``cyrus_fleet`` (`read_fleet`): one row per file (`FLEET`): what it is (format, size,
  SHA-256, record, mailbox and problem counts) and, computed in the same task from the one read,
  the findings of every per-file check (`dbchecks.run_checks`, as `findings.SCHEMA` structs) and
  every ACL entry (`dbchecks.acl_report`). `read_fleet` computes it at once, and the canonical
  frames (`CyrusFrames`: ``files``, ``findings``, ``acl``, ``sharing``) are views of it.
- ``cyrus_mailboxes`` (`read_records`): one row per live record, `RECORDS`: ``seq`` is the
  record's 0-based position in its file (key order for twoskip/skiplist, file order for a dump);
  ``kind``, ``user`` and ``namespace`` (``U``/``S`` for RACL keys of either generation) come from
  `records.classify_key`; ``name`` is the intname (a 3.6+ dbname converted). Integrity problems
  are not rows here; they are the ``integrity`` findings.

Options: ``paths`` (JSON list) or ``path``; ``version``, ``admins`` (JSON list), ``as_of`` (ISO
instant) and ``default_domain`` where they apply. The functions take paths as given, made
absolute (the ``file`` column and the findings' ``detail.file``). A missing or unreadable path
is an InputError on the driver before any job. A file that is no database (or a malformed dump)
fails in the executor with an InputError naming it: `read_fleet` computes its frame at once and
re-raises it on the driver as that InputError; `read_records` stays lazy, so it surfaces at the
action, wrapped, and `errors.explain` recovers the line. String columns show invalid UTF-8 as
U+FFFD; ``key`` and ``value`` keep the exact bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError
from mqforensics.spark import computed
from mqforensics.systems.cyrus import dbchecks, records
from mqforensics.systems.cyrus.database import Database, checked_paths, read_database
from mqforensics.systems.cyrus.frames import ACL_FIELDS, FLEET, RECORDS, CyrusFrames

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_STRINGS = {name for name, kind in ACL_FIELDS if kind == "string"}


@dataclass
class FilePartition(InputPartition):
    """One input file, read whole by one Spark task."""

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


def _admins(options: Any) -> list[str]:
    admins = json.loads(options.get("admins") or "null")
    return list(dbchecks.DEFAULT_ADMINS) if admins is None else admins


def _text(value: str | None) -> str | None:
    """`value` as a valid string: surrogate-escaped invalid UTF-8 becomes U+FFFD."""
    if value is None:
        return None
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def record_rows(db: Database) -> Iterator[tuple]:
    """The `RECORDS` rows of one loaded input (none for a ``ctl_mboxlist -d`` dump)."""
    for seq, (key, value) in enumerate(db.items or ()):
        info = records.classify_key(key)
        name = info.name
        if name is not None and info.kind in ("mailbox", "racl"):
            name = records.dbname_to_intname(name)
        namespace = None if info.shared is None else ("S" if info.shared else "U")
        yield (db.source, seq, key, value, info.kind, _text(name), _text(info.user), namespace)


def fleet_row(
    db: Database,
    version: str = dbchecks.DEFAULT_VERSION,
    admins: Sequence[str] = dbchecks.DEFAULT_ADMINS,
    as_of: dt.datetime | None = None,
    default_domain: str | None = None,
) -> tuple:
    """The `FLEET` row of one loaded input: what it is, its findings and its ACL entries."""
    found = dbchecks.run_checks(db, version, admins, as_of, default_domain)
    acl = dbchecks.acl_report(db.entries, admins, default_domain)
    bare = dbchecks.bare_userids(acl)
    entries = len(db.entries) + len(db.undecodable)
    return (
        db.source,
        db.format,
        db.size,
        db.sha256,
        len(db.items) if db.items is not None else entries,
        entries,
        len(db.problems),
        len(db.undecodable),
        not db.problems,
        bare,
        [f.as_row() for f in found],
        [
            tuple(_text(r[name]) if name in _STRINGS else r[name] for name, _ in ACL_FIELDS)
            for r in acl
        ],
    )


class _FilesReader(DataSourceReader):
    """One partition per file; `rows` turns one loaded file into rows of the source's schema."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[FilePartition]:  # type: ignore[override]
        return [FilePartition(path) for path in _paths(self.options)]

    def read(self, partition: FilePartition) -> Iterator[tuple]:  # type: ignore[override]
        yield from self.rows(read_database(Path(partition.path)))

    def rows(self, db: Database) -> Iterator[tuple]:
        raise NotImplementedError


class CyrusMailboxesReader(_FilesReader):
    def rows(self, db: Database) -> Iterator[tuple]:
        return record_rows(db)


class CyrusFleetReader(_FilesReader):
    def rows(self, db: Database) -> Iterator[tuple]:
        as_of = self.options.get("as_of")
        yield fleet_row(
            db,
            self.options.get("version") or dbchecks.DEFAULT_VERSION,
            _admins(self.options),
            dt.datetime.fromisoformat(as_of) if as_of else None,
            self.options.get("default_domain") or None,
        )


class CyrusMailboxesSource(DataSource):
    """``spark.read.format("cyrus_mailboxes")``: the live records of `mailboxes.db` files."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_mailboxes"

    def schema(self) -> str:
        return RECORDS

    def reader(self, schema: Any) -> CyrusMailboxesReader:
        return CyrusMailboxesReader(dict(self.options))


class CyrusFleetSource(DataSource):
    """``spark.read.format("cyrus_fleet")``: one row per file, its findings and ACL entries."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_fleet"

    def schema(self) -> str:
        return FLEET

    def reader(self, schema: Any) -> CyrusFleetReader:
        return CyrusFleetReader(dict(self.options))


SOURCES = (CyrusMailboxesSource, CyrusFleetSource)


# ---------------------------------------------------------------------------------------------


def _checked(paths: Sequence[str | Path]) -> list[str]:
    """`paths` made absolute, each a readable file named once; InputError/ConfigError if not."""
    if isinstance(paths, str | Path):
        paths = [paths]
    return [str(path.absolute()) for path in checked_paths(paths)]


def _load(spark: SparkSession, source: type[DataSource], options: dict[str, str]) -> DataFrame:
    for each in SOURCES:
        spark.dataSource.register(each)
    return spark.read.format(source.name()).options(**options).load()


def read_records(spark: SparkSession, paths: Sequence[str | Path]) -> DataFrame:
    """The live records of every file (`RECORDS`), one Spark partition per file; lazy."""
    return _load(spark, CyrusMailboxesSource, {"paths": json.dumps(_checked(paths))})


def read_fleet(
    spark: SparkSession,
    paths: Sequence[str | Path],
    version: str = dbchecks.DEFAULT_VERSION,
    admins: Sequence[str] = dbchecks.DEFAULT_ADMINS,
    as_of: dt.datetime | None = None,
    default_domain: str | None = None,
) -> CyrusFrames:
    """Every file read and checked in the executors (one task per file), computed at once, as
    `CyrusFrames`. A naive `as_of` is taken as UTC."""
    checked = _checked(paths)
    options = {"paths": json.dumps(checked), "version": version}
    options["admins"] = json.dumps(list(admins))
    if as_of is not None:
        utc = as_of.replace(tzinfo=dt.UTC) if as_of.tzinfo is None else as_of.astimezone(dt.UTC)
        options["as_of"] = utc.isoformat()
    if default_domain:
        options["default_domain"] = default_domain
    fleet = computed(_load(spark, CyrusFleetSource, options))
    records = read_records(spark, checked)
    return CyrusFrames(spark, fleet, checked, records, version, list(admins), default_domain)
