"""The schema Spark stored in Parquet footers, read without a Spark job, or left to Spark."""

import datetime as dt
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from mqforensics import parquet_footer

SCHEMA = (
    "name string, bucket int, at timestamp, recipients array<string>, "
    "attributes map<string, binary>, headers array<struct<_1: string, _2: string, _3: string>>"
)
ROWS = [
    ("a", 1, dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC), ["x@example.org"], {"k": b"v"},
     [("x@example.org", "X-H", "1")]),
    (None, None, None, None, None, None),
]  # fmt: skip


def written_by_spark(spark, path, rows=ROWS, schema=SCHEMA):
    spark.createDataFrame(rows, schema).repartition(2).write.parquet(str(path))
    return path


def test_a_table_written_by_spark_gets_the_schema_spark_infers(spark, tmp_path):
    path = written_by_spark(spark, tmp_path / "t.parquet")
    assert (path / "_SUCCESS").exists()  # skipped, as Spark skips it
    schema = parquet_footer.spark_schema(path)
    assert schema is not None
    assert schema == spark.read.parquet(str(path)).schema
    got = sorted(parquet_footer.read(spark, path).collect(), key=lambda r: r.name or "")
    assert got == sorted(spark.read.parquet(str(path)).collect(), key=lambda r: r.name or "")
    assert {r.name for r in got} == {"a", None}


def test_a_single_file_has_its_footer_read(spark, tmp_path):
    path = written_by_spark(spark, tmp_path / "t.parquet")
    single = next(path.glob("part-*.parquet"))
    assert parquet_footer.spark_schema(single) == spark.read.parquet(str(path)).schema


def test_anything_else_is_left_to_spark(spark, tmp_path):
    # Written by another tool: no schema of Spark's in the footer.
    other = tmp_path / "arrow.parquet"
    other.mkdir()
    pq.write_table(pa.table({"name": ["a", "b"]}), other / "part-0.parquet")
    assert parquet_footer.spark_schema(other) is None
    assert [r.name for r in parquet_footer.read(spark, other).collect()] == ["a", "b"]
    # Files whose stored schemas differ: Spark picks one footer, we do not guess which.
    mixed = written_by_spark(spark, tmp_path / "mixed.parquet")
    narrow = written_by_spark(spark, tmp_path / "narrow.parquet", [("b",)], "name string")
    shutil.copy(next(narrow.glob("part-*.parquet")), mixed / "part-99999.parquet")
    assert parquet_footer.spark_schema(mixed) is None
    # A partition directory, summary files, an unreadable footer, a path that is not there.
    partitioned = written_by_spark(spark, tmp_path / "partitioned.parquet")
    (partitioned / "bucket=1").mkdir()
    assert parquet_footer.spark_schema(partitioned) is None
    summary = written_by_spark(spark, tmp_path / "summary.parquet")
    (summary / "_common_metadata").write_bytes(b"")
    assert parquet_footer.spark_schema(summary) is None
    torn = written_by_spark(spark, tmp_path / "torn.parquet")
    part = next(torn.glob("part-*.parquet"))
    part.write_bytes(part.read_bytes()[:-20])
    assert parquet_footer.spark_schema(torn) is None
    assert parquet_footer.spark_schema(tmp_path / "absent.parquet") is None
