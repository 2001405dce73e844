"""Spark data source ``mqf_s3_inventory``: an Amazon S3 Inventory report as a blob inventory.

Reads the report's ``manifest.json`` on the driver and each data file it lists as one Spark
partition, into `blobstore.SCHEMA` (``bucket, key, size, last_modified, etag, storage_class``).
Facts of the format (AWS S3 user guide, "Amazon S3 Inventory list" and "Locating your inventory
list"):

- ``manifest.json`` holds ``sourceBucket``, ``destinationBucket`` (an ARN), ``fileFormat``
  (``CSV``, ``ORC`` or ``Parquet``), ``fileSchema`` and ``files[]`` (``key`` in the destination
  bucket, ``size``, ``MD5checksum`` of the data file, verified here when present).
- CSV data files are GZIP-compressed, without header, every field quoted, in the order of the
  comma-separated ``fileSchema`` (``Bucket, Key, ..., Size, LastModifiedDate, ETag, ...``). The key
  is URL-encoded with spaces as ``+`` (decode with ``unquote_plus``: cloud-custodian issue #1997).
- Parquet and ORC files have the columns ``bucket, key, size, last_modified_date, e_tag,
  storage_class`` (``fileSchema`` is a Parquet message / ORC struct); keys are not URL-encoded.
- A report of all versions adds ``IsLatest``/``IsDeleteMarker``: only current, non-delete-marker
  rows are objects James can read, so only those are kept.

A report is given as a local ``manifest.json``, a directory holding one, or
``s3://bucket/path/manifest.json`` (or its directory); data files are read from the bucket the
manifest lies in. Local data files are found under the manifest's ancestors by their key, or next
to the manifest by their file name. Every defect of a report is an `InputError` naming the file,
and the line for CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import hashlib
import io
import json
import re
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import unquote_plus, urlparse

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqforensics.errors import ConfigError, InputError
from mqforensics.sources.blobstore import SCHEMA, S3Endpoint

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FORMATS = {"csv": "CSV", "orc": "ORC", "parquet": "Parquet"}
# CSV fileSchema field -> output column; Bucket/Key/Size/LastModifiedDate are required.
CSV_FIELDS = {
    "Bucket": "bucket",
    "Key": "key",
    "Size": "size",
    "LastModifiedDate": "last_modified",
    "ETag": "etag",
    "StorageClass": "storage_class",
}
CSV_REQUIRED = ("Bucket", "Key", "Size", "LastModifiedDate")
# Parquet/ORC column -> output column; key, size and last_modified_date are required.
COLUMNAR_FIELDS = {
    "bucket": "bucket",
    "key": "key",
    "size": "size",
    "last_modified_date": "last_modified",
    "e_tag": "etag",
    "storage_class": "storage_class",
}
COLUMNAR_REQUIRED = ("key", "size", "last_modified_date")
BATCH_ROWS = 65_536
_MD5 = re.compile(r"[0-9a-f]{32}")


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("bucket", pa.string()),
            ("key", pa.string()),
            ("size", pa.int64()),
            ("last_modified", pa.timestamp("us", tz="UTC")),
            ("etag", pa.string()),
            ("storage_class", pa.string()),
        ]
    )


@dataclass(frozen=True)
class Report:
    """A parsed manifest: where its data files are and how to read them."""

    manifest: str  # where the manifest was read, for messages
    source_bucket: str
    file_format: str  # "CSV", "ORC" or "Parquet"
    fields: list[str]  # CSV: the fileSchema field names, in order; else []
    files: list[tuple[str, str | None]]  # (location of a data file, its MD5 or None)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> Report:
        data = json.loads(text)
        data["files"] = [tuple(f) for f in data["files"]]
        return cls(**data)


@dataclass
class DataFile(InputPartition):
    """One data file of the report: ``s3://bucket/key`` or a local path."""

    location: str
    md5: str | None


# ---------------------------------------------------------------------------------------------
# Finding and parsing the manifest (driver side)


def _s3_parts(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if not parsed.netloc:
        raise ConfigError(f"no bucket in {url!r}")
    return parsed.netloc, parsed.path.lstrip("/")


def _s3_body(endpoint: S3Endpoint, bucket: str, key: str) -> BinaryIO:
    """The streaming body of s3://bucket/key; a missing object is an InputError."""
    from botocore.exceptions import ClientError

    from mqforensics.sources.blobstore import Location, s3_error

    try:
        return endpoint.client().get_object(Bucket=bucket, Key=key)["Body"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code", "") in ("NoSuchKey", "404"):
            raise InputError(f"s3://{bucket}/{key} does not exist at {endpoint.where}") from None
        raise s3_error(exc, endpoint, Location("s3", bucket, key)) from None
    except Exception as exc:
        raise s3_error(exc, endpoint, Location("s3", bucket, key)) from None


def _read_s3_object(endpoint: S3Endpoint, bucket: str, key: str) -> bytes:
    return _s3_body(endpoint, bucket, key).read()


def _local_manifest(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise InputError(f"no S3 Inventory manifest at {path}")
    if (path / "manifest.json").is_file():
        return path / "manifest.json"
    found = sorted(path.rglob("manifest.json"))
    if not found:
        raise InputError(f"no S3 Inventory manifest.json in {path}")
    if len(found) > 1:
        raise ConfigError(
            f"{len(found)} manifest.json files under {path} (e.g. {found[0]}, {found[-1]}); "
            "give the one to read"
        )
    return found[0]


def _local_data_file(manifest: Path, key: str) -> Path:
    """A report's data file on local disk: a copy of the destination bucket, or files nearby."""
    for ancestor in manifest.parents:
        if (ancestor / key).is_file():
            return ancestor / key
    name = Path(key).name
    for candidate in (
        manifest.parent / name,
        manifest.parent / "data" / name,
        manifest.parent.parent / "data" / name,
    ):
        if candidate.is_file():
            return candidate
    raise InputError(f"data file {key!r} listed in {manifest} is not under {manifest.parent}")


def parse_manifest(text: bytes, where: str) -> dict[str, Any]:
    """The manifest's JSON object, checked for the fields this reader needs."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise InputError(f"{where} is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: not a JSON object")
    for name in ("sourceBucket", "fileFormat", "fileSchema"):
        if not isinstance(data.get(name), str) or not data[name].strip():
            raise InputError(f"{where}: field {name!r} is missing or not a string")
    if FORMATS.get(data["fileFormat"].lower()) is None:
        raise InputError(f"{where}: fileFormat {data['fileFormat']!r} is none of CSV, ORC, Parquet")
    files = data.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("key"), str) and f["key"] for f in files
    ):
        raise InputError(f"{where}: field 'files' is not a list of objects with a 'key'")
    return data


def _csv_fields(schema: str, where: str) -> list[str]:
    fields = [f.strip() for f in schema.split(",")]
    if "" in fields or len(set(fields)) != len(fields):
        raise InputError(f"{where}: fileSchema {schema!r} has empty or repeated fields")
    missing = [f for f in CSV_REQUIRED if f not in fields]
    if missing:
        raise InputError(
            f"{where}: fileSchema lacks {', '.join(missing)} (it lists: {', '.join(fields)})"
        )
    return fields


def load_report(inventory: str, endpoint: S3Endpoint | None = None) -> Report:
    """Read and check the manifest at `inventory` (local path/directory or ``s3://`` URL)."""
    if not inventory:
        raise ConfigError("an S3 Inventory report location is required")
    scheme = urlparse(inventory).scheme
    if scheme in ("s3", "s3a"):
        endpoint = endpoint or S3Endpoint.from_env()
        bucket, key = _s3_parts(inventory)
        if not key.endswith(".json"):
            key = (key.rstrip("/") + "/manifest.json").lstrip("/")
        where = f"s3://{bucket}/{key}"
        data = parse_manifest(_read_s3_object(endpoint, bucket, key), where)
        locations = [f"s3://{bucket}/{f['key']}" for f in data["files"]]
    elif scheme in ("", "file"):
        path = _local_manifest(Path(urlparse(inventory).path if scheme else inventory).resolve())
        where = str(path)
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
        data = parse_manifest(text, where)
        locations = [str(_local_data_file(path, f["key"])) for f in data["files"]]
    else:
        raise ConfigError(f"unsupported inventory scheme {scheme!r} in {inventory!r}")
    file_format = FORMATS[data["fileFormat"].lower()]
    if file_format == "CSV":
        fields = _csv_fields(data["fileSchema"], where)
    else:
        fields = []
        absent = [c for c in COLUMNAR_REQUIRED if not re.search(rf"\b{c}\b", data["fileSchema"])]
        if absent:
            raise InputError(f"{where}: fileSchema lacks {', '.join(absent)}")
    md5s = [
        str(f["MD5checksum"]).lower()
        if _MD5.fullmatch(str(f.get("MD5checksum", "")).lower())
        else None
        for f in data["files"]
    ]
    return Report(
        where, data["sourceBucket"], file_format, fields, list(zip(locations, md5s, strict=True))
    )


# ---------------------------------------------------------------------------------------------
# Reading data files (worker side)


class _Hashing(io.RawIOBase):
    """A readable stream that computes the MD5 of every byte read through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.md5 = hashlib.md5()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        self.md5.update(data)
        buffer[: len(data)] = data
        return len(data)


def _open(location: str, endpoint: S3Endpoint) -> BinaryIO:
    if not location.startswith("s3://"):
        try:
            return open(location, "rb")  # closed by the caller
        except OSError as exc:
            raise InputError(f"cannot read {location}: {exc.strerror}") from None
    return _s3_body(endpoint, *_s3_parts(location))


def _check_md5(location: str, expected: str | None, actual: str) -> None:
    if expected is not None and expected != actual:
        raise InputError(f"{location}: MD5 {actual} differs from the manifest's {expected}")


def _flag(text: str, field: str, where: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise InputError(f"{where}: {field} {text!r} is neither true nor false")


def _timestamp(text: str, where: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{where}: LastModifiedDate {text!r} is no ISO-8601 instant") from None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _csv_row(fields: list[str], values: list[str], source_bucket: str, where: str) -> tuple | None:
    if len(values) != len(fields):
        raise InputError(f"{where}: expected {len(fields)} fields, found {len(values)}")
    row = dict(zip(fields, values, strict=True))
    if "IsDeleteMarker" in row and _flag(row["IsDeleteMarker"], "IsDeleteMarker", where):
        return None
    if "IsLatest" in row and not _flag(row["IsLatest"], "IsLatest", where):
        return None
    try:
        key = unquote_plus(row["Key"], errors="strict")
    except UnicodeDecodeError:
        raise InputError(f"{where}: Key {row['Key']!r} is not URL-encoded UTF-8") from None
    if not key:
        raise InputError(f"{where}: empty Key")
    size_text = row["Size"].strip()
    if not size_text.isascii() or not size_text.isdigit():
        raise InputError(f"{where}: Size {row['Size']!r} is not a byte count")
    etag = row.get("ETag", "").strip('"') or None
    return (
        row["Bucket"] or source_bucket,
        key,
        int(size_text),
        _timestamp(row["LastModifiedDate"], where),
        etag,
        row.get("StorageClass") or None,
    )


def _batch(columns: list[list]) -> pa.RecordBatch:
    import pyarrow as pa

    schema = _arrow_schema()
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def read_csv_file(report: Report, part: DataFile, endpoint: S3Endpoint) -> Iterator[pa.RecordBatch]:
    """The objects of one gzip CSV data file, in Arrow batches; errors name the line."""
    raw = _open(part.location, endpoint)
    hashing = _Hashing(raw)
    line = 0
    try:
        with gzip.GzipFile(fileobj=io.BufferedReader(hashing), mode="rb") as unzipped:
            text = io.TextIOWrapper(unzipped, encoding="utf-8", newline="")
            reader = csv.reader(text, strict=True)
            columns: list[list] = [[] for _ in range(6)]
            while True:
                try:
                    values = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    raise InputError(
                        f"{part.location} line {reader.line_num}: bad CSV ({exc})"
                    ) from None
                except UnicodeDecodeError:
                    raise InputError(f"{part.location} line {line + 1}: not UTF-8") from None
                line = reader.line_num
                row = _csv_row(
                    report.fields, values, report.source_bucket, f"{part.location} line {line}"
                )
                if row is None:
                    continue
                for column, value in zip(columns, row, strict=True):
                    column.append(value)
                if len(columns[0]) >= BATCH_ROWS:
                    yield _batch(columns)
                    columns = [[] for _ in range(6)]
            if columns[0]:
                yield _batch(columns)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(
            f"{part.location}: corrupt gzip data after line {line} ({exc or type(exc).__name__})"
        ) from None
    finally:
        raw.close()
    _check_md5(part.location, part.md5, hashing.md5.hexdigest())


def _columnar_batches(report: Report, location: str, path: str) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        if report.file_format == "Parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(path)
            names = parquet.schema_arrow.names
            wanted = [
                n for n in names if n in COLUMNAR_FIELDS or n in ("is_latest", "is_delete_marker")
            ]
            batches: Iterator[pa.RecordBatch] = parquet.iter_batches(BATCH_ROWS, columns=wanted)
        else:
            import pyarrow.orc as orc

            orc_file = orc.ORCFile(path)
            names = orc_file.schema.names
            batches = (orc_file.read_stripe(i) for i in range(orc_file.nstripes))
        absent = [c for c in COLUMNAR_REQUIRED if c not in names]
        if absent:
            raise InputError(
                f"{location}: no column {', '.join(absent)} (it has {', '.join(names)})"
            )
        schema = _arrow_schema()
        for batch in batches:
            keep = None
            if "is_delete_marker" in names:
                keep = pc.invert(pc.fill_null(batch.column("is_delete_marker"), False))
            if "is_latest" in names:
                latest = pc.fill_null(batch.column("is_latest"), True)
                keep = latest if keep is None else pc.and_(keep, latest)
            if keep is not None:
                batch = batch.filter(keep)
            arrays = []
            for field in schema:
                source = next((c for c, o in COLUMNAR_FIELDS.items() if o == field.name), None)
                if source in names:
                    column = batch.column(source)
                    if field.name == "last_modified" and column.type.tz is None:
                        column = pc.assume_timezone(column, "UTC")
                    column = column.cast(field.type)
                    if field.name == "bucket":
                        column = pc.fill_null(column, report.source_bucket)
                else:
                    value = report.source_bucket if field.name == "bucket" else None
                    column = pa.array([value] * batch.num_rows, type=field.type)
                arrays.append(column)
            if pc.any(pc.is_null(arrays[1])).as_py() or pc.any(pc.is_null(arrays[2])).as_py():
                raise InputError(f"{location}: a row without key or size")
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise InputError(f"{location}: not a readable {report.file_format} file ({exc})") from None


def read_columnar_file(
    report: Report, part: DataFile, endpoint: S3Endpoint
) -> Iterator[pa.RecordBatch]:
    """The objects of one Parquet or ORC data file (random access: S3 files are spooled)."""
    if not part.location.startswith("s3://"):
        with open(part.location, "rb") as local:
            digest = hashlib.file_digest(local, "md5").hexdigest()
        _check_md5(part.location, part.md5, digest)
        yield from _columnar_batches(report, part.location, part.location)
        return
    raw = _open(part.location, endpoint)
    with tempfile.NamedTemporaryFile(suffix="." + report.file_format.lower()) as spool:
        hashing = hashlib.md5()
        try:
            for chunk in iter(lambda: raw.read(1 << 20), b""):
                hashing.update(chunk)
                spool.write(chunk)
        finally:
            raw.close()
        spool.flush()
        _check_md5(part.location, part.md5, hashing.hexdigest())
        yield from _columnar_batches(report, part.location, spool.name)


class InventorySource(DataSource):
    """``spark.read.format("mqf_s3_inventory")``: objects of an S3 Inventory report.

    Options: ``report`` (the JSON of a `Report`, made by `load_report` on the driver) and the
    `S3Endpoint` options of `blobstore`.
    """

    @classmethod
    def name(cls) -> str:
        return "mqf_s3_inventory"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> InventoryReader:
        return InventoryReader(dict(self.options))


class InventoryReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[DataFile]:
        report = Report.from_json(self.options["report"])
        return [DataFile(location, md5) for location, md5 in report.files]

    def read(self, partition: DataFile) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        report = Report.from_json(self.options["report"])
        endpoint = S3Endpoint.from_options(self.options)
        if report.file_format == "CSV":
            yield from read_csv_file(report, partition, endpoint)
        else:
            yield from read_columnar_file(report, partition, endpoint)


def read_inventory(
    spark: SparkSession, inventory: str, endpoint: S3Endpoint | None = None
) -> DataFrame:
    """The objects listed by the S3 Inventory report at `inventory`, in `blobstore.SCHEMA`.

    The manifest is read and checked here (errors surface at once); data files are read by the
    executors, one partition each.
    """
    is_s3 = urlparse(inventory or "").scheme in ("s3", "s3a")
    if is_s3:
        endpoint = endpoint or S3Endpoint.from_env()
    report = load_report(inventory, endpoint)
    spark.dataSource.register(InventorySource)
    reader = spark.read.format(InventorySource.name()).option("report", report.to_json())
    if is_s3 and endpoint is not None:
        for key, value in endpoint.to_options().items():
            reader = reader.option(key, value)
    return reader.load()
