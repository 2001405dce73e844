"""`sources.arrow_rows.ArrowRows` gives exactly the record batches Spark's own conversion of a
Python data source's tuples gives, for every column type the mail-store sources have."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from mqforensics.sources.arrow_rows import ArrowRows
from tests.unit.arrow_sources import assert_same_table, spark_table, struct, table

SCHEMA = (
    "s string, b binary, n bigint, i int, f boolean, d double, t timestamp, "
    "strings array<string>, ints array<int>, attrs map<string,string>, "
    "pairs array<struct<key: binary, value: binary>>, "
    "parts array<struct<name: string, size: bigint, at: timestamp>>, "
    "log array<struct<who: string, offset: bigint, ok: boolean>>"
)
PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
ROWS = [
    ("plain", b"\x00\xff", 1 << 40, 7, True, 0.5, dt.datetime(2026, 3, 1, tzinfo=dt.UTC),
     ["a", "\ufffd"], [1, -2], {"k": "v", "é": None}, [(b"N\xff", b"%(A)"), (b"", b"")],
     [("env", 12, dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=PLUS_TWO))],
     [("bob@example.net", 243, False)]),
    (None, None, None, None, None, None, None, None, None, None, None, None, None),
    ("", b"", 0, 0, False, -1.0, dt.datetime(1970, 1, 1, tzinfo=dt.UTC), [], [], {}, [], [],
     []),
    ("U+FFFD \ufffd stays", b"x", -1, -(1 << 31), None, None,
     dt.datetime(2026, 3, 1, 12, 0),  # naive: local time to Spark, so here too
     [None, "b"], [None], {"a": "b"}, [(b"k", None)], [(None, None, None)], [(None, None, None)]),
]  # fmt: skip


@pytest.fixture(scope="module")
def schema(spark):
    return struct(spark, SCHEMA)


def test_batches_equal_sparks_own_conversion_for_every_type(schema) -> None:
    got = table(ArrowRows(schema).batches(ROWS), schema)
    assert_same_table(got, spark_table(ROWS, schema))


def test_at_most_size_rows_a_batch_and_none_for_none(schema) -> None:
    arrow = ArrowRows(schema)
    assert [b.num_rows for b in arrow.batches(ROWS * 2, size=3)] == [3, 3, 2]
    assert list(arrow.batches([])) == []
    assert arrow.batch([]).num_rows == 0


def test_whole_columns_may_be_arrow_arrays(spark) -> None:
    schema = struct(spark, "s string, n int")
    batch = ArrowRows(schema).columns_batch([pa.array(["a", "b"]), [1, None]])
    assert batch.to_pylist() == [{"s": "a", "n": 1}, {"s": "b", "n": None}]


def test_undecoded_text_fails_as_in_sparks_path_and_a_wrong_type_fails(schema) -> None:
    # A lone surrogate (bytes decoded with surrogateescape) is what `units.valid_utf8` removes
    # before a row is made: neither path can carry it.
    row = ("a\udcff", *ROWS[1][1:])
    with pytest.raises(UnicodeEncodeError):
        spark_table([row], schema)
    with pytest.raises(UnicodeEncodeError):
        ArrowRows(schema).batch([row])
    with pytest.raises(pa.ArrowTypeError):
        ArrowRows(schema).batch([(1, *ROWS[1][1:])])
    with pytest.raises(ValueError, match="a row has 2 values"):
        ArrowRows(schema).batch([("a", b"")])
