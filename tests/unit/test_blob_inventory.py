"""S3 Inventory reports (hand-written, in tmp_path) read into the blob inventory schema."""

import datetime as dt
import gzip
import hashlib
import json
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from mqforensics.errors import explain
from mqforensics.sources.blob_inventory import read_inventory

UTC = dt.UTC
SOURCE = "james-default"
CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass"
T1 = dt.datetime(2026, 11, 6, 21, 32, 0, 123000, tzinfo=UTC)
T2 = dt.datetime(2026, 11, 7, 8, 0, 0, tzinfo=UTC)

# key -> (size, last_modified, etag, storage_class)
OBJECTS = {
    "210e7136-ede3-44eb-9495-3ed816d6e23b": (
        1234,
        T1,
        "d41d8cd98f00b204e9800998ecf8427e",
        "STANDARD",
    ),
    "1_628_MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": (
        0,
        T2,
        "0cc175b9c0f1b6a831c399e269772661",
        "STANDARD_IA",
    ),
    "1/628/M/f/emXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": (70_000, T1, "etag-3", "GLACIER"),
    "MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": (5, T2, None, None),
    "odd key/with spaces+plus&é": (7, T1, "etag-5", "STANDARD"),
}
KINDS = {
    "210e7136-ede3-44eb-9495-3ed816d6e23b": ("passthrough", None, None),
    "1_628_MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": ("generation_aware", 1, 628),
    "1/628/M/f/emXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": ("minio_generation_aware", 1, 628),
    "MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY=": ("legacy_hash", 0, 0),
    "odd key/with spaces+plus&é": ("unknown", None, None),
}


def iso(instant: dt.datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def csv_line(*fields: str) -> str:
    return ",".join('"' + f.replace('"', '""') + '"' for f in fields) + "\n"


def object_lines(objects: dict) -> list[str]:
    return [
        csv_line(SOURCE, quote_plus(key), str(size), iso(modified), etag or "", storage or "")
        for key, (size, modified, etag, storage) in objects.items()
    ]


def write_report(root, fmt, schema, files: dict[str, bytes], md5=True) -> str:
    """A report laid out as AWS writes it: <prefix>/<source>/<config>/<date>/manifest.json."""
    base = "inventory/james-default/daily"
    entries = []
    for name, data in files.items():
        key = f"{base}/data/{name}"
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
        entry = {"key": key, "size": len(data)}
        if md5:
            entry["MD5checksum"] = hashlib.md5(data).hexdigest()
        entries.append(entry)
    manifest = {
        "sourceBucket": SOURCE,
        "destinationBucket": "arn:aws:s3:::inventories",
        "version": "2016-11-30",
        "creationTimestamp": "1793655120000",
        "fileFormat": fmt,
        "fileSchema": schema,
        "files": entries,
    }
    path = root / base / "2026-11-08T00-00Z" / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2))
    return str(path)


def as_tuples(frame):
    return {
        r.key: (r.size, r.last_modified.astimezone(UTC), r.etag, r.storage_class)
        for r in frame.collect()
    }


def test_a_gzip_csv_report_is_read_exactly(spark, tmp_path):
    lines = object_lines(OBJECTS)
    manifest = write_report(
        tmp_path,
        "CSV",
        CSV_SCHEMA,
        {
            "a.csv.gz": gzip.compress("".join(lines[:2]).encode()),
            "b.csv.gz": gzip.compress("".join(lines[2:]).encode()),
        },
    )
    frame = read_inventory(spark, manifest)
    assert frame.rdd.getNumPartitions() == 2
    assert as_tuples(frame) == OBJECTS
    assert {r.bucket for r in frame.collect()} == {SOURCE}
    # The directory holding the one manifest, and a file:// URL, name the same report.
    assert as_tuples(read_inventory(spark, str(tmp_path))) == OBJECTS
    assert frame.count() == len(OBJECTS)


def test_a_versioned_csv_report_keeps_current_objects_only(spark, tmp_path):
    schema = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag"
    data = (
        csv_line(SOURCE, "kept", "v2", "true", "false", "3", iso(T2), "e2")
        + csv_line(SOURCE, "kept", "v1", "false", "false", "2", iso(T1), "e1")
        + csv_line(SOURCE, "gone", "v3", "true", "true", "", iso(T2), "")
    )
    manifest = write_report(tmp_path, "CSV", schema, {"v.csv.gz": gzip.compress(data.encode())})
    assert as_tuples(read_inventory(spark, manifest)) == {"kept": (3, T2, "e2", None)}


def parquet_table(objects: dict) -> pa.Table:
    return pa.table(
        {
            "bucket": [SOURCE] * len(objects),
            "key": list(objects),
            "version_id": pa.array([None] * len(objects), pa.string()),
            "is_latest": [True] * len(objects),
            "size": pa.array([v[0] for v in objects.values()], pa.int64()),
            "last_modified_date": pa.array(
                [v[1] for v in objects.values()], pa.timestamp("ms", tz="UTC")
            ),
            "e_tag": [v[2] for v in objects.values()],
            "storage_class": [v[3] for v in objects.values()],
        }
    )


def test_a_parquet_report_is_read_exactly(spark, tmp_path):
    sink = pa.BufferOutputStream()
    pq.write_table(parquet_table(OBJECTS), sink, compression="snappy")
    schema = (
        "message s3.inventory { required binary bucket (UTF8); required binary key (UTF8); "
        "optional binary version_id (UTF8); optional boolean is_latest; optional int64 size; "
        "optional int64 last_modified_date (TIMESTAMP_MILLIS); optional binary e_tag (UTF8); "
        "optional binary storage_class (UTF8);}"
    )
    manifest = write_report(
        tmp_path, "Parquet", schema, {"p.parquet": sink.getvalue().to_pybytes()}
    )
    assert as_tuples(read_inventory(spark, manifest)) == OBJECTS


def test_an_orc_report_is_read_exactly(spark, tmp_path):
    sink = pa.BufferOutputStream()
    orc.write_table(parquet_table(OBJECTS), sink)
    schema = "struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp>"
    manifest = write_report(tmp_path, "ORC", schema, {"o.orc": sink.getvalue().to_pybytes()})
    assert as_tuples(read_inventory(spark, manifest)) == OBJECTS


def error_of(action) -> str | None:
    with pytest.raises(Exception) as caught:
        action()
    return explain(caught.value)


def test_a_missing_manifest_and_a_wrong_file_schema(spark, tmp_path):
    assert error_of(lambda: read_inventory(spark, str(tmp_path / "nope.json"))) == (
        f"InputError: no S3 Inventory manifest at {tmp_path / 'nope.json'}"
    )
    (tmp_path / "empty").mkdir()
    assert error_of(lambda: read_inventory(spark, str(tmp_path / "empty"))) == (
        f"InputError: no S3 Inventory manifest.json in {tmp_path / 'empty'}"
    )
    manifest = write_report(tmp_path, "CSV", "Bucket, Key, ETag", {"a.csv.gz": gzip.compress(b"")})
    assert error_of(lambda: read_inventory(spark, manifest)) == (
        f"InputError: {manifest}: fileSchema lacks Size, LastModifiedDate "
        "(it lists: Bucket, Key, ETag)"
    )


def test_invalid_json_names_the_line(spark, tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "sourceBucket": "b"\n  "fileFormat": "CSV"\n}')
    assert error_of(lambda: read_inventory(spark, str(path))) == (
        f"InputError: {path} line 3: not valid JSON (Expecting ',' delimiter)"
    )


def test_a_corrupt_gzip_file_names_the_file(spark, tmp_path):
    good = gzip.compress("".join(object_lines(OBJECTS)).encode())
    corrupt = good[:-12] + bytes(b ^ 0xFF for b in good[-12:-8]) + good[-8:]
    manifest = write_report(tmp_path, "CSV", CSV_SCHEMA, {"c.csv.gz": corrupt}, md5=False)
    data = tmp_path / "inventory/james-default/daily/data/c.csv.gz"
    message = error_of(lambda: read_inventory(spark, manifest).collect())
    assert message.startswith(f"InputError: {data}: corrupt gzip data after line ")
    manifest = write_report(tmp_path, "CSV", CSV_SCHEMA, {"c.csv.gz": b"plain text"}, md5=False)
    assert error_of(lambda: read_inventory(spark, manifest).collect()) == (
        f"InputError: {data}: corrupt gzip data after line 0 (Not a gzipped file (b'pl'))"
    )


def test_a_bad_csv_line_names_the_file_and_line(spark, tmp_path):
    lines = object_lines(OBJECTS)
    data = tmp_path / "inventory/james-default/daily/data/bad.csv.gz"
    short = [*lines[:2], csv_line(SOURCE, "k", "12"), *lines[2:]]
    manifest = write_report(
        tmp_path, "CSV", CSV_SCHEMA, {"bad.csv.gz": gzip.compress("".join(short).encode())}
    )
    assert error_of(lambda: read_inventory(spark, manifest).collect()) == (
        f"InputError: {data} line 3: expected 6 fields, found 3"
    )
    size = [*lines[:3], csv_line(SOURCE, "k", "12kB", iso(T1), "", ""), *lines[3:]]
    manifest = write_report(
        tmp_path, "CSV", CSV_SCHEMA, {"bad.csv.gz": gzip.compress("".join(size).encode())}
    )
    assert error_of(lambda: read_inventory(spark, manifest).collect()) == (
        f"InputError: {data} line 4: Size '12kB' is not a byte count"
    )
    quoting = [lines[0], '"james-default","k"x,"1","2026-01-01T00:00:00.000Z","",""\n']
    manifest = write_report(
        tmp_path, "CSV", CSV_SCHEMA, {"bad.csv.gz": gzip.compress("".join(quoting).encode())}
    )
    assert error_of(lambda: read_inventory(spark, manifest).collect()) == (
        f"InputError: {data} line 2: bad CSV (',' expected after '\"')"
    )


def test_a_data_file_that_differs_from_its_checksum(spark, tmp_path):
    empty = gzip.compress(b"", mtime=0)
    manifest = write_report(tmp_path, "CSV", CSV_SCHEMA, {"a.csv.gz": empty})
    data = tmp_path / "inventory/james-default/daily/data/a.csv.gz"
    data.write_bytes(gzip.compress(b"".join(line.encode() for line in object_lines(OBJECTS))))
    message = error_of(lambda: read_inventory(spark, manifest).collect())
    assert message.startswith(f"InputError: {data}: MD5 ")
    assert message.endswith(f"differs from the manifest's {hashlib.md5(empty).hexdigest()}")


def test_a_parquet_file_without_a_required_column(spark, tmp_path):
    sink = pa.BufferOutputStream()
    pq.write_table(parquet_table(OBJECTS).drop_columns(["size"]), sink)
    manifest = write_report(
        tmp_path, "Parquet", "message s3.inventory { key; size; last_modified_date }",
        {"p.parquet": sink.getvalue().to_pybytes()},
    )  # fmt: skip
    data = tmp_path / "inventory/james-default/daily/data/p.parquet"
    assert error_of(lambda: read_inventory(spark, manifest).collect()) == (
        f"InputError: {data}: no column size (it has bucket, key, version_id, is_latest, "
        "last_modified_date, e_tag, storage_class)"
    )
