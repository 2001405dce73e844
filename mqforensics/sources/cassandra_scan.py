"""Spark data source ``mqf_cassandra``: a full scan of one CQL table, split by token range.

Each Spark partition reads one slice of the Murmur3 token ring with
``SELECT ... WHERE token(pk) > lo AND token(pk) <= hi``, so the table is read in parallel and
every Cassandra partition exactly once, including partitions nobody knows the key of (which is
what forensic scans are for). Options:

``hosts``, ``port``, ``username``, ``password``, ``local_dc`` (see CassandraEndpoint),
``keyspace``, ``table`` (required), ``splits`` (token ranges; default: one per 64 MiB of the
table by Cassandra's own ``system.size_estimates``, at least 2, or 16 when there is no estimate
yet), ``consistency`` (default ``LOCAL_QUORUM``), ``page_size`` (default 5000), ``columns``
(comma-separated subset).

Rows reach Spark as Arrow record batches (`cql_arrow`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError, ServerUnavailable
from mqforensics.sources.cassandra_connection import CassandraEndpoint, close_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
RING = 2**64
SPLIT_BYTES = 64 << 20
MIN_SPLITS = 2
DEFAULT_SPLITS = 16  # when Cassandra has no size estimate for the table yet


@dataclass(frozen=True)
class TableColumn:
    name: str
    kind: str  # partition_key, clustering, static, regular
    position: int
    cql_type: str


@dataclass
class TokenRange(InputPartition):
    """Tokens in (lo, hi]; the first range also includes MIN_TOKEN itself."""

    lo: int
    hi: int

    @property
    def includes_lo(self) -> bool:
        return self.lo == MIN_TOKEN


def token_ranges(splits: int) -> list[TokenRange]:
    """`splits` contiguous ranges covering the whole Murmur3 ring exactly once."""
    if splits < 1:
        raise ConfigError("splits must be at least 1")
    span = MAX_TOKEN - MIN_TOKEN
    bounds = [MIN_TOKEN + span * i // splits for i in range(splits)] + [MAX_TOKEN]
    return [TokenRange(bounds[i], bounds[i + 1]) for i in range(splits)]


def table_columns(session: Any, keyspace: str, table: str) -> list[TableColumn]:
    """Columns in ``SELECT *`` order: partition key, clustering, then the rest by name."""
    keyspaces = {
        row.keyspace_name
        for row in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
    }
    if keyspace not in keyspaces:
        raise InputError(
            f"keyspace {keyspace!r} does not exist (found: {', '.join(sorted(keyspaces))})"
        )
    rows = list(
        session.execute(
            "SELECT column_name, kind, position, type FROM system_schema.columns "
            "WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
    )
    if not rows:
        tables = sorted(
            row.table_name
            for row in session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
            )
        )
        raise InputError(
            f"table {keyspace}.{table} does not exist "
            f"(tables in {keyspace}: {', '.join(tables) or 'none'})"
        )
    order = {"partition_key": 0, "clustering": 1, "static": 2, "regular": 2}
    columns = [TableColumn(r.column_name, r.kind, r.position, r.type) for r in rows]
    return sorted(
        columns, key=lambda c: (order[c.kind], c.position if order[c.kind] < 2 else 0, c.name)
    )


def user_types(session: Any, keyspace: str) -> dict[str, list[tuple[str, str]]]:
    rows = session.execute(
        "SELECT type_name, field_names, field_types FROM system_schema.types "
        "WHERE keyspace_name = %s",
        (keyspace,),
    )
    return {r.type_name: list(zip(r.field_names, r.field_types, strict=True)) for r in rows}


def splits_for(estimates: list[tuple[int, int, int, int]]) -> int:
    """Token-range splits for a table from its ``system.size_estimates`` rows
    (range_start, range_end, partitions_count, mean_partition_size).

    A node only estimates the ranges it owns, so the bytes are scaled up by the share of the
    ring those ranges cover. No rows, or nothing estimated yet: `DEFAULT_SPLITS`.
    """
    covered = sum((end - start) % RING or RING for start, end, _, _ in estimates)
    size = sum(count * mean for _, _, count, mean in estimates)
    if not covered or not size:
        return DEFAULT_SPLITS
    whole = size * RING / min(covered, RING)
    return max(MIN_SPLITS, -(-int(whole) // SPLIT_BYTES))


def estimated_splits(session: Any, keyspace: str, table: str) -> int:
    """`splits_for` the estimates of the node `session` asks; `DEFAULT_SPLITS` if unreadable."""
    try:
        rows = session.execute(
            "SELECT range_start, range_end, partitions_count, mean_partition_size "
            "FROM system.size_estimates WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
        estimates = [(int(r[0]), int(r[1]), int(r[2] or 0), int(r[3] or 0)) for r in rows]
    except Exception:  # an estimate is an optimisation: without one, the default applies
        return DEFAULT_SPLITS
    return splits_for(estimates)


def positive_count(text: str, option: str) -> int:
    """A data source option that must be a positive integer (a ConfigError naming it if not)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise ConfigError(f"option {option!r} must be a positive integer, not {text!r}")
    return int(text)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class CassandraScanSource(DataSource):
    """``spark.read.format("mqf_cassandra")``: token-range scan of one table."""

    @classmethod
    def name(cls) -> str:
        return "mqf_cassandra"

    def _target(self) -> tuple[str, str]:
        keyspace, table = self.options.get("keyspace"), self.options.get("table")
        if not keyspace or not table:
            raise ConfigError("options 'keyspace' and 'table' are required")
        return keyspace, table

    def schema(self) -> str:
        from mqforensics.sources import cql_types

        keyspace, table = self._target()
        endpoint = CassandraEndpoint.from_options(self.options)
        cluster, session = endpoint.connect(schema_metadata=False)
        try:
            columns = _selected(table_columns(session, keyspace, table), self.options)
            udts = user_types(session, keyspace)
        finally:
            close_cluster(cluster)
        return ", ".join(
            f"`{c.name}` {cql_types.spark_type(cql_types.parse(c.cql_type), udts)}" for c in columns
        )

    def reader(self, schema: Any) -> CassandraScanReader:
        keyspace, table = self._target()
        endpoint = CassandraEndpoint.from_options(self.options)
        cluster, session = endpoint.connect(schema_metadata=False)
        try:
            columns = {c.name: c for c in table_columns(session, keyspace, table)}
            udts = user_types(session, keyspace)
            given = self.options.get("splits")
            if given:
                splits = positive_count(given, "splits")
            else:
                splits = estimated_splits(session, keyspace, table)
        finally:
            close_cluster(cluster)
        # read() uses it in the executors; a bad value fails here, on the driver, first.
        positive_count(self.options.get("page_size", "5000"), "page_size")
        names = [f.name for f in schema]
        missing = [n for n in names if n not in columns]
        if missing:
            raise InputError(f"{keyspace}.{table} has no column(s) {', '.join(missing)}")
        partition_key = [
            c.name
            for c in sorted(
                (c for c in columns.values() if c.kind == "partition_key"), key=lambda c: c.position
            )
        ]
        return CassandraScanReader(
            dict(self.options),
            keyspace,
            table,
            [(n, columns[n].cql_type) for n in names],
            partition_key,
            udts,
            splits,
        )


def _selected(columns: list[TableColumn], options: Any) -> list[TableColumn]:
    wanted = options.get("columns")
    if not wanted:
        return columns
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    by_name = {c.name: c for c in columns}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise InputError(f"no column(s) {', '.join(missing)}; columns: {', '.join(by_name)}")
    return [by_name[n] for n in names]


class CassandraScanReader(DataSourceReader):
    """Planned once with the table's column types; `read` runs in Spark's Python workers."""

    def __init__(
        self,
        options: dict[str, str],
        keyspace: str,
        table: str,
        columns: list[tuple[str, str]],
        partition_key: list[str],
        udts: dict[str, list[tuple[str, str]]],
        splits: int = DEFAULT_SPLITS,
    ) -> None:
        self.options = options
        self.keyspace = keyspace
        self.table = table
        self.columns = columns
        self.partition_key = partition_key
        self.udts = udts
        self.splits = splits

    def partitions(self) -> list[TokenRange]:
        return token_ranges(self.splits)

    def read(self, partition: TokenRange) -> Iterator[Any]:  # type: ignore[override]
        from cassandra import ConsistencyLevel, OperationTimedOut, ReadTimeout, Unavailable
        from cassandra.query import SimpleStatement

        from mqforensics.sources.cql_arrow import BatchMaker, pages, selector

        reads = [selector(_quote(n), t) for n, t in self.columns]
        read_types = [(n, t) for (n, _), (_, t) in zip(self.columns, reads, strict=True)]
        maker = BatchMaker(read_types, self.udts)
        key = ", ".join(_quote(n) for n in self.partition_key)
        lower = ">=" if partition.includes_lo else ">"
        endpoint = CassandraEndpoint.from_options(self.options)
        session = worker_session(endpoint)
        try:
            query = (
                f"SELECT {', '.join(expression for expression, _ in reads)} "
                f"FROM {_quote(self.keyspace)}.{_quote(self.table)} "
                f"WHERE token({key}) {lower} %s AND token({key}) <= %s"
            )
            level = self.options.get("consistency", "LOCAL_QUORUM").upper()
            if not hasattr(ConsistencyLevel, level):
                raise ConfigError(f"unknown consistency level {level!r}")
            statement = SimpleStatement(
                query,
                fetch_size=positive_count(self.options.get("page_size", "5000"), "page_size"),
                consistency_level=getattr(ConsistencyLevel, level),
            )
            try:
                yield from maker.page_batches(
                    pages(session, statement, (partition.lo, partition.hi))
                )
            except (OperationTimedOut, ReadTimeout, Unavailable) as exc:
                raise ServerUnavailable(
                    f"Cassandra at {endpoint.where} stopped answering while reading "
                    f"{self.keyspace}.{self.table} tokens ({partition.lo}, {partition.hi}]: "
                    f"{type(exc).__name__}"
                ) from None
            except Exception as exc:
                if type(exc).__name__ in (
                    "NoHostAvailable",
                    "ConnectionShutdown",
                    "ConnectionException",
                ):
                    raise ServerUnavailable(
                        f"Cassandra at {endpoint.where} went away while reading "
                        f"{self.keyspace}.{self.table} tokens ({partition.lo}, {partition.hi}]"
                    ) from None
                raise
        except BaseException:
            _drop_worker_session(endpoint)
            raise


# Spark reuses Python workers across tasks (spark.python.worker.reuse), so one connection per
# worker process and endpoint serves every token range that worker reads.
_WORKER_SESSIONS: dict[CassandraEndpoint, tuple[Any, Any]] = {}


def worker_session(endpoint: CassandraEndpoint) -> Any:
    if endpoint not in _WORKER_SESSIONS:
        import atexit

        # Readers take values by position: plain tuples spare a named tuple per row.
        cluster, session = endpoint.connect(schema_metadata=False, tuples=True)
        _WORKER_SESSIONS[endpoint] = (cluster, session)
        atexit.register(close_cluster, cluster)
    return _WORKER_SESSIONS[endpoint][1]


def _drop_worker_session(endpoint: CassandraEndpoint) -> None:
    cluster, _ = _WORKER_SESSIONS.pop(endpoint, (None, None))
    if cluster is not None:
        close_cluster(cluster)


def read_table(
    spark: SparkSession,
    endpoint: CassandraEndpoint,
    keyspace: str,
    table: str,
    schema: str | None = None,
    **options: str | int | None,
) -> DataFrame:
    """The whole table `keyspace.table` as a DataFrame (see module docstring for options).

    `schema` (DDL of the columns read, as the source would give them): for a caller that knows
    the table, so Spark need not ask the source for it (a Cassandra session to open on the
    driver); the column types are still read from Cassandra when the scan is planned."""
    reader = spark.read.format(CassandraScanSource.name())
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in {**endpoint.to_options(), **options}.items():
        if value is not None:  # not given: the source's default
            reader = reader.option(key, str(value))
    return reader.option("keyspace", keyspace).option("table", table).load()
