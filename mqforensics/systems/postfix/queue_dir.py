"""A Postfix ``queue_directory`` listed as Postfix lays it out, without Postfix (docs/postfix.md).

Message queues (``maildrop``, ``incoming``, ``active``, ``deferred``, ``hold``, ``corrupt``,
``saved``) hold one queue file per message, named by its queue id; the log queues (``defer``,
``bounce``, ``trace``) hold one log file per message that has one, under the same name. Queues
named in ``hash_queue_names`` (``deferred`` and ``defer`` by default) spread their files over
hashed subdirectories (``deferred/9/9564D9841D2``): Postfix itself scans every queue
recursively, and so does this listing, whatever the hashing settings were. A file's mode says
whether its writer finished it (``MAIL_QUEUE_STAT_READY``, 0700: cleanup and postdrop create it
0600 and change it when it is complete); the group-execute bit marks a message whose expiry was
forced (``postsuper -e``/``-f``, Postfix 3.5+). Nothing here modifies the directory, and a file
that vanishes between listing and reading (a live queue) is simply absent.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.filenames import shown

MESSAGE_QUEUES = ("maildrop", "incoming", "active", "deferred", "hold", "corrupt", "saved")
LOG_QUEUES = ("defer", "bounce", "trace")
# The queues showq (postqueue) lists and postsuper -d deletes from (postsuper's message queues);
# ``corrupt`` and ``saved`` are not among them.
LISTED_QUEUES = ("maildrop", "incoming", "active", "deferred", "hold")

MESSAGE, LOG = "message", "log"

# mail_queue.h: MAIL_QUEUE_STAT_READY (S_IRUSR | S_IWUSR | S_IXUSR); postsuper's READY_MESSAGE
# compares the owner bits only. MAIL_QUEUE_STAT_EXPIRE (S_IXGRP) marks a forced expiry.
READY_BITS = stat.S_IRWXU
READY = stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR
FORCED_EXPIRE = stat.S_IXGRP

# mail_queue.h: a short id is the microseconds as 5 upper-case hex digits, then the inode number
# in hex; a long id (enable_long_queue_ids) is the seconds (6 or more) and microseconds (4) in a
# base-52 alphabet without vowels, then ``z``, then the inode number in base 51 (the same
# alphabet without ``z``): its separator is the last ``z``, at index 10 or later.
_BASE52 = "0-9B-DF-HJ-NP-TV-Zb-df-hj-np-tv-z"
_BASE51 = "0-9B-DF-HJ-NP-TV-Zb-df-hj-np-tv-y"
SHORT_ID = re.compile(r"[0-9A-F]{5}[0-9A-F]{1,16}")
LONG_ID = re.compile(rf"[{_BASE52}]{{10,}}z[{_BASE51}]{{1,13}}")
SHORT, LONG_KIND, NOT_AN_ID = "short", "long", "not_an_id"
# mail_queue.h MQID_LG_*: the base-52 digits, in value order.
_BASE52_DIGITS = "0123456789BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz"
HASH_CHARS = 5  # the hex microseconds dir_forest() takes its subdirectory names from


def id_kind(name: str) -> str:
    """Whether `name` is a short queue id, a long one, or neither (a stray file)."""
    if SHORT_ID.fullmatch(name):
        return SHORT
    if LONG_ID.fullmatch(name):
        return LONG_KIND
    return NOT_AN_ID


def hash_string(queue_id: str) -> str:
    """What ``mail_queue_dir()`` hashes a queue id's subdirectories from: a short id's own
    leading hex microseconds, a long id's microseconds re-encoded as ``%05X``."""
    if id_kind(queue_id) != LONG_KIND:
        return queue_id[:HASH_CHARS]
    separator = queue_id.rindex("z")
    value = 0
    for digit in queue_id[separator - 4 : separator]:
        value = value * 52 + _BASE52_DIGITS.index(digit)
    return f"{value:05X}"


def possible_paths(root: str, queue: str, queue_id: str) -> list[str]:
    """Where Postfix keeps the file of `queue_id` in `queue`, for every ``hash_queue_depth``
    (0: not hashed; ``dir_forest`` makes one directory per hash character)."""
    hashed = hash_string(queue_id)
    return [
        os.path.join(root, queue, *hashed[:depth], queue_id)
        for depth in range(min(len(hashed), HASH_CHARS) + 1)
    ]


@dataclass(frozen=True)
class QueueDir:
    """One host's queue directory: `host` names it in findings (the directory when not given).
    Both are as the file system gives them (a byte that is not UTF-8 as a surrogate); whatever
    is shown or written carries them as `filenames.shown`."""

    host: str
    path: str

    @classmethod
    def parse(cls, given: str) -> QueueDir:
        """``[HOST=]DIR``, resolved and checked: an InputError naming a directory that is not a
        readable Postfix queue directory (one with none of the message queues)."""
        host, sep, directory = given.partition("=")
        if not sep or "/" in host or not host:
            host, directory = "", given
        path = Path(directory).resolve()
        if not path.is_dir():
            raise InputError(f"{shown(path)}: no such Postfix queue directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{shown(path)}: not readable")
        if not any((path / q).is_dir() for q in (*MESSAGE_QUEUES, *LOG_QUEUES)):
            raise InputError(
                f"{shown(path)}: not a Postfix queue directory "
                f"(none of {', '.join(MESSAGE_QUEUES)})"
            )
        return cls(host or str(path), str(path))


@dataclass(frozen=True)
class Listed:
    """One file found under a queue: its queue, its path relative to the queue directory,
    and whether it is a message or a log."""

    queue: str
    relative: str
    kind: str

    @property
    def name(self) -> str:
        return self.relative.rsplit("/", 1)[-1]


def _walk(root: str, queue: str) -> list[str]:
    """The relative paths of the files under ``root/queue``, at any depth, sorted."""
    found: list[str] = []
    top = os.path.join(root, queue)

    def fail(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):
            where = shown(exc.filename if exc.filename is not None else top)
            raise InputError(f"{where}: {exc.strerror or exc}") from None

    for directory, dirs, files in os.walk(top, onerror=fail):
        dirs.sort()
        for name in files:
            found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)


def list_queue_dir(queue_dir: QueueDir) -> list[Listed]:
    """Every file of every queue of `queue_dir`, messages first, each queue in path order."""
    listed = [Listed(q, rel, MESSAGE) for q in MESSAGE_QUEUES for rel in _walk(queue_dir.path, q)]
    listed += [Listed(q, rel, LOG) for q in LOG_QUEUES for rel in _walk(queue_dir.path, q)]
    return listed
