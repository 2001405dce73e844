"""DSBulk unload files, hand-written from DSBulk 1.10's documented defaults (dsbulk.py,
dsbulk_values.py): the CSV layer, the JSON layer and the value formats, without Spark."""

from __future__ import annotations

import datetime as dt
import gzip
import io
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.james import dsbulk
from mqforensics.systems.james.dsbulk_values import json_converter, text_converter

UTC = dt.UTC


def csv_rows(text: str) -> list[tuple[int, list[str | None]]]:
    return list(dsbulk.csv_rows(io.BytesIO(text.encode()), "t/output-000001.csv"))


def json_rows(text: str) -> list[tuple[int, dict]]:
    return list(dsbulk.json_rows(io.BytesIO(text.encode()), "t/output-000001.json"))


def test_csv_fields_quotes_and_escapes():
    rows = csv_rows('a,b,c\nx,"y, \\"q\\" \\\\",\n,"",\\\n')
    assert rows == [(2, ["x", 'y, "q" \\', None]), (3, [None, "", "\\"])]


def test_an_unquoted_empty_field_is_null_and_a_quoted_one_empty():
    assert csv_rows('h,i\n,""\n') == [(2, [None, ""])]


def test_a_quoted_line_break_continues_the_row_and_the_row_keeps_its_first_line():
    rows = csv_rows('h,i\n"one\ntwo\r\nthree",x\ny,z\n')
    assert rows == [(2, ["one\ntwo\r\nthree", "x"]), (5, ["y", "z"])]


def test_windows_line_endings_and_a_missing_last_line_break():
    assert csv_rows("h,i\r\na,b\r\nc,d") == [(2, ["a", "b"]), (3, ["c", "d"])]


def test_blank_lines_are_skipped():
    assert csv_rows("h\n\na\n") == [(3, ["a"])]


def test_a_quote_inside_an_unquoted_field_is_malformed():
    with pytest.raises(InputError, match=r"line 2: malformed CSV"):
        csv_rows('h,i\na"b,c\n')


def test_an_unclosed_quote_names_the_line_it_opened_on():
    with pytest.raises(InputError, match=r"t/output-000001.csv line 3: a quoted field is never"):
        csv_rows('h,i\na,b\n"open,c\nmore\n')


def test_a_line_that_is_not_utf8_is_named():
    with pytest.raises(InputError, match=r"line 2: not UTF-8 \(byte 2\)"):
        list(dsbulk.csv_rows(io.BytesIO(b"h\na\xff\n"), "t/output-000001.csv"))


def test_json_one_object_per_line_and_pretty_printed():
    assert json_rows('{"a":1}\n\n{"a":2}\n') == [(1, {"a": 1}), (3, {"a": 2})]
    pretty = '{\n  "a" : 1,\n  "m" : {\n    "k" : "v"\n  }\n}\n{\n  "a" : 2\n}\n'
    assert json_rows(pretty) == [(1, {"a": 1, "m": {"k": "v"}}), (7, {"a": 2})]


def test_json_errors_name_the_line():
    with pytest.raises(InputError, match=r"line 2: malformed JSON"):
        json_rows('{"a":1}\n{"a":}\n')
    with pytest.raises(InputError, match=r"line 1: malformed JSON \(the object is not closed\)"):
        json_rows('{"a":1\n{"a":2}\n')
    with pytest.raises(InputError, match=r"line 1: a JSON array; DSBulk writes one object"):
        json_rows('[{"a":1}]\n')
    with pytest.raises(InputError, match=r"line 1: expected a JSON object"):
        json_rows("1\n")


def test_timestamps_are_iso_instants_in_utc_with_the_digits_needed():
    read = text_converter("timestamp", "t")
    assert read("2026-11-01T12:00:30.03Z") == dt.datetime(2026, 11, 1, 12, 0, 30, 30000, UTC)
    assert read("1969-12-31T23:59:59.999Z") == dt.datetime(1969, 12, 31, 23, 59, 59, 999000, UTC)
    assert read("2026-11-01T10:00:00Z") == dt.datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert read("2026-11-01T10:00:00.123456789Z").microsecond == 123456
    with pytest.raises(InputError, match=r"cannot read '2026-11-01 10:00:00\+0000' as timestamp"):
        read("2026-11-01 10:00:00+0000")
    with pytest.raises(InputError, match=r"cannot read '1790000000000' as timestamp"):
        read("1790000000000")


def test_collections_are_json_with_base64_blobs():
    attributes = text_converter("frozen<map<text, blob>>", "attributes")
    assert attributes('{"k":"AAEC","e":""}') == {"k": b"\x00\x01\x02", "e": b""}
    assert attributes("{}") == {}
    headers = text_converter("frozen<list<frozen<tuple<text, text, text>>>>", "h")
    assert headers('[["a@b.c","X-H","v"]]') == [("a@b.c", "X-H", "v")]
    with pytest.raises(InputError, match=r"for column attributes \(not Base64"):
        attributes('{"k":"0x0"}')  # hexadecimal (codec.binary = HEX) is not read
    with pytest.raises(InputError, match=r"for column h \(expected a JSON array of 3 elements\)"):
        headers('[["a","b"]]')
    with pytest.raises(InputError, match=r"for column attributes \(not JSON"):
        attributes("{k: v}")


def test_an_empty_non_frozen_collection_is_null_a_frozen_one_empty():
    assert text_converter("list<text>", "r")("[]") is None
    assert text_converter("map<text, blob>", "a")("{}") is None
    assert text_converter("frozen<list<text>>", "r")("[]") == []
    assert json_converter("list<text>", "r")([]) is None
    assert json_converter("list<text>", "r")(["x"]) == ["x"]


def test_scalars_from_csv_text_and_from_json():
    assert text_converter("int", "b")("3") == 3 and text_converter("int", "b")(None) is None
    assert json_converter("int", "b")(3) == 3
    with pytest.raises(InputError, match=r"cannot read True as int"):
        json_converter("int", "b")(True)
    with pytest.raises(InputError, match=r"out of range for a 32-bit integer"):
        text_converter("int", "b")("2147483648")
    uid = "5B1F2D3E-0000-4000-8000-000000000001"
    assert text_converter("uuid", "u")(uid) == uid.lower()
    assert json_converter("text", "t")("") == "" and json_converter("text", "t")(None) is None
    with pytest.raises(InputError, match=r"cannot read 5 as text for column t \(expected a JSON"):
        json_converter("text", "t")(5)


def test_layout_files_are_ordered_by_number_and_kinds_are_told_apart(tmp_path: Path):
    table = tmp_path / "enqueuedmailsv4"
    table.mkdir()
    for name in ("output-000010.csv", "output-000002.csv", "_SUCCESS", ".hidden"):
        (table / name).write_text("queuename\n")
    assert [p.name for p in dsbulk.data_files(table)] == ["output-000002.csv", "output-000010.csv"]
    assert dsbulk.export_format(table) == "csv"
    (table / "output-000011.json").write_text("{}\n")
    with pytest.raises(InputError, match=r"holds both CSV and JSON files"):
        dsbulk.export_format(table)
    (table / "output-000011.json").unlink()
    (table / "output-000012.csv.zst").write_bytes(b"")
    with pytest.raises(InputError, match=r"compressed with zst, which this reader cannot open"):
        dsbulk.export_format(table)


def test_a_gzipped_file_is_read_through(tmp_path: Path):
    path = tmp_path / "browsestart" / "output-000001.csv.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(b"queuename,browsestart\nspool,2026-11-01T10:00:00Z\n"))
    assert dsbulk.export_format(path.parent) == "csv"
    assert dsbulk.csv_header(path) == ["queuename", "browsestart"]
    reader = dsbulk.DsbulkReader([str(path)], "browsestart", "csv")
    assert list(reader.read(dsbulk.OutputFile(str(path)))) == [
        ("spool", dt.datetime(2026, 11, 1, 10, tzinfo=UTC))
    ]
