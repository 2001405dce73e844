"""A table unloaded by DSBulk: a directory of ``output-*.csv`` or ``output-*.json`` files.

``dsbulk unload -k apache_james -t <table> -url DIR/<table>`` (``-c json`` for JSON) writes the
table into the directory ``DIR/<table>/`` as ``output-000001.csv``, ``output-000002.csv``, ...
(``connector.csv.fileNameFormat = output-%06d.csv``; one file per concurrent writer, or per
``-maxRecords`` rows), each compressed and suffixed (``.gz``, ``.bz2``, ``.xz``) with
``--connector.csv.compression``. An empty table leaves the directory empty. What is read, all
DSBulk 1.10's defaults (``dsbulk-reference.conf``):

- CSV: every file starts with a header line of the column names (``header = true``); fields are
  separated by ``,``; a field holding ``,``, ``"``, a line break or surrounding quotes is put in
  ``"`` quotes, inside which ``\\`` escapes the next character (``\\"``, ``\\\\``); line breaks
  inside a quoted field are written as they are, so a row may span lines; rows end with ``\\n``
  (``\\r\\n`` from Windows). An unquoted empty field is null, a quoted one (``""``) the empty
  string. Outside quotes a backslash is an ordinary character.
- JSON: one JSON object per row, keyed by column name (``mode = MULTI_DOCUMENT``), one per line,
  or spread over lines with ``prettyPrint = true``.
- Values: dsbulk_values.py.

Each file is one Spark partition, parsed by a Python worker (a row may span lines, so a file is
not split further). A bad row raises InputError naming the file, the line and the column.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from mqforensics import filenames
from mqforensics.errors import ConfigError, InputError
from mqforensics.systems.james.schema import TABLE_COLUMNS
from mqforensics.systems.james.table_source import TableSource

FORMATS = ("csv", "json")
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".lzma": lzma.open}
# Compressions DSBulk offers that the standard library does not read.
_UNREAD = (".zst", ".sz", ".lz4", ".snappy", ".deflate", ".br", ".z")
# A quoted field (its text, escapes still in, in group 1) and an unquoted one.
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_BARE = re.compile(r'[^,"]*')
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def export_format(directory: Path) -> str | None:
    """``csv`` or ``json`` if `directory` holds DSBulk output files of that kind, else None;
    an InputError when it mixes the two or holds a compression this reader cannot open."""
    kinds = {_kind(entry) for entry in data_files(directory)} - {None}
    if len(kinds) > 1:
        raise InputError(f"{directory}: holds both CSV and JSON files; a table is one unload")
    return kinds.pop() if kinds else None


def data_files(directory: Path) -> list[Path]:
    """The files of a table's directory in the order DSBulk numbered them (hidden and ``_``
    files left out)."""
    entries = [e for e in directory.iterdir() if e.is_file() and not e.name.startswith((".", "_"))]
    return sorted(entries, key=lambda e: (_number(e.name), e.name))


def _number(name: str) -> int:
    digits = re.search(r"\d+", name)
    return int(digits.group()) if digits else -1


def _kind(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _OPENERS:
        suffixes = suffixes[:-1]
    elif suffixes[-2:-1] in ([".csv"], [".json"]) and suffixes[-1] in _UNREAD:
        raise InputError(
            f"{path}: compressed with {suffixes[-1][1:]}, which this reader cannot open; "
            "unload with --connector.csv.compression gzip, bzip2 or xz, or none"
        )
    return suffixes[-1][1:] if suffixes and suffixes[-1][1:] in FORMATS else None


def _open(path: Path) -> IO[bytes]:
    opener = _OPENERS.get(path.suffix.lower())
    return opener(path, "rb") if opener else open(path, "rb")  # type: ignore[operator]


def shown(path: Path) -> str:
    """A file of an unload as messages name it: ``<table>/output-000001.csv`` (every table's
    files have the same names), escaped (`filenames.shown`, docs/filenames.md)."""
    return filenames.shown(f"{path.parent.name}/{path.name}")


def csv_header(path: Path) -> list[str]:
    """The column names of a DSBulk CSV file's header line."""
    try:
        with _open(path) as stream:
            first = stream.readline()
    except OSError as exc:
        raise InputError(f"{shown(path)}: cannot be read ({exc})") from None
    try:
        text = first.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
    except UnicodeDecodeError:
        raise InputError(f"{shown(path)} line 1: not UTF-8") from None
    try:
        fields = _split(text) if text.strip() else None
    except _Open:
        fields = None
    if fields is None or any(f is None for f in fields):
        raise InputError(f"{shown(path)} line 1: no header line (unload with the default -header)")
    return [str(f).strip() for f in fields]


class _Open(Exception):
    """Internal: the record ends inside a quoted field (it goes on on the next line)."""


def _split(text: str) -> list[str | None] | None:
    """The fields of one CSV record (None for an unquoted empty field); None if malformed;
    raises _Open if a quoted field is not closed by the end of `text`."""
    fields: list[str | None] = []
    pos, end = 0, len(text)
    while True:
        if text.startswith('"', pos):
            match = _QUOTED.match(text, pos)
            if match is None:
                raise _Open
            quoted = match.group(1)
            fields.append(_ESCAPED.sub(r"\1", quoted) if "\\" in quoted else quoted)
        else:
            match = _BARE.match(text, pos)
            assert match is not None  # it matches the empty string
            fields.append(match.group() or None)
        pos = match.end()
        if pos == end:
            return fields
        if text[pos] != ",":
            return None
        pos += 1


def _lines(stream: IO[bytes], name: str, first: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of `stream` from line `first` on, decoded as UTF-8."""
    for number, raw in enumerate(stream, start=first):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name} line {number}: not UTF-8 (byte {exc.start + 1})") from None


def csv_rows(stream: IO[bytes], name: str) -> Iterator[tuple[int, list[str | None]]]:
    """(line number, fields) of each row after the header line of a DSBulk CSV stream."""
    stream.readline()
    buffered: list[str] = []
    start = 1
    for number, text in _lines(stream, name, first=2):
        if not buffered:
            start = number
        buffered.append(text)
        record = "".join(buffered)
        body = record[:-2] if record.endswith("\r\n") else record.removesuffix("\n")
        try:
            fields = _split(body)
        except _Open:
            continue
        buffered = []
        if not body.strip():
            continue
        if fields is None:
            raise InputError(f"{name} line {start}: malformed CSV (a quote inside a field)")
        yield start, fields
    if buffered:
        raise InputError(f"{name} line {start}: a quoted field is never closed")


def json_rows(stream: IO[bytes], name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each row of a DSBulk JSON stream: one object per line, or one
    spread over lines (``prettyPrint``)."""
    buffered: list[str] = []
    start = 0
    for number, text in _lines(stream, name, first=1):
        if buffered and text.startswith("{"):  # a new top-level object: the last never closed
            raise InputError(f"{name} line {start}: malformed JSON (the object is not closed)")
        if not buffered:
            if not text.strip():
                continue
            start = number
            if text.lstrip().startswith("["):
                raise InputError(
                    f"{name} line {number}: a JSON array; DSBulk writes one object per row "
                    "(unload with the default connector.json.mode MULTI_DOCUMENT)"
                )
        buffered.append(text)
        try:
            value = json.loads("".join(buffered))
        except ValueError as exc:
            if len(buffered) == 1 and text.rstrip().endswith("}"):
                raise InputError(f"{name} line {start}: malformed JSON ({exc})") from None
            continue
        buffered = []
        if not isinstance(value, dict):
            raise InputError(f"{name} line {start}: expected a JSON object, found {value!r:.40}")
        yield start, value
    if buffered:
        raise InputError(f"{name} line {start}: malformed JSON (the object is not closed)")


# ---------------------------------------------------------------------------------------------
# The data source.


@dataclass
class OutputFile(InputPartition):
    """One of the files DSBulk unloaded a table into."""

    path: str


class DsbulkSource(TableSource):
    """``spark.read.format("mqf_dsbulk")``: one James table as DSBulk unloaded it.

    Options: ``paths`` (JSON list of the table's output files), ``format`` (``csv`` or
    ``json``), ``table`` (a key of TABLE_COLUMNS). The schema is the table's canonical one
    (schema.py, entries without ``table_version``).
    """

    @classmethod
    def name(cls) -> str:
        return "mqf_dsbulk"

    def reader(self, schema: Any) -> DsbulkReader:
        kind = self.options.get("format", "")
        if kind not in FORMATS:
            raise ConfigError(f"option 'format' must be one of {', '.join(FORMATS)}")
        return DsbulkReader(json.loads(self.options.get("paths") or "[]"), self._table(), kind)


class DsbulkReader(DataSourceReader):
    def __init__(self, paths: list[str], table: str, kind: str) -> None:
        self.paths, self.table, self.kind = paths, table, kind

    def partitions(self) -> list[OutputFile]:
        return [OutputFile(p) for p in self.paths]

    def read(self, partition: OutputFile) -> Iterator[tuple]:  # type: ignore[override]
        from mqforensics.systems.james import dsbulk_values

        path = Path(partition.path)
        name = shown(path)
        columns = TABLE_COLUMNS[self.table]
        try:
            stream = _open(path)
        except OSError as exc:
            raise InputError(f"{name}: cannot be read ({exc})") from None
        with stream:
            if self.kind == "csv":
                header = [h.lower() for h in csv_header(path)]
                texts = {c: dsbulk_values.text_converter(t, c) for c, t in columns}
                convert = [texts[c] for c in header]
                order = [header.index(c) for c, _ in columns]
                for line, fields in csv_rows(stream, name):
                    if len(fields) != len(header):
                        raise InputError(
                            f"{name} line {line}: {len(fields)} field(s), the header has "
                            f"{len(header)}"
                        )
                    try:
                        values = [f(v) for f, v in zip(convert, fields, strict=True)]
                    except InputError as exc:
                        raise InputError(f"{name} line {line}: {exc.message}") from None
                    yield tuple(values[i] for i in order)
            else:
                known = {c: dsbulk_values.json_converter(t, c) for c, t in columns}
                for line, row in json_rows(stream, name):
                    unexpected = sorted(k for k in row if k.lower() not in known)
                    if unexpected:
                        raise InputError(
                            f"{name} line {line}: unexpected column(s) "
                            f"{', '.join(unexpected)} for table {self.table}"
                        )
                    lowered = {k.lower(): v for k, v in row.items()}
                    try:
                        yield tuple(f(lowered.get(c)) for c, f in known.items())
                    except InputError as exc:
                        raise InputError(f"{name} line {line}: {exc.message}") from None
