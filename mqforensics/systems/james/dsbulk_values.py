"""Values as DSBulk ``unload`` writes them, turned back into the Spark values of CQL types.

DSBulk 1.10 formats values with its codecs (``dsbulk-codecs-text``) under the settings of
``dsbulk-reference.conf``; the defaults, which are what this module reads:

- ``codec.timestamp = CQL_TIMESTAMP`` with ``codec.timeZone = UTC``: an ISO-8601 instant with a
  ``Z`` and only the fraction digits needed (``2026-11-01T12:00:30.03Z``,
  ``1969-12-31T23:59:59.999Z``, ``2026-11-01T10:00:00Z``);
- ``codec.binary = BASE64``: a blob is standard Base64 with padding (``AAECAw==``);
- ``codec.formatNumbers = false``: integers as plain decimal digits;
- uuids in their canonical lower-case form; text as is;
- collections and tuples as JSON: lists, sets and tuples as arrays, maps as objects whose keys
  are the keys' text, elements formatted by the same rules (a blob element is a Base64 string).

In the JSON connector a row is one JSON object: text, uuids, timestamps and blobs are JSON
strings, integers JSON numbers, collections as above, null as ``null`` (an absent key is null
too: ``serializationStrategy = NON_NULL`` leaves nulls out). In the CSV connector the collections
are that JSON inside a CSV field (see dsbulk.py for the CSV layer).

Cassandra cannot hold an empty non-frozen collection (it is null), so one read as ``[]`` or
``{}`` is null, as every other reader of the toolkit gives it.

`json_converter` compiles a converter for one CQL type once; it is then called for every value.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from mqforensics.errors import InputError
from mqforensics.sources.cql_types import CqlType, parse

# A value that does not fit its type (becomes an InputError with the column), and the integer
# and uuid texts, which DSBulk writes as cqlsh does.
from mqforensics.systems.james.cqlsh_values import (
    NOT_VALID,
    Invalid,
    integer_value,
    type_text,
    uuid_value,
)

Converter = Callable[[Any], Any]

_TEXT = {"text", "varchar", "ascii"}
_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64, "counter": 64}
_INSTANT = re.compile(r"-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?Z")
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False, "y": True, "n": False,
             "t": True, "f": False, "yes": True, "no": False}  # fmt: skip
_COLLECTIONS = {"list", "set", "map", "tuple"}


def _shown(value: Any, limit: int = 80) -> str:
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "..."
    return repr(value if len(value) <= limit else value[:limit] + "...")


def json_converter(cql_type: str | CqlType, column: str) -> Converter:
    """Converts one value of a column (as decoded from JSON; None is null) to its Spark value;
    an InputError names the value, the type and the column."""
    cql = parse(cql_type) if isinstance(cql_type, str) else cql_type
    convert = _converter(cql, top=True)
    shown_type = type_text(cql)

    def run(value: Any) -> Any:
        if value is None:
            return None
        try:
            return convert(value)
        except Invalid as exc:
            raise _failure(value, shown_type, column, exc.reason) from None

    return run


def text_converter(cql_type: str, column: str) -> Converter:
    """Converts one CSV field (its text; None for an unquoted empty field, DSBulk's null) to its
    Spark value. A collection or tuple field is JSON text."""
    import json

    cql = parse(cql_type)
    inner = _unfrozen(cql)
    convert = json_converter(cql, column)
    if inner.name in _TEXT:
        return lambda text: text
    if inner.name in _COLLECTIONS:

        def collection(text: str | None) -> Any:
            if text is None or text == "":
                return None
            try:
                return convert(json.loads(text))
            except ValueError as exc:
                raise _failure(text, type_text(cql), column, f"not JSON: {exc}") from None

        return collection
    scalar = _from_text(inner)
    shown_type = type_text(cql)

    def field(text: str | None) -> Any:
        if text is None or text == "":
            return None
        try:
            return scalar(text)
        except Invalid as exc:
            raise _failure(text, shown_type, column, exc.reason) from None

    return field


def _failure(value: Any, shown_type: str, column: str, reason: str) -> InputError:
    detail = "" if reason in ("", NOT_VALID) else f" ({reason})"
    return InputError(f"cannot read {_shown(value)} as {shown_type} for column {column}{detail}")


def _unfrozen(cql: CqlType) -> CqlType:
    while cql.name == "frozen":
        cql = cql.params[0]
    return cql


def _converter(cql: CqlType, top: bool = False) -> Converter:
    frozen = cql.name == "frozen"
    inner = _unfrozen(cql)
    name = inner.name
    # At the top level a non-frozen collection cannot be empty in Cassandra: empty is null.
    empty_is_null = top and not frozen and name in ("list", "set", "map")
    if name in ("list", "set"):
        element = _converter(inner.params[0])

        def sequence(value: Any) -> Any:
            if not isinstance(value, list):
                raise Invalid("expected a JSON array")
            if not value and empty_is_null:
                return None
            return [element(v) for v in value]

        return sequence
    if name == "map":
        key = _from_text(_unfrozen(inner.params[0]))
        item = _converter(inner.params[1])

        def mapping(value: Any) -> Any:
            if not isinstance(value, dict):
                raise Invalid("expected a JSON object")
            if not value and empty_is_null:
                return None
            return {key(k): item(v) for k, v in value.items()}

        return mapping
    if name == "tuple":
        parts = [_converter(p) for p in inner.params]

        def record(value: Any) -> Any:
            if not isinstance(value, list) or len(value) != len(parts):
                raise Invalid(f"expected a JSON array of {len(parts)} elements")
            return tuple(None if v is None else p(v) for p, v in zip(parts, value, strict=True))

        return record
    if name in _INT_BITS:
        bits = _INT_BITS[name]

        def integer(value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise Invalid("expected an integer")
            return integer_value(str(value), bits)

        return integer
    if name == "boolean":
        return lambda value: value if isinstance(value, bool) else _boolean(_string(value))
    scalar = _from_text(inner)
    return lambda value: scalar(_string(value))


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid("expected a JSON string")
    return value


def _from_text(cql: CqlType) -> Callable[[str], Any]:
    """A converter of a scalar's text as DSBulk formats it (``Invalid`` on failure)."""
    name = cql.name
    if name in _TEXT:
        return lambda text: text
    if name in _INT_BITS:
        bits = _INT_BITS[name]
        return lambda text: integer_value(text, bits)
    if name in ("uuid", "timeuuid"):
        return uuid_value
    if name == "timestamp":
        return _timestamp
    if name == "blob":
        return _blob
    if name == "boolean":
        return _boolean
    raise Invalid(f"no DSBulk reader for CQL type {type_text(cql)!r}")


def _timestamp(text: str) -> dt.datetime:
    if not _INSTANT.fullmatch(text):
        raise Invalid("DSBulk's default codec.timestamp writes an ISO-8601 instant in UTC")
    head, _, fraction = text[:-1].partition(".")
    try:
        when = dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    # Cassandra keeps milliseconds; DSBulk writes up to nanoseconds for other sources.
    return when + dt.timedelta(microseconds=int((fraction + "000000")[:6])) if fraction else when


def _blob(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid("not Base64, DSBulk's default codec.binary") from None


def _boolean(text: str) -> bool:
    try:
        return _BOOLEANS[text.lower()]
    except KeyError:
        raise Invalid(NOT_VALID) from None
