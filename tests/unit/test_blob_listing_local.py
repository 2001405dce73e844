"""`mqf_blobs` over a local directory, through a real local Spark."""

import pytest

from mqforensics.errors import explain
from mqforensics.sources.blobstore import read_blobs

LAYOUT = {
    "top-level-blob": 11,
    "a/1": 1,
    "a/2": 2,
    "a/deeper/3": 3,
    "b/4": 0,  # empty objects are objects too
}


def write_layout(root, layout):
    for key, size in layout.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"m" * size)


def test_lists_every_object_once_with_its_size(spark, tmp_path):
    store = tmp_path / "bucket-copy"
    write_layout(store, LAYOUT)
    (store / "empty-dir").mkdir()
    rows = read_blobs(spark, str(store)).collect()
    assert sorted((r.key, r.size) for r in rows) == sorted(LAYOUT.items())
    assert {r.bucket for r in rows} == {"bucket-copy"}
    assert all(r.last_modified is not None for r in rows)


def test_file_url_form_and_an_empty_directory(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    assert read_blobs(spark, (tmp_path / "empty").as_uri()).count() == 0


def test_a_missing_directory_is_one_clear_input_error(spark, tmp_path):
    with pytest.raises(Exception) as caught:
        read_blobs(spark, str(tmp_path / "nope")).count()
    assert explain(caught.value) == (
        f"InputError: blob directory {tmp_path / 'nope'} does not exist or is not a directory"
    )
