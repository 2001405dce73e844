"""python-slimta's DiskStorage, read without slimta: ``<id>.env``, ``<id>.meta`` and ``tmp_dir``.

slimta (``slimta/diskstorage/__init__.py``, 5.0.5) writes each file by ``mkstemp`` in
``tmp_dir``, then ``os.rename`` to ``env_dir/<id>.env`` or ``meta_dir/<id>.meta``; the ``.env``
first, then the ``.meta``. Its restart (``load``) walks ``os.listdir(env_dir)`` in that order and
reads each ``.meta``; only ``OSError`` is caught there, so a ``.meta`` that does not unpickle
stops the load of every message after it. Readers here never modify anything, and a file that
vanishes between listing and reading (the queue is running) is simply absent.

Every name is read, whatever its bytes (a copy made under another locale, a file an operator put
there): a `DiskLayout` and the listing hold names as the file system gives them, and every
item carries its store, id and paths as escaped text (`filenames.shown`, docs/filenames.md).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.filenames import shown
from mqforensics.systems.slimta import safe_pickle
from mqforensics.systems.slimta.items import MESSAGE, MISSING, OK, TMP_FILE, Item, Part

BACKEND = "disk"
ENV_SUFFIX, META_SUFFIX = ".env", ".meta"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class DiskLayout:
    """The three directories of one DiskStorage (file-system paths); `store` (the env_dir)
    names it in findings (as `filenames.shown` text)."""

    env_dir: str
    meta_dir: str
    tmp_dir: str | None = None

    @property
    def store(self) -> str:
        return self.env_dir

    @classmethod
    def checked(
        cls,
        env_dir: str | Path,
        meta_dir: str | Path | None = None,
        tmp_dir: str | Path | None = None,
    ) -> DiskLayout:
        """Resolved, readable directories, or an InputError naming the one that is not."""

        def checked_dir(given: str | Path) -> str:
            path = Path(given).resolve()
            if not path.is_dir():
                raise InputError(f"{shown(path)}: no such slimta queue directory")
            if not os.access(path, os.R_OK | os.X_OK):
                raise InputError(f"{shown(path)}: not readable")
            return str(path)

        return cls(
            checked_dir(env_dir),
            checked_dir(meta_dir or env_dir),
            None if tmp_dir is None else checked_dir(tmp_dir),
        )


@dataclass(frozen=True)
class Listing:
    """What the directories held when listed: ``.env`` ids in slimta's load order, ids with
    only a ``.meta``, and the names of the files in ``tmp_dir`` slimta wrote (`MKSTEMP_NAME`)."""

    env_ids: list[str]
    meta_only_ids: list[str]
    tmp_files: list[str]


def _names(directory: str) -> list[str]:
    """The directory's entries, whatever their bytes (slimta writes hex ids and mkstemp's ASCII,
    but a copy or an operator may leave others: they are read like any other)."""
    try:
        return os.listdir(directory)
    except OSError as exc:
        raise InputError(f"{shown(directory)}: {exc.strerror or exc}") from None


# The names tempfile.mkstemp gives with its defaults, as DiskStorage calls it
# (``mkstemp(dir=tmp_dir)``): the prefix "tmp" and 8 characters of its alphabet. Nothing else in
# tmp_dir is slimta's (it defaults to the system's temp directory, shared with everything).
MKSTEMP_NAME = re.compile(r"tmp[a-z0-9_]{8}")


def _tmp_files(layout: DiskLayout) -> list[str]:
    """The regular files of ``tmp_dir`` (none without one), whatever their names."""
    if layout.tmp_dir is None:
        return []
    tmp_dir = layout.tmp_dir
    return sorted(n for n in _names(tmp_dir) if os.path.isfile(os.path.join(tmp_dir, n)))


def foreign_tmp_files(layout: DiskLayout) -> list[str]:
    """The files of ``tmp_dir`` slimta never writes (not named as mkstemp names): never judged,
    never planned."""
    return [n for n in _tmp_files(layout) if not MKSTEMP_NAME.fullmatch(n)]


def list_store(layout: DiskLayout) -> Listing:
    """The ids and leftover files of `layout`, listed as slimta lists them (`os.listdir`)."""
    env_ids = [n[: -len(ENV_SUFFIX)] for n in _names(layout.env_dir) if n.endswith(ENV_SUFFIX)]
    known = set(env_ids)
    meta_ids = [n[: -len(META_SUFFIX)] for n in _names(layout.meta_dir) if n.endswith(META_SUFFIX)]
    meta_only = sorted(i for i in meta_ids if i not in known)
    tmp = [n for n in _tmp_files(layout) if MKSTEMP_NAME.fullmatch(n)]
    return Listing(env_ids, meta_only, tmp)


def _read(path: str) -> tuple[bytes, Part] | None:
    """The file's bytes and its `Part`; None when it is gone. OSError otherwise."""
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        return None
    modified = dt.datetime.fromtimestamp(stat.st_mtime, tz=dt.UTC)
    return data, Part(shown(path), len(data), hashlib.sha256(data).hexdigest(), modified)


def _unreadable(exc: OSError) -> str:
    return f"cannot read: {exc.strerror or type(exc).__name__}"


def read_message(layout: DiskLayout, message_id: str, position: int | None) -> Item:
    """The message `message_id`: its ``.env`` and ``.meta``, each decoded if present."""
    item = Item(BACKEND, shown(layout.store), MESSAGE, shown(message_id), load_position=position)
    env_path = os.path.join(layout.env_dir, message_id + ENV_SUFFIX)
    meta_path = os.path.join(layout.meta_dir, message_id + META_SUFFIX)
    for half, path, take in (
        ("envelope", env_path, item.take_envelope),
        ("meta", meta_path, item.take_meta),
    ):
        try:
            read = _read(path)
        except OSError as exc:
            setattr(item, f"{half}_state", UNREADABLE)
            setattr(item, f"{half}_error", _unreadable(exc))
            continue
        if read is not None:
            item.parts.append(read[1])
            take(read[0])
    return item


def read_tmp_file(layout: DiskLayout, name: str) -> Item | None:
    """A file left in ``tmp_dir``, decoded as an envelope or a meta when it is one."""
    assert layout.tmp_dir is not None
    item = Item(BACKEND, shown(layout.store), TMP_FILE, shown(name))
    try:
        read = _read(os.path.join(layout.tmp_dir, name))
    except OSError as exc:
        item.envelope_state, item.envelope_error = UNREADABLE, _unreadable(exc)
        return item
    if read is None:
        return None
    data, part = read
    item.parts.append(part)
    item.take_envelope(data)
    if item.envelope_state == safe_pickle.WRONG_TYPE:  # a whole pickle, but no envelope: a meta?
        item.take_meta(data)
        if item.meta_state == OK:
            item.envelope_state, item.envelope_error = MISSING, None
    return item


def read_items(
    layout: DiskLayout, ids: list[tuple[str, int | None]], tmp_files: list[str]
) -> Iterator[Item]:
    """The items of one partition: messages (id, load position) and ``tmp_dir`` files."""
    for message_id, position in ids:
        yield read_message(layout, message_id, position)
    for name in tmp_files:
        item = read_tmp_file(layout, name)
        if item is not None:
            yield item
