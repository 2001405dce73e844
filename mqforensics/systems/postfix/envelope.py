"""A Postfix queue file's envelope and headers, from its records (records.py).

What each record means follows Postfix's queue manager (``qmgr_message.c``) and ``postcat``:
the ``C`` record's first fields are the content size, the content's offset and the recipient
count; ``T`` is the arrival time (seconds and microseconds); ``O`` and ``A dsn_orig_rcpt=`` give
the original form of the recipient record that follows them; ``R`` is a recipient still to
deliver, ``D`` one delivered (its type byte flipped in place), ``/`` one canceled. The content
starts at ``M``; its header lines (``N`` records, a long one split into ``L`` records and the
``N`` ending it) end at the first empty line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqforensics.systems.postfix.records import QueueFileRecords, Record

RECIPIENT_STATES = {"R": "pending", "D": "done", "/": "canceled"}
# Records that qualify the recipient record after them.
_ORIGINAL, _DSN_ORIGINAL = "O", "dsn_orig_rcpt"


@dataclass(frozen=True)
class Recipient:
    address: str
    state: str  # pending, done, canceled
    original: str | None
    dsn_original: str | None
    offset: int  # of its record: where qmgr flips R to D


@dataclass
class Envelope:
    content_size: int | None = None  # the C record's first field (postqueue -j message_size)
    content_offset: int | None = None
    recipient_count: int | None = None
    arrival_time: float | None = None
    sender: str | None = None
    sender_fullname: str | None = None
    recipients: list[Recipient] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    headers: list[str] = field(default_factory=list)  # unfolded header lines
    problems: list[str] = field(default_factory=list)  # records that mean nothing, by offset


def _text(record: Record) -> str:
    return record.data.decode("utf-8", "surrogateescape")


def _numbers(text: str) -> list[int] | None:
    parts = text.split()
    return [int(p) for p in parts] if parts and all(p.isdigit() for p in parts) else None


def read_envelope(read: QueueFileRecords) -> Envelope:
    """The envelope and header lines of a queue file's records (damaged ones: what precedes the
    damage)."""
    envelope = Envelope()
    original: str | None = None
    dsn_original: str | None = None
    section, partial = "envelope", ""
    for record in read.records:
        kind, text = record.type, _text(record)
        if section == "headers" and kind in ("L", "N"):  # L: a line continued by the next record
            text, partial = partial + text, ""
            if kind == "L":
                partial = text
                continue
        if kind == "M":
            section = "headers"
        elif kind == "X":
            section = "extracted"
        elif section == "headers":
            if kind != "N" or text == "":
                section = "body"
            elif text[:1] in (" ", "\t") and envelope.headers:
                envelope.headers[-1] += "\n" + text
            else:
                envelope.headers.append(text)
        elif section == "body":
            continue
        elif kind in ("C", "T") and (numbers := _numbers(text)) is None:
            envelope.problems.append(f"byte {record.offset}: record {kind!r} holds {text[:40]!r}")
        elif kind == "C" and numbers is not None and envelope.content_size is None:
            padded: list[int | None] = [*numbers, None, None]  # older Postfix wrote fewer fields
            envelope.content_size, envelope.content_offset, envelope.recipient_count = padded[:3]
        elif kind == "T" and numbers is not None:
            envelope.arrival_time = numbers[0] + (numbers[1] if len(numbers) > 1 else 0) / 1e6
        elif kind == "S":
            envelope.sender = text
        elif kind == "F":
            envelope.sender_fullname = text
        elif kind == _ORIGINAL:
            original = text
        elif kind == "A":
            name, _, value = text.partition("=")
            if name == _DSN_ORIGINAL:
                dsn_original = value
            else:
                envelope.attributes[name] = value
        elif kind in RECIPIENT_STATES:
            envelope.recipients.append(
                Recipient(text, RECIPIENT_STATES[kind], original, dsn_original, record.offset)
            )
            original = dsn_original = None
    return envelope
