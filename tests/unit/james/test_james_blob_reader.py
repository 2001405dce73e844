"""James's blob bucket read into the `BLOBS` frame (`read.read_james_blobs`): the shared
listing and S3 Inventory readers, with James's blob ids parsed."""

import gzip

import pytest

from mqforensics.errors import explain
from mqforensics.systems.james.read import read_james_blobs
from tests.unit.test_blob_inventory import CSV_SCHEMA, KINDS, OBJECTS, object_lines, write_report


def test_read_james_blobs_from_a_report_parses_the_ids(spark, tmp_path):
    manifest = write_report(
        tmp_path,
        "CSV",
        CSV_SCHEMA,
        {"a.csv.gz": gzip.compress("".join(object_lines(OBJECTS)).encode())},
    )
    frame = read_james_blobs(spark, inventory=manifest)
    assert frame.columns == [
        "bucket", "key", "size", "last_modified", "etag", "storage_class",
        "id_kind", "family", "generation", "hash",
    ]  # fmt: skip
    assert {r.key: (r.id_kind, r.family, r.generation) for r in frame.collect()} == KINDS


def test_read_james_blobs_needs_exactly_one_source(spark):
    message = "ConfigError: give exactly one of location (a live listing) or inventory (a report)"
    for kwargs in ({}, {"location": "x", "inventory": "y"}):
        with pytest.raises(Exception) as caught:
            read_james_blobs(spark, **kwargs)
        assert explain(caught.value) == message
