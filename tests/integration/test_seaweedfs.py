"""Against the session's real SeaweedFS S3: boto3, and the `mqf_blobs` source over S3."""

import hashlib
import uuid

import pytest

from mqforensics.errors import explain
from mqforensics.services.harness import Harness
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.sources.blobstore import S3Endpoint, read_blobs

pytestmark = pytest.mark.integration

OBJECTS = {
    "root-object": b"r" * 17,
    "0a/1f/blob-1": b"header\r\n\r\nbody",
    "0a/2b/blob-2": b"",
    "ff/blob-3": b"x" * 70_000,
    "ff/deeper/still/blob-4": b"y" * 3,
}


@pytest.fixture(scope="module")
def bucket(s3):
    client = s3_endpoint(s3).client()
    name = f"mqf-it-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    for key, body in OBJECTS.items():
        client.put_object(Bucket=name, Key=key, Body=body)
    return name


def test_put_list_delete_with_boto3(s3):
    client = s3_endpoint(s3).client()
    name = f"mqf-it-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    client.put_object(Bucket=name, Key="a/one", Body=b"1")
    client.put_object(Bucket=name, Key="a/two", Body=b"22")
    listed = client.list_objects_v2(Bucket=name)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("a/one", 1), ("a/two", 2)]
    client.delete_object(Bucket=name, Key="a/one")
    listed = client.list_objects_v2(Bucket=name)["Contents"]
    assert [o["Key"] for o in listed] == ["a/two"]
    assert client.get_object(Bucket=name, Key="a/two")["Body"].read() == b"22"


def test_blob_listing_over_s3_names_every_object_with_size_and_etag(spark, s3, bucket):
    rows = read_blobs(spark, f"s3://{bucket}", s3_endpoint(s3)).collect()
    assert sorted((r.key, r.size) for r in rows) == sorted(
        (key, len(body)) for key, body in OBJECTS.items()
    )
    # Single-part uploads: the ETag is the MD5 of the content.
    assert {r.key: r.etag for r in rows} == {
        key: hashlib.md5(body).hexdigest() for key, body in OBJECTS.items()
    }
    assert {r.bucket for r in rows} == {bucket}


def test_blob_listing_under_a_prefix_and_its_partitions(spark, s3, bucket):
    frame = read_blobs(spark, f"s3://{bucket}/ff", s3_endpoint(s3))
    # Objects directly under ff/ form one partition, the one common prefix ff/deeper/ another.
    assert frame.rdd.getNumPartitions() == 2
    assert sorted(r.key for r in frame.collect()) == ["ff/blob-3", "ff/deeper/still/blob-4"]


def test_listing_reflects_deletions(spark, s3, bucket):
    client = s3_endpoint(s3).client()
    client.put_object(Bucket=bucket, Key="0a/temporary", Body=b"t")
    assert read_blobs(spark, f"s3://{bucket}/0a", s3_endpoint(s3)).count() == 3
    client.delete_object(Bucket=bucket, Key="0a/temporary")
    assert read_blobs(spark, f"s3://{bucket}/0a", s3_endpoint(s3)).count() == 2


def test_wrong_keys_and_a_missing_bucket_are_one_line_errors(spark, s3, bucket):
    wrong = S3Endpoint(s3["endpoint"], s3["region"], s3["access_key"], "wrong-secret")
    with pytest.raises(Exception) as caught:
        read_blobs(spark, f"s3://{bucket}", wrong).count()
    message = explain(caught.value)
    assert message.startswith(f"AuthenticationFailed: {s3['endpoint']} refused the credentials")
    assert "wrong-secret" not in str(caught.value)

    with pytest.raises(Exception) as caught:
        read_blobs(spark, "s3://no-such-bucket", s3_endpoint(s3)).count()
    assert explain(caught.value) == (
        f"InputError: bucket 'no-such-bucket' does not exist at {s3['endpoint']}"
    )


def test_a_server_that_goes_away_is_a_clear_error(spark, tmp_path):
    # A second, private SeaweedFS that this test may stop without disturbing the others.
    harness = Harness(tmp_path / "private")
    info = harness.ensure("seaweedfs")
    endpoint = s3_endpoint(info)
    endpoint.client().create_bucket(Bucket="going")
    endpoint.client().put_object(Bucket="going", Key="k", Body=b"v")
    frame = read_blobs(spark, "s3://going", endpoint)
    assert frame.count() == 1
    assert harness.stop_all() == ["seaweedfs"]
    with pytest.raises(Exception) as caught:
        frame.count()
    assert (
        explain(caught.value) == f"ServerUnavailable: S3 endpoint {info['endpoint']} is unreachable"
    )


def test_hex_split_lists_a_flat_bucket_in_17_ranges_each_key_exactly_once(spark, s3):
    client = s3_endpoint(s3).client()
    name = f"mqf-it-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    # Keys on every boundary ("0", "a", "f"), before the first ("!", "-x"), between "9" and "a"
    # ("Zeta", "_u"), after the last ("zz", "ü"), and passthrough-style UUIDs.
    keys = ["0", "a", "f", "!", "-x", "Zeta", "_u", "zz", "ü", "9", "9zz", "f0", "ff"]
    keys += [str(uuid.UUID(int=n * 7919 + 12345)) for n in range(40)]
    for key in keys:
        client.put_object(Bucket=name, Key=key, Body=key.encode())
    try:
        frame = read_blobs(spark, f"s3://{name}", s3_endpoint(s3), split="hex")
        assert frame.rdd.getNumPartitions() == 17
        rows = frame.collect()
        assert sorted(r.key for r in rows) == sorted(keys)  # every key, none twice
        assert {r.key: r.size for r in rows} == {k: len(k.encode()) for k in keys}
    finally:
        for key in keys:
            client.delete_object(Bucket=name, Key=key)
        client.delete_bucket(Bucket=name)
