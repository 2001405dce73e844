"""The cqlsh value parser on the exact text cqlsh 6.2 ``COPY TO`` writes (after CSV unquoting).

Every example string below is what cqlsh printed for the value in a real export (see
tests/integration/test_james_snapshot.py, which round-trips them through a real Cassandra).
"""

import datetime as dt

import pytest

from mqforensics.errors import InputError, explain
from mqforensics.sources.cql_types import parse
from mqforensics.systems.james.cqlsh_values import parse_value, parser_for, type_text

UTC = dt.UTC
HEADERS = "frozen<list<frozen<tuple<text, text, text>>>>"


@pytest.mark.parametrize(
    ("text", "cql", "expected"),
    [
        ("", "text", None),
        ("", "frozen<list<text>>", None),
        ("", "timestamp", None),
        ("spool", "text", "spool"),
        ("Mail's 1\\nline2", "text", "Mail's 1\nline2"),
        ('err "quoted" \\\\ back', "text", 'err "quoted" \\ back'),
        ("tab\\there\\r\\x01\\x7f\\xa0", "text", "tab\there\r\x01\x7f\xa0"),
        ("üñíçødé ✉ \u2028 😀", "text", "üñíçødé ✉ \u2028 😀"),
        ("\\\\n is not a newline", "text", "\\n is not a newline"),
        ("2026-11-01 10:00:00.000+0000", "timestamp", dt.datetime(2026, 11, 1, 10, tzinfo=UTC)),
        (
            "2026-11-01 10:00:00.123456+0000",
            "timestamp",
            dt.datetime(2026, 11, 1, 10, 0, 0, 123456, tzinfo=UTC),
        ),
        (
            "1969-12-31 23:59:59.999+0000",
            "timestamp",
            dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        ),
        ("2026-11-01 12:30:00.000+0230", "timestamp", dt.datetime(2026, 11, 1, 10, tzinfo=UTC)),
        ("2026-11-01T10:00:00Z", "timestamp", dt.datetime(2026, 11, 1, 10, tzinfo=UTC)),
        (
            "5B1F2D3E-0000-4000-8000-000000000001",
            "uuid",
            "5b1f2d3e-0000-4000-8000-000000000001",
        ),
        ("-2147483648", "int", -(2**31)),
        ("0x00ff", "blob", b"\x00\xff"),
        ("0x", "blob", b""),
        ("True", "boolean", True),
        ("[]", "frozen<list<text>>", []),
        ("{}", "frozen<map<text, blob>>", {}),
        ("['a', 'b']", "frozen<list<text>>", ["a", "b"]),
        (
            "['a@b.c', 'x''y@z', 'ü@ñ.de', '', 'a\\\\b\\nc']",
            "list<text>",
            ["a@b.c", "x'y@z", "ü@ñ.de", "", "a\\b\nc"],
        ),
        (
            "{'a''b': 0x00ff, 'k,}': 0x, 'u': 0x7b2276223a22c3a9227d}",
            "frozen<map<text, blob>>",
            {"a'b": b"\x00\xff", "k,}": b"", "u": '{"v":"é"}'.encode()},
        ),
        (
            "[('a@b.c', 'X-H', 'v, with ''quote'''), ('r', '', ''), ('x', ')]}:', ' ,')]",
            HEADERS,
            [("a@b.c", "X-H", "v, with 'quote'"), ("r", "", ""), ("x", ")]}:", " ,")],
        ),
        # SELECT shows a null inside a tuple as None (COPY TO cannot write one at all).
        ("[('r', None, 'x')]", HEADERS, [("r", None, "x")]),
        ("{1, 2, 3}", "set<int>", [1, 2, 3]),
        (
            "[5b1f2d3e-0000-4000-8000-000000000001]",
            "list<uuid>",
            ["5b1f2d3e-0000-4000-8000-000000000001"],
        ),
        (
            "{'k': ['2026-11-01 10:00:00.000+0000']}",
            "map<text, frozen<list<timestamp>>>",
            {"k": [dt.datetime(2026, 11, 1, 10, tzinfo=UTC)]},
        ),
        (
            "{'k': {'n': [0x01, 0x]}}",
            "map<text, frozen<map<text, list<blob>>>>",
            {"k": {"n": [b"\x01", b""]}},
        ),
    ],
)
def test_parses_what_cqlsh_writes(text, cql, expected):
    assert parse_value(text, cql) == expected


def test_epoch_milliseconds():
    # CASSANDRA-13185: cqlsh writes milliseconds since the epoch when strftime cannot format the
    # instant; beyond Python's datetime range that is an error, not a wrong value.
    with pytest.raises(InputError, match="out of range"):
        parse_value("-62135596800001", "timestamp")
    assert parse_value("1790000000123", "timestamp") == dt.datetime(
        2026, 9, 21, 14, 13, 20, 123000, tzinfo=UTC
    )


def test_timestamps_are_utc_instants():
    value = parse_value("2026-11-01 10:00:00.000+0000", "timestamp")
    assert value.tzinfo is not None and value.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    ("text", "cql", "message"),
    [
        ("xyz", "timestamp", "cannot parse 'xyz' as timestamp for column c"),
        (
            "2026-11-01 10:00:00",
            "timestamp",
            "cannot parse '2026-11-01 10:00:00' as timestamp for column c (no UTC offset)",
        ),
        (
            "2026-13-01 10:00:00+0000",
            "timestamp",
            "cannot parse '2026-13-01 10:00:00+0000' as timestamp for column c "
            "(not a valid date or time)",
        ),
        ("12a", "int", "cannot parse '12a' as int for column c"),
        ("2147483648", "int", "as int for column c (out of range for a 32-bit integer)"),
        ("5b1f2d3e", "uuid", "cannot parse '5b1f2d3e' as uuid for column c"),
        ("00ff", "blob", "(a blob starts with 0x)"),
        ("0x0", "blob", "(not an even number of hex digits)"),
        ("a\\qb", "text", "cannot parse 'a\\\\qb' as text for column c (unknown backslash "),
        ("a\\", "text", "(unknown backslash escape at position 1)"),
        ("\\x4", "text", "(unknown backslash escape at position 0)"),
        (
            "['a', 'b",
            "frozen<list<text>>",
            "as frozen<list<text>> for column c (unterminated string at position 6)",
        ),
        ("['a' 'b']", "frozen<list<text>>", "(expected ']', found \"'\" at position 5)"),
        ("['a',]", "frozen<list<text>>", "(expected \"'\", found ']' at position 5)"),
        ("[a]", "frozen<list<text>>", "(expected \"'\", found 'a' at position 1)"),
        ("['a'] x", "frozen<list<text>>", "(unexpected text after the value at position 6)"),
        ("{'a': 0xzz}", "map<text, blob>", "('0xzz' is not a valid blob at position 6)"),
        ("{'a' 0x00}", "map<text, blob>", "(expected ':', found '0' at position 5)"),
        ("{None: 0x00}", "map<text, blob>", "(a map key cannot be null at position 1)"),
        ("[('a', 'b', 'c', 'd')]", HEADERS, "(expected ')', found ',' at position 15)"),
        ("('a', 'b')", "tuple<text, int>", "('b' is not a valid int at position 6)"),
        ("[", "list<int>", "(expected a int value, found 'end' at position 1)"),
    ],
)
def test_malformed_values_are_input_errors_with_position(text, cql, message):
    with pytest.raises(InputError) as caught:
        parse_value(text, cql, column="c")
    assert message in caught.value.message
    assert "\n" not in caught.value.message
    # The marker travels with the message, so errors raised in Spark workers explain themselves.
    assert (
        explain(RuntimeError(f"wrapped:\n{caught.value}\n"))
        == f"InputError: {caught.value.message}"
    )


def test_long_values_are_shortened_in_messages():
    with pytest.raises(InputError) as caught:
        parse_value("[" + "'x', " * 100 + "oops]", "list<text>")
    assert "..." in caught.value.message
    assert len(caught.value.message) < 200


def test_types_without_a_cqlsh_parser_are_input_errors():
    with pytest.raises(InputError, match="no cqlsh parser for CQL type 'vector<float, 3>'"):
        parser_for("vector<float, 3>", "v")


def test_parser_is_compiled_once_and_reused():
    parse_headers = parser_for(HEADERS, "perrecipientspecificheaders")
    assert parse_headers("[('a', 'b', 'c')]") == [("a", "b", "c")]
    assert parse_headers("") is None
    assert type_text(parse(HEADERS)) == HEADERS


def test_other_scalar_types():
    assert parse_value("3.25", "double") == 3.25
    assert parse_value("NaN", "float") != parse_value("NaN", "float")
    assert parse_value("1.50", "decimal") == "1.50"
    assert parse_value("123456789012345678901234567890", "varint") == (
        "123456789012345678901234567890"
    )
    assert parse_value("::1", "inet") == "::1"
    assert parse_value("2026-11-01", "date") == dt.date(2026, 11, 1)
    assert parse_value("10:00:00.000000001", "time") == 36_000_000_000_001
    assert parse_value("[True, False]", "list<boolean>") == [True, False]


# --- exports written with other COPY options (copy_options.py) ---------------------------------


def test_the_copy_options_sidecar_gives_the_dialect_and_value_formats(tmp_path) -> None:
    import json
    import re

    from mqforensics.errors import ConfigError
    from mqforensics.systems.james.copy_options import CopyOptions, read_copy_options

    assert read_copy_options(tmp_path) == CopyOptions()  # no sidecar: cqlsh's defaults
    assert CopyOptions().dialect()["escapechar"] == "\\"
    sidecar = tmp_path / "cqlsh_copy.json"
    sidecar.write_text(json.dumps({
        "delimiter": "|", "QUOTE": '"', "Escape": '"', "NULL": "<null>", "HEADER": "true",
        "DATETIMEFORMAT": "%Y-%m-%dT%H:%M:%S%z", "THOUSANDSSEP": "_", "PAGESIZE": "500",
        "ENCODING": "UTF-8", "MAXROWS": "-1", "DECIMALSEP": ",",
    }))  # fmt: skip
    copy = read_copy_options(tmp_path)
    assert copy == CopyOptions("|", '"', '"', "<null>", "%Y-%m-%dT%H:%M:%S%z", "_")
    assert copy.dialect() == {"delimiter": "|", "quotechar": '"', "doublequote": True,
                              "strict": True}  # fmt: skip
    assert CopyOptions.from_json(copy.to_json()) == copy
    stamp = parser_for("timestamp", timestamp_format=copy.datetime_format)
    assert stamp("2026-11-01T10:00:01+0100") == dt.datetime(2026, 11, 1, 9, 0, 1, tzinfo=dt.UTC)
    assert stamp("1790000000000") == dt.datetime.fromtimestamp(1_790_000_000, dt.UTC)
    with pytest.raises(InputError, match="not in the export's DATETIMEFORMAT"):
        stamp("2026-11-01 10:00:01.000+0000")
    assert parser_for("bigint", thousands_sep="_")("-1_234_567") == -1234567
    refused = [
        ({"MAXROWS": "10"}, "MAXROWS='10': the export holds part of the table"),
        ({"BEGINTOKEN": "0"}, "BEGINTOKEN='0': the export holds part of the table"),
        ({"DATETIMEFORMAT": "%Y-%m-%d %H:%M"}, "must hold %z"),
        ({"DELIMITER": "||"}, "must be one character"),
        ({"DELIMITER": '"'}, "DELIMITER must differ from QUOTE and ESCAPE"),
        ({"HEADER": "false"}, "HEADER=true"),
        ({"ENCODING": "latin1"}, "only UTF-8"),
        ({"TTL": "3600"}, "TTL='3600': not a cqlsh COPY TO option"),
        ({"NULL": 1}, "options as strings"),
    ]
    for given, message in refused:
        sidecar.write_text(json.dumps(given))
        with pytest.raises(ConfigError, match=re.escape(message)):
            read_copy_options(tmp_path)
