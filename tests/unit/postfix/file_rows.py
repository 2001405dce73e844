"""Rows of the files frame (`files.FILES`) made by hand, one fact at a time: what the views'
and the suites' tests need beyond the planted queue."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mqforensics.systems.postfix.files import FILE_COLUMNS
from tests.unit.postfix.planted_queue import AS_OF

DIGEST = "0" * 64


def message(
    queue: str,
    queue_id: str,
    sender: str | None,
    recipients: list[tuple[str, str]],
    age: dt.timedelta,
    *,
    mode: int = 0o700,
    complete: bool = True,
    host: str = "mx1",
    **columns: Any,
) -> tuple:
    """A queue file that arrived `age` before the planted queue's as-of, with `recipients`
    as (address, state); `columns` override any column."""
    values = dict.fromkeys(FILE_COLUMNS)
    values.update(
        host=host, queue_dir="/q", queue=queue, path=f"/q/{queue}/{queue_id}", queue_id=queue_id,
        id_kind="short", kind="message", size=100, mode=mode, ready=(mode & 0o700) == 0o700,
        forced_expire=bool(mode & 0o010), modified=AS_OF, digest=DIGEST, complete=complete,
        damage_offset=None if complete else 100, damage=None if complete else "cut",
        problems=[], content_size=50, arrival=AS_OF - age, sender=sender,
        recipients=[(a, None, state, 200 + 20 * i) for i, (a, state) in enumerate(recipients)],
    )  # fmt: skip
    values.update(columns)
    return tuple(values[c] for c in FILE_COLUMNS)


def log(
    queue: str, path: str, queue_id: str, entries: list[dict[str, Any]], **columns: Any
) -> tuple:
    """A defer, bounce or trace log at `path` (under /q) with `entries` (recipient, status,
    action, ...); `columns` override any column."""
    values = dict.fromkeys(FILE_COLUMNS)
    fields = ("recipient", "original", "offset", "status", "action", "reason", "at")
    values.update(
        host="mx1", queue_dir="/q", queue=queue, path=f"/q/{path}", queue_id=queue_id,
        id_kind="short", kind="log", size=100, mode=0o600, modified=AS_OF, digest=DIGEST,
        problems=[], log_entries=[tuple(e.get(f) for f in fields) for e in entries],
    )  # fmt: skip
    values.update(columns)
    return tuple(values[c] for c in FILE_COLUMNS)
