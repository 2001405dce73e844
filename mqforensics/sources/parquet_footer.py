"""Reading Parquet tables without Spark jobs, where what Spark would read is known exactly.

Spark infers a Parquet table's schema with a job that reads a file footer, and prefers, there,
the schema its own writer stored in the footer's key-value metadata
(``org.apache.spark.sql.parquet.row.metadata``; ``ParquetFileFormat.readSchemaFromFooter``).
`spark_schema` reads that same key on the driver (pyarrow reads only the footer): when every
data file of the table holds the same one, it is exactly the schema Spark would infer, and
`read` hands it to Spark, so no job runs. Files another tool wrote (no such key in any of them)
get the schema Spark's converter makes of their shared Parquet schema, where every column is of
a type it maps plainly (`_parquet_schema`). Anything else (files that differ, a type Spark
reads by a setting of its own, summary or partition directories, an unreadable footer) is left
to Spark's own inference, as if this module did not exist.

`small_rows` reads the rows of a small table of plain columns (strings, 32-bit integers,
timestamps) on the driver, as Spark's reader would give them, for a table held in the query
plan; any other column, or more rows, is left to Spark the same way.

File names are bytes (docs/filenames.md): every file is opened by Python here, so a name that is
not valid UTF-8 reads like any other. Spark (the JVM) names a file by a Java string and cannot
open such a name however it is written (a percent-encoded URI decodes to U+FFFD), so `read`
hands a table holding one to the Python data source ``mqf_parquet_files``
(`ParquetFilesSource`: pyarrow in Spark's Python workers, one task per file or slice of row
groups, the files named by their escaped text, `filenames.shown`); every other table is still
Spark's own read. Messages name a file by its escaped text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import fs_path, shown

if TYPE_CHECKING:
    import pyarrow
    import pyarrow.parquet
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
# More data files than this are left to Spark (it reads one footer; this reads them all).
MAX_FOOTERS = 256
# The bytes of row groups one task of `ParquetFilesSource` reads at most (a row group is never
# split): Spark's own ``spark.sql.files.maxPartitionBytes``.
SPLIT_BYTES = 128 * 1024 * 1024


def metadata(file: Path | str) -> pyarrow.parquet.FileMetaData:
    """The footer of the Parquet file `file`, opened by Python (any bytes in its name)."""
    import pyarrow.parquet as pq

    with open(file, "rb") as stream:
        return pq.read_metadata(stream)


def java_opens(path: Path | str) -> bool:
    """Whether Spark's own reader can name `path`: its bytes are valid UTF-8."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def data_files(path: Path) -> list[Path] | None:
    """The data files of a table at `path` (a file, or a directory of part files), or None when
    its layout is one Spark reads in a way of its own (summary files, partition directories)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return None
    files = []
    for entry in sorted(path.iterdir()):
        if entry.name in ("_metadata", "_common_metadata") or entry.is_dir():
            return None
        if entry.name.startswith(("_", ".")):
            continue  # _SUCCESS, .crc files: Spark skips them too
        files.append(entry)
    return files or None


def spark_schema(path: Path) -> StructType | None:
    """The schema Spark infers for the table at `path`, when every data file's footer tells
    the same one (see the module docstring): the schema Spark stored there, or, in files
    another tool wrote, their Parquet schema when `_parquet_schema` maps it; None otherwise."""
    files = data_files(path)
    if files is None or len(files) > MAX_FOOTERS:
        return None
    return _footers_schema(files)


def _footers_schema(files: list[Path]) -> StructType | None:
    """`spark_schema` of these data files."""
    from pyspark.sql.types import StructType

    stored = set()
    schemas = []
    for file in files:
        try:
            footer = metadata(file)
        except (OSError, ValueError):
            return None  # Spark reads it, and says what is wrong
        stored.add((footer.metadata or {}).get(SPARK_SCHEMA_KEY))
        schemas.append(footer.schema)
    if len(stored) != 1:
        return None
    spark_json = stored.pop()
    if spark_json is None:
        same = all(schema.equals(schemas[0]) for schema in schemas[1:])
        return _parquet_schema(schemas[0]) if same else None
    try:
        schema = StructType.fromJson(json.loads(spark_json))
    except (ValueError, KeyError, TypeError):
        return None
    return schema


def _parquet_schema(schema: pyarrow.parquet.ParquetSchema) -> StructType | None:
    """The Spark schema of a Parquet schema written without Spark's (ParquetToSparkSchemaConverter
    at default settings), when every column is one `_leaf_type` maps and every group is a
    struct, a list or a map; None otherwise. Nullability is not kept: Spark reads every file
    column as nullable."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    # Parquet's own types as Arrow sees them (no Arrow schema stored by a writer), and its leaf
    # columns in the same depth-first order, to check each leaf's physical type.
    arrow = schema.to_arrow_schema()
    leaves = iter(range(len(schema)))

    def convert(kind: pyarrow.DataType) -> DataType | None:
        import pyarrow as pa

        if pa.types.is_struct(kind):
            return fields_of([kind.field(i) for i in range(kind.num_fields)])
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            element = convert(kind.value_type)
            return None if element is None else ArrayType(element, True)
        if pa.types.is_map(kind):
            key, value = convert(kind.key_type), convert(kind.item_type)
            return None if key is None or value is None else MapType(key, value, True)
        column = schema.column(next(leaves))
        logical = json.loads(column.logical_type.to_json())
        return _leaf_type(column.physical_type, logical, kind)

    def fields_of(members: list[pyarrow.Field]) -> StructType | None:
        fields = []
        for member in members:
            converted = convert(member.type)
            if converted is None:
                return None
            fields.append(StructField(member.name, converted, True))
        return StructType(fields)

    return fields_of(list(arrow))


def _leaf_type(physical: str, logical: dict[str, Any], arrow: pyarrow.DataType) -> DataType | None:
    """The Spark type of a Parquet leaf column Spark reads plainly (strings, binary, booleans,
    signed integers, floating point, dates, decimals, instants); None for the rest (unsigned
    integers, timestamps not adjusted to UTC or in nanoseconds, intervals...)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    kind = logical.get("Type")
    width = logical.get("bitWidth") if kind == "Int" and logical.get("isSigned") else None
    plain = _spark_type(physical, logical)
    if plain is not None:
        return {"string": T.StringType(), "int": T.IntegerType(), "timestamp": T.TimestampType()}[
            plain
        ]
    if kind == "Decimal" and physical in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        return T.DecimalType(int(logical["precision"]), int(logical["scale"]))
    if physical == "BYTE_ARRAY" and kind == "None" and pa.types.is_binary(arrow):
        return T.BinaryType()
    if physical == "INT32" and width in (8, 16):
        return T.ByteType() if width == 8 else T.ShortType()
    if physical == "INT32" and kind == "Date":
        return T.DateType()
    if physical == "INT64" and (kind == "None" or width == 64):
        return T.LongType()
    if kind == "None":
        return {"BOOLEAN": T.BooleanType(), "FLOAT": T.FloatType(), "DOUBLE": T.DoubleType()}.get(
            physical
        )
    return None


def row_count(path: Path) -> int | None:
    """How many rows the table at `path` holds, from its footers (exact: every row group
    counts its rows); None when its layout is Spark's own affair or a footer is unreadable."""
    files = data_files(path)
    if files is None:
        return None
    try:
        return sum(metadata(file).num_rows for file in files)
    except (OSError, ValueError):
        return None


def read(spark: SparkSession, path: Path) -> DataFrame:
    """``spark.read.parquet(path)``, given the footers' schema when `spark_schema` has it; a
    table with a file Spark cannot name (`java_opens`) read through Python instead
    (`ParquetFilesSource`)."""
    files = data_files(path)
    if files is not None and not all(java_opens(file) for file in files):
        return _read_in_python(spark, files)
    if files is None and not java_opens(path):
        raise InputError(
            f"{shown(path)}: a Parquet table whose name is not valid UTF-8 is read as one file "
            "or a directory of part files (Spark cannot open such a name; this is neither)"
        )
    schema = spark_schema(path)
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.parquet(str(path))


def _read_in_python(spark: SparkSession, files: list[Path]) -> DataFrame:
    """The data `files` of one table read by `ParquetFilesSource`, with the schema Spark would
    infer (`_footers_schema`; else pyarrow's schema of the first file, Spark's mapping of it)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = _footers_schema(files)
    if schema is None:
        try:
            with open(files[0], "rb") as stream:
                import pyarrow.parquet as pq

                arrow = pq.ParquetFile(stream, coerce_int96_timestamp_unit="us").schema_arrow
            schema = from_arrow_schema(arrow)
        except (OSError, ValueError, TypeError) as exc:
            raise InputError(f"{shown(files[0])}: not readable as Parquet ({exc})") from None
    spark.dataSource.register(ParquetFilesSource)
    return (
        spark.read.format(ParquetFilesSource.name())
        .schema(schema)
        .option("files", json.dumps([shown(file) for file in files]))
        .load()
    )


@dataclass
class RowGroups(InputPartition):
    """Row groups `groups` of the Parquet file named `file` (escaped text, `filenames.shown`)."""

    file: str
    groups: list[int]


class ParquetFilesSource(DataSource):
    """``spark.read.format("mqf_parquet_files")``: Parquet data files read with pyarrow in
    Spark's Python workers, for names Spark cannot open (see the module docstring).

    Options: ``files``, a JSON list of the files' escaped text (`filenames.shown`); the schema is
    the caller's (``.schema(...)``): each column read by name (case-insensitively, as Spark
    does; a file without it gives nulls) and cast to Spark's Arrow type of it, a timestamp
    without a time zone taken as UTC (as Spark reads Parquet's INT96)."""

    @classmethod
    def name(cls) -> str:
        return "mqf_parquet_files"

    def schema(self) -> str:
        raise ConfigError("mqf_parquet_files needs the table's schema: .schema(...)")

    def reader(self, schema: Any) -> ParquetFilesReader:
        raw = self.options.get("files")
        try:
            files = json.loads(raw or "")
        except ValueError:
            files = None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ConfigError("option 'files' must be a JSON list of file names")
        return ParquetFilesReader(files, schema)


class ParquetFilesReader(DataSourceReader):
    """One partition per file, or per slice of its row groups of at most `SPLIT_BYTES`."""

    def __init__(self, files: list[str], schema: StructType) -> None:
        self.files = files
        self.schema = schema

    def partitions(self) -> list[RowGroups]:  # type: ignore[override]
        parts = []
        for file in self.files:
            try:
                footer = metadata(fs_path(file))
            except (OSError, ValueError) as exc:
                raise InputError(f"{file}: a damaged Parquet footer ({exc})") from None
            groups: list[int] = []
            size = 0
            for index in range(footer.num_row_groups):
                bytes_ = footer.row_group(index).total_byte_size
                if groups and size + bytes_ > SPLIT_BYTES:
                    parts.append(RowGroups(file, groups))
                    groups, size = [], 0
                groups.append(index)
                size += bytes_
            if groups:
                parts.append(RowGroups(file, groups))
        return parts

    def read(self, partition: RowGroups) -> Iterator[pyarrow.RecordBatch]:  # type: ignore[override]
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(self.schema)
        try:
            with open(fs_path(partition.file), "rb") as stream:
                parquet = pq.ParquetFile(stream, coerce_int96_timestamp_unit="us")
                present = {name.lower(): name for name in parquet.schema_arrow.names}
                wanted = [present.get(field.name.lower()) for field in target]
                columns = [name for name in wanted if name is not None]
                for batch in parquet.iter_batches(row_groups=partition.groups, columns=columns):
                    arrays = [
                        pa.nulls(batch.num_rows, field.type)
                        if name is None
                        else _as_spark(batch.column(name), field.type)
                        for name, field in zip(wanted, target, strict=True)
                    ]
                    yield pa.RecordBatch.from_arrays(arrays, schema=target)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise InputError(f"{partition.file}: not readable as Parquet ({exc})") from None


def _as_spark(column: pyarrow.Array, kind: pyarrow.DataType) -> pyarrow.Array:
    """`column` as Spark's Arrow type `kind` (a timestamp without a time zone, at any depth,
    is taken as UTC: Arrow's cast keeps its value)."""
    return column if column.type == kind else column.cast(kind)


# Parquet's physical and logical types of the plain columns `small_rows` reads, and the Spark
# type its reader gives each (ParquetToSparkSchemaConverter, default settings): INT96 is a
# timestamp (spark.sql.parquet.int96AsTimestamp), a timestamp adjusted to UTC too; one that is
# not is TIMESTAMP_NTZ, and left to Spark.
def _spark_type(physical: str, logical: dict[str, Any]) -> str | None:
    kind = logical.get("Type")
    if physical == "BYTE_ARRAY" and kind == "String":
        return "string"
    if physical == "INT32" and (
        kind == "None"
        or (kind == "Int" and logical.get("bitWidth") == 32 and logical.get("isSigned"))
    ):
        return "int"
    if physical == "INT96" and kind == "None":
        return "timestamp"
    if (
        physical == "INT64"
        and kind == "Timestamp"
        and logical.get("isAdjustedToUTC") is True
        and logical.get("timeUnit") in ("milliseconds", "microseconds")
    ):
        return "timestamp"
    return None


# Timestamps before this are left to Spark: its reader may rebase them from the Julian calendar.
_EARLIEST = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)


def small_rows(path: Path, columns: dict[str, str], limit: int) -> list[tuple] | None:
    """The rows of the table at `path` as tuples of `columns` (name -> Spark type, in order;
    names matched case-insensitively, as Spark does), read on the driver: when it has at most
    `limit` rows and exactly these columns, each of a plain type Spark reads as the one named
    (see `_spark_type`). Timestamps are aware datetimes in UTC. None otherwise: Spark reads it,
    and says what is wrong with it."""
    import pyarrow.parquet as pq

    files = data_files(path)
    if files is None:
        return None
    rows: list[tuple] = []
    try:
        for file in files:
            with open(file, "rb") as stream:
                parquet = pq.ParquetFile(stream, coerce_int96_timestamp_unit="us")
                table = _small_table(parquet, columns, limit - len(rows))
            if table is None:
                return None
            for record in table.to_pylist():
                rows.append(tuple(_utc(record[name]) for name in table.column_names))
    except (OSError, ValueError, TypeError, ArithmeticError, NotImplementedError):
        return None  # an unreadable file, or a value Python cannot hold: Spark reads it
    if any(isinstance(v, dt.datetime) and v < _EARLIEST for row in rows for v in row):
        return None
    return rows


def _small_table(
    parquet: pyarrow.parquet.ParquetFile, columns: dict[str, str], limit: int
) -> pyarrow.Table | None:
    """`columns` of one open file of `small_rows`, in that order (each under the file's own
    name of it); None when it holds more than `limit` rows or other columns."""
    if parquet.metadata.num_rows > limit:
        return None
    schema = parquet.schema
    if len(schema) != len(columns):
        return None
    found = {}
    for i in range(len(schema)):
        column = schema.column(i)
        logical = json.loads(column.logical_type.to_json())
        found[column.path.lower()] = (column.path, _spark_type(column.physical_type, logical))
    if sorted(found) != sorted(columns) or any(
        found[name][1] != kind for name, kind in columns.items()
    ):
        return None
    return parquet.read(columns=[found[name][0] for name in columns])


def _utc(value: Any) -> Any:
    """An INT96 timestamp (naive from pyarrow) is an instant in UTC, as Spark reads it."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    return value
