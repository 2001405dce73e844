"""Postfix's per-message ``defer``, ``bounce`` and ``trace`` logs, decoded (docs/postfix.md).

The bounce service appends one record per recipient (``bounce_append_service.c``, written with
``bounce_log.c``'s attribute lines): ``name=value`` lines (``orig_rcpt``, ``recipient``,
``offset``, ``dsn_orig_rcpt``, ``notify_flags``, ``status``, ``action``, ``reason``, ...), and
an empty line after the record. ``bounce_log_read`` still accepts the form of Postfix before 2.3,
``<recipient>: reason`` (a reason continued on lines starting with white space), so this reader
does too. A line that is neither is reported with its byte offset, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The attributes an entry keeps (others are ignored, as bounce_log_read does).
FIELDS = ("recipient", "orig_rcpt", "original_recipient", "offset", "status", "action", "reason")


@dataclass(frozen=True)
class LogEntry:
    recipient: str | None
    original_recipient: str | None
    offset: int | None  # of the recipient's record in the queue file
    status: str | None
    action: str | None
    reason: str | None
    at: int  # byte offset of the entry in the log file


@dataclass
class LogFile:
    entries: list[LogEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _entry(values: dict[str, str], at: int) -> LogEntry:
    offset = values.get("offset", "")
    return LogEntry(
        values.get("recipient"),
        values.get("orig_rcpt") or values.get("original_recipient"),
        int(offset) if offset.isdigit() else None,
        values.get("status"),
        values.get("action"),
        values.get("reason"),
        at,
    )


def read_log(data: bytes) -> LogFile:
    """The entries of one log file's bytes, and the lines that are not an entry's."""
    log = LogFile()
    values: dict[str, str] = {}
    start = 0
    old_style: str | None = None  # the entry being continued, in the pre-2.3 form
    position = 0
    for raw in data.splitlines(keepends=True):
        at, position = position, position + len(raw)
        line = raw.rstrip(b"\r\n").decode("utf-8", "surrogateescape")
        if old_style is not None and line[:1] in (" ", "\t"):
            values["reason"] = values.get("reason", "") + " " + line.strip()
            continue
        if old_style is not None:
            log.entries.append(_entry(values, start))
            values, old_style = {}, None
        if not line:
            if values:
                log.entries.append(_entry(values, start))
            values = {}
            continue
        if line.startswith("<") and ">: " in line:
            if values:
                log.entries.append(_entry(values, start))
            recipient, _, reason = line[1:].partition(">: ")
            values, start, old_style = {"recipient": recipient, "reason": reason}, at, recipient
            continue
        name, sep, value = line.partition("=")
        if not sep or not name or " " in name:
            log.problems.append(f"byte {at}: not an attribute line: {line[:40]!r}")
            continue
        if not values:
            start = at
        if name in FIELDS:
            values[name] = value
    if values:
        log.entries.append(_entry(values, start))
    return log
