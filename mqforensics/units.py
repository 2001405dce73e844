"""Parsers of the values options and policies share: instants, durations, byte counts, counts.

Each raises `ConfigError` naming what was wrong, so an option's type converter fails as one line.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from mqforensics.errors import ConfigError

_DURATION = re.compile(r"^(-?)(\d+)\s*(s|m|h|d|w)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_LIKE = "like 30s, 5m, 12h, 1d or 2w"

# The longest duration an option or a policy may give: 100 years of 365 days.
MAX_DURATION = dt.timedelta(days=36500)
# The instants an audit may be judged at: from the Unix epoch (no mail queue holds older mail)
# to a century before the last instant Python and Spark hold, so that every check can subtract
# and add any duration (`MAX_DURATION`) to it (an --as-of of year 1 once failed 24 s into an
# audit with "date value out of range").
EARLIEST_INSTANT = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST_INSTANT = dt.datetime(9899, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


def parse_instant(text: str) -> dt.datetime:
    """An ISO-8601 instant (``2026-11-22T02:30:00Z``); a value without a zone is UTC. Its errors
    say what is wrong with the value; the option layer names the option (`options.parse_text`),
    which also refuses an instant out of range (`checked_instant`)."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{text!r} is not an ISO-8601 instant (like 2026-11-22T02:30:00Z)"
        ) from None
    try:
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    except OverflowError:  # a zone that moves it beyond year 1 or 9999
        raise ConfigError(f"{text!r} is out of range: {instant_range_text()}") from None


def instant_range_text() -> str:
    return f"an instant from {utc_text(EARLIEST_INSTANT)} to {utc_text(LATEST_INSTANT)}"


def checked_instant(value: dt.datetime, text: str | None = None) -> dt.datetime:
    """`value` in UTC (a naive one taken as UTC) when the checks can compute with it (from
    `EARLIEST_INSTANT` to `LATEST_INSTANT`); a ConfigError quoting `text` (or the value)
    otherwise."""
    value = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if not EARLIEST_INSTANT <= value <= LATEST_INSTANT:
        shown = text if text is not None else value.isoformat()
        raise ConfigError(f"{shown!r} is out of range: {instant_range_text()}")
    return value


def parse_duration(text: str) -> dt.timedelta:
    """``30s``, ``5m``, ``12h``, ``1d``, ``2w``; a bare number is days (as James's DurationParser
    with its default unit for olderThan). Zero is a duration (``0s``: no grace); a negative one
    or one longer than `MAX_DURATION` is refused."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ConfigError(f"duration {text!r} is not {_LIKE}")
    if match.group(1):
        raise ConfigError(f"duration {text!r} is negative: a duration is 0s or more, {_LIKE}")
    seconds = int(match.group(2)) * _UNITS[match.group(3) or "d"]
    if seconds > MAX_DURATION.total_seconds():
        raise ConfigError(
            f"duration {text!r} is too long: at most {duration_text(MAX_DURATION)} (100 years)"
        )
    return dt.timedelta(seconds=seconds)


def checked_duration(value: dt.timedelta) -> dt.timedelta:
    """`value` when it is a duration `parse_duration` would give (0 to `MAX_DURATION`); a
    ConfigError otherwise (a ``timedelta`` given to the Python API)."""
    if value < dt.timedelta(0):
        raise ConfigError(f"duration {value!r} is negative: a duration is 0s or more, {_LIKE}")
    if value > MAX_DURATION:
        raise ConfigError(
            f"duration {value!r} is too long: at most {duration_text(MAX_DURATION)} (100 years)"
        )
    return value


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

    parse.minimum = minimum  # type: ignore[attr-defined]  # an int given in Python is checked too
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


_HUMAN_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def human_duration(seconds: float) -> str:
    """A duration as a person reads it: its two largest units, rounded to the smaller one
    (``8d 3h`` for 701,970 s, ``18h`` for 64,799 s, ``30m``, ``45s``, ``-2h 5m``); for tables
    and reports only: the exact value stays in the data (`duration_text` is the exact form)."""
    if seconds < 0:
        return "-" + human_duration(-seconds)
    for index, (unit, size) in enumerate(_HUMAN_UNITS):
        if seconds >= size or unit == "s":
            small, step = _HUMAN_UNITS[min(index + 1, len(_HUMAN_UNITS) - 1)]
            total = int(seconds / step + 0.5) * step  # rounded half up to the smaller unit
            if index and total >= _HUMAN_UNITS[index - 1][1]:  # rounded up into a larger unit
                return human_duration(total)
            big, part = divmod(total, size)
            return f"{big}{unit}" + (f" {part // step}{small}" if part and step != size else "")
    return f"{seconds}s"  # not reached: the loop ends on seconds
