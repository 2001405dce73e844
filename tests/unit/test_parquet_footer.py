"""The schema Spark stored in Parquet footers, read without a Spark job, or left to Spark."""

import datetime as dt
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from mqforensics.sources import parquet_footer

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


ARROW_TYPES = {
    "name": pa.string(),
    "big": pa.large_string(),
    "blob": pa.binary(),
    "flag": pa.bool_(),
    "tiny": pa.int8(),
    "small": pa.int16(),
    "bucket": pa.int32(),
    "count": pa.int64(),
    "ratio": pa.float32(),
    "share": pa.float64(),
    "day": pa.date32(),
    "amount": pa.decimal128(12, 3),
    "at": pa.timestamp("us", tz="UTC"),
    "at_ms": pa.timestamp("ms", tz="Europe/Paris"),
    "recipients": pa.list_(pa.string()),
    "attributes": pa.map_(pa.string(), pa.binary()),
    "headers": pa.list_(pa.struct([("_1", pa.string()), ("_2", pa.string()), ("_3", pa.string())])),
    "nested": pa.struct([("ids", pa.list_(pa.int64())),
                         ("more", pa.map_(pa.string(), pa.list_(pa.int32())))]),
}  # fmt: skip


def test_a_table_written_by_another_tool_gets_the_schema_spark_infers(spark, tmp_path):
    """pyarrow's files (no schema of Spark's in the footer): mapped from the Parquet schema,
    exactly as Spark's own inference maps it, so no job infers it."""
    path = tmp_path / "arrow.parquet"
    path.mkdir()
    table = pa.table({n: pa.nulls(2, t) for n, t in ARROW_TYPES.items()})
    for part in range(2):
        pq.write_table(table, path / f"part-{part}.parquet")
    schema = parquet_footer.spark_schema(path)
    assert schema is not None and len(schema.fields) == len(ARROW_TYPES)
    assert schema == spark.read.parquet(str(path)).schema
    assert parquet_footer.read(spark, path).count() == 4
    # INT96 instants, as older writers store them, are timestamps to Spark.
    legacy = tmp_path / "int96.parquet"
    at = pa.table({"at": pa.array([dt.datetime(2026, 11, 1)], pa.timestamp("us"))})
    pq.write_table(at, legacy, use_deprecated_int96_timestamps=True)
    assert parquet_footer.spark_schema(legacy) == spark.read.parquet(str(legacy)).schema


def test_anything_else_is_left_to_spark(spark, tmp_path):
    # Written by another tool with a type read by a setting of Spark's or not plainly: unsigned
    # integers, local date-times, nanoseconds; and files whose Parquet schemas differ.
    for name, kind in [("u", pa.uint32()), ("local", pa.timestamp("us")),
                       ("ns", pa.timestamp("ns", tz="UTC"))]:  # fmt: skip
        other = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"name": ["a"], name: pa.nulls(1, kind)}), other)
        assert parquet_footer.spark_schema(other) is None, name
    other = tmp_path / "arrow.parquet"
    other.mkdir()
    pq.write_table(pa.table({"name": ["a", "b"]}), other / "part-0.parquet")
    pq.write_table(pa.table({"name": [1]}), other / "part-1.parquet")
    assert parquet_footer.spark_schema(other) is None
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


COLUMNS = {"queuename": "string", "browsestart": "timestamp"}


def test_a_small_table_of_plain_columns_is_read_as_spark_reads_it(spark, tmp_path):
    at = dt.datetime(2026, 11, 1, 10, 30, 0, 123456, tzinfo=dt.UTC)
    # INT96 timestamps, as Spark writes them by default.
    by_spark = written_by_spark(
        spark, tmp_path / "spark.parquet", [("spool", at), ("out", None)], "queuename string, "
        "browsestart timestamp",
    )  # fmt: skip
    # INT64 microseconds adjusted to UTC, column names in another case, as another tool writes.
    by_arrow = tmp_path / "arrow.parquet"
    by_arrow.mkdir()
    pq.write_table(
        pa.table({"QueueName": ["spool", "out"], "browseStart": pa.array([at, None],
                  pa.timestamp("us", tz="UTC"))}), by_arrow / "part-0.parquet",
    )  # fmt: skip
    for path in (by_spark, by_arrow):
        rows = parquet_footer.small_rows(path, COLUMNS, 10)
        assert rows is not None and sorted(rows, key=str) == sorted(
            [("spool", at), ("out", None)], key=str
        )
        spark_rows = spark.read.parquet(str(path)).collect()
        assert {r[0]: r[1] and r[1].astimezone(dt.UTC) for r in spark_rows} == dict(rows)
    assert parquet_footer.small_rows(by_spark, COLUMNS, 1) is None  # more rows than asked


def test_other_small_tables_are_left_to_spark(tmp_path):
    def table(name, data):
        path = tmp_path / name
        path.mkdir()
        pq.write_table(pa.table(data), path / "part-0.parquet")
        return path

    at = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    cases = {
        # Not adjusted to UTC: Spark reads TIMESTAMP_NTZ.
        "ntz": {"queuename": ["a"], "browsestart": pa.array([at.replace(tzinfo=None)],
                                                            pa.timestamp("us"))},
        "nanos": {"queuename": ["a"], "browsestart": pa.array([at], pa.timestamp("ns", tz="UTC"))},
        "binary": {"queuename": pa.array([b"a"], pa.binary()), "browsestart": [at]},
        "extra": {"queuename": ["a"], "browsestart": [at], "other": [1]},
        "missing": {"queuename": ["a"]},
        "twice": {"queuename": ["a"], "QUEUENAME": ["b"], "browsestart": [at]},
        "ancient": {"queuename": ["a"], "browsestart": [dt.datetime(1500, 1, 1, tzinfo=dt.UTC)]},
    }  # fmt: skip
    for name, data in cases.items():
        assert parquet_footer.small_rows(table(name, data), COLUMNS, 10) is None, name
    plain = table("plain", {"queuename": ["a"], "browsestart": [at]})
    assert parquet_footer.small_rows(plain, COLUMNS, 10) == [("a", at)]
    torn = plain / "part-0.parquet"
    torn.write_bytes(torn.read_bytes()[:-30])
    assert parquet_footer.small_rows(plain, COLUMNS, 10) is None


def test_row_counts_come_from_the_footers(spark, tmp_path):
    path = written_by_spark(spark, tmp_path / "t.parquet", ROWS * 3)
    assert parquet_footer.row_count(path) == 6 == spark.read.parquet(str(path)).count()
    part = next(path.glob("part-*.parquet"))
    part.write_bytes(part.read_bytes()[:-20])
    assert parquet_footer.row_count(path) is None
    assert parquet_footer.row_count(tmp_path / "absent.parquet") is None
