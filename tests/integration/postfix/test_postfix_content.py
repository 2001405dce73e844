"""The content search on queue files the real Postfix 3.7 wrote: one message per position of
`tests.unit.postfix.placed_subjects` (envelope sender and recipient, From of list traffic,
Reply-To, Sender, Received ``for``, Delivered-To, an RFC 2047 display name, text body,
attachment, attached message; decoys; mixed case; SMTPUTF8 mail with the IDNA form the policy
does not name; a quoted-printable soft line break inside the address; base64 text; S/MIME)
submitted with Postfix's own sendmail and deferred. Then, in one Postfix run:

- the message rebuilt from each queue file's records is what ``postcat -bh`` prints;
- the audit's loader (`read.load`, as ``mqforensics audit postfix --erasure-policy``) and the
  checks give exactly the planted (subject, where) pairs per message at depth headers and at
  depth full, nothing on the decoys, and the S/MIME messages unreadable at depth full only.

The server is shared with the other Postfix modules: only this run's messages are looked at.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from mqforensics.services import postfix as server
from mqforensics.spec import AuditArgs
from mqforensics.systems.postfix.checks import personal_data, unreadable_content
from mqforensics.systems.postfix.content import message_content
from mqforensics.systems.postfix.options import PostfixOptions
from mqforensics.systems.postfix.read import load, settings
from mqforensics.systems.postfix.records import read_records
from tests.unit.postfix import placed_subjects as placed

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def queued(postfix: dict) -> dict[str, str]:
    """Every case submitted and deferred: case name -> queue id."""
    ids = {
        case.name: server.submit(postfix, case.sender, case.recipients, case.message(RUN))
        for case in placed.CASES
    }
    server.wait_deferred(postfix, ids.values(), timeout=120)
    return ids


def _postcat_content(postfix: dict, path: Path) -> str:
    """The message ``postcat -bh`` prints for a queue file (header and body records only, an
    ``L`` record without a line end: postcat.c)."""
    return server.postcat(postfix, path, "-bh")


def test_postfix_content_search_per_position(spark, postfix: dict, queued: dict[str, str],
                                             tmp_path: Path) -> None:  # fmt: skip
    names = {queue_id: name for name, queue_id in queued.items()}
    for name, queue_id in queued.items():
        path = server.queue_file(postfix, queue_id)
        assert path is not None, name
        content = message_content(read_records(path.read_bytes()))
        assert content is not None and content.complete, name
        assert content.message.decode("utf-8", "surrogateescape") == _postcat_content(
            postfix, path
        ), name

    options = PostfixOptions(queue_dir=[f"live={Path(postfix['queue_directory']).resolve()}"])
    as_of = dt.datetime.now(dt.UTC)
    got: dict[str, dict] = {}
    for depth in ("headers", "full"):
        searched = placed.searched(depth)
        common = AuditArgs(tmp_path / depth, as_of, False, searched.headers, placed.KEY,
                           searched.full)  # fmt: skip
        loaded = load(spark, options, common)
        judged = settings(options, common, loaded)
        found, unread = {}, {}
        for row in personal_data(loaded.frames, judged).collect():
            detail = json.loads(row["detail"])
            if detail["queue_id"] in names:
                assert detail["depth"] == depth and "@" not in row["detail"]
                found[names[detail["queue_id"]]] = {
                    (placed.hashes()[f["subject"]], f["where"]) for f in detail["found"]
                }
        for row in unreadable_content(loaded.frames, judged).collect():
            detail = json.loads(row["detail"])
            if detail["queue_id"] in names:
                unread[names[detail["queue_id"]]] = {u["where"] for u in detail["unreadable"]}
        got[depth] = {"found": found, "unreadable": unread}

    for depth in ("headers", "full"):
        want = {
            c.name: set(c.at_full if depth == "full" else c.at_headers)
            for c in placed.CASES
            if (c.at_full if depth == "full" else c.at_headers)
        }
        assert got[depth]["found"] == want, depth
    # Recall per position, at each depth: every planted pair found, none else.
    pairs = sum(len(c.at_full) for c in placed.CASES)
    assert sum(len(v) for v in got["full"]["found"].values()) == pairs
    assert got["headers"]["unreadable"] == {}
    assert got["full"]["unreadable"] == {
        c.name: set(c.unreadable_full) for c in placed.CASES if c.unreadable_full
    }
