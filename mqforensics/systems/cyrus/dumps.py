"""Parsers of the text dumps an administrator makes of `mailboxes.db` (§7).

- `read_show`: ``cyr_dbtool DB BACKEND show`` — raw ``key TAB value LF``, no escaping. A line
  without a TAB continues the previous value (a value holding LF); a dlist value is extended over
  following lines until it parses (literals may hold CR LF). A key holding a TAB cannot be told
  from its value unless the caller passes the real `keys`.
- `read_batch_show`: ``cyr_dbtool ... batch`` with ``SHOW`` — astring/literal pairs, exact.
- `read_flat`: ``cvt_cyrusdb ... flat`` — 0xFF escaping (FF 80 = NUL, FF 89 = TAB, FF 8A = LF,
  FF 8D = CR, FF FF = FF), exact.
- `read_ctl_mboxlist`: ``ctl_mboxlist -d`` — JSON (3.6.0-beta3+) or the older tab-separated
  ``name TAB mbtype [server!]partition acl`` lines.

Bad input raises `InputError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.systems.cyrus import dlist
from mqforensics.systems.cyrus.problems import load
from mqforensics.systems.cyrus.records import MailboxEntry, entry_from_fields, parse_acl_string

Source = bytes | str | Path


def _lines(data: bytes, label: str) -> list[bytes]:
    if not data:
        return []
    if not data.endswith(b"\n"):
        last = data.count(b"\n") + 1
        raise InputError(f"{label}: line {last}: no final newline (truncated dump?)")
    return data[:-1].split(b"\n")


def read_show(
    source: Source, *, keys: Iterable[bytes] | None = None, name: str | None = None
) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of ``cyr_dbtool ... show`` output, in file order."""
    data, label = load(source, name)
    known = set(keys) if keys is not None else None
    out: list[tuple[bytes, bytes]] = []
    lines = _lines(data, label)
    i = 0
    while i < len(lines):
        line = lines[i]
        if b"\t" not in line:
            if not out:
                raise InputError(f"{label}: line {i + 1}: no TAB between key and value")
            key, value = out.pop()
            out.append((key, value + b"\n" + line))
            i += 1
            continue
        cut = line.index(b"\t")
        if known is not None:
            cuts = [j for j, c in enumerate(line) if c == 9 and line[:j] in known]
            if not cuts:
                raise InputError(f"{label}: line {i + 1}: no known key before a TAB")
            cut = cuts[0]
        key, value = line[:cut], line[cut + 1 :]
        i += 1
        if value.startswith(b"%"):
            while dlist.prefix_length(value) != len(value) and i < len(lines):
                if dlist.prefix_length(value + b"\n" + lines[i]) is None and b"\t" in lines[i]:
                    break
                value += b"\n" + lines[i]
                i += 1
        out.append((key, value))
    return out


def _astring(data: bytes, pos: int, label: str) -> tuple[bytes, int]:
    if data.startswith(b"{", pos):
        close = data.find(b"}\r\n", pos)
        spec = data[pos + 1 : close].removesuffix(b"+") if close > 0 else b""
        if not spec.isdigit():
            raise InputError(f"{label}: offset {pos}: bad literal")
        start = close + 3
        end = start + int(spec)
        if end > len(data):
            raise InputError(f"{label}: offset {pos}: literal past the end")
        return data[start:end], end
    if data.startswith(b'"', pos):
        out = bytearray()
        p = pos + 1
        while p < len(data) and data[p] != ord('"'):
            if data[p] == ord("\\"):
                p += 1
            out.append(data[p])
            p += 1
        if p >= len(data):
            raise InputError(f"{label}: offset {pos}: unterminated quoted string")
        return bytes(out), p + 1
    end = pos
    while end < len(data) and data[end] not in b" \r\n":
        end += 1
    if end == pos:
        raise InputError(f"{label}: offset {pos}: empty atom")
    return data[pos:end], end


def read_batch_show(source: Source, *, name: str | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of ``cyr_dbtool ... batch`` ``SHOW`` output (`prot_printamap`)."""
    data, label = load(source, name)
    out: list[tuple[bytes, bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _astring(data, pos, label)
        if not data.startswith(b" ", pos):
            raise InputError(f"{label}: offset {pos}: expected a space after the key")
        value, pos = _astring(data, pos + 1, label)
        if data.startswith(b"\r\n", pos):
            pos += 1
        if not data.startswith(b"\n", pos):
            raise InputError(f"{label}: offset {pos}: expected end of line after the value")
        pos += 1
        out.append((key, value))
    return out


def _unescape(field: bytes, label: str, line: int) -> bytes:
    out = bytearray()
    i = 0
    while i < len(field):
        c = field[i]
        if c == 0xFF:
            if i + 1 >= len(field):
                raise InputError(f"{label}: line {line}: 0xFF escape at the end of a field")
            nxt = field[i + 1]
            out.append(0xFF if nxt == 0xFF else nxt & 0x7F)
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)


def read_flat(source: Source, *, name: str | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs of a Cyrus flat file, unescaped."""
    data, label = load(source, name)
    out: list[tuple[bytes, bytes]] = []
    for n, line in enumerate(_lines(data, label), 1):
        parts = line.split(b"\t")
        if len(parts) != 2:
            raise InputError(f"{label}: line {n}: {len(parts) - 1} TABs (a flat line has one)")
        out.append((_unescape(parts[0], label, n), _unescape(parts[1], label, n)))
    return out


def _json_entry(name: str, obj: dict, label: str) -> MailboxEntry:
    if not isinstance(obj, dict):
        raise InputError(f"{label}: mailbox {name!r} is not a JSON object")
    fields = {
        "T": obj.get("mbtype"),
        "P": obj.get("partition"),
        "S": obj.get("server"),
        "A": obj.get("acl") or {},
        "I": obj.get("uniqueid"),
        "M": obj.get("mtime"),
        "V": obj.get("uidvalidity"),
        "C": obj.get("createdmodseq"),
        "F": obj.get("foldermodseq"),
        "J": obj.get("jmapId"),
        "H": obj.get("name_history") or [],
    }
    return entry_from_fields(obj.get("name", name), fields)


def _legacy_entry(line: bytes, label: str, n: int) -> MailboxEntry:
    text = line.decode("utf-8", "surrogateescape")
    name, tab, rest = text.partition("\t")
    mbtype, _, rest = rest.partition(" ")
    part, _, acl = rest.partition(" ")
    if not tab or not mbtype.isdigit() or not part:
        raise InputError(f"{label}: line {n}: not a `name TAB mbtype partition acl` line")
    server, bang, partition = part.rpartition("!")
    try:
        pairs = parse_acl_string(acl.rstrip(" "))
    except InputError as exc:
        raise InputError(f"{label}: line {n}: {exc.message}") from None
    return MailboxEntry(
        name=name,
        mbtype=mbtype,
        partition=None if partition == "(null)" else partition,
        server=server if bang else None,
        acl=tuple(pairs),
    )


def read_ctl_mboxlist(source: Source, *, name: str | None = None) -> list[MailboxEntry]:
    """Mailbox entries of ``ctl_mboxlist -d`` output, JSON or legacy tab-separated."""
    data, label = load(source, name)
    if data.lstrip().startswith(b"{"):
        try:
            doc = json.loads(data.decode("utf-8", "surrogateescape"))
        except json.JSONDecodeError as exc:
            raise InputError(f"{label}: line {exc.lineno}: {exc.msg}") from None
        if not isinstance(doc, dict):
            raise InputError(f"{label}: line 1: not a JSON object")
        return [_json_entry(key, obj, label) for key, obj in doc.items()]
    return [_legacy_entry(line, label, n) for n, line in enumerate(_lines(data, label), 1)]
