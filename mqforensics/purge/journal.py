"""The purge journal: one fsync'ed JSON line per event, the purger's only memory across runs.

Every destructive step is bracketed by journal records (``started`` before, ``done`` after), and
a record is on disk before the purger moves on. After a crash the journal therefore tells, for
every action, whether it finished (``done``/``skipped``: never touched again), may be half done
(``started`` alone: verified and applied again, which executors make idempotent), or was never
begun. A crash while writing a record leaves a torn last line; it is cut off on the next open,
which is safe because the purger never acted on a record that was not complete on disk.

The first record binds the journal to one plan hash, so a journal is never resumed against a
different plan.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, InputError, PlanModified
from mqforensics.purge import faults
from mqforensics.retention.manifest import fsync_directory

FINAL_EVENTS = ("done", "skipped")
# Fields written for a reader, which may quote a server's words: masked (`mask_secrets`).
PROSE_FIELDS = ("reason", "error")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _canonical(record: dict[str, Any]) -> bytes:
    return (
        json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    ).encode("utf-8")


def _parse(path: Path, data: bytes) -> list[dict[str, Any]]:
    """Records of the complete lines of `data` (everything up to its last newline)."""
    records: list[dict[str, Any]] = []
    complete = data[: data.rfind(b"\n") + 1]
    for number, line in enumerate(complete.splitlines(), start=1):
        try:
            record = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"journal {path} line {number}: not a JSON record ({exc})") from exc
        if not isinstance(record, dict) or not isinstance(record.get("event"), str):
            raise InputError(f"journal {path} line {number}: not a journal record")
        records.append(record)
    return records


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a journal, without changing the file (for reports, dry runs).

    A torn last line (a crash while writing it) is ignored, as `Journal.open` would cut it.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"journal {path}: cannot be read ({exc.strerror or exc})") from exc
    return _parse(path, data)


class Journal:
    """An open journal, locked against a second purger writing the same file."""

    def __init__(self, path: Path, handle: BinaryIO, records: list[dict[str, Any]]) -> None:
        self.path = path
        self._handle = handle
        self._records: list[dict[str, Any]] = []
        self._final: dict[str, dict[str, Any]] = {}
        self._started: set[str] = set()
        self._census: dict[str, Any] | None = None
        for record in records:
            self._index(record)

    @classmethod
    def open(cls, path: Path, plan_sha256: str) -> Journal:
        """Create the journal (first record ``begin`` with the plan hash) or reopen it.

        Reopening cuts a torn last line, refuses (`PlanModified`) a journal begun for another
        plan, and fails with `InputError` on a damaged record anywhere else, naming the line.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        handle = open(path, "a+b")  # noqa: SIM115 - owned by the Journal, closed by close()
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise ConfigError(
                    f"journal {path} is in use by another purge of this plan"
                ) from exc
            if created:
                fsync_directory(path.parent)
            handle.seek(0)
            data = handle.read()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                # A torn last line: the crash came while it was being written, so the purger
                # never acted on it. Cut it so that appends start on a line of their own.
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
            records = _parse(path, data[:keep])
            journal = cls(path, handle, records)
            if not records:
                journal.record("begin", plan_sha256=plan_sha256)
            else:
                first = records[0]
                if first.get("event") != "begin" or not isinstance(first.get("plan_sha256"), str):
                    raise InputError(f"journal {path} line 1: not a begin record")
                if first["plan_sha256"] != plan_sha256:
                    raise PlanModified(
                        f"journal {path} belongs to plan {first['plan_sha256']}, not to this "
                        f"plan {plan_sha256}; use another --journal"
                    )
            return journal
        except BaseException:
            handle.close()
            raise

    def _index(self, record: dict[str, Any]) -> None:
        self._records.append(record)
        event = record["event"]
        action_id = record.get("id")
        if event in FINAL_EVENTS and isinstance(action_id, str):
            self._final[action_id] = record
        elif event == "started" and isinstance(action_id, str):
            self._started.add(action_id)
        elif event == "census" and self._census is None:
            self._census = record

    def record(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one record and make it durable (flush + fsync) before returning it."""
        record = {**fields, "event": event, "at": _now()}
        for name in PROSE_FIELDS:
            if isinstance(record.get(name), str):
                record[name] = mask_secrets(record[name])
        line = _canonical(record)
        self._handle.seek(0, os.SEEK_END)
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._index(json.loads(line))
        faults.point(f"journal {event}")
        return record

    def final(self, action_id: str) -> dict[str, Any] | None:
        """The latest ``done`` or ``skipped`` record of an action, or None."""
        return self._final.get(action_id)

    def was_started(self, action_id: str) -> bool:
        """Whether a ``started`` record exists for the action (it may be half done)."""
        return action_id in self._started

    @property
    def census(self) -> dict[str, Any] | None:
        """The first census record: the state outside the plan before any action ran."""
        return self._census

    @property
    def records(self) -> list[dict[str, Any]]:
        return list(self._records)

    def close(self) -> None:
        """Release the file and its lock."""
        self._handle.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
