import datetime as dt
import uuid

import pytest

from mqforensics.errors import InputError
from mqforensics.sources.cql_types import CqlType, converter, parse, spark_type


def test_parses_nested_frozen_collections_and_tuples():
    text, blob = CqlType("text"), CqlType("blob")
    inner_map = CqlType("frozen", (CqlType("map", (text, blob)),))
    expected = CqlType("frozen", (CqlType("list", (CqlType("tuple", (text, inner_map)),)),))
    assert parse("frozen<list<tuple<text, frozen<map<text, blob>>>>>") == expected
    assert parse("vector<float, 3>") == CqlType("vector", (CqlType("float"),), 3)


@pytest.mark.parametrize(
    ("cql", "spark"),
    [
        ("timeuuid", "string"),
        ("timestamp", "timestamp"),
        ("map<text, blob>", "map<string, binary>"),
        ("frozen<list<tuple<text, text>>>", "array<struct<_1: string, _2: string>>"),
        ("set<int>", "array<int>"),
        ("counter", "bigint"),
        ("vector<float, 3>", "array<float>"),
    ],
)
def test_maps_cql_types_to_spark_ddl(cql, spark):
    assert spark_type(parse(cql)) == spark


def test_user_defined_types_become_structs_with_their_field_names():
    udts = {"address": [("local", "text"), ("tags", "frozen<set<text>>")]}
    expected = "struct<`local`: string, `tags`: array<string>>"
    assert spark_type(parse("frozen<address>"), udts) == expected


def test_unknown_and_malformed_types_are_input_errors():
    with pytest.raises(InputError, match="no Spark mapping"):
        spark_type(parse("frozen<mystery>"))
    with pytest.raises(InputError, match="malformed"):
        parse("map<text, blob")


def test_converters_keep_values_exact():
    ident = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    assert converter(parse("timeuuid"))(ident) == str(ident)
    # The driver returns naive UTC datetimes; Spark must receive the same instant.
    naive = dt.datetime(2026, 1, 1, 12, 0, 5)
    assert converter(parse("timestamp"))(naive) == dt.datetime(2026, 1, 1, 12, 0, 5, tzinfo=dt.UTC)
    assert converter(parse("map<text, blob>"))({"h": b"\x00\xff"}) == {"h": b"\x00\xff"}
    assert converter(parse("frozen<list<tuple<text, int>>>"))([("a", 1), ("b", None)]) == [
        ("a", 1),
        ("b", None),
    ]
    assert converter(parse("set<text>"))(None) is None
