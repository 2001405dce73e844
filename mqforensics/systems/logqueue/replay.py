"""What the restart procedure reconstructs from a queue directory's records.

A queue directory holds segment files ``seg-<n>.lq`` and ``restart.lq`` (a segment numbered 0
holding one RESTART record, replaced atomically: the saved restart positions). The restart
procedure reads ``restart.lq``, scans the segments from the working suffix on, in (segment,
offset) order, and keeps per message:

- ENVELOPE: the message's live envelope (a replacement, whose back-reference names the envelope
  it replaces, supersedes that one);
- START: referring to the live envelope, the message is in flight (the envelope is garbage);
- DELIVERY: referring to the in-flight START, the outcome per recipient (the last one wins);
- FINISH: the message is finished; all its records are garbage.

The result (`Replay`): the working set (waiting: a live envelope; in flight: a START without a
replacement or FINISH after it), the envelopes the restart must write (in-flight messages, with
the recipients not yet delivered nor failed permanently; none left means a FINISH instead),
finished messages, every delivery outcome, records that refer to nothing live (`orphans`), and
where the garbage prefix ends: the earliest envelope of a waiting or in-flight message (the
restart rewrites an in-flight message from its envelope); every record before it is garbage.
A START, DELIVERY or FINISH whose back-reference points before the suffix (or to a record so
skipped) is garbage of an earlier attempt (a live envelope is never before the suffix) and is
skipped, not an orphan; one with no back-reference, (0, 0), refers to nothing and is an orphan
(the format's reading rule 11). A RESTART record in a segment is ignored (rule 12).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import Record

Position = tuple[int, int]
START_OF_LOG: Position = (1, fmt.SEGMENT_HEADER_SIZE)


@dataclass
class Message:
    message_id: uuid.UUID
    envelope: Record | None = None  # the live (or last) envelope
    start: Record | None = None  # the in-flight START
    outcomes: dict[str, tuple[int, str, Position]] = field(default_factory=dict)
    deliveries: list[tuple[str, Position]] = field(default_factory=list)  # every DELIVERED
    finished: Record | None = None
    attempts: int = 0

    @property
    def state(self) -> str:
        if self.finished is not None:
            return "finished"
        return "in_flight" if self.start is not None else "waiting"

    def remaining(self) -> list[str]:
        """Recipients of the last envelope neither delivered nor failed permanently."""
        recipients = list(self.envelope.values["recipients"]) if self.envelope else []
        done = {fmt.DELIVERED, fmt.PERMANENT_FAILURE}
        return [r for r in recipients if self.outcomes.get(r, (None,))[0] not in done]


@dataclass
class Replay:
    messages: dict[uuid.UUID, Message]
    orphans: list[tuple[Record, str]]
    suffix: Position

    def working_set(self) -> dict[uuid.UUID, Message]:
        return {m: msg for m, msg in self.messages.items() if msg.state != "finished"}

    def to_rewrite(self) -> dict[uuid.UUID, list[str]]:
        """In-flight messages → the recipients their replacement envelope must carry."""
        return {m: msg.remaining() for m, msg in self.messages.items() if msg.state == "in_flight"}

    def garbage_end(self, end_of_log: Position) -> Position:
        """The first position a restart still needs: the earliest envelope of a waiting or
        in-flight message (an in-flight START refers to its envelope, whose recipients the
        restart must rewrite), or `end_of_log` when nothing is live."""
        live = [msg.envelope.position for msg in self.working_set().values() if msg.envelope]
        return min(live, default=end_of_log)


def replay(records: Iterable[Record], suffix: Position = START_OF_LOG) -> Replay:
    """Replay `records` (any order; sorted here) from `suffix` on, as the restart procedure."""
    messages: dict[uuid.UUID, Message] = {}
    orphans: list[tuple[Record, str]] = []
    stale: set[Position] = set()
    for record in sorted(records, key=lambda r: r.position):
        # Positions come from restart.lq alone: a RESTART record in a segment is ignored (the
        # format's reading rule 12; the validation suite of the records reports it).
        if record.position < suffix or record.type == fmt.RESTART:
            continue
        if record.type != fmt.ENVELOPE and ((0, 0) < record.ref < suffix or record.ref in stale):
            # It refers to a record before the working suffix, which is garbage (a live
            # message's envelope is never before the suffix), or to such a record: so is it.
            stale.add(record.position)
            continue
        msg = messages.get(record.message_id)
        if record.type == fmt.ENVELOPE:
            if msg is None:
                msg = messages[record.message_id] = Message(record.message_id)
            elif msg.finished is not None:
                orphans.append((record, "envelope of a finished message"))
                continue
            msg.envelope, msg.start = record, None
            msg.attempts = record.values["attempt"]
            continue
        if msg is None:
            orphans.append((record, f"{record.type_name} of a message with no envelope"))
            continue
        if record.type == fmt.START:
            if msg.envelope is None or record.ref != msg.envelope.position or msg.start:
                orphans.append((record, "START of an envelope that is not live"))
                continue
            msg.start = record
        elif record.type == fmt.DELIVERY:
            if msg.start is None or record.ref != msg.start.position:
                orphans.append((record, "DELIVERY without its live START"))
                continue
            for recipient, status, reply in record.values["outcomes"]:
                msg.outcomes[recipient] = (status, reply, record.position)
                if status == fmt.DELIVERED:
                    msg.deliveries.append((recipient, record.position))
        elif record.type == fmt.FINISH:
            if msg.start is None or record.ref != msg.start.position:
                orphans.append((record, "FINISH without its live START"))
                continue
            msg.finished, msg.start = record, None
    return Replay(messages, orphans, suffix)
