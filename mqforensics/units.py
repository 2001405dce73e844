"""Parsers of the values options and policies share: instants, durations, byte counts, counts.

Each raises `ConfigError` naming what was wrong, so an option's type converter fails as one line.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from mqforensics.errors import ConfigError

_DURATION = re.compile(r"^(\d+)\s*(s|m|h|d|w)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_instant(text: str) -> dt.datetime:
    """An ISO-8601 instant (``2026-11-22T02:30:00Z``); a value without a zone is UTC."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--as-of {text!r} is not an ISO-8601 instant") from None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def parse_duration(text: str) -> dt.timedelta:
    """``30s``, ``5m``, ``12h``, ``1d``, ``2w``; a bare number is days (as James's DurationParser
    with its default unit for olderThan)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ConfigError(f"duration {text!r} is not like 30s, 5m, 12h, 1d or 2w")
    return dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2) or "d"])


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 finding``, ``2 findings``, ``100,000 findings`` (`words` for an irregular plural)."""
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


def counter(option: str, what: str = "a count", minimum: int = 0) -> Callable[[str], int]:
    """A converter of an integer >= `minimum` for `option` (its errors name the option)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ConfigError(f"{option} {text!r} is not {what}")
        return value

    return parse


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def utc_millis_text(value: dt.datetime) -> str:
    """``2026-11-03T10:00:00.000Z``, the one instant format of a plan; a naive datetime is
    taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def utc_text(value: dt.datetime) -> str:
    """``2026-11-22T02:30:00Z``; a naive datetime is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def valid_utf8(value: str | None) -> str | None:
    """`value` as valid UTF-8 text: bytes decoded with ``surrogateescape`` (mail headers,
    addresses, file names in 8-bit) leave lone surrogates, which neither Arrow nor JSON can
    carry; they become U+FFFD."""
    if value is None or value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def utc_from_unix(seconds: float | None) -> dt.datetime | None:
    """A Unix time as an aware UTC datetime; None for None or a value no timestamp can hold."""
    if seconds is None:
        return None
    try:
        return dt.datetime.fromtimestamp(float(seconds), tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def duration_text(value: dt.timedelta) -> str:
    """``30d``, ``12h``, ``5m`` or ``30s``: the largest unit that divides `value` exactly."""
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
