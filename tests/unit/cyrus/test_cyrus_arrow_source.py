"""The ``cyrus_mailboxes`` and ``cyrus_fleet`` sources yield Arrow record batches; over every
bundled sample and test file they give exactly what the tuple rows (`fleet.record_rows`,
`fleet.read_row`) gave: the same Arrow columns as Spark's own conversion of those tuples, and
the same DataFrame rows."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.systems.cyrus import columns, dumps, fleet
from mqforensics.systems.cyrus.database import Database, read_database
from mqforensics.systems.cyrus.frames import READ, RECORDS
from tests.unit.arrow_sources import assert_same_table, sorted_rows, spark_table, struct, table

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "datasets" / "cyrus" / "sample"
DATA = REPO / "tests" / "data" / "cyrus"
# A name that is not valid UTF-8: the ``file`` column holds its escaped text.
ODD = b"mailboxes-\xff.db"


def _readable(path: Path) -> bool:
    try:
        read_database(path)
    except InputError:  # a file the audit refuses is no corpus of the sources
        return False
    return True


CORPUS = [SAMPLE / "backend1" / "mailboxes.db", SAMPLE / "backend2" / "mailboxes.show"] + [
    p for p in sorted(DATA.iterdir()) if _readable(p)
]
BATCH_SHOW = DATA / "evil_twoskip.batchshow"  # read by `dumps.read_batch_show` (`_database`)


@pytest.fixture(scope="module")
def schemas(spark):
    return struct(spark, RECORDS), struct(spark, READ)


def _database(path: Path) -> Database:
    """What the sources read from `path`; a batch ``SHOW`` dump that `read_database` takes
    for a JSON dump (it starts with ``{``) is read as a batch ``SHOW`` dump."""
    if path.suffix == ".batchshow":
        return Database(str(path), dumps.read_batch_show(path), format="batchshow")
    return read_database(path)


def _with_listed_items(db: Database) -> Database:
    """`db` with its records as a list of pairs, as the reference readers and dumps give them."""
    return dataclasses.replace(db, items=None if db.items is None else list(db.items))


def test_the_corpus_holds_every_format_and_undecodable_text() -> None:
    formats = {_database(p).format for p in [*CORPUS, BATCH_SHOW]}
    assert formats == {"twoskip", "skiplist", "show", "batchshow", "flat", "ctl_mboxlist"}
    texts = [v for p in CORPUS for row in fleet.record_rows(_database(p)) for v in row[4:]]
    assert any(isinstance(v, str) and "\ufffd" in v for v in texts)


@pytest.mark.parametrize("path", [*CORPUS, BATCH_SHOW], ids=lambda p: p.name)
def test_record_batches_are_sparks_conversion_of_record_rows(schemas, path: Path) -> None:
    records, _ = schemas
    db = _database(path)
    want = spark_table(fleet.record_rows(db), records)
    assert_same_table(table(fleet.record_batches(db, ArrowRows(records)), records), want)
    listed = _with_listed_items(db)
    assert_same_table(table(fleet.record_batches(listed, ArrowRows(records)), records), want)


@pytest.mark.parametrize("path", [*CORPUS, BATCH_SHOW], ids=lambda p: p.name)
def test_small_batches_keep_the_order_and_the_positions(
    schemas, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, _ = schemas
    monkeypatch.setattr(columns, "BATCH", 3)  # the fast readers' batch of records
    monkeypatch.setattr(fleet, "BATCH_ROWS", 3)  # a list of pairs'
    db = _database(path)
    want = spark_table(fleet.record_rows(db), records)
    for each in (db, _with_listed_items(db)):
        batches = list(fleet.record_batches(each, ArrowRows(records)))
        assert all(b.num_rows <= 3 for b in batches)
        assert_same_table(table(batches, records), want)


@pytest.mark.parametrize("path", [*CORPUS, BATCH_SHOW], ids=lambda p: p.name)
def test_the_read_row_batch_is_sparks_conversion_of_read_row(schemas, path: Path) -> None:
    _, read = schemas
    db = _database(path)
    reader = fleet.CyrusFleetReader({}, read)
    got = table(reader.batches(db, ArrowRows(read)), read)
    assert_same_table(got, spark_table([fleet.read_row(db)], read))


def test_the_sources_read_what_the_tuple_rows_held(spark, tmp_path: Path) -> None:
    odd = os.path.join(os.fsencode(tmp_path), ODD)
    shutil.copyfile(SAMPLE / "backend1" / "mailboxes.db", odd)
    paths = [*CORPUS, Path(os.fsdecode(odd))]
    dbs = [read_database(p.absolute()) for p in paths]
    assert any("\\xff" in db.source for db in dbs)

    records = fleet.read_records(spark, paths)
    old = spark.createDataFrame([r for db in dbs for r in fleet.record_rows(db)], RECORDS)
    assert records.schema == old.schema
    assert sorted_rows(records.collect()) == sorted_rows(old.collect())

    read = fleet._load(spark, fleet.CyrusFleetSource, {"paths": fleet.json.dumps(
        fleet._checked(paths))})  # fmt: skip
    old_read = spark.createDataFrame([fleet.read_row(db) for db in dbs], READ)
    assert read.schema == old_read.schema
    assert sorted_rows(read.collect()) == sorted_rows(old_read.collect())
