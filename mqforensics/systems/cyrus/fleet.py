"""Spark readers over a fleet of Cyrus `mailboxes.db` files (one backend's file per partition).

Three Python data sources, each planning one partition per input file and reading it with
`audit.load`, so every input the audit accepts works (twoskip, skiplist, ``show``, ``flat`` and
batch ``SHOW`` dumps; a ``ctl_mboxlist -d`` JSON dump has entries but no key/value records):

- ``cyrus_mailboxes`` (`read_records`): one row per live record, `RECORDS`: ``seq`` is the
  record's 0-based position in its file (key order for twoskip/skiplist, file order for a dump);
  ``kind``, ``user`` and ``namespace`` (``U``/``S`` for RACL keys of either generation) come from
  `records.classify_key`; ``name`` is the intname (a 3.6+ dbname converted). Integrity problems
  are not rows here; they are `fleet_findings`' ``integrity`` findings.
- ``cyrus_findings`` (`fleet_findings`): `checks.run_checks` of each file, as `findings.SCHEMA`.
- ``cyrus_sharing`` (`fleet_sharing`): `checks.sharing_report` of each file, not pseudonymised.

Options: ``paths`` (JSON list) or ``path``; ``version``, ``admins`` (JSON list), ``as_of`` (ISO
instant) and ``default_domain`` where they apply. The functions take paths as given, made
absolute (the ``file`` column and the findings' ``detail.file``). A missing or unreadable path
is an InputError on the driver before any job. A file that is no database (or a malformed dump)
fails in the executor with an InputError naming it: `fleet_findings` and `fleet_sharing` compute
their (small) frames at once and re-raise it on the driver as that InputError; `read_records`
stays lazy, so it surfaces at the action, wrapped, and `errors.explain` recovers the line.
String columns show invalid UTF-8 as U+FFFD; ``key`` and ``value`` keep the exact bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError
from mqforensics.findings import SCHEMA as FINDINGS_SCHEMA
from mqforensics.spark import computed
from mqforensics.systems.cyrus import audit, checks, records
from mqforensics.systems.cyrus.checks import Database

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RECORDS = (
    "file string, seq int, key binary, value binary, kind string, name string, user string, "
    "namespace string"
)
SHARING = (
    "file string, owner string, mailbox string, grantee string, rights string, negative boolean, "
    "effective boolean"
)


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
    return list(checks.DEFAULT_ADMINS) if admins is None else admins


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


class _FilesReader(DataSourceReader):
    """One partition per file; `rows` turns one loaded file into rows of the source's schema."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[FilePartition]:  # type: ignore[override]
        return [FilePartition(path) for path in _paths(self.options)]

    def read(self, partition: FilePartition) -> Iterator[tuple]:  # type: ignore[override]
        yield from self.rows(audit.load(Path(partition.path)))

    def rows(self, db: Database) -> Iterator[tuple]:
        raise NotImplementedError


class CyrusMailboxesReader(_FilesReader):
    def rows(self, db: Database) -> Iterator[tuple]:
        return record_rows(db)


class CyrusFindingsReader(_FilesReader):
    def rows(self, db: Database) -> Iterator[tuple]:
        as_of = self.options.get("as_of")
        found = checks.run_checks(
            db,
            self.options.get("version") or checks.DEFAULT_VERSION,
            _admins(self.options),
            dt.datetime.fromisoformat(as_of) if as_of else None,
            self.options.get("default_domain") or None,
        )
        return (f.as_row() for f in found)


class CyrusSharingReader(_FilesReader):
    def rows(self, db: Database) -> Iterator[tuple]:
        domain = self.options.get("default_domain") or None
        report = checks.sharing_report(db.entries, _admins(self.options), domain)
        return (
            (
                db.source,
                r["owner"],
                r["mailbox"],
                r["grantee"],
                r["rights"],
                r["negative"],
                r["effective"],
            )
            for r in report
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


class CyrusFindingsSource(DataSource):
    """``spark.read.format("cyrus_findings")``: `checks.run_checks` of each file."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_findings"

    def schema(self) -> str:
        return FINDINGS_SCHEMA

    def reader(self, schema: Any) -> CyrusFindingsReader:
        return CyrusFindingsReader(dict(self.options))


class CyrusSharingSource(DataSource):
    """``spark.read.format("cyrus_sharing")``: `checks.sharing_report` of each file."""

    @classmethod
    def name(cls) -> str:
        return "cyrus_sharing"

    def schema(self) -> str:
        return SHARING

    def reader(self, schema: Any) -> CyrusSharingReader:
        return CyrusSharingReader(dict(self.options))


SOURCES = (CyrusMailboxesSource, CyrusFindingsSource, CyrusSharingSource)


# ---------------------------------------------------------------------------------------------


def _checked(paths: Sequence[str | Path]) -> list[str]:
    """`paths` made absolute, each a readable file named once; InputError/ConfigError if not."""
    if isinstance(paths, str | Path):
        paths = [paths]
    out: list[str] = []
    for given in paths:
        path = Path(given).absolute()
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{path}: not readable")
        if str(path) in out:
            raise ConfigError(f"{path} is given twice")
        out.append(str(path))
    if not out:
        raise ConfigError("no mailboxes.db file given")
    return out


def _load(spark: SparkSession, source: type[DataSource], options: dict[str, str]) -> DataFrame:
    for each in SOURCES:
        spark.dataSource.register(each)
    return spark.read.format(source.name()).options(**options).load()


def read_records(spark: SparkSession, paths: Sequence[str | Path]) -> DataFrame:
    """The live records of every file (`RECORDS`), one Spark partition per file; lazy."""
    return _load(spark, CyrusMailboxesSource, {"paths": json.dumps(_checked(paths))})


def fleet_findings(
    spark: SparkSession,
    paths: Sequence[str | Path],
    version: str = checks.DEFAULT_VERSION,
    admins: Sequence[str] = checks.DEFAULT_ADMINS,
    as_of: dt.datetime | None = None,
    default_domain: str | None = None,
) -> DataFrame:
    """`checks.run_checks` of every file, run in the executors (one task per file), as
    `findings.SCHEMA`; computed at once. A naive `as_of` is taken as UTC."""
    options = {"paths": json.dumps(_checked(paths)), "version": version}
    options["admins"] = json.dumps(list(admins))
    if as_of is not None:
        utc = as_of.replace(tzinfo=dt.UTC) if as_of.tzinfo is None else as_of.astimezone(dt.UTC)
        options["as_of"] = utc.isoformat()
    if default_domain:
        options["default_domain"] = default_domain
    return computed(_load(spark, CyrusFindingsSource, options))


def fleet_sharing(
    spark: SparkSession,
    paths: Sequence[str | Path],
    admins: Sequence[str] = checks.DEFAULT_ADMINS,
    default_domain: str | None = None,
) -> DataFrame:
    """`checks.sharing_report` of every file (`SHARING`, with ``file``), not pseudonymised;
    computed at once."""
    options = {"paths": json.dumps(_checked(paths)), "admins": json.dumps(list(admins))}
    if default_domain:
        options["default_domain"] = default_domain
    return computed(_load(spark, CyrusSharingSource, options))
