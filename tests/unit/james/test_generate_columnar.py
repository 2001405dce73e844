"""The vectorised snapshot writer (datasets.james.columnar) writes the reference's tables.

Every table of `columnar.write_parquet` equals the row-by-row reference's
(`generate.write_parquet`) row for row after sorting, and its ground truth and anomaly list are
the same bytes; the view and deletion parts are even the same files.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datasets.james import columnar
from datasets.james import generate as gen
from datasets.james.make_sample import SAMPLE_SPEC
from mqforensics import native

SORT_KEYS = {"blob_inventory.parquet": "key", "eventstore.parquet": "event"}


def _sorted(directory: Path) -> pa.Table:
    table = pq.read_table(directory)
    names = table.column_names
    key = SORT_KEYS.get(directory.name, "enqueueid" if "enqueueid" in names else names[0])
    return table.sort_by(key).combine_chunks()


def _assert_same(reference: Path, fast: Path) -> None:
    tables = sorted(p.name for p in reference.glob("*.parquet"))
    assert tables == sorted(p.name for p in fast.glob("*.parquet"))
    for name in tables:
        ours, theirs = _sorted(fast / name), _sorted(reference / name)
        assert ours.num_rows == theirs.num_rows, name
        assert ours.equals(theirs), name
    for name in ("ground_truth.json", "ANOMALIES.md", "snapshot.json"):
        assert (fast / name).read_bytes() == (reference / name).read_bytes(), name
    for table in ("enqueuedmailsv4.parquet", "enqueuedmailsv3.parquet", "deletedmailsv2.parquet"):
        for part in sorted((reference / table).glob("part-*.parquet")):
            assert (fast / table / part.name).read_bytes() == part.read_bytes(), part


@pytest.fixture(autouse=True)
def _kernel() -> None:
    native.forget()
    assert native.load(columnar.KERNEL) is not None, native.unavailable(columnar.KERNEL)


CASES = {
    # the benchmark's spec (bench/james_audit.py), several chunks per queue
    "bench-20k": dataclasses.replace(SAMPLE_SPEC, normal_mails=20_000, chunk_size=6_000),
    "bench-200k": dataclasses.replace(SAMPLE_SPEC, normal_mails=200_000, chunk_size=70_000),
    "v3-four-queues": gen.GenerationSpec(
        seed=5,
        table_version="v3",
        queues=("spool", "outgoing", "bounces", "relay"),
        normal_mails=20_000,
        chunk_size=4_000,
        anomalies=gen.AnomalyCounts(
            never_cleaned_partitions=2,
            stuck_mails=2,
            invisible_mails=1,
            orphaned_blobs=2,
            dangling_blob_refs=2,
            bucket_mismatches=1,
            slice_mismatches=2,
            config_violations=2,
            pinned_browse_start=1,
            empty_queue_old_browse_start=1,
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_columnar_writes_the_reference_tables(case, tmp_path):
    spec = CASES[case]
    gen.write_parquet(spec, tmp_path / "reference", blob_files=False)
    truth = columnar.write_parquet(spec, tmp_path / "fast", blob_files=False)
    _assert_same(tmp_path / "reference", tmp_path / "fast")
    written = json.loads((tmp_path / "reference" / "ground_truth.json").read_text())
    assert truth == written["findings"]


def test_two_workers_write_the_same_tables(tmp_path):
    spec = dataclasses.replace(SAMPLE_SPEC, normal_mails=9_000, chunk_size=2_000)
    columnar.write_parquet(spec, tmp_path / "one", blob_files=False)
    columnar.write_parquet(spec, tmp_path / "two", blob_files=False, workers=2)
    for table in sorted(p.name for p in (tmp_path / "one").glob("*.parquet")):
        for part in sorted((tmp_path / "one" / table).glob("part-*.parquet")):
            assert (tmp_path / "two" / table / part.name).read_bytes() == part.read_bytes()


def test_without_blobs_no_inventory_and_the_reference_truth(tmp_path):
    spec = dataclasses.replace(SAMPLE_SPEC, normal_mails=3_000, chunk_size=1_000)
    gen.write_parquet(spec, tmp_path / "reference", blobs=False)
    columnar.write_parquet(spec, tmp_path / "fast", blobs=False)
    assert not (tmp_path / "fast" / "blob_inventory.parquet").exists()
    _assert_same(tmp_path / "reference", tmp_path / "fast")


def test_what_the_reference_writes(tmp_path, monkeypatch):
    dedup = dataclasses.replace(SAMPLE_SPEC, blob_strategy="deduplication", normal_mails=500)
    assert "deduplication" in columnar.unavailable(dedup, blob_files=False)
    assert "blob files" in columnar.unavailable(SAMPLE_SPEC, blob_files=True)
    assert columnar.unavailable(SAMPLE_SPEC, blob_files=False) is None
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    assert columnar.unavailable(SAMPLE_SPEC, blob_files=False) == "MQF_NATIVE is off"
    spec = dataclasses.replace(SAMPLE_SPEC, normal_mails=600, chunk_size=250)
    columnar.write_parquet(spec, tmp_path / "fallback", blob_files=False)
    gen.write_parquet(spec, tmp_path / "reference", blob_files=False)
    for path in sorted((tmp_path / "reference").rglob("*.parquet/*")):
        relative = path.relative_to(tmp_path / "reference")
        assert (tmp_path / "fallback" / relative).read_bytes() == path.read_bytes()
    native.forget()
