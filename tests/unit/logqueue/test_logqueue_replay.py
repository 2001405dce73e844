"""The restart procedure's replay on hand-written record sequences."""

from __future__ import annotations

import uuid

from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.replay import replay
from mqforensics.systems.logqueue.segment import read_segment

T0 = 1_800_000_000_000_000
A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def _log(*steps: tuple) -> list:
    """Records from (code, message, ref-index or None, values); ref-index = earlier step."""
    data = bytearray(fmt.encode_segment_header(1, T0))
    offsets: list[int] = []
    for code, mid, ref, values in steps:
        offsets.append(len(data))
        where = (1, offsets[ref]) if ref is not None else (0, 0)
        data += fmt.encode_record(code, mid, T0, where, values)
    return read_segment(bytes(data)).records


def _env(recipients: list[str], attempt: int = 0) -> dict:
    return {"sender": "s@x", "recipients": recipients, "spool": "sp", "attempt": attempt,
            "not_before_us": T0}  # fmt: skip


def test_states_rewrites_and_garbage_end() -> None:
    records = _log(
        (fmt.ENVELOPE, A, None, _env(["a1", "a2"])),  # 0
        (fmt.START, A, 0, {"runner": "r"}),  # 1
        (fmt.DELIVERY, A, 1, {"outcomes": [("a1", fmt.DELIVERED, "250")]}),  # 2
        (fmt.ENVELOPE, B, None, _env(["b1"])),  # 3
        (fmt.START, B, 3, {"runner": "r"}),  # 4
        (fmt.DELIVERY, B, 4, {"outcomes": [("b1", fmt.DELIVERED, "250")]}),  # 5
        (fmt.FINISH, B, 4, {"reason": 0}),  # 6
        (fmt.ENVELOPE, C, None, _env(["c1"])),  # 7
        (fmt.DELIVERY, C, 1, {"outcomes": [("c1", fmt.DELIVERED, "250")]}),  # 8: wrong START
    )
    result = replay(records)
    states = {m: msg.state for m, msg in result.messages.items()}
    assert states == {A: "in_flight", B: "finished", C: "waiting"}
    assert result.to_rewrite() == {A: ["a2"]}
    assert [(r.offset, why) for r, why in result.orphans] == [
        (records[8].offset, "DELIVERY without its live START")
    ]
    # A is in flight: the restart rewrites it from its envelope, the earliest record needed.
    assert result.garbage_end((2, 32)) == records[0].position
    assert replay(records, records[0].position).to_rewrite() == {A: ["a2"]}
    assert result.messages[A].deliveries == [("a1", records[2].position)]


def test_replacement_envelope_and_suffix() -> None:
    records = _log(
        (fmt.ENVELOPE, A, None, _env(["a1", "a2"])),  # 0
        (fmt.START, A, 0, {"runner": "r"}),  # 1
        (fmt.DELIVERY, A, 1, {"outcomes": [("a1", fmt.DELIVERED, "250"), ("a2", 1, "451")]}),
        (fmt.ENVELOPE, A, 0, _env(["a2"], attempt=1)),  # 3: replaces 0
    )
    result = replay(records)
    msg = result.messages[A]
    assert msg.state == "waiting" and msg.attempts == 1 and msg.remaining() == ["a2"]
    assert result.garbage_end((9, 9)) == records[3].position
    # From a suffix past the first envelope, the START and DELIVERY referring before it are
    # garbage of that attempt, not orphans; the replacement envelope is the message.
    later = replay(records, suffix=records[1].position)
    assert later.orphans == [] and later.messages[A].state == "waiting"
