"""A queue file's envelope: what postqueue -j says of the real Postfix's deferred file, and the
record meanings of qmgr_message.c on records built as rec_put writes them."""

from __future__ import annotations

import json
from pathlib import Path

from mqforensics.systems.postfix.envelope import Recipient, read_envelope
from mqforensics.systems.postfix.records import read_records
from tests.unit.postfix.test_postfix_records import rec_put

DATA = Path(__file__).resolve().parents[2] / "data" / "postfix"


def test_the_deferred_file_says_what_postqueue_j_says():
    data = (DATA / "deferred-9564D9841D2").read_bytes()
    shown = json.loads((DATA / "deferred-9564D9841D2.postqueue.json").read_text())
    read = read_records(data)
    envelope = read_envelope(read)
    assert int(envelope.arrival_time or 0) == shown["arrival_time"]
    assert envelope.content_size == shown["message_size"]
    assert envelope.sender == shown["sender"]
    pending = {r.address for r in envelope.recipients if r.state == "pending"}
    assert pending == {r["address"] for r in shown["recipients"]}
    assert envelope.recipient_count == len(envelope.recipients) == 2
    content = next(r for r in read.records if r.type == "M")
    assert envelope.content_offset == content.offset + 2  # the first record after M's
    assert envelope.recipients[0] == Recipient(
        "bob@example.net", "pending", "bob@example.net", "rfc822;bob@example.net", 243
    )
    assert envelope.attributes == {"create_time": str(shown["arrival_time"]),
                                   "rewrite_context": "local"}  # fmt: skip
    assert envelope.headers[0].startswith("Received: by mqf-test.example (Postfix")
    assert "\n\tid 9564D9841D2;" in envelope.headers[0]  # folded: one header
    assert envelope.headers[1:4] == ["Subject: test one", "From: alice@example.org",
                                     "To: bob@example.net"]  # fmt: skip


def test_the_maildrop_file_has_no_size_record():
    envelope = read_envelope(read_records((DATA / "maildrop-F2B019841E7").read_bytes()))
    assert envelope.content_size is None and envelope.recipient_count is None
    assert (envelope.sender, [r.address for r in envelope.recipients]) == (
        "dave@example.org",
        ["erin@example.net"],
    )
    assert envelope.headers == ["Subject: dropped"]


def test_done_and_canceled_recipients_and_a_header_split_over_records():
    data = b"".join([
        rec_put("T", "1795820000 5"), rec_put("S", "a@x"),
        rec_put("O", "Orig@x"), rec_put("D", "done@x"),
        rec_put("R", "pending@x"), rec_put("/", "canceled@x"),
        rec_put("M", ""), rec_put("L", "Subject: a long "), rec_put("N", "subject"),
        rec_put("N", ""), rec_put("N", "To: not a header, the body"),
        rec_put("X", ""), rec_put("R", "extracted@x"), rec_put("E", ""),
    ])  # fmt: skip
    envelope = read_envelope(read_records(data))
    assert [(r.address, r.state, r.original) for r in envelope.recipients] == [
        ("done@x", "done", "Orig@x"), ("pending@x", "pending", None),
        ("canceled@x", "canceled", None), ("extracted@x", "pending", None),
    ]  # fmt: skip
    assert envelope.headers == ["Subject: a long subject"]
    assert envelope.arrival_time == 1795820000.000005


def test_a_size_or_time_record_that_is_not_numbers_is_a_problem_not_a_crash():
    data = rec_put("C", "12 x 1") + rec_put("T", "soon") + rec_put("S", "a@x") + rec_put("E", "")
    envelope = read_envelope(read_records(data))
    assert envelope.content_size is None and envelope.arrival_time is None
    assert envelope.problems == [
        "byte 0: record 'C' holds '12 x 1'",
        f"byte {len(rec_put('C', '12 x 1'))}: record 'T' holds 'soon'",
    ]
    assert envelope.sender == "a@x"
