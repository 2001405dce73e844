"""Values as ``cqlsh COPY ... TO`` writes them, parsed back into the Spark values of cql_types.

cqlsh formats each value with ``cqlshlib/formatting.py`` (cqlsh 6.2, the PyPI ``cqlsh`` package
and Cassandra 5.0's bundled cqlsh share it) and then writes the row with Python's ``csv`` module
(see snapshot.py for the CSV layer). The facts this parser inverts, all from that file:

- text (``format_value_text``): every ``\\`` is doubled, then (inside collections only) every
  ``'`` is doubled and the value is put in single quotes, then each character in
  ``[\\x00-\\x1f\\x7f-\\xa0]`` is replaced by its Python ``repr`` escape (``\\n``, ``\\t``,
  ``\\r``, ``\\xHH``). So a value never contains a raw line break, and the escapes are reversible.
- collections (``format_simple_collection``, ``format_value_map``): ``[a, b]`` lists, ``{a, b}``
  sets, ``{k: v}`` maps, ``(a, b)`` tuples, elements joined by ``", "``.
- blob ``0x`` + lower-case hex (``0x`` alone is an empty blob); uuid ``str(UUID)``, unquoted even
  inside collections (``format_python_formatted_type`` is called without ``quote``).
- timestamp ``%Y-%m-%d %H:%M:%S.%f%z`` truncated to milliseconds for COPY TO
  (``round_microseconds``), e.g. ``2026-11-01 10:00:00.000+0000``; quoted inside collections; a
  date strftime cannot format is written as milliseconds since the epoch (CASSANDRA-13185).
- a null top-level value is the ``NULL`` option, default the empty string (copyutil.py
  ``nullval``), so an empty field is null; an empty text value is written the same way and reads
  back as null (the one loss of the format).
- a null inside a tuple is shown as ``None`` by cqlsh's SELECT display; COPY TO fails on it
  (``format_value_default(None)``) and leaves the row out, so ``None`` (and ``null``) are accepted.

`parser_for` compiles a parser for one CQL type once; it is then called for every field.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import re
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from mqforensics.sources.cql_types import CqlType, parse

FieldParser = Callable[[str], Any]

_TEXT = {"text", "varchar", "ascii"}
_INT_RANGES = {
    "tinyint": 8,
    "smallint": 16,
    "int": 32,
    "bigint": 64,
    "counter": 64,
}
# Python repr escapes cqlsh writes (_show_control_chars), plus the doubled backslash.
# Scanning left to right pairs each backslash with what follows it; anything else is an error.
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[\\ntr]|.|$)", re.DOTALL)
NOT_VALID = "not valid"
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_SIMPLE_ESCAPES = {"\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_TIMESTAMP = re.compile(
    r"(?P<y>\d{1,4})-(?P<mo>\d{2})-(?P<d>\d{2})[ T](?P<h>\d{2}):(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?\s*(?P<z>Z|[+-]\d{2}:?\d{2})?"
)
_EPOCH_MS = re.compile(r"-?\d+")
_INTEGER = re.compile(r"-?\d+")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# A bare (unquoted) element inside a collection ends at one of these.
_BARE_END = re.compile(r"[,:)\]}\s]")


class Invalid(Exception):
    """Internal: why and where (offset in the field) a value failed; becomes an InputError."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


def type_text(cql: CqlType) -> str:
    """The CQL spelling of a parsed type, e.g. ``frozen<list<text>>`` (for messages)."""
    if not cql.params:
        return cql.name
    inner = ", ".join(type_text(p) for p in cql.params)
    return f"{cql.name}<{inner}{'' if cql.size is None else f', {cql.size}'}>"


def _shown(text: str, limit: int = 80) -> str:
    # repr keeps the message on one line (errors.explain reads one line).
    return repr(text if len(text) <= limit else text[:limit] + "...")


def is_text(cql_type: str) -> bool:
    """Whether a column of `cql_type` holds text (where an empty value exists)."""
    return _unfrozen(parse(cql_type)).name in _TEXT


def parse_value(text: str, cql_type: str | CqlType, column: str | None = None) -> Any:
    """Parse one CSV field (already CSV-unquoted) of CQL type `cql_type`; ``""`` is null.

    Raises InputError naming the value, the type, the column if given and, for collections, the
    position of the first character that does not fit.
    """
    return parser_for(cql_type, column)(text)


def parser_for(
    cql_type: str | CqlType,
    column: str | None = None,
    *,
    timestamp_format: str | None = None,
    thousands_sep: str = "",
) -> FieldParser:
    """A function parsing one CSV field of type `cql_type` (compiled once, called per row).
    `timestamp_format` and `thousands_sep`: a top-level timestamp's ``strftime`` format and the
    separator of integer groups, when the export was written with ``DATETIMEFORMAT`` or
    ``THOUSANDSSEP`` (copy_options.py)."""
    from mqforensics.errors import InputError

    cql = parse(cql_type) if isinstance(cql_type, str) else cql_type
    shown_type = type_text(cql)
    suffix = f" for column {column}" if column else ""
    inner = _unfrozen(cql)
    composite = inner.name in ("list", "set", "map", "tuple")

    def fail(text: str, exc: Invalid) -> InputError:
        if exc.position is not None:
            detail = f" ({exc.reason} at position {exc.position})"
        else:
            detail = "" if exc.reason == NOT_VALID else f" ({exc.reason})"
        return InputError(f"cannot parse {_shown(text)} as {shown_type}{suffix}{detail}")

    try:
        scalar = None if composite or inner.name in _TEXT else _scalar(inner)
    except Invalid as exc:
        raise InputError(f"{exc.reason}{suffix}") from None
    if scalar is not None and timestamp_format and inner.name == "timestamp":
        scalar = functools.partial(_formatted_timestamp, timestamp_format)
    if scalar is not None and thousands_sep and inner.name in _INT_RANGES:
        grouped, bits = thousands_sep, _INT_RANGES[inner.name]
        scalar = lambda text: integer_value(text.replace(grouped, ""), bits)  # noqa: E731

    if inner.name in _TEXT:

        def parse_text(text: str) -> Any:
            if text == "":
                return None
            if "\\" not in text:
                return text
            try:
                return _unescape(text, 0)
            except Invalid as exc:
                raise fail(text, exc) from None

        return parse_text

    if composite:

        def parse_composite(text: str) -> Any:
            if text == "":
                return None
            reader = _Reader(text)
            try:
                value = reader.value(inner, nested=False)
                reader.skip_space()
                if reader.pos != len(text):
                    raise Invalid("unexpected text after the value", reader.pos)
            except Invalid as exc:
                raise fail(text, exc) from None
            return value

        return parse_composite

    assert scalar is not None

    def parse_scalar(text: str) -> Any:
        if text == "":
            return None
        try:
            return scalar(text)
        except Invalid as exc:
            raise fail(text, exc) from None

    return parse_scalar


def _unfrozen(cql: CqlType) -> CqlType:
    while cql.name == "frozen":
        cql = cql.params[0]
    return cql


def _unescape(text: str, offset: int) -> str:
    """Undo cqlsh's backslash escapes; `offset` is where `text` starts in the field."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        if len(code) == 3:
            return chr(int(code[1:], 16))
        raise Invalid("unknown backslash escape", offset + match.start())

    return _ESCAPE.sub(replace, text)


@functools.cache
def _scalar(cql: CqlType) -> Callable[[str], Any]:
    """A parser for the bare text of a non-text scalar (``Invalid`` on failure)."""
    name = cql.name
    if name in _INT_RANGES:
        bits = _INT_RANGES[name]
        return lambda text: integer_value(text, bits)
    if name == "varint":
        return lambda text: str(integer_value(text, None))
    if name in ("uuid", "timeuuid"):
        return uuid_value
    if name == "timestamp":
        return _timestamp
    if name == "blob":
        return _blob
    if name == "boolean":
        return _boolean
    if name in ("float", "double"):
        return _float
    if name == "decimal":
        return _decimal
    if name == "inet":
        return _inet
    if name == "date":
        return _date
    if name == "time":
        return _time
    if name == "duration":
        return lambda text: text
    raise Invalid(f"no cqlsh parser for CQL type {type_text(cql)!r}")


def integer_value(text: str, bits: int | None) -> int:
    if not _INTEGER.fullmatch(text):
        raise Invalid(NOT_VALID)
    value = int(text)
    if bits is not None and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise Invalid(f"out of range for a {bits}-bit integer")
    return value


def uuid_value(text: str) -> str:
    if len(text) != 36:
        raise Invalid(NOT_VALID)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise Invalid(NOT_VALID) from None


def _timestamp(text: str) -> dt.datetime:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        if _EPOCH_MS.fullmatch(text):
            # cqlsh writes milliseconds since the epoch when strftime cannot format the instant.
            try:
                return _UTC_EPOCH + dt.timedelta(milliseconds=int(text))
            except OverflowError:
                raise Invalid("out of range") from None
        raise Invalid(NOT_VALID)
    if match["z"] is None:
        raise Invalid("no UTC offset")
    fraction = (match["f"] or "0").ljust(6, "0")[:6]
    zone = match["z"]
    if zone == "Z":
        offset = dt.timedelta(0)
    else:
        digits = zone[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        if zone[0] == "-":
            offset = -offset
    try:
        value = dt.datetime(
            int(match["y"]),
            int(match["mo"]),
            int(match["d"]),
            int(match["h"]),
            int(match["mi"]),
            int(match["s"] or 0),
            int(fraction),
            tzinfo=dt.timezone(offset),
        )
        return value.astimezone(dt.UTC)
    except (ValueError, OverflowError):
        raise Invalid("not a valid date or time") from None


def _formatted_timestamp(timestamp_format: str, text: str) -> dt.datetime:
    """A timestamp cqlsh wrote with ``DATETIMEFORMAT`` (it holds ``%z``), or as milliseconds
    since the epoch when strftime could not format it."""
    try:
        return dt.datetime.strptime(text, timestamp_format).astimezone(dt.UTC)
    except ValueError:
        if _EPOCH_MS.fullmatch(text):
            return _timestamp(text)
        raise Invalid(f"not in the export's DATETIMEFORMAT {timestamp_format!r}") from None


def _blob(text: str) -> bytes:
    if not text.startswith("0x"):
        raise Invalid("a blob starts with 0x")
    if not _HEX.fullmatch(text, 2):
        raise Invalid("not an even number of hex digits")
    return bytes.fromhex(text[2:])


def _boolean(text: str) -> bool:
    # cqlsh's BOOLSTYLE default is "True, False".
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise Invalid(NOT_VALID)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise Invalid(NOT_VALID) from None


def _decimal(text: str) -> str:
    try:
        Decimal(text)
    except InvalidOperation:
        raise Invalid(NOT_VALID) from None
    return text


def _inet(text: str) -> str:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        raise Invalid(NOT_VALID) from None
    return text


def _date(text: str) -> dt.date:
    try:
        if _INTEGER.fullmatch(text):
            # Days since the epoch, what cqlsh writes for dates Python cannot represent.
            return dt.date(1970, 1, 1) + dt.timedelta(days=int(text))
        return dt.date.fromisoformat(text)
    except (ValueError, OverflowError):
        raise Invalid(NOT_VALID) from None


def _time(text: str) -> int:
    match = _TIME.fullmatch(text)
    if match is None:
        raise Invalid(NOT_VALID)
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3])
    if hours > 23 or minutes > 59 or seconds > 59:
        raise Invalid(NOT_VALID)
    nanos = int((match[4] or "0").ljust(9, "0"))
    return ((hours * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos


class _Reader:
    """Recursive descent over one field, driven by the expected CQL type."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] == " ":
            pos += 1
        self.pos = pos

    def expect(self, char: str) -> None:
        self.skip_space()
        if not self.text.startswith(char, self.pos):
            found = self.text[self.pos : self.pos + 1]
            raise Invalid(
                f"expected {char!r}, found {found!r}" if found else f"expected {char!r}, found end",
                self.pos,
            )
        self.pos += 1

    def peek(self, char: str) -> bool:
        self.skip_space()
        return self.text.startswith(char, self.pos)

    def null(self) -> bool:
        """Consume a ``None``/``null`` element (a null inside a tuple)."""
        for word in ("None", "null"):
            end = self.pos + len(word)
            if self.text.startswith(word, self.pos) and (
                end == len(self.text) or _BARE_END.match(self.text, end)
            ):
                self.pos = end
                return True
        return False

    def value(self, cql: CqlType, nested: bool = True) -> Any:
        cql = _unfrozen(cql)
        self.skip_space()
        if nested and self.null():
            return None
        name = cql.name
        if name in ("list", "set"):
            return self.sequence(
                cql.params[0], "[" if name == "list" else "{", "]" if name == "list" else "}"
            )
        if name == "map":
            return self.mapping(cql.params[0], cql.params[1])
        if name == "tuple":
            return self.tuple(cql.params)
        if name in _TEXT:
            return self.quoted()
        return self.scalar(cql)

    def sequence(self, item: CqlType, open_: str, close: str) -> list[Any]:
        self.expect(open_)
        items: list[Any] = []
        if self.peek(close):
            self.pos += 1
            return items
        while True:
            items.append(self.value(item))
            if self.peek(","):
                self.pos += 1
                continue
            self.expect(close)
            return items

    def mapping(self, key: CqlType, value: CqlType) -> dict[Any, Any]:
        self.expect("{")
        result: dict[Any, Any] = {}
        if self.peek("}"):
            self.pos += 1
            return result
        while True:
            at = self.pos
            k = self.value(key)
            if k is None:
                raise Invalid("a map key cannot be null", at)
            self.expect(":")
            result[k] = self.value(value)
            if self.peek(","):
                self.pos += 1
                continue
            self.expect("}")
            return result

    def tuple(self, parts: tuple[CqlType, ...]) -> tuple[Any, ...]:
        self.expect("(")
        values = []
        for index, part in enumerate(parts):
            if index:
                if self.peek(")"):
                    # cqlsh prints fewer components when a tuple value has fewer (nulls at the end).
                    break
                self.expect(",")
            values.append(self.value(part))
        self.expect(")")
        return tuple(values) + (None,) * (len(parts) - len(values))

    def quoted(self) -> str:
        """A single-quoted string with ``''`` for a quote, then cqlsh's backslash escapes."""
        self.expect("'")
        text, start = self.text, self.pos
        pieces = []
        pos = start
        while True:
            end = text.find("'", pos)
            if end < 0:
                raise Invalid("unterminated string", start - 1)
            pieces.append(text[pos:end])
            if text.startswith("'", end + 1):
                pieces.append("'")
                pos = end + 2
                continue
            self.pos = end + 1
            break
        raw = "".join(pieces)
        return _unescape(raw, start) if "\\" in raw else raw

    def scalar(self, cql: CqlType) -> Any:
        start = self.pos
        if self.text.startswith("'", start):
            token = self.quoted()
        else:
            match = _BARE_END.search(self.text, start)
            end = match.start() if match else len(self.text)
            token = self.text[start:end]
            self.pos = end
            if not token:
                found = self.text[start : start + 1] or "end"
                raise Invalid(f"expected a {type_text(cql)} value, found {found!r}", start)
        try:
            return _scalar(cql)(token)
        except Invalid as exc:
            raise Invalid(f"{token!r} is not a valid {type_text(cql)}", start) from exc
