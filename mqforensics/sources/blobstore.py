"""Spark data source ``mqf_blobs``: the inventory of an object store bucket or a local directory.

One row per object: ``bucket, key, size, last_modified, etag, storage_class``. The listing is
split for parallelism at the first ``/`` level: objects directly under the prefix form one
partition, each common prefix another (each read with paged ListObjectsV2, or a directory walk).
Reading never modifies the store. Options:

``location`` (``s3://bucket[/prefix]``, ``file:///dir`` or a plain directory path), and for S3
``endpoint_url``, ``region``, ``aws_access_key_id``, ``aws_secret_access_key`` (absent keys fall
back to boto3's usual credential chain in the worker), and ``split``: ``prefix`` (default, as
above) or ``hex``: 17 key ranges cut at the hex digits, listed in parallel with ListObjectsV2
``StartAfter``, for flat buckets of UUID/hash keys. ``hex`` relies on S3's listing order (UTF-8
binary order of keys), which SeaweedFS also keeps for keys without ``/``.

A local directory is named by its escaped text (docs/filenames.md; `read_blobs` passes
it so) and walked by its bytes (`filenames.fs_path`); a file whose name is not valid UTF-8 is
listed like any other, its ``bucket`` and ``key`` escaped the same way.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import AuthenticationFailed, ConfigError, InputError, ServerUnavailable
from mqforensics.filenames import fs_path, shown
from mqforensics.sources.s3_endpoint import S3Endpoint

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

SCHEMA = (
    "bucket string, key string, size bigint, last_modified timestamp, etag string, "
    "storage_class string"
)


@dataclass(frozen=True)
class Location:
    """A parsed ``location`` option: an S3 bucket and prefix, or a local directory."""

    scheme: str  # "s3" or "file"
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, text: str | None) -> Location:
        if not text:
            raise ConfigError("option 'location' is required (s3://bucket[/prefix] or a directory)")
        url = urlparse(text)
        if url.scheme in ("s3", "s3a"):
            if not url.netloc:
                raise ConfigError(f"no bucket in {text!r}")
            prefix = url.path.lstrip("/")
            if prefix and not prefix.endswith("/"):
                prefix += "/"
            return cls("s3", url.netloc, prefix)
        if url.scheme in ("", "file"):
            path = Path(fs_path(url.path if url.scheme == "file" else text)).resolve()
            return cls("file", str(path), "")
        raise ConfigError(f"unsupported location scheme {url.scheme!r} in {text!r}")


@dataclass
class Listing(InputPartition):
    """All objects under `prefix`, or only those directly under it when not `recursive`."""

    prefix: str
    recursive: bool


@dataclass
class KeyRange(InputPartition):
    """Objects under `prefix` whose key is in [start, end) (None: unbounded)."""

    prefix: str
    start: str | None
    end: str | None


# Split points for `split=hex`: a flat bucket of UUID or hash keys (James's passthrough blob ids)
# has no common prefix to split on, so its key space is cut at each hex digit instead.
HEX_DIGITS = "0123456789abcdef"


def key_ranges(prefix: str) -> list[KeyRange]:
    """Contiguous ranges covering every key under `prefix` exactly once."""
    bounds: list[str | None] = [None, *(prefix + c for c in HEX_DIGITS), None]
    return [KeyRange(prefix, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def s3_error(exc: Exception, endpoint: S3Endpoint, location: Location) -> Exception:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    where = f"s3://{location.bucket}/{location.prefix}"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket", "404"):
            return InputError(f"bucket {location.bucket!r} does not exist at {endpoint.where}")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
            return AuthenticationFailed(
                f"{endpoint.where} refused the credentials for {where} ({code})"
            )
        return ServerUnavailable(f"{endpoint.where} failed listing {where}: {code}")
    if isinstance(exc, NoCredentialsError):
        return AuthenticationFailed(f"no S3 credentials configured for {where}")
    if isinstance(exc, EndpointConnectionError):
        return ServerUnavailable(f"S3 endpoint {endpoint.where} is unreachable")
    return ServerUnavailable(f"{endpoint.where} failed listing {where}: {type(exc).__name__}")


class BlobListingSource(DataSource):
    """``spark.read.format("mqf_blobs")``: object inventory of a bucket or directory."""

    @classmethod
    def name(cls) -> str:
        return "mqf_blobs"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> BlobListingReader:
        return BlobListingReader(dict(self.options))


class BlobListingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[Listing] | list[KeyRange]:  # type: ignore[override]
        location = Location.parse(self.options.get("location"))
        split = self.options.get("split", "prefix")
        if split not in ("prefix", "hex"):
            raise ConfigError(f"split must be 'prefix' or 'hex', not {split!r}")
        if split == "hex" and location.scheme == "s3":
            return key_ranges(location.prefix)
        if location.scheme == "file":
            root = Path(location.bucket)
            if not root.is_dir():
                raise InputError(
                    f"blob directory {shown(root)} does not exist or is not a directory"
                )
            subdirs = sorted(p.name + "/" for p in root.iterdir() if p.is_dir())
            return [Listing("", False)] + [Listing(d, True) for d in subdirs]
        endpoint = S3Endpoint.from_options(self.options)
        client = endpoint.client()
        prefixes: list[str] = []
        try:
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=location.bucket, Prefix=location.prefix, Delimiter="/"
            )
            for page in pages:
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        except Exception as exc:
            raise s3_error(exc, endpoint, location) from None
        return [Listing(location.prefix, False)] + [Listing(p, True) for p in sorted(prefixes)]

    def read(self, partition: Listing | KeyRange) -> Iterator[tuple]:  # type: ignore[override]
        location = Location.parse(self.options.get("location"))
        if isinstance(partition, KeyRange):
            yield from _list_range(S3Endpoint.from_options(self.options), location, partition)
            return
        if location.scheme == "file":
            yield from _walk(Path(location.bucket), partition)
            return
        endpoint = S3Endpoint.from_options(self.options)
        client = endpoint.client()
        arguments: dict[str, str] = {"Bucket": location.bucket, "Prefix": partition.prefix}
        if not partition.recursive:
            arguments["Delimiter"] = "/"
        try:
            for page in client.get_paginator("list_objects_v2").paginate(**arguments):
                for obj in page.get("Contents", []):
                    yield (
                        location.bucket,
                        obj["Key"],
                        int(obj["Size"]),
                        obj.get("LastModified"),
                        (obj.get("ETag") or "").strip('"') or None,
                        obj.get("StorageClass"),
                    )
        except Exception as exc:
            raise s3_error(exc, endpoint, location) from None


def _list_range(endpoint: S3Endpoint, location: Location, part: KeyRange) -> Iterator[tuple]:
    from botocore.exceptions import ClientError

    client = endpoint.client()
    try:
        if part.start is not None:
            # StartAfter excludes its own key: an object named exactly `start` is fetched alone.
            try:
                head = client.head_object(Bucket=location.bucket, Key=part.start)
                yield (
                    location.bucket, part.start, int(head["ContentLength"]),
                    head.get("LastModified"), (head.get("ETag") or "").strip('"') or None,
                    head.get("StorageClass", "STANDARD"),
                )  # fmt: skip
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey"):
                    raise
        arguments = {"Bucket": location.bucket, "Prefix": part.prefix}
        if part.start is not None:
            arguments["StartAfter"] = part.start
        for page in client.get_paginator("list_objects_v2").paginate(**arguments):
            for obj in page.get("Contents", []):
                if part.end is not None and obj["Key"] >= part.end:
                    return
                yield (
                    location.bucket, obj["Key"], int(obj["Size"]), obj.get("LastModified"),
                    (obj.get("ETag") or "").strip('"') or None, obj.get("StorageClass"),
                )  # fmt: skip
    except Exception as exc:
        raise s3_error(exc, endpoint, location) from None


def _walk(root: Path, partition: Listing) -> Iterator[tuple]:
    base = root / partition.prefix
    paths = base.rglob("*") if partition.recursive else base.glob("*")
    for path in sorted(paths):
        if not path.is_file():
            continue
        stat = path.stat()
        yield (
            shown(root.name),
            shown(path.relative_to(root).as_posix()),
            stat.st_size,
            dt.datetime.fromtimestamp(stat.st_mtime, tz=dt.UTC),
            None,
            None,
        )


def read_blobs(
    spark: SparkSession, location: str, endpoint: S3Endpoint | None = None, split: str = "prefix"
) -> DataFrame:
    """The inventory at `location` as a DataFrame (see module docstring for `split`)."""
    s3 = location.startswith(("s3://", "s3a://"))
    reader = (
        spark.read.format(BlobListingSource.name())
        .option("location", location if s3 else shown(location))
        .option("split", split)
    )
    if s3:
        for key, value in (endpoint or S3Endpoint.from_env()).to_options().items():
            reader = reader.option(key, value)
    return reader.load()
