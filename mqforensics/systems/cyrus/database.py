"""One Cyrus `mailboxes.db` (or a dump of it) read into a `Database`: the key/value records,
any integrity `Problem`s, the history a twoskip file still holds, and what the file was.

Each input's type is found from its content (`read_database`): twoskip or skiplist magic, else a
text dump — ``ctl_mboxlist -d`` JSON (starts with ``{``, or a ``.json`` name), ``cvt_cyrusdb``
flat (``.flat`` name), ``cyr_dbtool ... batch`` SHOW (``.batchshow``), otherwise ``cyr_dbtool ...
show``. Bytes that are neither (no magic, and binary rather than text: `looks_binary`) are
refused before Spark starts, saying what the file starts with (`sniff`). No Spark here: the
options check (`options.CyrusOptions.check`) and the Spark reader (`fleet`) both use it.

A file is named, in a `Database`'s ``source`` and in every message, by its escaped text
(`filenames.shown`, docs/filenames.md): a name that is not valid UTF-8 keeps its bytes as ``\\xNN``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import mmap
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import shown
from mqforensics.systems.cyrus import dumps, records, twoskip
from mqforensics.systems.cyrus.problems import Problem
from mqforensics.systems.cyrus.records import MailboxEntry
from mqforensics.systems.cyrus.twoskip import Record, TwoskipFile


@dataclass(frozen=True)
class Database:
    """What the checks read: `items` are None when the input holds mailbox entries only (a
    ``ctl_mboxlist -d`` dump has no RACL keys), `entries` are then given directly."""

    source: str
    items: Sequence[tuple[bytes, bytes]] | None
    problems: Sequence[Problem] = ()
    given_entries: Sequence[MailboxEntry] | None = field(default=None, compare=False)
    history: Sequence[Record] = field(default=(), compare=False)
    # What the input was (twoskip, skiplist, show, batchshow, flat, ctl_mboxlist), its size in
    # bytes and SHA-256: the run manifest's fingerprint of the file.
    format: str = field(default="", compare=False)
    size: int = field(default=0, compare=False)
    sha256: str = field(default="", compare=False)

    @classmethod
    def from_file(cls, parsed: TwoskipFile, source: str | None = None) -> Database:
        """A twoskip or skiplist read result (with its history when it was read with one)."""
        return cls(
            source or parsed.source,
            parsed.items(),
            tuple(parsed.problems),
            history=tuple(parsed.history) if isinstance(parsed.history, list) else parsed.history,
        )

    @functools.cached_property
    def _decoded(self) -> tuple[tuple[MailboxEntry, ...], tuple[tuple[bytes, str], ...]]:
        """Every mailbox record decoded once (every check reads them)."""
        if self.given_entries is not None:
            return tuple(self.given_entries), ()
        found: list[tuple[bytes, str]] = []
        entries = records.mailbox_entries(self.items or (), found)
        return tuple(entries), tuple(found)

    @property
    def entries(self) -> list[MailboxEntry]:
        """The mailbox records that decode (see `undecodable` for the others)."""
        return list(self._decoded[0])

    @property
    def undecodable(self) -> list[tuple[bytes, str]]:
        """(key, why) of every mailbox record whose value does not decode."""
        return list(self._decoded[1])


# How much of a file `sniff` reads, and the share of control bytes (other than the TAB, line
# breaks and the separators 0x1d-0x1f that mailbox names and dlists hold) beyond which it is
# binary: random bytes hold about 11% (29 of 256 values), dumps next to none (a key may hold
# a NUL).
SNIFF_BYTES = 4096
BINARY_MAGICS = (twoskip.MAGIC, twoskip.SKIPLIST_MAGIC)
_BINARY_SHARE = 1 / 16
_TEXT_CONTROLS = frozenset(b"\t\n\r\x1d\x1e\x1f")
_HASH_WINDOW = 16 << 20  # bytes of a mapped file hashed between two releases of its pages


def looks_binary(head: bytes) -> bool:
    """`head` (a file's first bytes) is binary, not a text dump: more than a sixteenth of its
    bytes are control bytes no dump holds."""
    controls = sum(1 for byte in head if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return bool(head) and controls > len(head) * _BINARY_SHARE


def sniff(path: Path, head: bytes) -> None:
    """An InputError saying what `path` looks like when its first bytes, `head`, are neither
    a twoskip or skiplist database nor text (`looks_binary`)."""
    if head.startswith(BINARY_MAGICS) or not looks_binary(head):
        return
    raise InputError(
        f"{shown(path)}: not a twoskip or skiplist database, nor a text dump "
        f"(first bytes {head[:8].hex(' ')})"
    )


def check_file(path: Path) -> None:
    """`path` is a readable regular file; an InputError saying what it is otherwise."""
    if path.is_dir():
        raise InputError(f"{shown(path)}: is a directory, not a mailboxes.db or a dump")
    if not path.exists():
        raise InputError(f"{shown(path)}: no such file")
    if not path.is_file():
        raise InputError(f"{shown(path)}: not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{shown(path)}: not readable")


def checked_paths(paths: Sequence[str | Path]) -> list[Path]:
    """`paths`, each an existing readable file named once; InputError or ConfigError naming the
    path otherwise (before any Spark work)."""
    out: list[Path] = []
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        check_file(path)
        absolute = str(path.absolute())
        if absolute in seen:
            raise ConfigError(f"{shown(path)} is given twice")
        seen.add(absolute)
        out.append(path)
    if not out:
        raise ConfigError("no mailboxes.db file given")
    return out


def read_database(path: Path) -> Database:
    """Read one input, its type found from its content (see the module docstring); its
    ``source`` is the path's escaped text (`filenames.shown`). A twoskip file is mapped, not
    read (`twoskip_fast`, `skiplist_fast`): its records stay in the file until a check iterates
    them."""
    # The fast readers import numpy: only when a binary file is read, not when the command
    # line's parser loads this module (tests/unit/test_cli_startup.py).
    from mqforensics.systems.cyrus import skiplist_fast, twoskip_fast

    check_file(path)
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
        sniff(path, head)
        binary = head.startswith(BINARY_MAGICS)
        if binary:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    label = shown(path)
    fingerprint: dict[str, Any]
    if binary:
        fingerprint = {"size": len(mapped), "sha256": _sha256(mapped)}
        if head.startswith(twoskip.MAGIC):
            parsed = twoskip_fast.read(mapped, name=label, history=True)
            return _with(Database.from_file(parsed), "twoskip", fingerprint)
        parsed = skiplist_fast.read(mapped, name=label)
        return _with(Database.from_file(parsed), "skiplist", fingerprint)
    data = path.read_bytes()
    fingerprint = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    kind = dump_format(path, [data])
    if kind == "ctl_mboxlist":
        entries = dumps.read_ctl_mboxlist(data, name=label)
        return Database(label, None, (), entries, format="ctl_mboxlist", **fingerprint)
    if kind == "flat":
        return Database(label, dumps.read_flat(data, name=label), format="flat", **fingerprint)
    if kind == "batchshow":
        items = dumps.read_batch_show(data, name=label)
        return Database(label, items, format="batchshow", **fingerprint)
    return Database(label, dumps.read_show(data, name=label), format="show", **fingerprint)


def dump_format(path: Path, chunks: Iterable[bytes]) -> str:
    """The dump format of a text input, `chunks` its content in order: ``ctl_mboxlist`` (a
    JSON document: its first byte past whitespace is ``{``, or the name ends ``.json``),
    ``flat`` or ``batchshow`` (by the name's ending), ``show`` (a tab anywhere: each line is
    key, tab, value; or empty). An InputError naming `path` when it is none of them. Reads
    only until it can tell (a show dump's first line holds its first tab), so the command's
    checks call it before Spark starts."""
    name = path.name.lower()
    named = name.endswith((".json", ".flat", ".batchshow"))
    first, tab, empty = b"", False, True
    for chunk in chunks:
        empty = empty and not chunk
        first = first or chunk.lstrip()[:1]
        tab = tab or b"\t" in chunk
        if first and (first == b"{" or tab or named):
            break
    if first == b"{" or name.endswith(".json"):
        return "ctl_mboxlist"
    if name.endswith(".flat"):
        return "flat"
    if name.endswith(".batchshow"):
        return "batchshow"
    if tab or empty:
        return "show"
    raise InputError(
        f"{shown(path)}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist dump"
    )


def _sha256(mapped: mmap.mmap) -> str:
    """The SHA-256 of a mapped file, a window at a time, releasing each window's pages."""
    digest = hashlib.sha256()
    view = memoryview(mapped)
    try:
        for start in range(0, len(mapped), _HASH_WINDOW):
            digest.update(view[start : start + _HASH_WINDOW])
            mapped.madvise(mmap.MADV_DONTNEED, start, min(_HASH_WINDOW, len(mapped) - start))
    finally:
        view.release()
    return digest.hexdigest()


def _with(db: Database, kind: str, fingerprint: dict[str, Any]) -> Database:
    return dataclasses.replace(db, format=kind, **fingerprint)


def entries_json(entries: Sequence[MailboxEntry]) -> str:
    """The given entries of a ``ctl_mboxlist -d`` dump as one JSON text (ASCII: invalid UTF-8,
    held as surrogate escapes, comes back as it was from `entries_from_json`)."""
    return json.dumps(
        [{f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)} for entry in entries]
    )


def entries_from_json(text: str) -> list[MailboxEntry]:
    """The `MailboxEntry` values `entries_json` wrote."""
    return [
        MailboxEntry(
            **{
                **fields,
                "acl": tuple(tuple(pair) for pair in fields["acl"]),
                "history": tuple(fields["history"]),
            }
        )
        for fields in json.loads(text)
    ]
