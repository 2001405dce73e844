"""File names are bytes: how every layer carries and shows one losslessly (docs/filenames.md).

A POSIX file name is any bytes but ``/`` and NUL; real spools and their copies hold names that are
not valid UTF-8 (8-bit names from old tools, a copy made under another locale). Python gives
such a name back from `os.listdir` of a `str` directory with each undecodable byte as a lone
surrogate (``surrogateescape``), which neither Arrow nor JSON can hold. Every frame, finding,
plan, error and view therefore carries a name as its **escaped text** (`shown`):

- a character of valid UTF-8 that prints is itself;
- a backslash is ``\\\\``;
- every other byte (invalid UTF-8, a control character, DEL) is ``\\xNN`` (two lower-case hex
  digits).

The rule is reversible (`unescaped`), so a plan's subject names the exact file the purger
re-checks and deletes, and the same name reads the same in a terminal, a report and a notebook.
A name that needed escaping is *odd* (`is_odd`): audits say so.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "first_listed", "fs_path", "is_odd", "odd_names_note", "printable_line", "shown", "unescaped",
]  # fmt: skip

LISTED = 3  # odd names a note lists before "and N more"

_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2})")


def _raw(name: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bytes:
    """The bytes of `name`: a `str` from the file system (its undecodable bytes as surrogates) is
    encoded back with ``surrogateescape``."""
    return os.fsencode(name)


# Every character `shown` escapes: an undecodable byte (a lone surrogate), a backslash, a C0 or
# C1 control character or DEL. A name without one (nearly every name) is returned as it is.
_TO_ESCAPE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code >= 0xDC80:  # an undecodable byte, kept as a lone surrogate
        return f"\\x{code - 0xDC00:02x}"
    if char == "\\":
        return "\\\\"
    return "".join(f"\\x{b:02x}" for b in char.encode("utf-8"))


def shown(name: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """`name` as escaped text: valid, printable UTF-8 as is, ``\\`` doubled, every other byte
    ``\\xNN``. Always valid UTF-8 (Arrow, JSON and a terminal take it), always one line."""
    text = _raw(name).decode("utf-8", "surrogateescape")
    if _TO_ESCAPE.search(text) is None:
        return text
    return _TO_ESCAPE.sub(_escape, text)


def unescaped(text: str) -> bytes:
    """The bytes `shown` made `text` from (text without escapes is its UTF-8 bytes)."""

    def byte(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape == "\\":
            return "\\"
        value = int(escape[1:], 16)
        # A byte of 0x80 or more is not text alone: it goes back as its surrogate escape.
        return chr(0xDC00 + value) if value >= 0x80 else chr(value)

    return _ESCAPE.sub(byte, text).encode("utf-8", "surrogateescape")


def fs_path(text: str) -> str:
    """The path to open for escaped text: the bytes of `unescaped`, as the `str` the file system
    calls take (undecodable bytes as surrogates)."""
    return os.fsdecode(unescaped(text))


def is_odd(name: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bool:
    """Whether `name` needed escaping beyond a backslash: bytes that are not valid UTF-8, or a
    control character."""
    text = os.fsencode(name).decode("utf-8", "surrogateescape")
    return shown(name).replace("\\\\", "") != text.replace("\\", "")


def first_listed(names: list[str]) -> str:
    """The first `LISTED` of `names`, comma-separated, then ``and N more`` for the rest."""
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


def odd_names_note(odd: list[str]) -> str | None:
    """The one line an audit prints (and its manifest keeps) about the odd names it read (each
    already `shown`), or None when there are none: they were audited like any other."""
    if not odd:
        return None
    names = sorted(set(odd))
    listed = first_listed(names)
    what = (
        "file name is not valid UTF-8 or holds a control character"
        if len(names) == 1
        else "file names are not valid UTF-8 or hold control characters"
    )
    return (
        f"{len(names)} {what}, audited like any "
        f"other and shown escaped (\\xNN per odd byte, docs/filenames.md): {listed}"
    )


def printable_line(text: str) -> str:
    """`text` (a message that may quote a raw file name) as one printable line of valid UTF-8:
    each undecodable byte (a lone surrogate) and control character written ``\\xNN`` as `shown`
    writes it; backslashes are left alone (names already `shown` in it stay as they are)."""
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append("".join(f"\\x{b:02x}" for b in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)
