"""Cassandra rows to Arrow record batches, column by column, for the Python data sources.

A Spark Python data source may yield `pyarrow.RecordBatch`es instead of rows; Spark then skips
its own per-row, per-value conversion. Here the driver's rows are gathered into batches,
transposed into columns, and each column converted once: values Arrow takes as the driver
returns them (text, numbers, blobs, timestamps) are passed through untouched, the others go
through the same converters as the row path (`cql_types.converter`), so both paths give the
same values. Arrow types are Spark's own mapping of the `cql_types.spark_type` of each column.

`selector` asks Cassandra for ``uuid``/``timeuuid`` columns as text (``CAST(x AS text)``, the
same canonical form as Python's ``str(UUID)``): the server formats them far faster than the
driver builds a `uuid.UUID` per value for us to turn into a string. `pages` hands out a paged
query's pages while the driver already fetches the next one, and `BatchMaker.page_batches` turns
whole pages into columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mqforensics.sources import cql_types
from mqforensics.sources.arrow_rows import BATCH_ROWS, chunked
from mqforensics.sources.cql_types import CqlType, UdtFields

if TYPE_CHECKING:
    import pyarrow as pa


# Driver values of these types are what Arrow expects for the column's Spark type; naive
# driver timestamps are UTC, which is how Arrow reads a naive datetime for a UTC column.
_PASSED_THROUGH = {
    "ascii", "text", "varchar", "boolean", "tinyint", "smallint", "int", "bigint", "counter",
    "float", "double", "blob", "timestamp",
}  # fmt: skip


# Read as text: Cassandra's text form of these is exactly ``str()`` of the driver's value
# (not so for inet, whose IPv6 text differs, nor decimal, whose exponent form may).
_CAST_TO_TEXT = {"uuid", "timeuuid"}


def selector(quoted_name: str, cql: str) -> tuple[str, str]:
    """(selector, CQL type of what it returns) for reading column `quoted_name` of type `cql`."""
    if cql.strip() in _CAST_TO_TEXT:
        return f"CAST({quoted_name} AS text)", "text"
    return quoted_name, cql


def arrow_type(cql: CqlType, udts: UdtFields | None = None) -> pa.DataType:
    """The Arrow type Spark uses for ``cql_types.spark_type(cql)``."""
    import pyarrow as pa

    udts = udts or {}
    name = cql.name
    if name == "frozen":
        return arrow_type(cql.params[0], udts)
    if name in ("list", "set", "vector"):
        return pa.list_(arrow_type(cql.params[0], udts))
    if name == "map":
        return pa.map_(arrow_type(cql.params[0], udts), arrow_type(cql.params[1], udts))
    if name == "tuple":
        return pa.struct(
            [pa.field(f"_{n}", arrow_type(p, udts)) for n, p in enumerate(cql.params, 1)]
        )
    if name in udts:
        return pa.struct([pa.field(f, arrow_type(cql_types.parse(t), udts)) for f, t in udts[name]])
    scalar = cql_types.spark_type(cql, udts)
    return {
        "string": pa.string(),
        "boolean": pa.bool_(),
        "tinyint": pa.int8(),
        "smallint": pa.int16(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
        "binary": pa.binary(),
    }[scalar]


def column_converter(cql: CqlType, udts: UdtFields | None = None) -> Callable[[list], list]:
    """A function turning one column of driver values into values Arrow takes for its type."""
    bare = cql.params[0] if cql.name == "frozen" else cql
    if bare.name in _PASSED_THROUGH:
        return lambda values: values
    one = cql_types.converter(cql, udts)
    return lambda values: [one(v) for v in values]


class BatchMaker:
    """Turns row tuples with the given (name, CQL type) columns, plus constant string columns
    appended after them, into record batches of the matching Arrow schema."""

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        udts: UdtFields | None = None,
        constants: Sequence[tuple[str, str]] = (),
    ) -> None:
        import pyarrow as pa

        parsed = [cql_types.parse(t) for _, t in columns]
        self.types = [arrow_type(c, udts) for c in parsed]
        self.converters = [column_converter(c, udts) for c in parsed]
        self.constants = list(constants)
        self.schema = pa.schema(
            [pa.field(n, t) for (n, _), t in zip(columns, self.types, strict=True)]
            + [pa.field(n, pa.string()) for n, _ in self.constants]
        )

    def batch(self, rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
        width = len(self.types)
        columns = list(zip(*rows, strict=True)) if rows else [()] * width
        if len(columns) != width:
            raise ValueError(f"rows have {len(columns)} values, the columns are {width}")
        return self.columns_batch([list(values) for values in columns])

    def columns_batch(self, columns: Sequence[list[Any] | pa.Array]) -> pa.RecordBatch:
        """The batch of the given columns (equal lengths, in column order): lists of driver
        values, or Arrow arrays already of the column's type."""
        import pyarrow as pa

        if len(columns) != len(self.types):
            raise ValueError(f"{len(columns)} columns given, the columns are {len(self.types)}")
        arrays = [
            values if isinstance(values, pa.Array) else pa.array(convert(values), type=kind)
            for convert, values, kind in zip(self.converters, columns, self.types, strict=True)
        ]
        count = len(columns[0]) if columns else 0
        arrays += [pa.array([value] * count, type=pa.string()) for _, value in self.constants]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def page_batches(
        self, pages: Iterable[Sequence[Sequence[Any]]], size: int = BATCH_ROWS
    ) -> Iterator[Any]:
        """Record batches of the rows of `pages`, whole pages gathered column by column until
        at least `size` rows (no Python object per row besides the driver's); none for none."""
        width = len(self.types)
        pending: list[list[Any]] = [[] for _ in range(width)]
        held = 0
        for page in pages:
            if not page:
                continue
            for target, values in zip(pending, zip(*page, strict=True), strict=True):
                target.extend(values)
            held += len(page)
            if held >= size:
                yield self.columns_batch(pending)
                pending, held = [[] for _ in range(width)], 0
        if held:
            yield self.columns_batch(pending)

    def batches(self, rows: Iterable[Sequence[Any]], size: int = BATCH_ROWS) -> Iterator[Any]:
        """Record batches of at most `size` rows; none for no rows."""
        return map(self.batch, chunked(rows, size))


def pages(session: Any, statement: Any, parameters: Any = None) -> Iterator[Sequence[Any]]:
    """The pages (lists of rows) of a paged query; the next page is requested before the
    current one is handed out, so Cassandra reads it while the caller converts this one."""
    future = session.execute_async(statement, parameters)
    result = future.result()
    while True:
        rows = result.current_rows
        more = future.has_more_pages
        if more:
            future.start_fetching_next_page()
        yield rows
        if not more:
            return
        result = future.result()
