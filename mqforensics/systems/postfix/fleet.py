"""Spark data source ``postfix_files``: every file of one or more Postfix queue directories.

The driver lists the directories (`queue_dir.list_queue_dir`: names only, nothing read) and cuts
each listing into partitions of `CHUNK` files; each Spark task reads its files once and decodes
them (`files.read_file`), so many hosts' queues are read in parallel. Option ``queue_dirs``: a
JSON list of ``[host, path]``. A directory that cannot be listed is a typed error on the driver,
before any job; a file that cannot be read is a row saying why. The rows (`files.read_files`)
reach Spark as Arrow record batches of `FILES` (`arrow_rows.ArrowRows`), not one by one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError
from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.systems.postfix.files import FILES, read_files
from mqforensics.systems.postfix.queue_dir import Listed, QueueDir, list_queue_dir

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

CHUNK = 500
NAME = "postfix_files"


@dataclass
class FilesPartition(InputPartition):
    host: str
    path: str
    files: list[tuple[str, str, str]]  # (queue, relative path, kind)


def _queue_dirs(options: Any) -> list[QueueDir]:
    try:
        given = json.loads(options["queue_dirs"])
        return [QueueDir(str(host), str(path)) for host, path in given]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"option 'queue_dirs': not a JSON list of [host, path]: {exc}") from None


class PostfixFilesReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.queue_dirs = _queue_dirs(options)
        self.schema = schema

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        parts: list[InputPartition] = []
        for queue_dir in self.queue_dirs:
            listed = [(f.queue, f.relative, f.kind) for f in list_queue_dir(queue_dir)]
            parts += [
                FilesPartition(queue_dir.host, queue_dir.path, listed[i : i + CHUNK])
                for i in range(0, len(listed), CHUNK)
            ]
        return parts

    def read(  # type: ignore[override]
        self, partition: InputPartition | None
    ) -> Iterator[pa.RecordBatch]:
        yield from ArrowRows(self.schema).batches(self.rows(partition))

    def rows(self, partition: InputPartition | None) -> Iterator[tuple]:
        """The `FILES` rows of one partition (none for Spark's empty one)."""
        if not isinstance(partition, FilesPartition):  # nothing listed: one empty partition
            return iter(())
        queue_dir = QueueDir(partition.host, partition.path)
        return read_files(queue_dir, (Listed(*f) for f in partition.files))


class PostfixFilesSource(DataSource):
    """``spark.read.format("postfix_files")``: the files of Postfix queue directories
    (`files.FILES`)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return FILES

    def reader(self, schema: StructType) -> PostfixFilesReader:
        return PostfixFilesReader(dict(self.options), schema)


def read_queue_dirs(spark: SparkSession, queue_dirs: Sequence[QueueDir]) -> DataFrame:
    """Every file of `queue_dirs` (`files.FILES`), lazily."""
    if not queue_dirs:
        raise ConfigError("no Postfix queue directory given (--queue-dir)")
    spark.dataSource.register(PostfixFilesSource)
    option = json.dumps([[q.host, q.path] for q in queue_dirs])
    return spark.read.format(NAME).option("queue_dirs", option).load()
