"""James's mail queue view from SSTables, read without the cluster that wrote them.

Operators keep ``nodetool snapshot`` directories and backups, and a forensic read should never
load a production cluster. `read_sstables` hands the SSTables to Cassandra itself: a private
single node (Cassandra 5.0.9 from the Maven jars, on 127.0.0.1, in a temporary directory) gets
each table's ``schema.cql``, then ``nodetool import --copy-data`` of its SSTables (the snapshot is
only read), is read like a live cluster by a full token-range scan, and the tables are written to
a private Parquet copy before the node stops. Cassandra's own read path merges the SSTables of a
table, applies row, range and partition tombstones and drops expired cells, so the state is what
a ``SELECT`` on the cluster returned (docs/james.md weighs this against reading the files in
Python). Expired TTLs are judged when the node reads, not at the snapshot's time.

What a directory may hold: the SSTables of each table in a directory named ``<table>-<id>``
(or ``<table>``), anywhere below it, with the table's ``schema.cql`` beside them, as
``nodetool snapshot`` writes them (``<keyspace>/<table>-<id>/snapshots/<tag>/``) or copied out
of it. Tables other than the mail queue view's are left alone. SSTable file names say their
format and version (``nb-1-big-Data.db``, ``oa-3gz..-big-Data.db``, ``da-..-bti-Data.db``); the
node runs with ``storage_compatibility_mode: NONE`` and reads what Cassandra 5.0's
``BigFormat`` and ``BtiFormat`` accept: big ``ma`` (3.0) up to ``o*``, bti ``d*``. Anything else is
an InputError naming the file before a node starts.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import shown
from mqforensics.systems.james.schema import (
    BROWSE_START_TABLE,
    DELETED_TABLE,
    ENQUEUED_TABLES,
    EVENT_STORE_TABLE,
    TABLE_COLUMNS,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import SparkSession

    from mqforensics.sources.cassandra_connection import CassandraEndpoint
    from mqforensics.systems.james.frames import JamesState

# The keyspace the private node holds the tables in.
PRIVATE_KEYSPACE = "offline_snapshot"
_REQUIRED = (DELETED_TABLE, BROWSE_START_TABLE, EVENT_STORE_TABLE)
_TABLE_DIR = re.compile(r"(?P<table>[A-Za-z0-9_]+?)(?:-[0-9a-f]{32})?")
# <version>-<generation>-<format>-Data.db (Cassandra 3.0 on); 2.x named <ks>-<table>-<v>-<n>.
_DATA = re.compile(r"(?P<version>[a-z]{2})-(?P<generation>[0-9a-z_]+)-(?P<format>[a-z]+)-Data\.db")
_LEGACY = re.compile(r".+-(?P<version>[a-z]{2})-(?P<generation>\d+)-Data\.db")
_RELEASES = {
    "jb": "Cassandra 2.0", "ka": "Cassandra 2.1", "la": "Cassandra 2.2", "lb": "Cassandra 2.2",
    "ma": "Cassandra 3.0", "mb": "Cassandra 3.0.7", "mc": "Cassandra 3.0.8",
    "md": "Cassandra 3.11.4", "me": "Cassandra 3.11.11", "na": "Cassandra 4.0",
    "nb": "Cassandra 4.0", "oa": "Cassandra 5.0", "da": "Cassandra 5.0",
}  # fmt: skip
_CREATE_TABLE = re.compile(
    r"(CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?)(?:\"?\w+\"?\.)?(\"?\w+\"?)", re.IGNORECASE
)


@dataclass(frozen=True)
class TableSSTables:
    """The SSTables of one table: the directory holding them and their ``-Data.db`` files."""

    table: str
    directory: Path
    data_files: tuple[Path, ...]

    @property
    def schema(self) -> Path:
        return self.directory / "schema.cql"


def readable(sstable_format: str, version: str) -> bool:
    """Whether Cassandra 5.0 (``storage_compatibility_mode: NONE``) reads SSTables of this
    format and version: ``BigVersion``/``BtiVersion.isCompatible`` (from ``ma``, or ``da``, up
    to the current major letter)."""
    if sstable_format == "big":
        return version >= "ma" and version[0] <= "o"
    if sstable_format == "bti":
        return version >= "da" and version[0] <= "d"
    return False


def format_of(data_file: Path) -> tuple[str, str]:
    """(format, version) of an SSTable from its ``-Data.db`` file name."""
    match = _DATA.fullmatch(data_file.name)
    if match:
        return match["format"], match["version"]
    legacy = _LEGACY.fullmatch(data_file.name)
    return ("big", legacy["version"]) if legacy else ("unknown", "??")


def locate(directory: Path) -> dict[str, TableSSTables]:
    """The SSTables of each mail queue view table below `directory`, keyed by table (the
    enqueued table under ``enqueued`` too); an InputError for a missing table or a file of a
    version Cassandra 5.0 cannot read, a ConfigError for a table found in two places."""
    if not directory.is_dir():
        raise InputError(
            f"SSTable directory {shown(directory)} does not exist or is not a directory"
        )
    holders: dict[str, list[Path]] = {}
    for data_file in sorted(directory.rglob("*-Data.db")):
        table_dir = _table_directory(data_file.parent)
        match = _TABLE_DIR.fullmatch(table_dir.name)
        table = match["table"].lower() if match else ""
        if table in TABLE_COLUMNS:
            holders.setdefault(table, [])
            if data_file.parent not in holders[table]:
                holders[table].append(data_file.parent)
    found: dict[str, TableSSTables] = {}
    for table, places in holders.items():
        if len(places) > 1:
            raise ConfigError(
                f"{shown(directory)} holds SSTables of {table} in {shown(places[0])} and "
                f"{shown(places[1])}: point "
                "at one snapshot (<table>-<id>/snapshots/<tag>) or one copy of it"
            )
        files = tuple(sorted(places[0].glob("*-Data.db")))
        found[table] = TableSSTables(table, places[0], files)
    enqueued = [found[t] for t in ENQUEUED_TABLES if t in found]
    missing = [t for t in _REQUIRED if t not in found]
    if not enqueued:
        missing.insert(0, " or ".join(ENQUEUED_TABLES))
    if missing:
        raise InputError(
            f"{shown(directory)} holds no SSTables of table(s) {', '.join(missing)} (expected "
            "<table>-<id>/ directories of *-Data.db files, as nodetool snapshot writes them)"
        )
    if len(enqueued) > 1:
        raise ConfigError(
            f"{shown(directory)} holds SSTables of both {enqueued[0].table} and "
            f"{enqueued[1].table}; "
            "give the directory of one James version's tables"
        )
    for tables in found.values():
        _check(tables)
    return {**found, "enqueued": enqueued[0]}


def _table_directory(holder: Path) -> Path:
    """The ``<table>-<id>`` directory of SSTables in `holder`: itself, or the table's own
    directory for ``snapshots/<tag>/`` and ``backups/``."""
    if holder.parent.name == "snapshots":
        return holder.parent.parent
    if holder.name == "backups":
        return holder.parent
    return holder


def _check(tables: TableSSTables) -> None:
    for data_file in tables.data_files:
        sstable_format, version = format_of(data_file)
        if not readable(sstable_format, version):
            release = _RELEASES.get(version, "an unknown version")
            raise InputError(
                f"{shown(data_file)}: SSTable format {sstable_format!r} version {version!r} "
                f"({release}) cannot be read by Cassandra 5.0 (it reads big ma..oa, Cassandra "
                "3.0 to 5.0, and bti da); upgrade the SSTables with nodetool upgradesstables"
            )
    if not tables.schema.is_file():
        raise InputError(
            f"{shown(tables.directory)}: no schema.cql beside the SSTables of {tables.table} "
            "(nodetool snapshot writes one; copy it from a snapshot of the same table)"
        )


def versions(found: dict[str, TableSSTables]) -> str:
    """The SSTables' formats and versions, counted, for the state's notes."""
    counts: dict[str, int] = {}
    for key, tables in found.items():
        if key == "enqueued":
            continue
        for data_file in tables.data_files:
            name = "/".join(format_of(data_file))
            counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))


def taken_at(found: dict[str, TableSSTables]) -> tuple[dt.datetime, str]:
    """When the snapshot was taken: the newest ``created_at`` of its ``manifest.json`` files
    (nodetool snapshot writes them), else the newest modification time of the SSTables."""
    created = []
    for tables in found.values():
        manifest = tables.directory / "manifest.json"
        if manifest.is_file():
            try:
                text = json.loads(manifest.read_text())["created_at"]
                created.append(dt.datetime.fromisoformat(str(text)).astimezone(dt.UTC))
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(
                    f"{manifest}: expected nodetool's manifest with created_at ({exc})"
                ) from None
    if created:
        return max(created), "created_at of the snapshot's manifest.json"
    newest = max(f.stat().st_mtime for t in found.values() for f in t.data_files)
    return dt.datetime.fromtimestamp(newest, dt.UTC), "the newest modification time of the SSTables"


def private_schema(tables: TableSSTables) -> list[str]:
    """The statements of a table's ``schema.cql`` with the table moved to PRIVATE_KEYSPACE."""
    statements = [s.strip() for s in tables.schema.read_text().split(";") if s.strip()]
    moved = []
    for statement in statements:
        if _CREATE_TABLE.match(statement):
            statement = _CREATE_TABLE.sub(rf"\g<1>{PRIVATE_KEYSPACE}.\g<2>", statement, count=1)
        elif not statement.upper().startswith("ALTER TABLE"):
            continue  # only the table and its dropped columns matter here
        else:
            statement = re.sub(
                r"(ALTER\s+TABLE\s+)(?:\"?\w+\"?\.)?", rf"\g<1>{PRIVATE_KEYSPACE}.", statement,
                count=1, flags=re.IGNORECASE,
            )  # fmt: skip
        moved.append(statement)
    if not moved:
        raise InputError(f"{shown(tables.schema)}: no CREATE TABLE statement")
    return moved


def read_sstables(
    spark: SparkSession, directory: Path, as_of: dt.datetime | None = None
) -> JamesState:
    """The James state held by the SSTables below `directory` (see the module docstring),
    judged at `as_of` (default: when the snapshot was taken)."""
    from mqforensics.services import cassandra
    from mqforensics.services.process import ServerDir, stop
    from mqforensics.sources.cassandra_connection import CassandraEndpoint
    from mqforensics.sources.cassandra_scan import read_table
    from mqforensics.systems.james.live import LiveOptions, read_live
    from mqforensics.systems.james.snapshot import read_snapshot, write_parquet_snapshot

    directory = Path(directory)
    found = locate(directory)
    when, origin = taken_at(found)
    if as_of is not None:
        when = as_of if as_of.tzinfo else as_of.replace(tzinfo=dt.UTC)
        origin = "the as_of argument"
    work = Path(tempfile.mkdtemp(prefix="mqf-sstables-"))  # private: the queue's addresses
    atexit.register(shutil.rmtree, work, True)
    server = ServerDir(work / "cassandra")
    server.reset()
    tables = {key: t for key, t in found.items() if key != "enqueued"}
    try:
        # The JDK's own JIT: this node may read millions of rows, where C2's code pays for itself.
        info = cassandra.start(
            server, settings="storage_compatibility_mode: NONE\n", default_jit=True
        )
        endpoint = CassandraEndpoint((info["host"],), info["port"], info["username"],
                                     info["password"])  # fmt: skip
        _create_schema(endpoint, tables.values())
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda t: _import(info, t), tables.values()))
        options = LiveOptions(keyspace=PRIVATE_KEYSPACE, mode="scan", consistency="ONE")
        state = read_live(spark, endpoint, options, as_of=when)
        events = read_table(spark, endpoint, PRIVATE_KEYSPACE, EVENT_STORE_TABLE)
        write_parquet_snapshot(state, events, work / "parquet")
    finally:
        stop(server, grace=0)  # its data is a throwaway copy: no clean shutdown needed
        shutil.rmtree(server.path, ignore_errors=True)
    result = read_snapshot(spark, work / "parquet", as_of=when)
    enqueued = found["enqueued"].table
    result.source = f"sstables {directory} ({enqueued})"
    result.notes = [
        f"{t.table} from {len(t.data_files)} SSTable(s) in {t.directory}" for t in tables.values()
    ] + [
        f"read by a private Cassandra {cassandra.VERSION} node: {versions(found)}",
        f"as_of {when.isoformat()} from {origin}",
    ]
    return result


def _create_schema(endpoint: CassandraEndpoint, tables: Iterable[TableSSTables]) -> None:
    """The tables in the private keyspace, with compaction off: the import is then checked by
    counting the SSTables the node took."""
    from mqforensics.sources.cassandra_connection import close_cluster

    cluster, session = endpoint.connect()
    try:
        session.execute(
            f"CREATE KEYSPACE {PRIVATE_KEYSPACE} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        for table in tables:
            for statement in private_schema(table):
                session.execute(statement, timeout=60)
            session.execute(
                f"ALTER TABLE {PRIVATE_KEYSPACE}.{table.table} WITH compaction = "
                "{'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}",
                timeout=60,
            )
    finally:
        close_cluster(cluster)


def _import(info: dict, tables: TableSSTables) -> None:
    """``nodetool import --copy-data`` of one table; an InputError if the node took none of
    its SSTables (import skips what it cannot load and still succeeds)."""
    from mqforensics.services import cassandra

    cassandra.nodetool(
        info, "import", "--copy-data", PRIVATE_KEYSPACE, tables.table, str(tables.directory)
    )
    data = Path(info["log"]).parents[1] / "data" / "data" / PRIVATE_KEYSPACE
    imported = [f for d in data.glob(f"{tables.table}-*") for f in d.glob("*-Data.db")]
    if len(imported) < len(tables.data_files):
        raise InputError(
            f"{shown(tables.directory)}: Cassandra imported {len(imported)} of the "
            f"{len(tables.data_files)} SSTable(s) of {tables.table} (see its log)"
        )
