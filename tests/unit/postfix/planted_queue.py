"""A Postfix queue directory with planted anomalies, built from queue files the real Postfix 3.7
wrote (tests/data/postfix): each anomaly is one file, and `PLANTED` says what the checks must
report about it (check, queue, file, offset where reading stops)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "postfix"
REAL_DEFERRED = (DATA / "deferred-9564D9841D2").read_bytes()
REAL_MAILDROP = (DATA / "maildrop-F2B019841E7").read_bytes()
# Where the records of the real deferred file are (its .postcat): T at 97, S at 169, the first
# recipient at 243, the end record at 637.
T_AT, S_AT, RCPT_AT = 97, 169, 243
ARRIVAL = dt.datetime(2026, 11, 28, 1, 24, 16, 604418, tzinfo=dt.UTC)
AS_OF = dt.datetime(2026, 11, 28, 3, 0, tzinfo=dt.UTC)

DEFER_LOG = (
    b"recipient=bob@example.net\noffset=243\ndsn_orig_rcpt=rfc822;bob@example.net\n"
    b"notify_flags=0\nstatus=4.4.1\naction=delayed\n"
    b"reason=connect to 127.0.0.1[127.0.0.1]:1: Connection refused\n\n"
    b"recipient=carol@example.com\noffset=319\ndsn_orig_rcpt=rfc822;carol@example.com\n"
    b"notify_flags=0\nstatus=4.4.1\naction=delayed\n"
    b"reason=connect to 127.0.0.1[127.0.0.1]:1: Connection refused\n\n"
)


def backdated(data: bytes, days: int) -> bytes:
    """The real deferred file with its arrival (``T``) and ``create_time`` `days` earlier; the
    same number of digits, so no record changes length."""
    old = str(int(ARRIVAL.timestamp())).encode()
    new = str(int(ARRIVAL.timestamp()) - days * 86400).encode()
    assert len(new) == len(old) and data.count(old) == 2
    return data.replace(old, new)


def flipped_length(data: bytes, at: int) -> bytes:
    """`data` with the high bit of the length byte of the record at `at` set: the length goes
    on into the data and claims more bytes than the file has."""
    changed = bytearray(data)
    changed[at + 1] |= 0x80
    return bytes(changed)


# relative path -> (content, mode, age of the file's mtime at AS_OF)
FILES: dict[str, tuple[bytes, int, dt.timedelta]] = {
    "deferred/9/9564D9841D2": (REAL_DEFERRED, 0o700, dt.timedelta(minutes=30)),
    "defer/9/9564D9841D2": (DEFER_LOG, 0o600, dt.timedelta(minutes=30)),
    "maildrop/F2B019841E7": (REAL_MAILDROP, 0o744, dt.timedelta(minutes=20)),
    # truncated inside the first recipient record
    "deferred/A/A1B2C3D4E5F": (REAL_DEFERRED[: RCPT_AT + 7], 0o700, dt.timedelta(minutes=30)),
    "defer/A/A1B2C3D4E5F": (DEFER_LOG, 0o600, dt.timedelta(minutes=30)),
    # the sender record's length runs past the end of the file
    "deferred/B/B1C2D3E4F50": (flipped_length(REAL_DEFERRED, S_AT), 0o700, dt.timedelta(hours=1)),
    "defer/B/B1C2D3E4F50": (DEFER_LOG, 0o600, dt.timedelta(hours=1)),
    # a defer log whose message is gone
    "defer/C/C1D2E3F40516": (DEFER_LOG, 0o600, dt.timedelta(days=2)),
    # a writer died: never marked ready, no end record; and one still being written
    "incoming/D1E2F3A4B5C": (REAL_DEFERRED[:300], 0o600, dt.timedelta(hours=2)),
    "incoming/D2E3F4A5B6C": (REAL_DEFERRED[:300], 0o600, dt.timedelta(minutes=5)),
    # set aside by the queue manager
    "corrupt/E1F2A3B4C5D": (REAL_DEFERRED[:200], 0o400, dt.timedelta(hours=3)),
    # deferred for 30 days, past maximal_queue_lifetime; a second deferred file with no defer log
    "deferred/F/F1A2B3C4D5E": (backdated(REAL_DEFERRED, 30), 0o700, dt.timedelta(minutes=10)),
    "defer/F/F1A2B3C4D5E": (DEFER_LOG, 0o600, dt.timedelta(minutes=10)),
    "deferred/9/9A8B7C6D5E4": (REAL_DEFERRED, 0o700, dt.timedelta(minutes=30)),
    # on hold for 20 days, and one held today
    "hold/A2B3C4D5E6F": (backdated(REAL_DEFERRED, 20), 0o700, dt.timedelta(days=1)),
    "hold/A3B4C5D6E7F": (REAL_DEFERRED, 0o700, dt.timedelta(minutes=40)),
    # a bounce log of a message that exists: not an orphan
    "bounce/9/9564D9841D2": (DEFER_LOG, 0o600, dt.timedelta(minutes=30)),
}

# (check, queue, relative path, detail.offset) of every finding the checks must give at AS_OF
# with the default thresholds (retention 7d, hold 7d, lifetimes 5d, graces 1h).
PLANTED = {
    ("damaged_queue_file", "deferred", "deferred/A/A1B2C3D4E5F", RCPT_AT),
    ("damaged_queue_file", "deferred", "deferred/B/B1C2D3E4F50", S_AT),
    ("orphan_log", "defer", "defer/C/C1D2E3F40516", None),
    ("incomplete_queue_file", "incoming", "incoming/D1E2F3A4B5C", 300),
    ("corrupt_queue_file", "corrupt", "corrupt/E1F2A3B4C5D", 188),  # cut in the record at 188
    ("expired_in_queue", "deferred", "deferred/F/F1A2B3C4D5E", None),
    ("retention_exceeded", "deferred", "deferred/F/F1A2B3C4D5E", None),
    ("deferred_without_log", "deferred", "deferred/9/9A8B7C6D5E4", None),
    ("old_hold", "hold", "hold/A2B3C4D5E6F", None),
    ("retention_exceeded", "hold", "hold/A2B3C4D5E6F", None),
}


def build(root: Path) -> Path:
    """The planted queue directory under `root`; its path."""
    for relative, (content, mode, age) in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
        when = (AS_OF - age).timestamp()
        os.utime(path, (when, when))
    for queue in ("active", "trace", "saved"):
        (root / queue).mkdir(exist_ok=True)
    return root
