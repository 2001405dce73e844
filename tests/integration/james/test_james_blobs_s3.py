"""James blobs on the real SeaweedFS: a live listing and an S3 Inventory report agree exactly."""

import gzip
import hashlib
import io
import json
import uuid
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqforensics.errors import explain
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.systems.james.read import read_james_blobs

pytestmark = pytest.mark.integration

HASH = "MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY="
PASSTHROUGH = str(uuid.UUID("2b0f4c1e-9a7d-4e3b-8c55-0d2e6f7a9b10"))
# key -> (body, (id_kind, family, generation, hash))
BLOBS = {
    PASSTHROUGH: (b"Subject: x\r\n\r\n", ("passthrough", None, None, None)),
    str(uuid.uuid4()): (b"", ("passthrough", None, None, None)),
    f"1_628_{HASH}": (b"h" * 70_000, ("generation_aware", 1, 628, HASH)),
    "12_126_ab_c": (b"abc", ("generation_aware", 12, 126, "ab_c")),
    f"1/629/{HASH[0]}/{HASH[1]}/{HASH[2:]}": (b"minio", ("minio_generation_aware", 1, 629, HASH)),
    HASH: (b"legacy", ("legacy_hash", 0, 0, HASH)),
    "stray file + space.eml": (b"??", ("unknown", None, None, None)),
}


@pytest.fixture(scope="module")
def james_bucket(s3):
    client = s3_endpoint(s3).client()
    name = f"james-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    try:
        for key, (body, _) in BLOBS.items():
            client.put_object(Bucket=name, Key=key, Body=body)
        yield name
    finally:
        drop_bucket(client, name)


def listed(client, bucket: str) -> list[dict]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [obj for page in pages for obj in page.get("Contents", [])]


def drop_bucket(client, bucket: str) -> None:
    """Delete a test bucket: the shared SeaweedFS has few volume slots (one set per bucket)."""
    for obj in listed(client, bucket):
        client.delete_object(Bucket=bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=bucket)


@pytest.fixture(scope="module")
def reports(s3, james_bucket):
    """A CSV and a Parquet inventory report of `james_bucket`, in their own bucket."""
    client = s3_endpoint(s3).client()
    name = f"inventories-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    try:
        yield write_reports(client, name, james_bucket)
    finally:
        drop_bucket(client, name)


def write_reports(client, name: str, james_bucket: str) -> dict:
    objects = listed(client, james_bucket)
    rows = [
        (
            james_bucket,
            o["Key"],
            o["Size"],
            o["LastModified"],
            o["ETag"].strip('"'),
            o.get("StorageClass", "STANDARD"),
        )
        for o in objects
    ]
    csv_text = "".join(
        ",".join(
            f'"{v}"' for v in (b, quote_plus(k), s, t.strftime("%Y-%m-%dT%H:%M:%S.000Z"), e, c)
        )
        + "\n"
        for b, k, s, t, e, c in rows
    )
    half = len(rows) // 2
    lines = csv_text.splitlines(keepends=True)
    csv_files = {
        "a.csv.gz": gzip.compress("".join(lines[:half]).encode()),
        "b.csv.gz": gzip.compress("".join(lines[half:]).encode()),
    }
    table = pa.table(
        {
            "bucket": [r[0] for r in rows],
            "key": [r[1] for r in rows],
            "size": pa.array([r[2] for r in rows], pa.int64()),
            "last_modified_date": pa.array([r[3] for r in rows], pa.timestamp("ms", tz="UTC")),
            "e_tag": [r[4] for r in rows],
            "storage_class": [r[5] for r in rows],
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    manifests = {}
    for config, fmt, schema, files in (
        ("csv", "CSV", "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass", csv_files),
        ("parquet", "Parquet", "message s3.inventory { key; size; last_modified_date }",
         {"p.parquet": sink.getvalue()}),
    ):  # fmt: skip
        base = f"inv/{james_bucket}/{config}"
        entries = []
        for file_name, data in files.items():
            key = f"{base}/data/{file_name}"
            client.put_object(Bucket=name, Key=key, Body=data)
            entries.append(
                {"key": key, "size": len(data), "MD5checksum": hashlib.md5(data).hexdigest()}
            )
        manifest = {
            "sourceBucket": james_bucket,
            "destinationBucket": f"arn:aws:s3:::{name}",
            "version": "2016-11-30",
            "fileFormat": fmt,
            "fileSchema": schema,
            "files": entries,
        }
        key = f"{base}/2026-11-08T00-00Z/manifest.json"
        client.put_object(Bucket=name, Key=key, Body=json.dumps(manifest).encode())
        manifests[config] = f"s3://{name}/{key}"
    manifests["bucket"] = name
    return manifests


def summary(frame) -> dict:
    return {
        r.key: (r.size, r.etag, (r.id_kind, r.family, r.generation, r.hash), r.bucket)
        for r in frame.collect()
    }


def test_listing_and_inventory_reports_equal_the_uploaded_set(spark, s3, james_bucket, reports):
    endpoint = s3_endpoint(s3)
    expected = {
        key: (len(body), hashlib.md5(body).hexdigest(), kind, james_bucket)
        for key, (body, kind) in BLOBS.items()
    }
    live = read_james_blobs(spark, location=f"s3://{james_bucket}", endpoint=endpoint)
    assert summary(live) == expected
    for config in ("csv", "parquet"):
        frame = read_james_blobs(spark, inventory=reports[config], endpoint=endpoint)
        assert summary(frame) == expected, config
    # The report's timestamps are the listing's, to the second.
    times = {r.key: r.last_modified.replace(microsecond=0) for r in live.collect()}
    csv = read_james_blobs(spark, inventory=reports["csv"], endpoint=endpoint)
    assert {r.key: r.last_modified for r in csv.collect()} == times


def test_a_missing_manifest_or_data_file_on_s3_is_named(spark, s3, reports):
    endpoint = s3_endpoint(s3)
    bucket = reports["bucket"]
    with pytest.raises(Exception) as caught:
        read_james_blobs(spark, inventory=f"s3://{bucket}/nowhere/", endpoint=endpoint)
    assert explain(caught.value) == (
        f"InputError: s3://{bucket}/nowhere/manifest.json does not exist at {s3['endpoint']}"
    )
    client = endpoint.client()
    manifest_key = reports["csv"].removeprefix(f"s3://{bucket}/")
    manifest = json.loads(client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    manifest["files"].append({"key": "inv/gone.csv.gz", "size": 1})
    client.put_object(Bucket=bucket, Key="broken/manifest.json", Body=json.dumps(manifest))
    frame = read_james_blobs(spark, inventory=f"s3://{bucket}/broken", endpoint=endpoint)
    with pytest.raises(Exception) as caught:
        frame.collect()
    assert explain(caught.value) == (
        f"InputError: s3://{bucket}/inv/gone.csv.gz does not exist at {s3['endpoint']}"
    )
