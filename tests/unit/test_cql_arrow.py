"""`cql_arrow`: Arrow batches carry exactly the values of the row path, in Spark's Arrow types."""

import datetime as dt
import decimal
import uuid
from collections import namedtuple

import pyarrow as pa
import pytest
from cassandra.util import Date, Duration, SortedSet, Time
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from mqforensics.sources import cql_types
from mqforensics.sources.cql_arrow import BatchMaker, arrow_type, column_converter

UDTS = {"addr": [("street", "text"), ("zip", "int")]}
COLUMNS = [
    ("t", "text"), ("a", "ascii"), ("b", "boolean"), ("ti", "tinyint"), ("si", "smallint"),
    ("i", "int"), ("bi", "bigint"), ("f", "float"), ("d", "double"), ("ts", "timestamp"),
    ("u", "uuid"), ("tu", "timeuuid"), ("ip", "inet"), ("du", "duration"), ("vi", "varint"),
    ("de", "decimal"), ("da", "date"), ("tm", "time"), ("bl", "blob"),
    ("l", "list<text>"), ("s", "frozen<set<timestamp>>"), ("m", "map<text, blob>"),
    ("tp", "tuple<text, int>"), ("ud", "frozen<addr>"), ("v", "vector<float, 2>"),
    ("nested", "frozen<list<frozen<tuple<text, frozen<map<text, blob>>>>>>"),
]  # fmt: skip
Addr = namedtuple("Addr", ["street", "zip"])


def driver_row(n: int) -> tuple:
    """Values of the types cassandra-driver returns for the columns above."""
    return (
        f"text {n}", "ascii", n % 2 == 0, 7, 300, n, 2**40 + n, 1.5, 2.25,
        dt.datetime(2026, 11, 1, 12, n % 60, 5, 123000),  # naive, UTC: what the driver returns
        uuid.UUID(int=n), uuid.uuid1(node=1, clock_seq=n), "10.0.0.1", Duration(1, 2, 3),
        10**30 + n, decimal.Decimal("1.10"), Date(dt.date(2026, 1, 2)), Time(3_600_000_000_123),
        b"\x00\xff" * n,
        ["x", "y"], SortedSet([dt.datetime(2026, 1, 1)]),
        {"Subject": b"\x01", "X-Empty": b""},
        ("p", n), Addr("Main St", 12345), [0.5, 1.5],
        [("h", {"Subject": b"\x01"})],
    )  # fmt: skip


def null_row() -> tuple:
    return (None,) * len(COLUMNS)


def normalized(cql: cql_types.CqlType, value):
    """Arrow's Python form of a row-path value (maps come back as pairs, structs as dicts)."""
    if value is None:
        return None
    name = cql.params[0].name if cql.name == "frozen" else cql.name
    inner = cql.params[0] if cql.name == "frozen" else cql
    if name in ("list", "set", "vector"):
        return [normalized(inner.params[0], v) for v in value]
    if name == "map":
        return [(k, normalized(inner.params[1], v)) for k, v in value.items()]
    if name == "tuple":
        return {
            f"_{i}": normalized(p, v)
            for i, (p, v) in enumerate(zip(inner.params, value, strict=True), 1)
        }
    if name in UDTS:
        fields = UDTS[name]
        return {
            f: normalized(cql_types.parse(t), v) for (f, t), v in zip(fields, value, strict=True)
        }
    return value


def test_arrow_types_are_sparks_mapping_of_the_spark_types(spark):
    ddl = ", ".join(f"`{n}` {cql_types.spark_type(cql_types.parse(t), UDTS)}" for n, t in COLUMNS)
    spark_schema = StructType.fromDDL(ddl) if hasattr(StructType, "fromDDL") else None
    spark_schema = spark_schema or spark.createDataFrame([], ddl).schema
    expected = to_arrow_schema(spark_schema)
    for (name, cql), field in zip(COLUMNS, expected, strict=True):
        assert arrow_type(cql_types.parse(cql), UDTS).equals(field.type), name


def test_batches_hold_the_row_path_values():
    rows = [driver_row(n) for n in range(5)] + [null_row()]
    maker = BatchMaker(COLUMNS, UDTS, constants=[("table_version", "v4")])
    (batch,) = list(maker.batches(rows))
    assert batch.schema.names == [n for n, _ in COLUMNS] + ["table_version"]
    for index, ((name, cql), column) in enumerate(zip(COLUMNS, batch.columns, strict=False)):
        parsed = cql_types.parse(cql)
        row_path = cql_types.converter(parsed, UDTS)
        expected = [normalized(parsed, row_path(row[index])) for row in rows]
        assert column.to_pylist() == expected, name
    assert batch.column("table_version").to_pylist() == ["v4"] * 6
    assert batch.column("ts").to_pylist()[0] == dt.datetime(
        2026, 11, 1, 12, 0, 5, 123000, tzinfo=dt.UTC
    )


def test_batch_sizes_and_no_batch_for_no_rows():
    maker = BatchMaker([("i", "int"), ("t", "text")])
    sizes = [b.num_rows for b in maker.batches(((n, str(n)) for n in range(25)), size=10)]
    assert sizes == [10, 10, 5]
    assert list(maker.batches([])) == []
    assert maker.batch([]).num_rows == 0


def test_pages_become_the_batches_of_their_rows():
    """Whole pages gathered column by column: the same values as the row path, empty pages
    skipped, a batch cut after the page that reaches the size."""
    rows = [driver_row(n) for n in range(7)] + [null_row()]
    maker = BatchMaker(COLUMNS, UDTS, constants=[("table_version", "v4")])
    pages = [rows[:3], [], rows[3:5], rows[5:]]
    batches = list(maker.page_batches(pages, size=4))
    assert [b.num_rows for b in batches] == [5, 3]
    (whole,) = list(maker.batches(rows))
    assert [b.to_pylist() for b in batches] == [
        whole.slice(0, 5).to_pylist(),
        whole.slice(5).to_pylist(),
    ]
    assert list(maker.page_batches([[], []])) == []


def test_a_row_of_the_wrong_width_is_refused():
    maker = BatchMaker([("i", "int"), ("t", "text")])
    with pytest.raises(ValueError):
        maker.batch([(1, "a", "extra"), (2, "b", "extra")])


def test_pass_through_columns_are_not_copied_value_by_value():
    values = ["a", "b"]
    assert column_converter(cql_types.parse("text"))(values) is values
    assert column_converter(cql_types.parse("uuid"))([uuid.UUID(int=1)]) == [
        "00000000-0000-0000-0000-000000000001"
    ]
    assert pa.array(column_converter(cql_types.parse("date"))([Date(0)]), type=pa.date32())[
        0
    ].as_py() == dt.date(1970, 1, 1)
