"""A deterministic MTA on top of `QueueWriter`, with crashes, and the ground truth of its queue.

The simulated world is a pure function of the seed: message `i` (`message_id`) arrives at
`arrival_us`, has 1-4 recipients (`recipients_of`), and each delivery outcome is
`outcome(seed, message, recipient, attempt)` (delivered, deferred or failed permanently). Queue
runners "fast" (attempts 0 and 1, retry after 60 s) and "slow" (later attempts, 3600 s) take due
messages on a simulated clock; at most `concurrency` attempts are in flight, an attempt's
outcomes are written one or two recipients per DELIVERY, and after `max_attempts` attempts the
recipients still deferred are bounced. Every `checkpoint_every` operations the restart positions
are saved and garbage segments deleted (or moved to ``deleted/`` with `keep_deleted`).

Crashes: the simulator journals every write the writer is about to do (``simulator-journal.jsonl``
in the queue directory, before the write) and may pass it to a fault hook (`FaultPlan`), which
crashes the writer after its Nth write, optionally torn. At its next start the simulator decides
from the files how much of the last journaled write reached them. The journal is therefore the
exact list of durable writes: `Truth` replays it with the simulator's own rules (never the
reader's) and says what replay of the directory must give, at a crash or at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from datasets.logqueue.writer import (
    DATA_KINDS,
    Crash,
    QueueWriter,
    Recovery,
    Write,
    WriteHook,
)
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.replay import START_OF_LOG, Message, Position, Replay, replay
from mqforensics.systems.logqueue.segment import read_segment, segment_number_of

T0_US = 1_800_000_000_000_000  # 2027-01-15: the simulated clock's start
SECOND = 1_000_000
JOURNAL = "simulator-journal.jsonl"
GROUND_TRUTH = "ground_truth.json"
DELETED_DIR = "deleted"
RUNNERS = {"fast": 60, "slow": 3600}  # name → retry interval, seconds
REPLIES = {
    fmt.DELIVERED: "250 2.0.0 ok",
    fmt.TEMPORARY_FAILURE: "451 4.3.0 try again later",
    fmt.PERMANENT_FAILURE: "550 5.1.1 no such user",
}

# --- the simulated world: pure functions of the seed ---------------------------------------------


def _hash(*parts: object) -> int:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def message_id(seed: int, index: int) -> uuid.UUID:
    digest = hashlib.blake2b(f"{seed}|message|{index}".encode(), digest_size=16).digest()
    return uuid.UUID(bytes=digest, version=4)


def arrival_us(seed: int, index: int) -> int:
    return T0_US + index * 20 * SECOND + _hash(seed, "arrival", index) % (20 * SECOND)


def sender_of(seed: int, index: int) -> str:
    return f"sender{_hash(seed, 'sender', index) % 50}@origin.example"


def recipients_of(seed: int, index: int) -> list[str]:
    count = 1 + _hash(seed, "count", index) % 4
    return [f"user{index}-{j}@d{_hash(seed, 'domain', index, j) % 3}.example" for j in range(count)]


def content_of(seed: int, index: int) -> bytes:
    return f"Subject: message {index}\r\n\r\nseed {seed}\r\n".encode()


def outcome(seed: int, message: uuid.UUID, recipient: str, attempt: int) -> int:
    """Deferred for the first 0-4 attempts (per recipient), then delivered (7/8) or failed."""
    h = _hash(seed, "outcome", message, recipient)
    if attempt < h % 5:
        return fmt.TEMPORARY_FAILURE
    return fmt.PERMANENT_FAILURE if (h >> 8) % 8 == 0 else fmt.DELIVERED


def runner_for(attempt: int) -> str:
    return "fast" if attempt < 2 else "slow"


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    messages: int = 10
    max_attempts: int = 4
    concurrency: int = 3
    checkpoint_every: int = 5
    segment_bytes: int = 2048
    delete_garbage: bool = True
    keep_deleted: bool = False  # move garbage segments to <dir>/deleted/ instead of unlinking


# --- the journal: every write, before it happens --------------------------------------------------


def _rel(directory: Path, path: Path) -> str:
    return path.relative_to(directory).as_posix()


def _entry(directory: Path, write: Write) -> dict[str, Any]:
    entry: dict[str, Any] = {"w": write.kind, "path": _rel(directory, write.path)}
    if write.kind in DATA_KINDS:
        entry.update(offset=write.offset, data=write.data.hex())
    if write.target is not None:
        entry["to"] = _rel(directory, write.target)
    return entry


def _resolve(directory: Path, entry: dict[str, Any]) -> tuple[int, bool]:
    """How much of the journal's last write reached the files: (bytes, done)."""
    path = directory / entry["path"]
    if entry["w"] not in DATA_KINDS:
        return 0, not path.exists()
    data = bytes.fromhex(entry["data"])
    if not path.exists():
        return 0, False
    with path.open("rb") as f:
        f.seek(entry["offset"])
        got = f.read(len(data))
    n = next((i for i, (a, b) in enumerate(zip(got, data, strict=False)) if a != b), len(got))
    return n, n == len(data)


def _read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The journal's complete lines and their byte length (a torn last line is dropped)."""
    if not path.exists():
        return [], 0
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    return [json.loads(line) for line in raw[:end].splitlines()], end


class Journal:
    """Appends one JSON line per write (no fsync: it models a process crash, not power loss)."""

    def __init__(self, directory: Path, config: SimConfig) -> None:
        self.directory = directory
        path = directory / JOURNAL
        lines, good = _read_journal(path)
        if path.exists() and path.stat().st_size > good:
            os.truncate(path, good)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if not lines:
            self._append({"config": asdict(config)})
        elif lines[0]["config"] != asdict(config):
            raise ValueError(f"{path}: written with {lines[0]['config']}, not {asdict(config)}")
        last = lines[-1] if lines else {}
        resolved = list(_resolve(directory, last)) if "w" in last else None
        self._append({"start": sum(1 for e in lines if "start" in e), "resolved": resolved})

    def _append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def record(self, write: Write) -> None:
        self._append(_entry(self.directory, write))

    def close(self) -> None:
        os.close(self._fd)


# --- the ground truth ---------------------------------------------------------------------------


@dataclass
class TruthMessage:
    message_id: uuid.UUID
    index: int
    recipients: list[str]  # of the first envelope
    spool: str
    envelope_recipients: list[str]
    envelope_pos: Position
    attempt: int = 0
    state: str = "waiting"
    start_pos: Position | None = None
    outcomes: dict[str, int] = field(default_factory=dict)  # recipient → last status
    history: list[tuple[str, int, int]] = field(default_factory=list)  # (rcpt, status, attempt)
    delivered: Counter[str] = field(default_factory=Counter)
    tried: set[str] = field(default_factory=set)  # recipients with an outcome in this attempt
    finish_reason: int | None = None

    def remaining(self) -> list[str]:
        done = {fmt.DELIVERED, fmt.PERMANENT_FAILURE}
        return [r for r in self.envelope_recipients if self.outcomes.get(r) not in done]

    def expected(self) -> dict[str, Any]:
        """What replay must give for this message (the shape of `observed`)."""
        return {
            "state": self.state,
            "attempt": self.attempt,
            "remaining": [] if self.state == "finished" else sorted(self.remaining()),
            "delivered": sorted(r for r, n in self.delivered.items() if n),
            "failed": sorted(r for r, s in self.outcomes.items() if s == fmt.PERMANENT_FAILURE),
        }


def observed(result: Replay) -> dict[str, dict[str, Any]]:
    """Per message (id as text): state, attempt, remaining, delivered and failed recipients."""
    out = {}
    for mid, msg in result.messages.items():
        finished = msg.state == "finished"
        out[str(mid)] = {
            "state": msg.state,
            "attempt": msg.attempts,
            "remaining": [] if finished else sorted(msg.remaining()),
            "delivered": sorted({r for r, _ in msg.deliveries}),
            "failed": sorted(r for r, o in msg.outcomes.items() if o[0] == fmt.PERMANENT_FAILURE),
        }
    return out


class Truth:
    """The simulator's account of its queue, from the journal: which writes became durable and
    what they mean, checked against the simulator's rules (`violations`)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.messages: dict[uuid.UUID, TruthMessage] = {}
        self._index = {message_id(config.seed, i): i for i in range(config.messages)}
        self.starts = 0
        self.last_time_us = 0
        self.headers: dict[int, int] = {}  # segment → header bytes written
        self.torn: dict[tuple[int, int], tuple[str, int]] = {}  # (seg, offset) → (kind, size)
        self.unlinked: set[int] = set()  # segments deleted
        self.archived: set[int] = set()  # segments moved to deleted/
        self.saved_suffix: Position | None = None
        self.saved_runners: list[list[Any]] = []
        self._pending_restart: tuple[Position, list[list[Any]]] | None = None
        self.violations: list[str] = []

    @classmethod
    def load(cls, directory: str | Path) -> Truth:
        directory = Path(directory)
        lines, _ = _read_journal(directory / JOURNAL)
        if not lines:
            raise FileNotFoundError(f"{directory / JOURNAL}: no simulator journal (yet)")
        truth = cls(SimConfig(**lines[0]["config"]))
        entries = lines[1:]
        for k, entry in enumerate(entries):
            if "start" in entry:
                truth.starts += 1
                continue
            nxt = entries[k + 1] if k + 1 < len(entries) else None
            if nxt is None:
                n, done = _resolve(directory, entry)
            elif "start" in nxt:
                n, done = nxt["resolved"]
            else:
                n, done = len(entry.get("data", "")) // 2, True
            truth._apply(entry, n, done)
        return truth

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _apply(self, entry: dict[str, Any], n: int, done: bool) -> None:
        kind, name = entry["w"], Path(entry["path"]).name
        number = segment_number_of(name) if "/" not in entry["path"] else None
        if kind in DATA_KINDS:
            data = bytes.fromhex(entry["data"])
        if kind == "segment_header" and number is not None:
            self.headers[number] = n
            self.torn = {k: v for k, v in self.torn.items() if k[0] != number}
            if not done:
                self.torn[(number, 0)] = ("bad_segment_header", n)
            self.last_time_us = max(self.last_time_us, fmt.decode_segment_header(data).created_us)
        elif kind == "record" and number is not None:
            self.last_time_us = max(self.last_time_us, fmt.decode_record_header(data, 0).time_us)
            if done:
                self._record((number, entry["offset"]), data)
            elif n:
                self.torn[(number, entry["offset"])] = ("torn_tail", n)
        elif kind == "restart":
            self._pending_restart = None
            if done:
                values = read_segment(data).records[0].values
                suffix = (values["suffix_segment"], values["suffix_offset"])
                self._pending_restart = (suffix, [list(p) for p in values["positions"]])
        elif kind == "rename" and done:
            if self._pending_restart is None:
                self._violation("restart.lq replaced by a file that was not written whole")
                return
            self.saved_suffix, self.saved_runners = self._pending_restart
            live = [m.envelope_pos for m in self.messages.values() if m.state != "finished"]
            if live and self.saved_suffix > min(live):
                self._violation(f"saved suffix {self.saved_suffix} past live envelope {min(live)}")
        elif kind in ("unlink", "move") and done:
            if number is not None:
                if self.saved_suffix is None or number >= self.saved_suffix[0]:
                    self._violation(f"segment {number} deleted, saved suffix {self.saved_suffix}")
                (self.archived if kind == "move" else self.unlinked).add(number)
            elif entry["path"].startswith(layout.SPOOL_DIR + "/"):
                owner = next((m for m in self.messages.values() if m.spool == name), None)
                if owner is not None and owner.state != "finished":
                    self._violation(f"spool file of {owner.state} message {owner.index} removed")

    def _record(self, pos: Position, data: bytes) -> None:
        head = fmt.decode_record_header(data, 0)
        values = fmt.decode_payload(head.type, data[fmt.RECORD_HEADER_SIZE :])
        mid, seed = head.message_id, self.config.seed
        msg = self.messages.get(mid)
        what = f"{fmt.RECORD_TYPES[head.type].name} at {pos} of {mid}"
        if head.type == fmt.ENVELOPE and head.ref == (0, 0):
            if msg is not None or mid not in self._index:
                self._violation(f"{what}: a new envelope of a known or unknown message")
                return
            recipients = list(values["recipients"])
            self.messages[mid] = TruthMessage(
                mid, self._index[mid], recipients, values["spool"], list(recipients), pos
            )
            return
        if msg is None:
            self._violation(f"{what}: no such message")
            return
        # A replacement envelope, DELIVERY and FINISH need the message in flight, a START
        # waiting; ENVELOPE and START refer to the envelope, the others to the START.
        state = "waiting" if head.type == fmt.START else "in_flight"
        ref = msg.envelope_pos if head.type in (fmt.ENVELOPE, fmt.START) else msg.start_pos
        if msg.state != state or head.ref != ref:
            self._violation(f"{what}: message {msg.state}, ref {head.ref} != {ref}")
            return
        if head.type == fmt.ENVELOPE:
            if (
                list(values["recipients"]) != msg.remaining()
                or values["attempt"] != msg.attempt + 1
            ):
                carried = f"{values['recipients']} attempt {values['attempt']}"
                self._violation(f"{what}: {carried}, not {msg.remaining()} {msg.attempt + 1}")
            msg.envelope_recipients, msg.envelope_pos = list(values["recipients"]), pos
            msg.attempt, msg.state, msg.start_pos = values["attempt"], "waiting", None
        elif head.type == fmt.START:
            msg.state, msg.start_pos, msg.tried = "in_flight", pos, set()
        elif head.type == fmt.DELIVERY:
            for recipient, status, _ in values["outcomes"]:
                if recipient not in msg.remaining() or recipient in msg.tried:
                    self._violation(f"{what}: {recipient} is not to be delivered")
                if status != outcome(seed, mid, recipient, msg.attempt):
                    self._violation(f"{what}: {recipient} status {status} != the outcome function")
                msg.tried.add(recipient)
                msg.outcomes[recipient] = status
                msg.history.append((recipient, status, msg.attempt))
                if status == fmt.DELIVERED:
                    msg.delivered[recipient] += 1
                    if msg.delivered[recipient] > 1:
                        self._violation(f"{what}: {recipient} delivered twice")
        else:
            left = msg.remaining()
            all_delivered = all(
                msg.outcomes.get(r) == fmt.DELIVERED for r in msg.envelope_recipients
            )
            if left and msg.attempt < self.config.max_attempts - 1:
                self._violation(f"{what}: finished at attempt {msg.attempt} with {left} left")
            if values["reason"] != (0 if all_delivered else 1):
                self._violation(f"{what}: reason {values['reason']}")
            msg.state, msg.start_pos, msg.finish_reason = "finished", None, values["reason"]

    # --- what the truth says ---

    @property
    def next_index(self) -> int:
        """How many messages were accepted (durable ENVELOPE): the next one to submit."""
        indexes = sorted(m.index for m in self.messages.values())
        if indexes != list(range(len(indexes))):
            self._violation(f"messages accepted out of order: {indexes}")
        return len(indexes)

    @property
    def complete(self) -> bool:
        every = self.next_index == self.config.messages
        return every and all(m.state == "finished" for m in self.messages.values())

    def expected(self) -> dict[str, dict[str, Any]]:
        return {str(mid): m.expected() for mid, m in self.messages.items()}

    def unfinished(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.expected().items() if v["state"] != "finished"}

    def problems(self) -> dict[int, set[tuple[str, int, int]]]:
        """Per segment: the problems `read_segment` must report, (kind, offset, size)."""
        out: dict[int, set[tuple[str, int, int]]] = {}
        for (segment, offset), (kind, size) in self.torn.items():
            out.setdefault(segment, set()).add((kind, offset, size))
        return out

    def final_problems(self) -> list[str]:
        """What is wrong with a run said to be over: every message accepted and finished; per
        recipient, every outcome the outcome function's, delivered at most once, and ending
        delivered, failed, or bounced (deferred or never tried when the message finished)."""
        cfg, out = self.config, []
        if self.next_index != cfg.messages:
            out.append(f"{self.next_index} of {cfg.messages} messages accepted")
        for m in self.messages.values():
            if m.state != "finished":
                out.append(f"message {m.index} is {m.state}")
            for r in m.recipients:
                tries = [(s, a) for rcpt, s, a in m.history if rcpt == r]
                if any(s != outcome(cfg.seed, m.message_id, r, a) for s, a in tries):
                    out.append(f"message {m.index} {r}: outcomes {tries}")
                if m.delivered[r] > 1:
                    out.append(f"message {m.index} {r}: delivered {m.delivered[r]} times")
                last = tries[-1][0] if tries else fmt.TEMPORARY_FAILURE
                if last == fmt.TEMPORARY_FAILURE and m.finish_reason != 1:
                    out.append(f"message {m.index} {r}: left deferred, reason {m.finish_reason}")
        return out

    def ground_truth(self) -> dict[str, Any]:
        """The content of ``ground_truth.json`` (see ``docs/logqueue.md``)."""
        messages = {}
        for mid, m in sorted(self.messages.items(), key=lambda kv: kv[1].index):
            messages[str(mid)] = {
                "index": m.index,
                "recipients": m.recipients,
                "spool": m.spool,
                **m.expected(),
                "finish_reason": m.finish_reason,
                "outcomes": [list(h) for h in m.history],
            }
        return {
            "format": "mqforensics-logqueue-ground-truth/1",
            "config": asdict(self.config),
            "complete": self.complete,
            "starts": self.starts,
            "saved_suffix": list(self.saved_suffix) if self.saved_suffix else None,
            "saved_runners": self.saved_runners,
            "segments_deleted": sorted(self.unlinked),
            "segments_moved_to_deleted": sorted(self.archived),
            "problems": [
                {"segment": s, "kind": k, "offset": o, "size": n}
                for (s, o), (k, n) in sorted(self.torn.items())
            ],
            "messages": messages,
            "violations": self.violations,
        }


# --- comparing a directory with the truth ---------------------------------------------------------


def restart_view(directory: Path) -> Replay:
    """Replay as the restart procedure does it: from the saved suffix, segments at or after it."""
    files = layout.segments(directory)
    saved = layout.saved_positions(directory)
    suffix = saved.suffix if saved else (min(files, default=1), fmt.SEGMENT_HEADER_SIZE)
    records = [r for n, p in files.items() if n >= suffix[0] for r in read_segment(p).records]
    return replay(records, suffix)


def full_view(directory: Path) -> Replay:
    """Replay of every segment there is (``deleted/`` included) from the start of the log."""
    files = dict(layout.segments(directory))
    if (directory / DELETED_DIR).is_dir():
        files.update(layout.segments(directory / DELETED_DIR))
    return replay((r for p in files.values() for r in read_segment(p).records), START_OF_LOG)


def check_directory(directory: str | Path, truth: Truth) -> list[str]:
    """Every difference between the directory's files and what the truth says they hold."""
    directory = Path(directory)
    out: list[str] = []
    files = layout.segments(directory)
    moved = layout.segments(directory / DELETED_DIR) if (directory / DELETED_DIR).is_dir() else {}
    expected = set(truth.headers) - truth.unlinked - truth.archived
    maybe_absent = {s for s, n in truth.headers.items() if n == 0}
    if not expected - maybe_absent <= set(files) <= expected:
        out.append(f"segments {sorted(files)}, expected {sorted(expected)}")
    if set(moved) != truth.archived:
        out.append(f"{DELETED_DIR}/ holds {sorted(moved)}, expected {sorted(truth.archived)}")
    want = truth.problems()
    for number, path in {**files, **moved}.items():
        got = {(p.kind, p.offset, p.size) for p in read_segment(path).problems}
        if got != want.get(number, set()):
            out.append(f"segment {number}: problems {got}, expected {want.get(number, set())}")
    saved = layout.saved_positions(directory)
    if (saved.suffix if saved else None) != truth.saved_suffix:
        out.append(f"restart.lq suffix {saved and saved.suffix}, expected {truth.saved_suffix}")
    expected_messages = truth.expected()
    if not truth.unlinked:  # the whole history is there: replay of it must give the truth
        full = full_view(directory)
        if full.orphans:
            out.append(f"full history: orphans {[(r.position, w) for r, w in full.orphans]}")
        got_all = observed(full)
        for mid in sorted(set(got_all) | set(expected_messages)):
            if got_all.get(mid) != expected_messages.get(mid):
                out.append(f"full {mid}: {got_all.get(mid)} != {expected_messages.get(mid)}")
    view = observed(restart_view(directory))
    unfinished = truth.unfinished()
    live = {m: v for m, v in view.items() if v["state"] != "finished"}
    for mid in sorted(set(live) | set(unfinished)):
        seen, should = live.get(mid), unfinished.get(mid)
        if seen is None or should is None:
            out.append(f"restart view {mid}: {seen} != {should}")
            continue
        # Outcomes of earlier attempts before the suffix are garbage the restart does not
        # read: delivered and failed recipients are a subset of the truth's.
        exact = ("state", "attempt", "remaining")
        subsets = all(set(seen[k]) <= set(should[k]) for k in ("delivered", "failed"))
        if any(seen[k] != should[k] for k in exact) or not subsets:
            out.append(f"restart view {mid}: {seen} != {should}")
    for mid, seen in view.items():
        if (
            seen["state"] == "finished"
            and expected_messages.get(mid, {}).get("state") != "finished"
        ):
            out.append(f"restart view {mid}: finished, truth {expected_messages.get(mid)}")
    return out


# --- the simulator --------------------------------------------------------------------------------


class FaultPlan:
    """A write hook crashing after given write numbers (counted over every writer it serves):
    number → None (the whole write reaches the file) or the fraction of it that does (torn)."""

    def __init__(self, crashes: Mapping[int, float | None]) -> None:
        self.crashes = dict(crashes)
        self.count = 0
        self.fired: list[tuple[int, str, str, int]] = []  # (number, kind, file, bytes)

    def __call__(self, write: Write) -> int | None:
        self.count += 1
        if self.count not in self.crashes:
            return None
        fraction = self.crashes[self.count]
        cut = len(write.data)
        if fraction is not None and write.kind in DATA_KINDS and write.data:
            cut = min(len(write.data) - 1, int(len(write.data) * fraction))
        self.fired.append((self.count, write.kind, write.path.name, cut))
        return cut


def _not_before(msg: Message) -> int:
    return int(msg.envelope.values["not_before_us"]) if msg.envelope else 0


def _due_order(msg: Message) -> tuple[int, Position]:
    return _not_before(msg), msg.envelope.position if msg.envelope else (0, 0)


def _start_position(msg: Message) -> Position:
    return msg.start.position if msg.start else (0, 0)


class Simulator:
    """One process lifetime of the simulated MTA: `start` (restart procedure) then `run`."""

    def __init__(
        self,
        directory: str | Path,
        config: SimConfig,
        *,
        faults: WriteHook | None = None,
        after_op: Callable[[Simulator], None] | None = None,
        pace_s: float = 0.0,
    ) -> None:
        self.directory = Path(directory)
        self.config = config
        self.faults = faults
        self.after_op = after_op
        self.pace_s = pace_s
        self.journal: Journal | None = None
        self.writer: QueueWriter | None = None
        self.positions: dict[str, Position] = {}
        self.next_index = 0
        self.now_us = T0_US
        self.ops = 0

    def start(self) -> Recovery:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(self.directory, self.config)
        truth = Truth.load(self.directory)
        self.next_index = truth.next_index
        self.now_us = max(truth.last_time_us, T0_US) + 1000
        self.writer = QueueWriter(
            self.directory,
            segment_bytes=self.config.segment_bytes,
            clock=self._clock,
            hook=self._hook,
        )
        recovery = self.writer.recover()
        self.positions = dict(self.writer.positions)
        return recovery

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.journal is not None:
            self.journal.close()
            self.journal = None

    def _clock(self) -> int:
        self.now_us += 1000
        return self.now_us

    def _hook(self, write: Write) -> int | None:
        assert self.journal is not None
        self.journal.record(write)
        return self.faults(write) if self.faults is not None else None

    def run(self) -> None:
        """Operate until every message arrived and finished, checkpointing on the way."""
        while (action := self._next_action()) is not None:
            action()
            self.ops += 1
            if self.ops % self.config.checkpoint_every == 0:
                self._checkpoint()
            if self.after_op is not None:
                self.after_op(self)
            if self.pace_s:
                time.sleep(self.pace_s)
        self._checkpoint()

    def _next_action(self) -> Callable[[], None] | None:
        """The next operation (a pure function of the queue's state and the clock), advancing
        the clock to the next arrival or due retry when nothing is to be done now; None: done."""
        assert self.writer is not None
        seed, cfg = self.config.seed, self.config
        while True:
            live = self.writer.working_set().values()
            waiting = [m for m in live if m.state == "waiting"]
            flying = sorted((m for m in live if m.state == "in_flight"), key=_start_position)
            due = sorted((m for m in waiting if _not_before(m) <= self.now_us), key=_due_order)
            choices: list[Callable[[], None]] = []
            more = self.next_index < cfg.messages
            if more and arrival_us(seed, self.next_index) <= self.now_us:
                choices.append(self._enqueue)
            if due and len(flying) < cfg.concurrency:
                choices.append(functools.partial(self._start, due[0].message_id))
            if flying:
                pick = flying[_hash(seed, "which", self.now_us) % len(flying)]
                choices.append(functools.partial(self._progress, pick.message_id))
            if choices:
                return choices[_hash(seed, "pick", self.now_us) % len(choices)]
            upcoming = [_not_before(m) for m in waiting]
            if more:
                upcoming.append(arrival_us(seed, self.next_index))
            if not upcoming:
                return None
            self.now_us = max(self.now_us, min(upcoming))

    def _enqueue(self) -> None:
        assert self.writer is not None
        seed, i = self.config.seed, self.next_index
        self.writer.enqueue(
            sender_of(seed, i),
            recipients_of(seed, i),
            content_of(seed, i),
            message_id=message_id(seed, i),
            not_before_us=self.now_us,
        )
        self.next_index += 1

    def _start(self, mid: uuid.UUID) -> None:
        assert self.writer is not None
        msg = self.writer.message(mid)
        assert msg.envelope is not None
        runner = runner_for(msg.attempts)
        self.positions[runner] = msg.envelope.position
        self.writer.start(mid, runner)
        if msg.attempts >= self.config.max_attempts:  # a crash cost the last attempt: bounce
            self.writer.finish(mid)

    def _progress(self, mid: uuid.UUID) -> None:
        assert self.writer is not None
        seed, msg = self.config.seed, self.writer.message(mid)
        assert msg.start is not None and msg.envelope is not None
        start, attempt = msg.start.position, msg.attempts
        untried = [
            r
            for r in msg.envelope.values["recipients"]
            if r not in msg.outcomes or msg.outcomes[r][2] < start
        ]
        if untried:
            chunk = untried[: 1 + _hash(seed, "chunk", mid, attempt, len(untried)) % 2]
            statuses = [(r, outcome(seed, mid, r, attempt)) for r in chunk]
            self.writer.deliver(mid, [(r, s, REPLIES[s]) for r, s in statuses])
        elif msg.remaining() and attempt + 1 < self.config.max_attempts:
            interval = RUNNERS[runner_for(attempt)] * SECOND
            self.writer.retry(mid, self.now_us + interval)
        else:
            self.writer.finish(mid)

    def _checkpoint(self) -> None:
        assert self.writer is not None
        self.writer.save_positions(self.positions)
        if self.config.delete_garbage:
            keep = self.directory / DELETED_DIR if self.config.keep_deleted else None
            self.writer.delete_garbage_segments(keep)


def run_simulation(
    directory: str | Path,
    config: SimConfig,
    *,
    faults: WriteHook | None = None,
    on_crash: Callable[[int], None] | None = None,
    on_recovered: Callable[[Simulator, Recovery], None] | None = None,
    after_op: Callable[[Simulator], None] | None = None,
    stop_after_crashes: int | None = None,
) -> int:
    """Run to the end in-process, restarting after every `Crash`; the number of crashes."""
    crashes = 0
    while True:
        sim = Simulator(directory, config, faults=faults, after_op=after_op)
        try:
            recovery = sim.start()
            if on_recovered is not None:
                on_recovered(sim, recovery)
            sim.run()
            return crashes
        except Crash:
            crashes += 1
            if on_crash is not None:
                on_crash(crashes)
            if stop_after_crashes is not None and crashes >= stop_after_crashes:
                return crashes
        finally:
            sim.close()


def count_writes(config: SimConfig) -> int:
    """How many writes a crash-free run of `config` does."""
    plan = FaultPlan({})
    with tempfile.TemporaryDirectory() as tmp:
        run_simulation(Path(tmp) / "q", config, faults=plan)
    return plan.count


def write_ground_truth(directory: str | Path) -> dict[str, Any]:
    """Write ``ground_truth.json`` (atomically) from the journal; its content."""
    directory = Path(directory)
    truth = Truth.load(directory).ground_truth()
    tmp = directory / (GROUND_TRUTH + ".tmp")
    tmp.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, directory / GROUND_TRUTH)
    return truth


def write_dataset(
    directory: str | Path,
    *,
    seed: int = 0,
    messages: int = 20,
    crashes: int = 2,
    torn: bool = True,
    stop_at_last_crash: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """A queue directory from a seeded run with `crashes` in-process crashes (torn writes half
    of the time when `torn`), left as the last crash left it when `stop_at_last_crash` (with
    messages in flight and possibly a torn tail), plus its ``ground_truth.json``."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} is not empty")
    config = SimConfig(seed=seed, messages=messages, **options)
    total = count_writes(config)
    rng = random.Random(f"{seed}|crashes")
    points = sorted(rng.sample(range(1, max(2, total * 9 // 10)), min(crashes, total // 2)))
    plan = FaultPlan({p: rng.random() if torn and rng.random() < 0.5 else None for p in points})
    stop = len(points) if stop_at_last_crash and points else None
    run_simulation(directory, config, faults=plan, stop_after_crashes=stop)
    return write_ground_truth(directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m datasets.logqueue.simulate",
        description="Run (or resume after a crash) the simulated MTA on a queue directory.",
    )
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--kill-after-writes", type=int, metavar="K",
                        help="SIGKILL this process right after its Kth write")  # fmt: skip
    parser.add_argument("--tear", action="store_true", help="only half of that write lands")
    parser.add_argument("--segment-bytes", type=int, default=SimConfig.segment_bytes)
    parser.add_argument("--max-attempts", type=int, default=SimConfig.max_attempts)
    parser.add_argument("--checkpoint-every", type=int, default=SimConfig.checkpoint_every)
    keep = f"move garbage segments to {DELETED_DIR}/ instead of deleting them"
    parser.add_argument("--keep-deleted", action="store_true", help=keep)
    parser.add_argument(
        "--no-delete-garbage", action="store_true",
        help="never delete garbage segments (leave them to `mqforensics purge`)",
    )  # fmt: skip
    parser.add_argument("--pace-ms", type=float, default=0.0, help="sleep after each operation")
    args = parser.parse_args(argv)
    config = SimConfig(
        seed=args.seed,
        messages=args.messages,
        max_attempts=args.max_attempts,
        checkpoint_every=args.checkpoint_every,
        segment_bytes=args.segment_bytes,
        keep_deleted=args.keep_deleted,
        delete_garbage=not args.no_delete_garbage,
    )
    faults = None
    if args.kill_after_writes:
        faults = FaultPlan({args.kill_after_writes: 0.5 if args.tear else None})
    sim = Simulator(args.directory, config, faults=faults, pace_s=args.pace_ms / 1000)
    try:
        sim.start()
        sim.run()
    except Crash:
        os.kill(os.getpid(), signal.SIGKILL)
    finally:
        with contextlib.suppress(OSError):
            sim.close()
    truth = write_ground_truth(args.directory)
    summary = {
        "complete": truth["complete"],
        "starts": truth["starts"],
        "messages": len(truth["messages"]),
        "violations": len(truth["violations"]),
    }
    print(json.dumps(summary))
    return 0 if truth["complete"] and not truth["violations"] else 1


if __name__ == "__main__":
    sys.exit(main())
