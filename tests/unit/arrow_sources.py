"""What the tests of the Arrow-yielding data sources compare against: the rows as Spark's own
tuple path converts them, as an Arrow table and as a DataFrame."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Row, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches


class _Named:
    """What Spark's conversion asks of a data source: a name for its messages."""

    @staticmethod
    def name() -> str:
        return "tuples"


def struct(spark: SparkSession, ddl: str) -> StructType:
    """The `StructType` Spark hands a data source's reader for the schema `ddl`."""
    return spark.createDataFrame([], ddl).schema


def spark_table(rows: Iterable[Sequence[Any]], schema: StructType) -> pa.Table:
    """`rows` converted as Spark converts the tuples a Python data source's ``read`` yields."""
    batches = records_to_arrow_batches(iter(rows), 10_000, schema, _Named())  # type: ignore[arg-type]
    return pa.Table.from_batches(list(batches), schema=to_arrow_schema(schema))


def table(batches: Iterable[pa.RecordBatch], schema: StructType) -> pa.Table:
    """The batches a reader yields, as one table of the schema Spark expects of them."""
    return pa.Table.from_batches(list(batches), schema=to_arrow_schema(schema))


def assert_same_table(got: pa.Table, want: pa.Table) -> None:
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    assert got.combine_chunks().equals(want.combine_chunks()), (got.to_pylist(), want.to_pylist())


def sorted_rows(rows: Iterable[Row]) -> list[Row]:
    """`collect()`ed rows in an order that does not depend on partitions."""
    return sorted(rows, key=repr)
