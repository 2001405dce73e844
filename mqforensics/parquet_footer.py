"""Reading a Parquet table written by Spark without running Spark jobs for its schema.

Spark infers a Parquet table's schema with a job that reads a file footer, and prefers, there,
the schema its own writer stored in the footer's key-value metadata
(``org.apache.spark.sql.parquet.row.metadata``; ``ParquetFileFormat.readSchemaFromFooter``).
`spark_schema` reads that same key on the driver (pyarrow reads only the footer): when every
data file of the table holds the same one, it is exactly the schema Spark would infer, and
`read` hands it to Spark, so no job runs. Anything else (no such key, files that differ,
summary or partition directories, an unreadable footer) is left to Spark's own inference, as
if this module did not exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
# More data files than this are left to Spark (it reads one footer; this reads them all).
MAX_FOOTERS = 256


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
    """The schema Spark stored in every data file's footer at `path`, if they all hold the same
    one (see the module docstring); None otherwise."""
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    files = data_files(path)
    if files is None or len(files) > MAX_FOOTERS:
        return None
    stored = set()
    for file in files:
        try:
            metadata = pq.read_metadata(file).metadata or {}
        except (OSError, ValueError):
            return None  # Spark reads it, and says what is wrong
        if SPARK_SCHEMA_KEY not in metadata:
            return None
        stored.add(metadata[SPARK_SCHEMA_KEY])
    if len(stored) != 1:
        return None
    try:
        schema = StructType.fromJson(json.loads(stored.pop()))
    except (ValueError, KeyError, TypeError):
        return None
    return schema


def read(spark: SparkSession, path: Path) -> DataFrame:
    """``spark.read.parquet(path)``, given the footers' schema when `spark_schema` has it."""
    schema = spark_schema(path)
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.parquet(str(path))
