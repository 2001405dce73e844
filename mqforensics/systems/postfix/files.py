"""The one frame a Postfix queue directory is read into: one row per file (`FILES`).

Each file is read once: its bytes give the digest, and then either its records (a queue file:
`records.read_records`, `envelope.read_envelope`; a clean file's records walked by the kernel
in `fast`, which gives the same columns) or its log entries (a defer, bounce or trace log:
`logs.read_log`). The derived frames (`frames`) are projections of this one.

Columns (a `None` where a value does not apply or could not be read):

- where: ``host`` and ``queue_dir`` (the `queue_dir.QueueDir`), ``queue``, ``path`` (absolute),
  ``queue_id`` (the file name), each as escaped text (`filenames.shown`: a name that is not valid
  UTF-8 keeps its bytes as ``\\xNN``, docs/filenames.md), ``id_kind`` (``short``, ``long``,
  ``not_an_id``), ``kind`` (``message`` or ``log``);
- the file: ``size``, ``mode`` (permission bits), ``ready`` (mode says complete), ``forced_expire``
  (group-execute bit), ``modified``, ``inode``, ``digest`` (sha256 hex), ``read_error`` (why it
  could not be read: then nothing below is set);
- a queue file: ``complete`` (read to its end record without damage), ``damage_offset`` and
  ``damage`` (where and why reading stopped), ``problems`` (records that mean nothing, with their
  offsets), ``content_size`` (postqueue -j's message_size) and ``content_offset`` (where the
  message content starts: both from the ``C`` record), ``arrival`` (the ``T`` record),
  ``sender``, ``recipient_count``, ``message_id`` (the Message-ID header), ``attributes`` (the
  named ``A`` records), ``recipients`` (address, original address, state ``pending``/``done``/
  ``canceled``, offset of its record);
- a log: ``log_entries`` (recipient, original recipient, offset of the recipient's record in
  the queue file, status, action, reason, offset of the entry in the log).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator

from mqforensics.filenames import shown
from mqforensics.systems.postfix import queue_dir as layout
from mqforensics.systems.postfix.envelope import read_envelope
from mqforensics.systems.postfix.logs import read_log
from mqforensics.systems.postfix.queue_dir import Listed, QueueDir
from mqforensics.systems.postfix.records import read_records
from mqforensics.units import utc_from_unix as instant
from mqforensics.units import valid_utf8 as text

SYSTEM = "postfix"

FILES = (
    "host string, queue_dir string, queue string, path string, queue_id string, "
    "id_kind string, kind string, size bigint, mode int, ready boolean, forced_expire boolean, "
    "modified timestamp, inode bigint, digest string, read_error string, complete boolean, "
    "damage_offset bigint, damage string, problems array<string>, content_size bigint, "
    "content_offset bigint, arrival timestamp, sender string, recipient_count int, "
    "message_id string, attributes map<string,string>, "
    "recipients array<struct<address:string, original:string, state:string, offset:bigint>>, "
    "log_entries array<struct<recipient:string, original:string, offset:bigint, status:string, "
    "action:string, reason:string, at:bigint>>"
)
# The names of the columns of `FILES`, in order.
FILE_COLUMNS = (
    "host", "queue_dir", "queue", "path", "queue_id", "id_kind", "kind", "size", "mode", "ready",
    "forced_expire", "modified", "inode", "digest", "read_error", "complete", "damage_offset",
    "damage", "problems", "content_size", "content_offset", "arrival", "sender",
    "recipient_count", "message_id", "attributes", "recipients", "log_entries",
)  # fmt: skip

_INT32 = (1 << 31) - 1
# A file's mtime is its nanoseconds cut to microseconds, as the purger re-checks it
# (`purge.file_drift`): the float ``st_mtime`` rounds, and would differ by one.
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _header(headers: Iterable[str], name: str) -> str | None:
    prefix = name.lower() + ":"
    for line in headers:
        if line.lower().startswith(prefix):
            return " ".join(line[len(prefix) :].split())
    return None


def message_columns(data: bytes, *, reference: bool = False) -> tuple:
    """The queue-file columns of a file's bytes: by the kernel walk (`fast`) when the file reads
    cleanly and the kernel is there, else (or with `reference`) by `records.read_records`; the
    same columns either way."""
    # `fast` imports numpy: when a queue file is read, not when the command line's parser
    # loads this module (tests/unit/test_cli_startup.py).
    from mqforensics.systems.postfix import fast

    read = None if reference else fast.envelope_records(data)
    if read is None:
        read = read_records(data)
    envelope = read_envelope(read)
    damage = read.damage
    count = envelope.recipient_count
    return (
        read.complete,
        damage.offset if damage else None,
        damage.reason if damage else None,
        [text(p) for p in envelope.problems],
        envelope.content_size,
        envelope.content_offset,
        instant(envelope.arrival_time),
        text(envelope.sender),
        count if count is None or count <= _INT32 else _INT32,
        text(_header(envelope.headers, "Message-ID")),
        {text(k): text(v) for k, v in envelope.attributes.items()},
        [
            (text(r.address), text(r.original or r.dsn_original), r.state, r.offset)
            for r in envelope.recipients
        ],
        None,
    )


def _log_columns(data: bytes) -> tuple:
    log = read_log(data)
    entries = [
        (text(e.recipient), text(e.original_recipient), e.offset, text(e.status), e.action,
         text(e.reason), e.at)
        for e in log.entries
    ]  # fmt: skip
    return (None, None, None, [text(p) for p in log.problems], *(None,) * 8, entries)


_NOTHING_READ = (None,) * (len(FILE_COLUMNS) - 15)


def read_file(queue_dir: QueueDir, listed: Listed) -> tuple | None:
    """The `FILES` row of one listed file; None when it vanished since the listing."""
    path = os.path.join(queue_dir.path, listed.relative)
    where = (shown(queue_dir.host), shown(queue_dir.path), listed.queue,
             shown(path), shown(listed.name), layout.id_kind(listed.name),
             listed.kind)  # fmt: skip
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return (*where, None, None, None, None, None, None, None,
                f"cannot stat: {exc.strerror or exc}", *_NOTHING_READ)  # fmt: skip
    mode = stat.S_IMODE(info.st_mode)
    facts = (
        (mode & layout.READY_BITS) == layout.READY,
        bool(mode & layout.FORCED_EXPIRE),
        _EPOCH + dt.timedelta(microseconds=info.st_mtime_ns // 1000),
        info.st_ino,
    )
    if not stat.S_ISREG(info.st_mode):
        return (*where, info.st_size, mode, *facts, None, "not a regular file", *_NOTHING_READ)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return (*where, info.st_size, mode, *facts, None, f"cannot read: {exc.strerror or exc}",
                *_NOTHING_READ)  # fmt: skip
    digest = hashlib.sha256(data).hexdigest()
    columns = message_columns(data) if listed.kind == layout.MESSAGE else _log_columns(data)
    return (*where, len(data), mode, *facts, digest, None, *columns)


def read_files(queue_dir: QueueDir, listed: Iterable[Listed]) -> Iterator[tuple]:
    """The rows of `listed` (those still there)."""
    for one in listed:
        row = read_file(queue_dir, one)
        if row is not None:
            yield row
