"""The queue's one writer: crash-only appends, and the restart procedure that recovers from a crash.

Every mutation of the queue directory — each byte appended to a segment, the segment headers,
``restart.lq.tmp``, the spool files, and every rename and unlink — goes through one function,
`QueueWriter._perform`, which first calls the optional write hook. A hook (the simulator's
journal, a fault injector) sees the `Write` before it happens and may return a byte count: the
writer then writes only that prefix of the data (a torn write; for a rename or an unlink, the
operation is done) and raises `Crash`, as if the process had died right there.

Durability: a record is appended and the segment fsync'ed before its operation returns; a new
segment's header is fsync'ed and then its directory; a spool file and its directory are fsync'ed
before the ENVELOPE naming it is appended, and it is unlinked only after the message's FINISH
is durable; ``restart.lq`` is replaced by writing and fsync'ing ``restart.lq.tmp``, renaming it
over and fsync'ing the directory.

The in-memory state (`state`) is at every moment what `replay` of the files from the saved
suffix gives for the messages (orphans excepted: the writer never writes one, and garbage
records of finished messages are not kept).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError
from mqforensics.retention.manifest import fsync_directory
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.replay import Message, Position, Replay, replay
from mqforensics.systems.logqueue.segment import Problem, Record, read_segment

DEFAULT_SEGMENT_BYTES = 1 << 20
RESTART_TMP = "restart.lq.tmp"
DATA_KINDS = ("segment_header", "record", "restart", "spool")
OTHER_KINDS = ("rename", "unlink", "move")
FINISH_DELIVERED, FINISH_BOUNCED = 0, 1


class Crash(Exception):
    """A write hook stopped the writer after a (possibly torn) write: the process 'died'."""


class QueueError(RuntimeError):
    """An operation the message's state does not allow (the caller's bug, nothing written)."""


@dataclass(frozen=True)
class Write:
    """One mutation: `kind` in `DATA_KINDS` writes `data` at `offset` of `path`; ``rename`` and
    ``move`` rename `path` to `target`; ``unlink`` removes `path`."""

    kind: str
    path: Path
    offset: int = 0
    data: bytes = b""
    target: Path | None = None


WriteHook = Callable[[Write], int | None]


@dataclass
class Recovery:
    """What one run of the restart procedure found and did."""

    restart_file: str  # "ok" | "missing" | "damaged: <why>"
    suffix: Position  # the working suffix scanned from
    scanned: list[int]  # segment numbers read (>= the suffix's)
    problems: dict[int, list[Problem]]  # per scanned segment
    segment: int  # the new segment appended to from now on
    rewritten: dict[uuid.UUID, list[str]] = field(default_factory=dict)  # replacement envelopes
    finished: dict[uuid.UUID, int] = field(default_factory=dict)  # in flight, nothing left
    removed_spool: list[str] = field(default_factory=list)
    saved_suffix: Position = (0, 0)
    last_time_us: int = 0  # the latest time in any header or record read


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _now_us() -> int:
    return time.time_ns() // 1000


def _record(segment: int, offset: int, data: bytes) -> Record:
    """The `Record` that `read_segment` returns for `data` written at (segment, offset)."""
    head = fmt.decode_record_header(data, 0)
    values = fmt.decode_payload(head.type, data[fmt.RECORD_HEADER_SIZE :])
    return Record(
        segment, offset, head.type, head.time_us, head.message_id, head.ref, values, len(data)
    )


def finish_reason(msg: Message) -> int:
    """0 (delivered) when every recipient of the message's last envelope was delivered, else 1."""
    recipients = msg.envelope.values["recipients"] if msg.envelope else []
    delivered = all(msg.outcomes.get(r, (None,))[0] == fmt.DELIVERED for r in recipients)
    return FINISH_DELIVERED if delivered else FINISH_BOUNCED


class QueueWriter:
    """The single writer of a queue directory. Call `recover` (or use `open`) before anything."""

    def __init__(
        self,
        directory: str | Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        clock: Callable[[], int] | None = None,
        hook: WriteHook | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.spool_directory = self.directory / layout.SPOOL_DIR
        self.segment_bytes = segment_bytes
        self._clock = clock or _now_us
        self._hook = hook
        self._fd: int | None = None
        self._dead = False
        self.segment = 0  # current segment (0: not recovered yet)
        self.offset = 0  # its end
        self.suffix: Position = (0, 0)  # the saved working suffix
        self.positions: dict[str, Position] = {}  # the runners' saved positions
        self._messages: dict[uuid.UUID, Message] = {}
        self._envelopes: dict[uuid.UUID, list[Position]] = {}  # each message's, from the suffix

    @classmethod
    def open(cls, directory: str | Path, **options: object) -> QueueWriter:
        """A writer on `directory` after the restart procedure (`recover`)."""
        writer = cls(directory, **options)  # type: ignore[arg-type]
        writer.recover()
        return writer

    # --- state -----------------------------------------------------------------------------------

    @property
    def end_of_log(self) -> Position:
        return self.segment, self.offset

    def message(self, message: uuid.UUID) -> Message:
        try:
            return self._messages[message]
        except KeyError:
            raise QueueError(f"message {message} is not in the working suffix") from None

    def working_set(self) -> dict[uuid.UUID, Message]:
        """Waiting and in-flight messages (do not modify them)."""
        return {m: msg for m, msg in self._messages.items() if msg.state != "finished"}

    def state(self) -> Replay:
        """What replay of the files from the saved suffix gives (messages only, no orphans)."""
        return Replay(dict(self._messages), [], self.suffix)

    def garbage_end(self) -> Position:
        """The first position the restart procedure still needs (`Replay.garbage_end`)."""
        return self.state().garbage_end(self.end_of_log)

    # --- the one low-level mutation ---------------------------------------------------------------

    def _perform(self, write: Write, open_fd: Callable[[], int] | None = None) -> int | None:
        """Do `write` (opening its file with `open_fd` after the hook saw it); see the module."""
        if self._dead:
            raise Crash("this writer crashed; recover with a new one")
        cut = self._hook(write) if self._hook is not None else None
        fd = None
        if write.kind in DATA_KINDS:
            fd = open_fd() if open_fd is not None else self._fd
            assert fd is not None
            _write_all(fd, write.data if cut is None else write.data[: max(0, cut)])
        elif write.kind in ("rename", "move"):
            assert write.target is not None
            os.replace(write.path, write.target)
        elif write.kind == "unlink":
            with contextlib.suppress(FileNotFoundError):
                write.path.unlink()
        else:
            raise AssertionError(write.kind)
        if cut is not None:
            self._dead = True
            if open_fd is not None and fd is not None and fd != self._fd:
                os.close(fd)
            raise Crash(f"crash after {write.kind} of {write.path.name} ({cut}/{len(write.data)})")
        return fd

    def close(self) -> None:
        """Close the segment file; the writer is unusable afterwards (also after a `Crash`)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._dead = True

    # --- segments and records ---------------------------------------------------------------------

    def _new_segment(self, number: int) -> None:
        path = self.directory / fmt.segment_name(number)
        header = fmt.encode_segment_header(number, self._clock())
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        old = self._fd

        def open_fd() -> int:
            self._fd = os.open(path, flags, 0o644)
            return self._fd

        try:
            self._perform(Write("segment_header", path, 0, header), open_fd)
        finally:
            if old is not None and old != self._fd:
                os.close(old)
        assert self._fd is not None
        os.fsync(self._fd)
        fsync_directory(self.directory)
        self.segment, self.offset = number, len(header)

    def rotate(self) -> int:
        """Start the next segment (appends go there from now on); its number."""
        self._new_segment(self.segment + 1)
        return self.segment

    def _append(
        self, code: int, message: uuid.UUID | None, ref: Position, values: dict[str, Any]
    ) -> Record:
        data = fmt.encode_record(code, message, self._clock(), ref, values)
        if self.offset > fmt.SEGMENT_HEADER_SIZE and self.offset + len(data) > self.segment_bytes:
            self.rotate()
        path = self.directory / fmt.segment_name(self.segment)
        self._perform(Write("record", path, self.offset, data))
        assert self._fd is not None
        os.fsync(self._fd)
        record = _record(self.segment, self.offset, data)
        self.offset += len(data)
        self._apply(record)
        return record

    def _apply(self, record: Record) -> None:
        """Replay's rules for one record the writer wrote (always a valid transition)."""
        mid = record.message_id
        if record.type == fmt.ENVELOPE:
            msg = self._messages.setdefault(mid, Message(mid))
            msg.envelope, msg.start = record, None
            msg.attempts = record.values["attempt"]
            self._envelopes.setdefault(mid, []).append(record.position)
            return
        msg = self._messages[mid]
        if record.type == fmt.START:
            msg.start = record
        elif record.type == fmt.DELIVERY:
            for recipient, status, reply in record.values["outcomes"]:
                msg.outcomes[recipient] = (status, reply, record.position)
                if status == fmt.DELIVERED:
                    msg.deliveries.append((recipient, record.position))
        elif record.type == fmt.FINISH:
            msg.finished, msg.start = record, None

    def _prune(self, suffix: Position) -> None:
        """Forget what replay from the new `suffix` no longer sees: a message exists from its
        first envelope at or after the suffix on; records before that are garbage."""
        for mid in list(self._messages):
            chain = [p for p in self._envelopes[mid] if p >= suffix]
            if not chain:
                assert self._messages[mid].state == "finished", "suffix past a live envelope"
                del self._messages[mid], self._envelopes[mid]
                continue
            msg, born = self._messages[mid], chain[0]
            self._envelopes[mid] = chain
            msg.outcomes = {r: o for r, o in msg.outcomes.items() if o[2] >= born}
            msg.deliveries = [d for d in msg.deliveries if d[1] >= born]

    # --- message operations ----------------------------------------------------------------------

    def _in_flight(self, message: uuid.UUID) -> Message:
        msg = self.message(message)
        if msg.state != "in_flight" or msg.start is None or msg.envelope is None:
            raise QueueError(f"message {message} is {msg.state}, not in flight")
        return msg

    def _write_whole_file(self, kind: str, path: Path, data: bytes) -> None:
        """Create or truncate `path`, write `data` through `_perform`, and fsync it."""

        def open_fd() -> int:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

        fd = self._perform(Write(kind, path, 0, data), open_fd)
        assert fd is not None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _spool_file(self, name: str, content: bytes) -> None:
        path = self.spool_directory / name
        self._write_whole_file("spool", path, content)
        fsync_directory(self.spool_directory)

    def _remove_spool(self, name: str) -> None:
        if name and (self.spool_directory / name).exists():
            self._perform(Write("unlink", self.spool_directory / name))
            fsync_directory(self.spool_directory)

    def enqueue(
        self,
        sender: str,
        recipients: list[str],
        content: bytes,
        *,
        message_id: uuid.UUID | None = None,
        not_before_us: int | None = None,
    ) -> uuid.UUID:
        """Accept a message: its spool file (fsync'ed), then its ENVELOPE (fsync'ed); its id."""
        mid = message_id or uuid.uuid4()
        if mid in self._messages:
            raise QueueError(f"message {mid} already exists")
        if not recipients or len(set(recipients)) != len(recipients):
            raise QueueError("a message needs distinct recipients, at least one")
        self._spool_file(mid.hex, content)
        values = {
            "sender": sender,
            "recipients": list(recipients),
            "spool": mid.hex,
            "attempt": 0,
            "not_before_us": self._clock() if not_before_us is None else not_before_us,
        }
        self._append(fmt.ENVELOPE, mid, (0, 0), values)
        return mid

    def start(self, message: uuid.UUID, runner: str) -> Position:
        """A runner takes a waiting message: a START referring to its envelope; its position."""
        msg = self.message(message)
        if msg.state != "waiting" or msg.envelope is None:
            raise QueueError(f"message {message} is {msg.state}, not waiting")
        return self._append(fmt.START, message, msg.envelope.position, {"runner": runner}).position

    def deliver(self, message: uuid.UUID, outcomes: list[tuple[str, int, str]]) -> Position:
        """Outcomes (recipient, status, reply) of recipients still to be delivered, fsync'ed."""
        msg = self._in_flight(message)
        remaining = set(msg.remaining())
        recipients = [r for r, _, _ in outcomes]
        if not outcomes or len(set(recipients)) != len(recipients):
            raise QueueError("outcomes need distinct recipients, at least one")
        for recipient, status, _ in outcomes:
            if recipient not in remaining:
                raise QueueError(f"{recipient} of {message} is not to be delivered (any more)")
            if status not in fmt.STATUSES:
                raise QueueError(f"unknown status {status}")
        assert msg.start is not None
        values = {"outcomes": [tuple(o) for o in outcomes]}
        return self._append(fmt.DELIVERY, message, msg.start.position, values).position

    def _replace(self, msg: Message, not_before_us: int) -> Record:
        assert msg.envelope is not None
        old = msg.envelope.values
        values = {
            "sender": old["sender"],
            "recipients": msg.remaining(),
            "spool": old["spool"],
            "attempt": msg.attempts + 1,
            "not_before_us": not_before_us,
        }
        return self._append(fmt.ENVELOPE, msg.message_id, msg.envelope.position, values)

    def retry(self, message: uuid.UUID, not_before_us: int) -> Position:
        """End an attempt with recipients left: a replacement envelope carrying them."""
        msg = self._in_flight(message)
        if not msg.remaining():
            raise QueueError(f"message {message} has no recipient left: finish it")
        return self._replace(msg, not_before_us).position

    def finish(self, message: uuid.UUID, reason: int | None = None) -> Position:
        """End the message (reason: `finish_reason` by default); then remove its spool file."""
        msg = self._in_flight(message)
        reason = finish_reason(msg) if reason is None else reason
        if reason not in fmt.FINISH_REASONS:
            raise QueueError(f"unknown finish reason {reason}")
        assert msg.start is not None and msg.envelope is not None
        record = self._append(fmt.FINISH, message, msg.start.position, {"reason": reason})
        self._remove_spool(msg.envelope.values["spool"])
        return record.position

    # --- restart positions and garbage ------------------------------------------------------------

    def save_positions(self, runner_positions: Mapping[str, Position] | None = None) -> Position:
        """Replace ``restart.lq`` atomically; the new saved suffix (`garbage_end`). Runner
        positions (kept from before when None) are clamped to be at or after the suffix."""
        if runner_positions is not None:
            self.positions = dict(runner_positions)
        suffix = self.garbage_end()
        runners = tuple(sorted((n, *max(p, suffix)) for n, p in self.positions.items()))
        data = layout.encode_restart(suffix, runners, self._clock())
        tmp = self.directory / RESTART_TMP
        self._write_whole_file("restart", tmp, data)
        self._perform(Write("rename", tmp, target=self.directory / layout.RESTART_FILE))
        fsync_directory(self.directory)
        self.suffix = suffix
        self.positions = {n: (s, o) for n, s, o in runners}
        self._prune(suffix)
        return suffix

    def delete_garbage_segments(self, archive: Path | None = None) -> list[int]:
        """Remove (or move into `archive`) every segment below the saved suffix; their numbers."""
        gone = []
        for number, path in layout.segments(self.directory).items():
            if number >= self.suffix[0]:
                continue
            assert number != self.segment
            if archive is None:
                self._perform(Write("unlink", path))
            else:
                archive.mkdir(exist_ok=True)
                self._perform(Write("move", path, target=archive / path.name))
            gone.append(number)
        if gone:
            fsync_directory(self.directory)
            if archive is not None:
                fsync_directory(archive)
        return gone

    # --- the restart procedure --------------------------------------------------------------------

    def recover(self) -> Recovery:
        """The restart procedure (see ``docs/logqueue.md``): replay from the saved suffix, a new
        segment, a replacement envelope (or a FINISH) per in-flight message, new positions."""
        if self.segment:
            raise QueueError("recover() runs once, before anything else")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.spool_directory.mkdir(exist_ok=True)
        fsync_directory(self.directory)
        if (self.directory / RESTART_TMP).exists():
            self._perform(Write("unlink", self.directory / RESTART_TMP))
        files = layout.segments(self.directory)
        status = "ok"
        try:
            saved = layout.saved_positions(self.directory)
        except InputError as exc:  # cannot happen with atomic replacement; scan everything
            saved, status = None, f"damaged: {exc}"
        if saved is None:
            status = "missing" if status == "ok" else status
            suffix: Position = (min(files, default=1), fmt.SEGMENT_HEADER_SIZE)
        else:
            suffix = saved.suffix
            self.positions = {n: (s, o) for n, s, o in saved.runners}
        self.suffix = suffix
        scanned = [n for n in files if n >= suffix[0]]
        parsed = {n: read_segment(files[n]) for n in scanned}
        records = [r for n in scanned for r in parsed[n].records]
        last_time = max(
            [r.time_us for r in records]
            + [p.header.created_us for p in parsed.values() if p.header is not None],
            default=0,
        )
        result = replay(records, suffix)
        self._messages = result.messages
        for record in records:
            msg = self._messages.get(record.message_id)
            if (
                record.type == fmt.ENVELOPE
                and record.position >= suffix
                and msg is not None
                and msg.envelope is not None
                and record.position <= msg.envelope.position
            ):
                self._envelopes.setdefault(record.message_id, []).append(record.position)
        # Never append after a possibly torn tail: a new segment, numbered after every other.
        self._new_segment(max([*files, suffix[0] if saved else 0], default=0) + 1)
        report = Recovery(
            status,
            suffix,
            scanned,
            {n: parsed[n].problems for n in scanned if parsed[n].problems},
            self.segment,
            last_time_us=last_time,
        )
        in_flight = sorted(
            (m for m in self._messages.values() if m.state == "in_flight"),
            key=lambda m: m.start.position if m.start else (0, 0),
        )
        for msg in in_flight:
            if msg.remaining():
                report.rewritten[msg.message_id] = msg.remaining()
                self._replace(msg, self._clock())
            else:
                report.finished[msg.message_id] = finish_reason(msg)
                self.finish(msg.message_id)
        report.saved_suffix = self.save_positions()
        keep = {msg.envelope.values["spool"] for msg in self.working_set().values() if msg.envelope}
        for path in sorted(self.spool_directory.iterdir()):
            if path.name not in keep:
                self._perform(Write("unlink", path))
                report.removed_spool.append(path.name)
        if report.removed_spool:
            fsync_directory(self.spool_directory)
        return report
