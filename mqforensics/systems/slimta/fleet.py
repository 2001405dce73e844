"""Spark data source ``slimta_items``: every item of a slimta queue store, decoded in executors.

The driver only lists (directory names, ``SCAN`` keys, ListObjectsV2 keys) and cuts the listing
into partitions of `CHUNK` items; each Spark task reads and decodes its items with the
allow-list unpickler (`safe_pickle`), so a hostile or corrupt pickle becomes a row saying so,
never an executed payload or a failed job. Options: ``backend`` (``disk``, ``redis``, ``s3``)
and that backend's settings (`_options`). A store that cannot be listed (missing directory,
refused login, unknown bucket) is a typed error on the driver, before any job. The rows
(`items.Item.as_row`) reach Spark as Arrow record batches of `ITEMS` (`arrow_rows.ArrowRows`).

An erasure audit's subjects (`content_search.Searched`, keyed hashes and their key) are searched
in the same task, on the bytes it already read (`items.Item.search`), into the ``subjects``,
``found`` and ``unreadable`` columns. They are never a data source option (Spark Connect logs
options): `read_items` registers a subclass of the source made for the audit, whose class
attribute holds them, and Spark ships that class to the executors pickled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.content_search import Searched
from mqforensics.errors import ConfigError
from mqforensics.filenames import fs_path, shown
from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.sources.blobstore import S3Endpoint
from mqforensics.systems.slimta import cloud, disk, redis_store
from mqforensics.systems.slimta.items import ITEMS, Item
from mqforensics.systems.slimta.redis_server import RedisServer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

CHUNK = 200


@dataclass(frozen=True)
class Stores:
    """The slimta stores one audit reads (any combination, at least one)."""

    disk: disk.DiskLayout | None = None
    redis: RedisServer | None = None
    redis_prefix: str = redis_store.DEFAULT_PREFIX
    s3: cloud.Bucket | None = None
    s3_endpoint: S3Endpoint = field(default_factory=S3Endpoint)
    sqs_export: Path | None = None

    def describe(self) -> list[str]:
        """Password-free names of the stores, for reports and plan headers."""
        names = []
        if self.disk:
            names.append(f"disk {shown(self.disk.env_dir)}")
        if self.redis:
            names.append(f"redis {self.redis.where} prefix {self.redis_prefix}")
        if self.s3:
            names.append(f"s3 {self.s3.store}")
        if self.sqs_export:
            names.append(f"sqs export {shown(self.sqs_export)}")
        return names


@dataclass
class DiskPartition(InputPartition):
    ids: list[tuple[str, int | None]]
    tmp_files: list[str]


@dataclass
class RedisPartition(InputPartition):
    keys: list[bytes]


@dataclass
class S3Partition(InputPartition):
    objects: list[cloud.Listed]


def _chunks(values: list, size: int = CHUNK) -> list[list]:
    return [values[i : i + size] for i in range(0, len(values), size)]


def _disk_layout(options: Any) -> disk.DiskLayout:
    """The layout the options name (escaped text: an option crosses the JVM as valid UTF-8)."""
    tmp_dir = options.get("tmp_dir")
    return disk.DiskLayout(
        fs_path(options["env_dir"]), fs_path(options["meta_dir"]),
        fs_path(tmp_dir) if tmp_dir else None,
    )  # fmt: skip


def _bucket(options: Any) -> cloud.Bucket:
    return cloud.Bucket(options["bucket"], options.get("prefix", ""))


class SlimtaItemsReader(DataSourceReader):
    def __init__(
        self, options: dict[str, str], schema: StructType, searched: Searched | None = None
    ) -> None:
        self.options = options
        self.schema = schema
        self.searched = searched or Searched()
        self.backend = options.get("backend")
        if self.backend not in ("disk", "redis", "s3"):
            raise ConfigError(f"option 'backend' must be disk, redis or s3, not {self.backend!r}")

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        parts: list[InputPartition] = []
        if self.backend == "disk":
            listing = disk.list_store(_disk_layout(self.options))
            ids: list[tuple[str, int | None]] = list(
                zip(listing.env_ids, range(len(listing.env_ids)), strict=True)
            )
            ids += [(i, None) for i in listing.meta_only_ids]
            parts += [DiskPartition(chunk, []) for chunk in _chunks(ids)]
            parts += [DiskPartition([], chunk) for chunk in _chunks(listing.tmp_files)]
        elif self.backend == "redis":
            server = RedisServer.from_options(self.options)
            keys = redis_store.list_keys(server, self.options["prefix"])
            parts += [RedisPartition(chunk) for chunk in _chunks(keys)]
        else:
            endpoint = S3Endpoint.from_options(self.options)
            objects = cloud.list_objects(endpoint, _bucket(self.options))
            parts += [S3Partition(chunk) for chunk in _chunks(objects)]
        return parts

    def read(  # type: ignore[override]
        self, partition: InputPartition | None
    ) -> Iterator[pa.RecordBatch]:
        yield from ArrowRows(self.schema).batches(item.as_row() for item in self.items(partition))

    def items(self, partition: InputPartition | None) -> Iterator[Item]:
        """The items of one partition, read and decoded (none for Spark's empty one)."""
        items: Iterator[Item]
        if isinstance(partition, DiskPartition):
            layout = _disk_layout(self.options)
            items = disk.read_items(layout, partition.ids, partition.tmp_files)
        elif isinstance(partition, RedisPartition):
            server = RedisServer.from_options(self.options)
            items = redis_store.read_items(server, self.options["prefix"], partition.keys)
        elif isinstance(partition, S3Partition):
            endpoint = S3Endpoint.from_options(self.options)
            items = cloud.read_items(endpoint, _bucket(self.options), partition.objects)
        else:  # nothing listed: Spark plans one empty partition
            return iter(())
        return self._searched(items) if self.searched else items

    def _searched(self, items: Iterator[Item]) -> Iterator[Item]:
        for item in items:
            item.search(self.searched)
            yield item


class SlimtaItemsSource(DataSource):
    """``spark.read.format("slimta_items")``: the items of one slimta store (`items.ITEMS`).
    `searched`: what the items are searched for (nothing here; see `searching_source`)."""

    source_name: str = "slimta_items"
    searched: Searched = Searched()

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def schema(self) -> str:
        return ITEMS

    def reader(self, schema: StructType) -> SlimtaItemsReader:
        return SlimtaItemsReader(dict(self.options), schema, type(self).searched)


_searching_sources = itertools.count(1)


def searching_source(searched: Searched) -> type[SlimtaItemsSource]:
    """The data source to read with: `SlimtaItemsSource` when nothing is searched, else a
    subclass of it made here, under a name of its own, whose class attribute `searched` holds
    the subjects and their key. It is not importable, so Spark pickles it by value: the key
    reaches the executors inside the pickled class, never as an option."""
    if not searched:
        return SlimtaItemsSource
    name = f"slimta_items_searched_{next(_searching_sources)}"
    return type(
        "SlimtaItemsSearching",
        (SlimtaItemsSource,),
        {"source_name": name, "searched": searched, "__module__": __name__},
    )


def _options(stores: Stores) -> list[dict[str, str]]:
    """One option set per store to read through the data source."""
    sets = []
    if stores.disk:
        layout = stores.disk
        sets.append(
            {"backend": "disk", "env_dir": shown(layout.env_dir),
             "meta_dir": shown(layout.meta_dir)}
            | ({"tmp_dir": shown(layout.tmp_dir)} if layout.tmp_dir else {})
        )  # fmt: skip
    if stores.redis:
        sets.append({"backend": "redis", "prefix": stores.redis_prefix} | stores.redis.to_options())
    if stores.s3:
        sets.append(
            {"backend": "s3", "bucket": stores.s3.bucket, "prefix": stores.s3.prefix}
            | stores.s3_endpoint.to_options()
        )
    return sets


def read_items(spark: SparkSession, stores: Stores, searched: Searched | None = None) -> DataFrame:
    """Every item of `stores` (`items.ITEMS`), lazily, searched for `searched` (an erasure
    audit's subjects) in the executors; the SQS export (queue entries only) is read on the
    driver."""
    option_sets = _options(stores)
    if not option_sets and stores.sqs_export is None:
        raise ConfigError("no slimta store given (--disk, --redis or --s3)")
    if stores.sqs_export is not None and stores.s3 is None:
        raise ConfigError("--sqs-export needs --s3: the bucket its messages point into")
    source = searching_source(searched or Searched())
    spark.dataSource.register(source)
    frame = spark.createDataFrame([], ITEMS)
    for options in option_sets:
        loaded = spark.read.format(source.name()).options(**options).load()
        frame = frame.unionByName(loaded)
    if stores.sqs_export is not None and stores.s3 is not None:
        rows = [i.as_row() for i in cloud.read_sqs_export(stores.sqs_export, stores.s3)]
        frame = frame.unionByName(spark.createDataFrame(rows, ITEMS))
    return frame
