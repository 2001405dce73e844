"""The Postfix parameters the checks judge against, from a ``main.cf`` or ``postconf -n`` output.

Both are ``name = value`` lines (``postconf(5)``): a line starting with white space continues
the previous one, ``#`` starts a comment line, and a value may name another parameter as
``$name`` or ``${name}``. Time values are a number and a unit (``s``, ``m``, ``h``, ``d``,
``w``); without a unit, the lifetimes here are in days (``conv_time`` with the parameter's
default unit). Defaults are Postfix 3.x's (``mail_params.h``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import InputError

DEFAULTS = {"maximal_queue_lifetime": "5d", "bounce_queue_lifetime": "5d"}
# conv_time(): digits, then a unit letter; only the first character after the digits is read
# ("5days" is 5d), and none means the parameter's default unit (days here).
_TIME = re.compile(r"(\d+)(?:([smhdw])\S*)?")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_REFERENCE = re.compile(r"\$(?:\{(\w+)\}|\((\w+)\)|(\w+))")


@dataclass(frozen=True)
class Lifetimes:
    """How long Postfix keeps trying: ``maximal_queue_lifetime`` for mail,
    ``bounce_queue_lifetime`` for bounces (mail with the null sender); `source` says where
    they were read (``Postfix defaults`` when no file was given)."""

    maximal_queue_lifetime: dt.timedelta = dt.timedelta(days=5)
    bounce_queue_lifetime: dt.timedelta = dt.timedelta(days=5)
    source: str = "Postfix defaults"


def read_parameters(path: Path) -> dict[str, str]:
    """The ``name = value`` parameters of `path`; an InputError naming the file and line of
    anything else."""
    try:
        text = Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    parameters: dict[str, str] = {}
    last: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[:1] in (" ", "\t"):
            if last is None:
                raise InputError(
                    f"{path}, line {number}: a continuation line with nothing to continue"
                )
            parameters[last] += " " + line.strip()
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise InputError(f"{path}, line {number}: not a 'name = value' Postfix parameter")
        parameters[name], last = value.strip(), name
    return parameters


def _expanded(parameters: dict[str, str], name: str, depth: int = 0) -> str:
    value = parameters.get(name, DEFAULTS.get(name, ""))
    if depth > 10:
        return value
    return _REFERENCE.sub(
        lambda m: _expanded(parameters, next(g for g in m.groups() if g), depth + 1), value
    )


def time_value(text: str, where: str) -> dt.timedelta:
    """A Postfix time value (days without a unit); an InputError naming `where`."""
    match = _TIME.fullmatch(text.strip())
    if match is None:
        raise InputError(f"{where}: {text!r} is not a Postfix time value such as 5d or 12h")
    return dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2) or "d"])


def lifetimes(path: Path | None) -> Lifetimes:
    """The lifetimes `path` sets (Postfix's defaults for those it does not, or without a file)."""
    if path is None:
        return Lifetimes()
    parameters = read_parameters(path)
    values = {
        name: time_value(_expanded(parameters, name), f"{path}: {name}")
        for name in ("maximal_queue_lifetime", "bounce_queue_lifetime")
    }
    # qmgr.c: a bounce_queue_lifetime above maximal_queue_lifetime is clamped to it.
    values["bounce_queue_lifetime"] = min(values["bounce_queue_lifetime"],
                                          values["maximal_queue_lifetime"])  # fmt: skip
    return Lifetimes(**values, source=str(Path(path).resolve()))
