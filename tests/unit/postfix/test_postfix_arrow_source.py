"""The ``postfix_files`` source yields Arrow record batches; over the bundled sample, the planted
queue and a queue with odd names and 8-bit text it gives exactly what its tuple rows
(`files.read_files`) gave: the same Arrow columns as Spark's own conversion of those tuples, and
the same DataFrame rows."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.systems.postfix import fleet
from mqforensics.systems.postfix.files import FILE_COLUMNS, FILES
from mqforensics.systems.postfix.queue_dir import QueueDir
from tests.unit.arrow_sources import assert_same_table, sorted_rows, spark_table, struct, table
from tests.unit.postfix import planted_queue

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "postfix" / "sample" / "queue"
# A defer log whose recipient and reason are not valid UTF-8: U+FFFD in the rows.
EIGHT_BIT_LOG = (
    b"recipient=b\xe9b\xff@example.net\noffset=243\nstatus=4.4.1\naction=delayed\n"
    b"reason=caf\xc3\xa9 \xff refused\n\n"
)


@pytest.fixture(scope="module")
def queue_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[QueueDir]:
    """The sample; the planted queue with an 8-bit defer log and a symbolic link; the sample
    copied under a name that is not valid UTF-8, with a message renamed so too."""
    root = tmp_path_factory.mktemp("queues")
    planted = planted_queue.build(root / "planted")
    (planted / "defer" / "9" / "9A8B7C6D5E4").write_bytes(EIGHT_BIT_LOG)
    (planted / "hold" / "B3C4D5E6F7A").symlink_to(planted / "hold" / "A3B4C5D6E7F")
    odd = os.path.join(os.fsencode(root), b"queue-\xfe")
    shutil.copytree(os.fsencode(SAMPLE), odd)
    held = os.path.join(odd, b"hold", b"4C4B4A0A252")
    os.rename(held, held + b"\xff\xfe")
    return [QueueDir("mx1", str(SAMPLE)), QueueDir("mx2", str(planted)),
            QueueDir("mx\xff", os.fsdecode(odd))]  # fmt: skip


def _reader(spark, queue_dirs: list[QueueDir]) -> tuple[fleet.PostfixFilesReader, list]:
    """The source's reader of `queue_dirs` and its partitions."""
    option = fleet.json.dumps([[q.host, q.path] for q in queue_dirs])
    reader = fleet.PostfixFilesReader({"queue_dirs": option}, struct(spark, FILES))
    return reader, reader.partitions()


def test_the_corpus_holds_odd_names_8bit_text_and_unread_files(queue_dirs, spark) -> None:
    reader, parts = _reader(spark, queue_dirs)
    rows = [dict(zip(FILE_COLUMNS, r, strict=True)) for p in parts for r in reader.rows(p)]
    assert any("\\xff\\xfe" in r["path"] for r in rows)
    assert any(r["read_error"] == "not a regular file" for r in rows)
    entries = [e for r in rows for e in r["log_entries"] or ()]
    assert ("b\ufffdb\ufffd@example.net", "caf\u00e9 \ufffd refused") in {
        (e[0], e[5]) for e in entries
    }
    assert {r["kind"] for r in rows} == {"message", "log"}
    assert any(r["attributes"] for r in rows) and any(r["recipients"] for r in rows)


def test_the_batches_are_sparks_conversion_of_the_rows(queue_dirs, spark) -> None:
    schema = struct(spark, FILES)
    reader, parts = _reader(spark, queue_dirs)
    for part in parts:
        want = spark_table(reader.rows(part), schema)
        assert want.num_rows
        assert_same_table(table(reader.read(part), schema), want)
        small = list(ArrowRows(schema).batches(reader.rows(part), size=4))
        assert all(b.num_rows <= 4 for b in small)
        assert_same_table(table(small, schema), want)
    assert list(reader.read(None)) == []  # Spark's one empty partition


def test_the_source_reads_what_the_tuple_rows_held(queue_dirs, spark) -> None:
    reader, parts = _reader(spark, queue_dirs)
    frame = fleet.read_queue_dirs(spark, queue_dirs)
    old = spark.createDataFrame([r for p in parts for r in reader.rows(p)], FILES)
    assert frame.schema == old.schema
    assert sorted_rows(frame.collect()) == sorted_rows(old.collect())
