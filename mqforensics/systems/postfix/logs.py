"""Postfix's per-message ``defer``, ``bounce`` and ``trace`` logs, decoded (docs/postfix.md).

The bounce service appends one record per recipient (``bounce_append_service.c``): an empty
line, then (with ``backwards_bounce_logfile_compatibility``, on by default) ``<ADDR>: REASON``,
then ``name=value`` lines (``recipient``, ``original_recipient``, ``offset``, ``dsn_orig_rcpt``,
``notify_flags``, ``status``, ``action``, ``diag_*``, ``mta_*``, ``reason``), then an empty line.
``bounce_log_read`` (``bounce_log.c``) takes empty lines as the only record delimiter, accepts
both line forms within a record (the last value wins), and drops a record that no empty line
ends before the end of the file (an append cut short): so does this reader, reporting it. A
line of neither form is reported with its byte offset, never raised.
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
    start, position, continues = 0, 0, False
    for raw in data.splitlines(keepends=True):
        at, position = position, position + len(raw)
        line = raw.rstrip(b"\r\n").decode("utf-8", "surrogateescape")
        if not line.strip():
            if values:
                log.entries.append(_entry(values, start))
            values, continues = {}, False
            continue
        if not values:
            start = at
        if continues and line[:1] in (" ", "\t"):
            values["reason"] = values.get("reason", "") + " " + line.strip()
            continue
        continues = False
        if line.startswith("<") and ">:" in line:
            recipient, _, reason = line[1:].partition(">:")
            values["recipient"], values["reason"] = recipient, reason.lstrip()
            continues = True
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip().replace("_", "").isalnum():
            log.problems.append(f"byte {at}: not a log line: {line[:40]!r}")
            continue
        if name.strip() in FIELDS:
            values[name.strip()] = value.strip()
    if values:
        log.problems.append(
            f"byte {start}: a record no empty line ends (an append cut short): Postfix ignores it"
        )
    return log
