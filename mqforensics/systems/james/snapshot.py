"""James mail queue state from a directory of table exports (cqlsh CSV or Spark Parquet).

An admin exports each table of the mail queue view, one file per table, into one directory:

- ``cqlsh -e "COPY apache_james.<table> TO '<table>.csv' WITH HEADER=true"`` (cqlsh's default
  CSV dialect: ``,`` separator, ``"`` quote, ``\\`` escape, empty field = null), also split by
  ``MAXOUTPUTSIZE=N``: ``<table>.csv`` with the header and N rows, then ``<table>.csv.1``,
  ``<table>.csv.2``, ... of N rows each and no header (cqlshlib/copyutil.py, ExportWriter), and
  written with other ``COPY`` options when ``cqlsh_copy.json`` records them (copy_options.py),
  or
- Parquet as Spark writes a table: ``<table>.parquet`` (a file or a directory of part files),
  or a directory ``<table>/`` of part files (``df.write.parquet(".../<table>")``, with or
  without ``_SUCCESS``, hive-style partition folders too): Cassandra's lower-case column names,
  uuids as strings, tuples as structs ``_1, _2, _3``, maps of binary.

Tables: exactly one of ``enqueuedmailsv4`` / ``enqueuedmailsv3`` (James < 3.7), and
``deletedmailsv2``, ``browsestart``, ``eventstore``; ``contentstart`` is optional (it does not
exist before James 3.7, JAMES-3601). A table present in two layouts is a ConfigError.

The instant the state is judged at (`as_of`) is, in this order: the `as_of` argument;
``taken_at`` of ``snapshot.json`` in the directory (``{"taken_at": "2026-11-01T10:00:00Z"}``,
ISO-8601 with a UTC offset), which `write_parquet_snapshot` writes; else the newest modification
time of the export files (a copy may have reset it, so a state says which one it used in
``notes``).

CSV files are read by the Python data source ``mqf_cqlsh_csv`` in byte ranges of
``chunk_bytes`` (64 MiB), so a table of millions of rows is parsed in parallel by Spark's Python
workers and never collected. That split is exact because cqlsh writes one line per row: its text
formatter escapes every control character, line breaks included (cqlsh_values.py). A bad field
raises InputError naming the file, the line and the column; line numbers are counted only then.

Names are bytes (docs/filenames.md): a snapshot directory or a part file whose name is not valid
UTF-8 is read like any other (Spark cannot open such a name: `parquet_footer.read` then reads the
table through Python), and every message, note and source names it by its escaped text
(`filenames.shown`); the CSV reader's options carry that text and open exactly its bytes
(`filenames.fs_path`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from mqforensics import errors
from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import fs_path, shown
from mqforensics.sources import parquet_footer
from mqforensics.spark import local_frame
from mqforensics.systems.james import config_history, dsbulk
from mqforensics.systems.james.copy_options import CopyOptions, read_copy_options
from mqforensics.systems.james.dsbulk import DsbulkSource
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.schema import (
    BROWSE_START,
    BROWSE_START_TABLE,
    CONTENT_START,
    CONTENT_START_TABLE,
    DELETED_TABLE,
    ENQUEUED_TABLES,
    EVENT_STORE_TABLE,
    TABLE_COLUMNS,
)
from mqforensics.systems.james.table_source import CANONICAL, TableSource

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

SNAPSHOT_FILE = "snapshot.json"
CHUNK_BYTES = 64 * 1024 * 1024

_REQUIRED = (DELETED_TABLE, BROWSE_START_TABLE, EVENT_STORE_TABLE)
# Tables of a handful of rows (a queue's starts, the configuration events), read on the driver
# from a Parquet export of at most this many rows (`parquet_footer.small_rows`).
_SMALL_TABLES = (BROWSE_START_TABLE, CONTENT_START_TABLE, EVENT_STORE_TABLE)
SMALL_TABLE_ROWS = 10_000


@dataclass(frozen=True)
class TableFile:
    """One export of a table: a cqlsh CSV file (with the files cqlsh split it into), or a
    Parquet file or directory."""

    table: str
    path: Path
    # "csv" (cqlsh), "parquet", "dsbulk-csv" / "dsbulk-json" (`path` the table's directory,
    # `parts` its files) or "empty" (a table's empty directory: DSBulk's unload of no rows)
    kind: str
    # A CSV export split by cqlsh (MAXOUTPUTSIZE): ``<table>.csv.1``, ``.2``, ... after `path`,
    # each without the header line; or the output files of a DSBulk unload.
    parts: tuple[Path, ...] = ()
    # The COPY options a CSV export was written with (``cqlsh_copy.json``; cqlsh's defaults).
    copy: CopyOptions = dataclass_field(default_factory=CopyOptions)

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.path, *self.parts)

    @property
    def label(self) -> str:
        if self.kind.startswith("dsbulk-"):
            count = len(self.parts)
            return f"{self.path.name}/ (DSBulk {self.kind[7:].upper()}, {count} file(s))"
        if self.kind == "empty":
            return f"{self.path.name}/ (empty: DSBulk's unload of no rows)"
        split = f" and {len(self.parts)} split file(s) {self.path.name}.1.." if self.parts else ""
        return f"{self.path.name}{split}"


def read_snapshot(
    spark: SparkSession, directory: Path, as_of: dt.datetime | None = None
) -> JamesState:
    """The James state held by a directory of table exports (see the module docstring).

    Frames are lazy: CSV rows are parsed when a frame is computed, so a malformed line raises its
    InputError (file, line, column) at that action; the file set, headers, Parquet schemas and
    the configuration history are checked here.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(
            f"snapshot directory {shown(directory)} does not exist or is not a directory"
        )
    files = locate_tables(directory)
    enqueued = files["enqueued"]
    assert enqueued is not None
    spark.dataSource.register(CqlshCsvSource)
    spark.dataSource.register(DsbulkSource)

    notes = [f"{f.table} from {f.label}" for f in files.values() if f is not None]
    content = files[CONTENT_START_TABLE]
    if content is None:
        notes.append("no contentstart table (James before 3.7): content_start is empty")
    # Each table read in a thread of its own: reading a file's schema, and the queues' starts
    # (one row per queue, read now and held in the plan: the checks join them with the view
    # about twenty times), are small Spark jobs and driver work that overlap.
    held = {BROWSE_START_TABLE: BROWSE_START, CONTENT_START_TABLE: CONTENT_START}

    def read(found: TableFile) -> DataFrame:
        if found.kind == "parquet" and found.table in _SMALL_TABLES:
            # Read on the driver when its columns are plain: no Spark job at all.
            ddl = CANONICAL[found.table]
            columns = {f.name: f.dataType.simpleString() for f in _schema(ddl).fields}
            rows = parquet_footer.small_rows(found.path, columns, SMALL_TABLE_ROWS)
            if rows is not None:
                return local_frame(spark, rows, ddl)
        frame = _read_table(spark, found)
        return _held(spark, frame, held[found.table]) if found.table in held else frame

    order = ("enqueued", DELETED_TABLE, BROWSE_START_TABLE, EVENT_STORE_TABLE, CONTENT_START_TABLE)
    tables = [f for f in (files[key] for key in order) if f is not None]
    with ThreadPoolExecutor(max_workers=len(tables)) as pool:
        frames = dict(zip([f.table for f in tables], pool.map(read, tables), strict=True))
    frames["enqueued"] = frames[enqueued.table]
    if content is None:
        frames[CONTENT_START_TABLE] = local_frame(spark, [], CONTENT_START)

    from pyspark.sql import functions as F

    version = enqueued.table[-2:]
    entries = frames["enqueued"].withColumn("table_version", F.lit(version))
    event_file = files[EVENT_STORE_TABLE]
    assert event_file is not None
    try:
        history = config_history.history_frame(
            spark, frames[EVENT_STORE_TABLE], event_file.path.name
        )
    except Exception as exc:
        raise _typed(exc) from None

    when, origin = _as_of(directory, [f for f in files.values() if f is not None], as_of)
    notes.append(f"as_of {when.isoformat()} from {origin}")
    return JamesState(
        entries=entries,
        deleted=frames[DELETED_TABLE],
        browse_start=frames[BROWSE_START_TABLE],
        content_start=frames[CONTENT_START_TABLE],
        config_history=history,
        as_of=when,
        source=f"snapshot {shown(directory)} ({enqueued.table})",
        notes=notes,
        table=enqueued.table,
        rereadable=all(f.kind == "parquet" for f in files.values() if f is not None),
    )


def _held(spark: SparkSession, frame: DataFrame, ddl: str) -> DataFrame:
    """The rows of a small table (a queue's start) as a `local_frame`."""
    try:
        rows = frame.collect()
    except Exception as exc:
        raise _typed(exc) from None
    return local_frame(spark, [tuple(r) for r in rows], ddl)


def write_parquet_snapshot(state: JamesState, event_store: DataFrame, directory: Path) -> None:
    """Write `state` (and the raw EVENT_STORE frame) as a Parquet export plus ``snapshot.json``.

    The layout is what `read_snapshot` reads: ``<table>.parquet`` directories with Cassandra's
    column names, the enqueued table named after the entries' `table_version` (``v4`` when there
    are no entries). Blobs are not part of a table export and are not written. Refuses to
    overwrite an existing export.
    """
    directory = Path(directory)
    versions = [r[0] for r in state.entries.select("table_version").distinct().limit(2).collect()]
    if len(versions) > 1:
        raise ConfigError("entries mix table versions v3 and v4; a snapshot holds one table")
    version = versions[0] if versions else "v4"
    if f"enqueuedmails{version}" not in ENQUEUED_TABLES:
        raise ConfigError(f"entries have table_version {version!r}, not 'v4' or 'v3'")
    targets = {
        f"enqueuedmails{version}": state.entries.drop("table_version"),
        DELETED_TABLE: state.deleted,
        BROWSE_START_TABLE: state.browse_start,
        CONTENT_START_TABLE: state.content_start,
        EVENT_STORE_TABLE: event_store,
    }
    existing = [
        name
        for table in targets
        for name in (f"{table}.parquet", f"{table}.csv")
        if (directory / name).exists()
    ] + [SNAPSHOT_FILE] * (directory / SNAPSHOT_FILE).exists()
    if existing:
        raise ConfigError(
            f"{shown(directory)} already holds {', '.join(existing)}; not overwriting"
        )
    directory.mkdir(parents=True, exist_ok=True)
    for table, frame in targets.items():
        columns = [name for name, _ in TABLE_COLUMNS[table]]
        frame.select(*columns).write.parquet(str(directory / f"{table}.parquet"))
    taken_at = state.as_of.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    (directory / SNAPSHOT_FILE).write_text(json.dumps({"taken_at": taken_at}) + "\n")


def locate_tables(directory: Path) -> dict[str, TableFile | None]:
    """The export file of every table; InputError for missing tables, ConfigError for doubles."""

    def find(table: str) -> TableFile | None:
        csv_path, parquet_path = directory / f"{table}.csv", directory / f"{table}.parquet"
        # Spark's own layout: a directory named after the table, no extension.
        spark_dir = directory / table
        present = [p for p in (csv_path, parquet_path, spark_dir) if p.exists()]
        if len(present) > 1:
            names = " and ".join(p.name + ("/" if p.is_dir() else "") for p in present)
            raise ConfigError(f"{shown(directory)} holds both {names} for table {table}; keep one")
        parts = _split_parts(directory, csv_path)
        if csv_path.exists():
            return TableFile(table, csv_path, "csv", parts, copy)
        if parts:
            raise InputError(
                f"{shown(directory)} holds {shown(parts[0].name)} but not {csv_path.name}: the "
                "first file of a split cqlsh export (the one with the header) is missing"
            )
        if parquet_path.exists():
            return TableFile(table, parquet_path, "parquet")
        if spark_dir.is_dir():
            kind = dsbulk.export_format(spark_dir)
            if kind is not None:
                return TableFile(
                    table, spark_dir, f"dsbulk-{kind}", tuple(dsbulk.data_files(spark_dir))
                )
            if not any(spark_dir.iterdir()):
                return TableFile(table, spark_dir, "empty")
            return TableFile(table, spark_dir, "parquet")
        if spark_dir.exists():
            raise InputError(
                f"{shown(spark_dir)}: a table export must be <table>.csv, <table>.parquet or a "
                "directory <table>/ of Parquet, DSBulk CSV or DSBulk JSON files"
            )
        return None

    copy = read_copy_options(directory)
    enqueued = [f for f in (find(t) for t in ENQUEUED_TABLES) if f is not None]
    found: dict[str, TableFile | None] = {t: find(t) for t in (*_REQUIRED, CONTENT_START_TABLE)}
    missing = [t for t in _REQUIRED if found[t] is None]
    if len(enqueued) > 1:
        raise ConfigError(
            f"{shown(directory)} holds both {enqueued[0].path.name} and {enqueued[1].path.name}; "
            "a snapshot holds exactly one enqueued mails table"
        )
    if not enqueued:
        missing.insert(0, " or ".join(ENQUEUED_TABLES))
    if missing:
        raise InputError(
            f"snapshot directory {shown(directory)} lacks table(s) {', '.join(missing)} "
            "(expected <table>.csv, <table>.parquet or a directory <table>/ of Parquet or "
            "DSBulk files)"
        )
    found["enqueued"] = enqueued[0]
    _check_empty_directories(directory, found)
    return found


def _check_empty_directories(directory: Path, found: dict[str, TableFile | None]) -> None:
    """An empty table directory is what DSBulk leaves for a table without rows; in a snapshot
    that holds no other DSBulk unload it is more likely a copy that lost its files."""
    present = [f for key, f in found.items() if f is not None and key != "enqueued"]
    empty = [f for f in present if f.kind == "empty"]
    if empty and not any(f.kind.startswith("dsbulk-") for f in present):
        raise InputError(
            f"{shown(empty[0].path)}: an empty directory, and no other table in "
            f"{shown(directory)} is a DSBulk unload (DSBulk leaves an empty directory for a "
            "table without rows); the export lost its files?"
        )


def _split_parts(directory: Path, csv_path: Path) -> tuple[Path, ...]:
    """The files cqlsh split a CSV export into after `csv_path` (``COPY ... WITH
    MAXOUTPUTSIZE=N``: ``<file>.1``, ``<file>.2``, ..., N rows each and no header line), in
    order; an InputError when one is missing from the sequence (a part lost in the copy)."""
    prefix = csv_path.name + "."
    numbered = {}
    for entry in directory.iterdir():
        suffix = entry.name[len(prefix) :] if entry.name.startswith(prefix) else ""
        if suffix.isascii() and suffix.isdigit() and not suffix.startswith("0"):
            numbered[int(suffix)] = entry
    if not numbered:
        return ()
    gaps = sorted(set(range(1, max(numbered) + 1)) - set(numbered))
    if gaps:
        raise InputError(
            f"{shown(directory)}: split export {csv_path.name} has "
            f"{csv_path.name}.{max(numbered)} but not {csv_path.name}.{gaps[0]} (cqlsh numbers "
            "its split files from 1 without gaps)"
        )
    return tuple(numbered[n] for n in sorted(numbered))


def check_export(files: dict[str, TableFile | None]) -> None:
    """What can be checked of the export files before Spark starts, cheaply: each CSV file's
    header line, and each Parquet file's magic numbers and footer (`check_parquet`); an
    InputError naming the file otherwise."""
    for found in files.values():
        if found is None:
            continue
        if found.kind == "csv":
            _csv_header(found)
        elif found.kind == "dsbulk-csv":
            _dsbulk_headers(found)
        elif found.kind == "parquet":
            check_parquet(found.path)


PARQUET_MAGIC = b"PAR1"


def check_parquet(path: Path) -> None:
    """`path` (a Parquet file, or a table's directory of part files) looks like Parquet: not
    an empty directory, every data file starting and ending with Parquet's magic number and
    with a footer pyarrow reads (only footers are read). An InputError naming the file says
    what it looks like instead (random bytes, a truncated copy, an empty file). A layout Spark
    reads in a way of its own (partition directories) is left to Spark."""
    if path.is_dir():
        entries = [e for e in sorted(path.iterdir()) if not e.name.startswith((".", "_"))]
        if any(e.is_dir() for e in entries):
            return
        if not entries:
            raise InputError(
                f"{shown(path)}: an empty directory, not a Parquet table (no part files)"
            )
        for entry in entries:
            _check_parquet_file(entry)
    elif path.is_file():
        _check_parquet_file(path)
    else:
        raise InputError(f"{shown(path)}: neither a file nor a directory")


def _check_parquet_file(path: Path) -> None:
    size = path.stat().st_size
    if size == 0:
        raise InputError(f"{shown(path)}: an empty file (0 bytes), not Parquet")
    with open(path, "rb") as stream:
        head = stream.read(len(PARQUET_MAGIC))
        stream.seek(max(0, size - len(PARQUET_MAGIC)))
        tail = stream.read(len(PARQUET_MAGIC))
    if head != PARQUET_MAGIC:
        raise InputError(f"{shown(path)}: not a Parquet file (first bytes {head.hex(' ')})")
    if tail != PARQUET_MAGIC or size < 3 * len(PARQUET_MAGIC):
        raise InputError(
            f"{shown(path)}: a truncated Parquet file: no footer at its end ({size} bytes)"
        )
    try:
        parquet_footer.metadata(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{shown(path)}: a damaged Parquet footer ({_first_line(exc)})") from None


def read_table_export(
    spark: SparkSession, path: Path, table: str, chunk_bytes: int = CHUNK_BYTES
) -> DataFrame:
    """One exported table (``.csv`` from cqlsh or ``.parquet``) as its canonical frame.

    `table` is a key of TABLE_COLUMNS; the frame has the table's canonical schema (schema.py,
    entries without ``table_version``; ``eventstore`` as EVENT_STORE). `chunk_bytes` is the CSV
    partition size.
    """
    path = Path(path)
    if table not in TABLE_COLUMNS:
        raise ConfigError(f"unknown table {table!r}; one of {', '.join(TABLE_COLUMNS)}")
    if path.suffix not in (".csv", ".parquet"):
        raise ConfigError(f"{shown(path.name)}: expected a .csv or .parquet export")
    if not path.exists():
        raise InputError(f"{shown(path)} does not exist")
    spark.dataSource.register(CqlshCsvSource)
    copy = read_copy_options(path.parent) if path.suffix == ".csv" else CopyOptions()
    return _read_table(spark, TableFile(table, path, path.suffix[1:], copy=copy), chunk_bytes)


def _read_table(
    spark: SparkSession, table_file: TableFile, chunk_bytes: int = CHUNK_BYTES
) -> DataFrame:
    if table_file.kind == "csv":
        return _read_csv(spark, table_file, chunk_bytes)
    if table_file.kind == "empty":
        return local_frame(spark, [], CANONICAL[table_file.table])
    if table_file.kind.startswith("dsbulk-"):
        return _read_dsbulk(spark, table_file)
    return _read_parquet(spark, table_file)


def _dsbulk_headers(table_file: TableFile) -> None:
    """Every file of a DSBulk CSV unload starts with the table's column names."""
    expected = [n for n, _ in TABLE_COLUMNS[table_file.table]]
    for path in table_file.parts:
        header = dsbulk.csv_header(path)
        _check_columns(dsbulk.shown(path), header, expected, "header", table_file.table)


def _read_dsbulk(spark: SparkSession, table_file: TableFile) -> DataFrame:
    if table_file.kind == "dsbulk-csv":
        _dsbulk_headers(table_file)
    return (
        spark.read.format(DsbulkSource.name())
        .option("paths", json.dumps([str(p) for p in table_file.parts]))
        .option("format", table_file.kind.removeprefix("dsbulk-"))
        .option("table", table_file.table)
        .load()
    )


def _read_csv(spark: SparkSession, table_file: TableFile, chunk_bytes: int) -> DataFrame:
    header = _csv_header(table_file)
    return (
        spark.read.format(CqlshCsvSource.name())
        .option("path", shown(table_file.path))
        .option("parts", json.dumps([shown(p) for p in table_file.parts]))
        .option("copy", table_file.copy.to_json())
        .option("table", table_file.table)
        .option("header", json.dumps(header))
        .option("chunk_bytes", str(chunk_bytes))
        .load()
    )


def _csv_header(table_file: TableFile) -> list[str]:
    """The column names of a cqlsh CSV file's header line, checked against the table's."""
    import csv

    name = shown(table_file.path.name)
    with open(table_file.path, "rb") as stream:
        first = stream.readline()
    if not first.strip():
        raise InputError(f"{name} line 1: no header line (export with WITH HEADER=true)")
    try:
        text = first.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
        header = next(csv.reader([text], **table_file.copy.dialect()))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{name} line 1: unreadable header ({exc})") from None
    expected = [n for n, _ in TABLE_COLUMNS[table_file.table]]
    _check_columns(name, [h.strip() for h in header], expected, "header")
    return [h.strip() for h in header]


def _check_columns(
    name: str, found: list[str], expected: list[str], what: str, table: str | None = None
) -> None:
    lowered = [f.lower() for f in found]
    missing = [c for c in expected if c not in lowered]
    unexpected = [f for f, low in zip(found, lowered, strict=True) if low not in expected]
    duplicated = sorted({f for f in lowered if lowered.count(f) > 1})
    if missing or unexpected or duplicated:
        problems = []
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        if unexpected:
            problems.append(f"unexpected column(s) {', '.join(unexpected)}")
        if duplicated:
            problems.append(f"repeated column(s) {', '.join(duplicated)}")
        raise InputError(
            f"{name}: {what} {', '.join(found) or '(empty)'} does not match table "
            f"{table or name.split('.')[0]} ({'; '.join(problems)})"
        )


def _read_parquet(spark: SparkSession, table_file: TableFile) -> DataFrame:
    from pyspark.sql import functions as F

    name = table_file.path.name
    try:
        frame = parquet_footer.read(spark, table_file.path)
        found = frame.schema
    except Exception as exc:
        raise InputError(
            f"{shown(table_file.path)}: cannot be read as Parquet ({_first_line(exc)})"
        ) from None
    expected = [n for n, _ in TABLE_COLUMNS[table_file.table]]
    _check_columns(name, [f.name for f in found.fields], expected, "columns")
    canonical = _schema(CANONICAL[table_file.table])
    actual = {f.name.lower(): f for f in found.fields}
    columns = []
    for field in canonical.fields:
        source = actual[field.name]
        if not _same_shape(source.dataType, field.dataType):
            raise InputError(
                f"{name}: column {source.name} has type {source.dataType.simpleString()}, "
                f"expected {field.dataType.simpleString()}"
            )
        columns.append(F.col(f"`{source.name}`").cast(field.dataType).alias(field.name))
    return frame.select(*columns)


def _schema(ddl: str) -> Any:
    from pyspark.sql.types import DataType

    # Parsed without building a frame (classic and Connect sessions alike).
    return DataType.fromDDL(ddl)


def _same_shape(found: DataType, wanted: DataType) -> bool:
    """Equal types, ignoring nullability and struct field names (tuples may be named)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(wanted, StructType):
        return (
            isinstance(found, StructType)
            and len(found.fields) == len(wanted.fields)
            and all(
                _same_shape(a.dataType, b.dataType)
                for a, b in zip(found.fields, wanted.fields, strict=True)
            )
        )
    if isinstance(wanted, ArrayType):
        return isinstance(found, ArrayType) and _same_shape(found.elementType, wanted.elementType)
    if isinstance(wanted, MapType):
        return (
            isinstance(found, MapType)
            and _same_shape(found.keyType, wanted.keyType)
            and _same_shape(found.valueType, wanted.valueType)
        )
    return type(found) is type(wanted)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _typed(exc: Exception) -> Exception:
    """The toolkit error inside a Spark-wrapped exception (or the InputError of a file Spark
    could not read), as its own type; `exc` itself otherwise (`errors.typed`)."""
    return errors.typed(exc) or exc


def _as_of(
    directory: Path, files: list[TableFile], given: dt.datetime | None
) -> tuple[dt.datetime, str]:
    """The instant to judge at and where it came from (see the module docstring)."""
    if given is not None:
        # A naive instant is taken as UTC, like every timestamp of the toolkit.
        utc = given.replace(tzinfo=dt.UTC) if given.tzinfo is None else given.astimezone(dt.UTC)
        return utc, "the as_of argument"
    marker = directory / SNAPSHOT_FILE
    if marker.exists():
        try:
            taken_at = json.loads(marker.read_text(encoding="utf-8"))["taken_at"]
            when = dt.datetime.fromisoformat(str(taken_at))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise InputError(
                f'{marker.name}: expected {{"taken_at": "<ISO-8601 instant with UTC offset>"}} '
                f"({type(exc).__name__}: {_first_line(exc)})"
            ) from None
        if when.tzinfo is None:
            raise InputError(f"{marker.name}: taken_at {taken_at!r} has no UTC offset")
        return when.astimezone(dt.UTC), marker.name
    newest = max(_newest_mtime(path) for f in files for path in f.files)
    return dt.datetime.fromtimestamp(newest, dt.UTC), "the newest modification time of the files"


def _newest_mtime(path: Path) -> float:
    if path.is_dir():
        times = [
            (Path(root) / name).stat().st_mtime
            for root, _, names in os.walk(path)
            for name in names
            if not name.startswith((".", "_"))
        ]
        return max(times, default=path.stat().st_mtime)
    return path.stat().st_mtime


# ---------------------------------------------------------------------------------------------
# The data source: a cqlsh CSV file in byte ranges.


@dataclass
class ByteRange(InputPartition):
    """The rows whose line starts at a byte offset in [start, end) of file `file` (0: the file
    with the header, then the split files in order)."""

    start: int
    end: int
    file: int = 0


class CqlshCsvSource(TableSource):
    """``spark.read.format("mqf_cqlsh_csv")``: one cqlsh ``COPY TO`` CSV file of a James table.

    Options: ``path``, ``table`` (a key of TABLE_COLUMNS), ``header`` (JSON list of the file's
    column names, in file order; checked by the caller), ``chunk_bytes`` (partition size),
    ``parts`` (JSON list of the files cqlsh split the export into after `path`, which have no
    header line; none by default). Files are named by their escaped text (`filenames.shown`).
    The schema is the table's canonical one (schema.py), without ``table_version``.
    """

    @classmethod
    def name(cls) -> str:
        return "mqf_cqlsh_csv"

    def reader(self, schema: Any) -> CqlshCsvReader:
        table = self._table()
        path = self.options.get("path")
        if not path:
            raise ConfigError("option 'path' is required")
        header = json.loads(self.options.get("header") or "null") or [
            n for n, _ in TABLE_COLUMNS[table]
        ]
        from mqforensics.sources.cassandra_scan import positive_count

        chunk_bytes = positive_count(
            self.options.get("chunk_bytes", str(CHUNK_BYTES)), "chunk_bytes"
        )
        parts = json.loads(self.options.get("parts") or "[]")
        copy = CopyOptions.from_json(self.options.get("copy"))
        return CqlshCsvReader([path, *parts], table, header, chunk_bytes, copy)


class CqlshCsvReader(DataSourceReader):
    """Plans byte ranges on the driver; `read` parses one range in a Python worker. `paths`:
    the export's file with the header line, then the split files without one."""

    def __init__(
        self,
        paths: list[str],
        table: str,
        header: list[str],
        chunk_bytes: int,
        copy: CopyOptions | None = None,
    ) -> None:
        if chunk_bytes < 1:
            raise ConfigError("chunk_bytes must be at least 1")
        self.copy = copy or CopyOptions()
        self.paths = paths
        self.table = table
        self.header = [h.lower() for h in header]
        self.chunk_bytes = chunk_bytes

    def partitions(self) -> list[ByteRange]:
        ranges = []
        for index, path in enumerate(self.paths):
            try:
                size = os.path.getsize(fs_path(path))
            except OSError as exc:
                raise InputError(f"{Path(path).name}: cannot be read ({exc.strerror})") from None
            count = max(1, -(-size // self.chunk_bytes))
            ranges += [
                ByteRange(i * self.chunk_bytes, min(size, (i + 1) * self.chunk_bytes), index)
                for i in range(count)
            ]
        return ranges

    def read(self, partition: ByteRange) -> Iterator[tuple]:  # type: ignore[override]
        import csv

        from mqforensics.systems.james.cqlsh_values import is_text, parser_for

        # Python's csv refuses fields over 128 KiB by default; attribute maps can be larger.
        csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
        path = self.paths[partition.file]
        name = Path(path).name
        types = dict(TABLE_COLUMNS[self.table])
        copy = self.copy
        parsers = [
            parser_for(types[column], column, timestamp_format=copy.datetime_format,
                       thousands_sep=copy.thousands_sep)
            for column in self.header
        ]  # fmt: skip
        # With a NULL other than the empty string, an empty text field is the empty string.
        empties = ["" if copy.null and is_text(types[column]) else None for column in self.header]
        order = [self.header.index(column) for column, _ in TABLE_COLUMNS[self.table]]
        width = len(self.header)
        with open(fs_path(path), "rb") as stream:
            if partition.start == 0:
                if partition.file == 0:
                    stream.readline()  # the header line, checked on the driver (split files
                    # have none: their rows start at their first byte)
            else:
                # Hadoop's LineRecordReader rule: a line belongs to the range holding its first
                # byte, so skip the tail of a line that began in the previous range.
                stream.seek(partition.start - 1)
                if stream.read(1) != b"\n":
                    stream.readline()
            offset = stream.tell()
            while offset < partition.end:
                raw = stream.readline()
                if not raw:
                    break
                line_start, offset = offset, offset + len(raw)
                fields = self._fields(raw, line_start, path)
                if fields is None:
                    continue
                if len(fields) != width:
                    raise InputError(
                        f"{name} line {_line_number(path, line_start)}: "
                        f"{len(fields)} field(s), the header has {width}"
                    )
                try:
                    values = [
                        None if field == copy.null else empty if field == "" else parse(field)
                        for parse, empty, field in zip(parsers, empties, fields, strict=True)
                    ]
                except InputError as exc:
                    raise InputError(
                        f"{name} line {_line_number(path, line_start)}: {exc.message}"
                    ) from None
                yield tuple(values[i] for i in order)

    def _fields(self, raw: bytes, line_start: int, path: str) -> list[str] | None:
        """The CSV fields of one line of the file at `path`; None for a blank line."""
        import csv

        name = Path(path).name
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{name} line {_line_number(path, line_start)}: not UTF-8 "
                f"(byte {exc.start + 1} of the line)"
            ) from None
        text = text[:-2] if text.endswith("\r\n") else text.rstrip("\n")
        if not text.strip():
            return None
        try:
            return next(csv.reader([text], **self.copy.dialect()))
        except csv.Error as exc:
            raise InputError(
                f"{name} line {_line_number(path, line_start)}: malformed CSV ({exc}; "
                "cqlsh never writes a line break inside a value)"
            ) from None


def _line_number(path: str, offset: int) -> int:
    """1-based number of the line starting at byte `offset` (only computed for a message)."""
    count = 0
    remaining = offset
    with open(fs_path(path), "rb") as stream:
        while remaining > 0:
            block = stream.read(min(remaining, 1 << 20))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count + 1
