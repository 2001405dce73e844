"""Rows of a Spark schema as Arrow record batches, converted exactly as Spark converts them.

A Spark Python data source may yield `pyarrow.RecordBatch`es from ``read()`` instead of tuples;
Spark then skips its own conversion, which walks every value of every row in Python. Spark's
conversion (``plan_data_source_read.records_to_arrow_batches``) gathers rows into columns, passes
each value through ``LocalDataToArrowConversion`` and builds the batch against
``to_arrow_schema`` of the source's schema. `ArrowRows` does the same, except that a column whose
values Arrow takes as they are is handed to Arrow whole: strings, bytes, numbers and booleans,
and arrays, structs (given as tuples) and maps (given as dicts) made only of those. A column
that holds a timestamp keeps Spark's own converter (it reads a naive datetime as local time).

What a row may hold is therefore what Spark's tuple path takes, with one difference: a value of
the wrong Python type (an int in a string column) is an error here, where Spark would have
turned it into text. A string holding a lone surrogate (undecoded bytes) fails in both; the
readers replace those with U+FFFD before (`units.valid_utf8`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

BATCH_ROWS = 8192


def _passed_through(kind: DataType) -> bool:
    """Whether Arrow takes the Python values of `kind` as Spark's converter would hand them."""
    from pyspark.sql import types as T

    if isinstance(kind, T.ArrayType):
        return _passed_through(kind.elementType)
    if isinstance(kind, T.MapType):
        return _passed_through(kind.keyType) and _passed_through(kind.valueType)
    if isinstance(kind, T.StructType):
        return all(_passed_through(f.dataType) for f in kind.fields)
    plain = (
        T.StringType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
        T.LongType, T.FloatType, T.DoubleType,
    )  # fmt: skip
    return isinstance(kind, plain)


def _converter(kind: DataType) -> Callable[[Any], Any] | None:
    """None when the column's values go to Arrow as they are, else Spark's own converter."""
    from pyspark.sql.conversion import LocalDataToArrowConversion

    if _passed_through(kind):
        return None
    return LocalDataToArrowConversion._create_converter(kind)


class ArrowRows:
    """Record batches of `schema` (the `StructType` Spark hands a data source's ``reader``)
    from rows (tuples in schema order) or from whole columns."""

    def __init__(self, schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schema: pa.Schema = to_arrow_schema(schema)
        self.converters = [_converter(f.dataType) for f in schema.fields]

    def columns_batch(self, columns: Sequence[list[Any] | pa.Array]) -> pa.RecordBatch:
        """The batch of `columns` (equal lengths, schema order): lists of row values, or
        Arrow arrays already of the column's type."""
        import pyarrow as pa

        if len(columns) != len(self.converters):
            raise ValueError(f"{len(columns)} columns given, the schema has {len(self.schema)}")
        arrays = []
        for values, convert, field in zip(columns, self.converters, self.schema, strict=True):
            if not isinstance(values, pa.Array):
                if convert is not None:
                    values = [convert(v) for v in values]
                values = pa.array(values, type=field.type)
            arrays.append(values)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def batch(self, rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
        """The batch of `rows`, each a tuple of the schema's width."""
        width = len(self.converters)
        for row in rows:
            if len(row) != width:
                raise ValueError(f"a row has {len(row)} values, the schema has {width}")
        columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[]] * width
        return self.columns_batch(columns)

    def batches(self, rows: Iterable[Sequence[Any]], size: int = BATCH_ROWS) -> Iterator[Any]:
        """Record batches of at most `size` rows each (none for no rows): only one batch's
        rows are held at a time."""
        return map(self.batch, chunked(rows, size))


def chunked(rows: Iterable[Sequence[Any]], size: int) -> Iterator[list[Sequence[Any]]]:
    """`rows` in lists of `size` (the last one shorter; none for no rows)."""
    pending: list[Sequence[Any]] = []
    for row in rows:
        pending.append(row)
        if len(pending) >= size:
            yield pending
            pending = []
    if pending:
        yield pending
