"""CQL column types (as ``system_schema.columns.type`` spells them) to Spark types and values.

Mapping choices, made for forensic reads where nothing may be lost: ``uuid``/``timeuuid``,
``inet``, ``duration`` and ``varint`` become strings (exact), ``time`` becomes nanoseconds since
midnight, ``timestamp`` an instant in UTC, ``frozen<...>`` the inner type, ``tuple<...>`` a struct
with fields ``_1``, ``_2``..., a user-defined type a struct with its own field names, sets and
lists arrays, and maps maps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mqforensics.errors import InputError

_SCALARS = {
    "ascii": "string",
    "text": "string",
    "varchar": "string",
    "uuid": "string",
    "timeuuid": "string",
    "inet": "string",
    "duration": "string",
    "varint": "string",
    "boolean": "boolean",
    "tinyint": "tinyint",
    "smallint": "smallint",
    "int": "int",
    "bigint": "bigint",
    "counter": "bigint",
    "time": "bigint",
    "float": "float",
    "double": "double",
    "decimal": "string",
    "timestamp": "timestamp",
    "date": "date",
    "blob": "binary",
}


@dataclass(frozen=True)
class CqlType:
    """A parsed CQL type: a name and its type parameters (``map<text, blob>`` → map[text, blob])."""

    name: str
    params: tuple[CqlType, ...] = ()
    size: int | None = None  # the dimension of vector<float, n>


def parse(text: str) -> CqlType:
    """Parse a type string such as ``frozen<list<tuple<text, frozen<map<text, blob>>>>>``."""
    parsed, rest = _parse(text.strip(), text)
    if rest.strip():
        raise InputError(f"unexpected {rest!r} after CQL type in {text!r}")
    return parsed


def _parse(text: str, whole: str) -> tuple[CqlType, str]:
    i = 0
    while i < len(text) and text[i] not in "<>,":
        i += 1
    name = text[:i].strip().strip('"')
    if not name:
        raise InputError(f"malformed CQL type {whole!r}")
    rest = text[i:]
    if not rest.startswith("<"):
        return CqlType(name.lower() if name.lower() in _COMPOSITE | set(_SCALARS) else name), rest
    params: list[CqlType] = []
    size = None
    rest = rest[1:]
    while True:
        stripped = rest.lstrip()
        if name.lower() == "vector" and params and stripped[:1].isdigit():
            j = 0
            while j < len(stripped) and stripped[j].isdigit():
                j += 1
            size, rest = int(stripped[:j]), stripped[j:]
        else:
            param, rest = _parse(stripped, whole)
            params.append(param)
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:]
            continue
        if rest.startswith(">"):
            return CqlType(name.lower(), tuple(params), size), rest[1:]
        raise InputError(f"malformed CQL type {whole!r}")


_COMPOSITE = {"frozen", "list", "set", "map", "tuple", "vector"}

UdtFields = Mapping[str, list[tuple[str, str]]]


def spark_type(cql: CqlType, udts: UdtFields | None = None) -> str:
    """The Spark DDL type for `cql`; `udts` maps a user type's name to its (field, type) list."""
    udts = udts or {}
    if cql.name == "frozen":
        return spark_type(cql.params[0], udts)
    if cql.name in ("list", "set"):
        return f"array<{spark_type(cql.params[0], udts)}>"
    if cql.name == "vector":
        return f"array<{spark_type(cql.params[0], udts)}>"
    if cql.name == "map":
        return f"map<{spark_type(cql.params[0], udts)}, {spark_type(cql.params[1], udts)}>"
    if cql.name == "tuple":
        fields = ", ".join(f"_{n}: {spark_type(p, udts)}" for n, p in enumerate(cql.params, 1))
        return f"struct<{fields}>"
    if cql.name in _SCALARS:
        return _SCALARS[cql.name]
    if cql.name in udts:
        fields = ", ".join(f"`{f}`: {spark_type(parse(t), udts)}" for f, t in udts[cql.name])
        return f"struct<{fields}>"
    raise InputError(f"CQL type {cql.name!r} has no Spark mapping (unknown user type?)")


Converter = Callable[[Any], Any]


def converter(cql: CqlType, udts: UdtFields | None = None) -> Converter:
    """A function turning a cassandra-driver value of type `cql` into its Spark value."""
    udts = udts or {}
    name = cql.name
    if name == "frozen":
        return converter(cql.params[0], udts)
    if name in ("list", "set", "vector"):
        item = converter(cql.params[0], udts)
        return lambda v: None if v is None else [item(x) for x in v]
    if name == "map":
        key, value = converter(cql.params[0], udts), converter(cql.params[1], udts)
        return lambda v: None if v is None else {key(k): value(x) for k, x in v.items()}
    if name == "tuple":
        parts = [converter(p, udts) for p in cql.params]
        return lambda v: None if v is None else tuple(c(x) for c, x in zip(parts, v, strict=False))
    if name in udts:
        fields = [(f, converter(parse(t), udts)) for f, t in udts[name]]
        return lambda v: None if v is None else tuple(c(getattr(v, f, None)) for f, c in fields)
    if name in ("uuid", "timeuuid", "inet", "duration", "varint", "decimal"):
        return lambda v: None if v is None else str(v)
    if name == "timestamp":
        return _utc
    if name == "date":
        return lambda v: None if v is None else v.date()
    if name == "time":
        return lambda v: None if v is None else int(v.nanosecond_time)
    if name == "blob":
        return lambda v: None if v is None else bytes(v)
    return lambda v: v


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    # The driver returns naive datetimes that are UTC; Spark would read a naive one as local time.
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value
