"""Parser of Cyrus dlist values (`imap/dlist.c`), the format of `mailboxes.db` entries since 2.5.

Grammar (§5.3.1): kvlist ``%(key SP value ...)``, list ``(value ...)``, atom, quoted string
(backslash quotes the next byte), literal ``{N}\\r\\n<N bytes>`` or ``{N+}\\r\\n...``, and
``NIL``. Also the file form ``%{partition guid size}\\r\\n<size bytes>`` that `dlist_print` writes
for message files (from `imap/dlist.c`; it never appears in `mailboxes.db`).

Scalars come back as `str`, decoded as UTF-8 with ``surrogateescape`` so that
``s.encode("utf-8", "surrogateescape")`` gives the exact bytes back; ``NIL`` is None; kvlists are
dicts (insertion order kept; a repeated key keeps its last value); lists are lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqforensics.errors import InputError

_SPECIAL = b' ()\r\n"{%'


@dataclass(frozen=True)
class DlistFile:
    """The ``%{partition guid size}`` file form."""

    partition: str
    guid: str
    size: int
    data: bytes


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class _Parser:
    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def fail(self, why: str) -> InputError:
        return InputError(f"{self.where}: dlist offset {self.pos}: {why}")

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def expect(self, byte: bytes) -> None:
        if self.data[self.pos : self.pos + 1] != byte:
            raise self.fail(f"expected {byte!r}")
        self.pos += 1

    def value(self) -> Any:
        c = self.peek()
        if c is None:
            raise self.fail("unexpected end of value")
        if self.data.startswith(b"%(", self.pos):
            self.pos += 2
            return self.kvlist()
        if self.data.startswith(b"%{", self.pos):
            return self.file()
        if c == ord("("):
            self.pos += 1
            return self.list()
        if c == ord('"'):
            return _text(self.quoted())
        if c == ord("{"):
            return _text(self.literal())
        raw = self.atom()
        return None if raw == b"NIL" else _text(raw)

    def key(self) -> str:
        c = self.peek()
        if c == ord('"'):
            return _text(self.quoted())
        if c == ord("{"):
            return _text(self.literal())
        return _text(self.atom())

    def atom(self) -> bytes:
        start = self.pos
        while self.pos < len(self.data) and self.data[self.pos] not in _SPECIAL:
            self.pos += 1
        if self.pos == start:
            raise self.fail("empty atom")
        return self.data[start : self.pos]

    def quoted(self) -> bytes:
        self.pos += 1
        out = bytearray()
        while True:
            c = self.peek()
            if c is None:
                raise self.fail("unterminated quoted string")
            self.pos += 1
            if c == ord('"'):
                return bytes(out)
            if c == ord("\\"):
                nxt = self.peek()
                if nxt is None:
                    raise self.fail("backslash at end of value")
                out.append(nxt)
                self.pos += 1
            else:
                out.append(c)

    def literal(self) -> bytes:
        close = self.data.find(b"}\r\n", self.pos)
        if close < 0:
            raise self.fail("literal without }\\r\\n")
        spec = self.data[self.pos + 1 : close].removesuffix(b"+")
        if not spec.isdigit():
            raise self.fail(f"bad literal length {spec!r}")
        start = close + 3
        end = start + int(spec)
        if end > len(self.data):
            raise self.fail(f"literal of {int(spec)} bytes past the end")
        self.pos = end
        return self.data[start:end]

    def file(self) -> DlistFile:
        close = self.data.find(b"}\r\n", self.pos)
        parts = self.data[self.pos + 2 : close].split(b" ") if close > 0 else []
        if len(parts) != 3 or not parts[2].isdigit():
            raise self.fail("bad %{partition guid size} file literal")
        start = close + 3
        size = int(parts[2])
        if start + size > len(self.data):
            raise self.fail("file literal past the end")
        self.pos = start + size
        return DlistFile(_text(parts[0]), _text(parts[1]), size, self.data[start : self.pos])

    def _items(self, item: Any) -> None:
        """Space-separated items up to the closing parenthesis, each read by `item()`."""
        first = True
        while self.peek() != ord(")"):
            if not first:
                self.expect(b" ")
            item()
            first = False
        self.pos += 1

    def kvlist(self) -> dict[str, Any]:
        out: dict[str, Any] = {}

        def pair() -> None:
            key = self.key()
            self.expect(b" ")
            out[key] = self.value()

        self._items(pair)
        return out

    def list(self) -> list[Any]:
        out: list[Any] = []
        self._items(lambda: out.append(self.value()))
        return out


def parse(data: bytes, where: str = "<dlist>") -> Any:
    """The Python value of one whole dlist `data`; InputError (naming `where`) if it is not one."""
    parser = _Parser(data, where)
    result = parser.value()
    if parser.pos != len(data):
        raise parser.fail(f"{len(data) - parser.pos} bytes after the value")
    return result


def prefix_length(data: bytes) -> int | None:
    """Length of the complete dlist value at the start of `data`, or None if it is incomplete."""
    parser = _Parser(data, "<dlist>")
    try:
        parser.value()
    except InputError:
        return None
    return parser.pos
