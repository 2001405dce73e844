"""Reading a Postfix queue directory without Postfix: queue ids, hashed subdirectories, file
modes, queue files and their damage, and the defer/bounce/trace logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.postfix.files import FILE_COLUMNS, read_file
from mqforensics.systems.postfix.logs import read_log
from mqforensics.systems.postfix.queue_dir import (
    LOG,
    MESSAGE,
    QueueDir,
    id_kind,
    list_queue_dir,
)
from tests.unit.postfix import planted_queue


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("9564D9841D2", "short"),  # written by Postfix 3.7 (tests/data/postfix)
        ("4jbvsT385tz1XM6K", "long"),  # a long id from postsuper -H (docs/postfix.md)
        ("4jbvsT3Cjzz1XLCF", "long"),  # a z in the microseconds: the separator is the last z
        ("9564d9841d2", "not_an_id"),  # short ids are upper-case hex
        ("9564D", "not_an_id"),  # 5 digits of microseconds and at least one of the inode
        ("4jbvsT385tz1XMaK", "not_an_id"),  # a vowel
        (".9564D9841D2.mqf-purge", "not_an_id"),
    ],
)
def test_queue_ids_short_and_long(name: str, kind: str) -> None:
    assert id_kind(name) == kind


def row(queue_dir: QueueDir, relative: str) -> dict:
    listed = next(f for f in list_queue_dir(queue_dir) if f.relative == relative)
    values = read_file(queue_dir, listed)
    assert values is not None
    return dict(zip(FILE_COLUMNS, values, strict=True))


def test_listing_walks_hashed_subdirectories_messages_then_logs(tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    listed = list_queue_dir(QueueDir("mx1", str(root)))
    assert {(f.queue, f.relative, f.kind) for f in listed} == {
        (r.split("/")[0], r, LOG if r.split("/")[0] in ("defer", "bounce") else MESSAGE)
        for r in planted_queue.FILES
    }
    kinds = [f.kind for f in listed]
    assert kinds == sorted(kinds, key=lambda k: k != MESSAGE)


def test_modes_say_ready_and_forced_expiry(tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    (root / "deferred/9/9564D9841D2").chmod(0o710)  # postsuper -e sets S_IXGRP
    queue_dir = QueueDir("mx1", str(root))
    expired = row(queue_dir, "deferred/9/9564D9841D2")
    assert (expired["ready"], expired["forced_expire"], expired["mode"]) == (True, True, 0o710)
    unfinished = row(queue_dir, "incoming/D1E2F3A4B5C")
    assert (unfinished["ready"], unfinished["forced_expire"]) == (False, False)
    maildrop = row(queue_dir, "maildrop/F2B019841E7")  # postdrop's 0744 is ready
    assert maildrop["ready"] is True


def test_a_real_queue_file_read_once(tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    one = row(QueueDir("mx1", str(root)), "deferred/9/9564D9841D2")
    assert one["complete"] is True and one["damage"] is None
    assert one["arrival"] == planted_queue.ARRIVAL
    assert (one["sender"], one["content_size"], one["recipient_count"]) == (
        "alice@example.org", 295, 2,
    )  # fmt: skip
    assert one["content_offset"] == 340  # postcat: the M record at 338, the content after it
    assert one["recipients"] == [
        ("bob@example.net", "bob@example.net", "pending", 243),
        ("carol@example.com", "carol@example.com", "pending", 319),
    ]
    assert one["message_id"] == "<20261128012416.9564D9841D2@mqf-test.example>"
    assert one["attributes"]["create_time"] == "1795829056"
    assert one["size"] == len(planted_queue.REAL_DEFERRED) and len(one["digest"]) == 64


def test_damage_is_reported_at_the_record_where_reading_stops(tmp_path: Path) -> None:
    queue_dir = QueueDir("mx1", str(planted_queue.build(tmp_path / "queue")))
    truncated = row(queue_dir, "deferred/A/A1B2C3D4E5F")
    assert (truncated["complete"], truncated["damage_offset"]) == (False, planted_queue.RCPT_AT)
    flipped = row(queue_dir, "deferred/B/B1C2D3E4F50")
    assert (flipped["complete"], flipped["damage_offset"]) == (False, planted_queue.S_AT)
    assert "claims" in flipped["damage"]
    unfinished = row(queue_dir, "incoming/D1E2F3A4B5C")
    assert (unfinished["complete"], unfinished["damage_offset"]) == (False, 300)


def test_an_unreadable_file_is_a_row_saying_why(tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    (root / "hold/A3B4C5D6E7F").unlink()
    (root / "hold/A3B4C5D6E7F").mkdir()
    queue_dir = QueueDir("mx1", str(root))
    listed = [f for f in list_queue_dir(queue_dir) if f.queue == "hold"]
    assert [f.relative for f in listed] == ["hold/A2B3C4D5E6F"]  # a directory is not a file


def test_queue_dir_parse_host_and_errors(tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    assert QueueDir.parse(f"mx1={root}") == QueueDir("mx1", str(root))
    assert QueueDir.parse(str(root)) == QueueDir(str(root), str(root))
    with pytest.raises(InputError, match="no such Postfix queue directory"):
        QueueDir.parse(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a Postfix queue directory"):
        QueueDir.parse(str(tmp_path / "empty"))


# What bounce_append_service.c writes for one recipient (Postfix 3.7, defaults).
ONE_RECORD = (
    b"\n<bob@example.net>: connect to 127.0.0.1[127.0.0.1]:1: Connection refused\n"
    b"recipient=bob@example.net\noffset=243\ndsn_orig_rcpt=rfc822;bob@example.net\n"
    b"status=4.4.1\naction=delayed\nreason=connect to 127.0.0.1[127.0.0.1]:1: Connection refused\n"
    b"\n"
)


def test_a_log_as_the_bounce_service_writes_it() -> None:
    log = read_log(ONE_RECORD + ONE_RECORD.replace(b"bob@example.net", b"carol@example.com"))
    assert log.problems == []
    assert [(e.recipient, e.offset, e.status, e.action) for e in log.entries] == [
        ("bob@example.net", 243, "4.4.1", "delayed"),
        ("carol@example.com", 243, "4.4.1", "delayed"),
    ]
    assert log.entries[0].reason == "connect to 127.0.0.1[127.0.0.1]:1: Connection refused"
    assert (log.entries[0].at, log.entries[1].at) == (1, len(ONE_RECORD) + 1)


def test_the_old_log_form_and_a_record_cut_short() -> None:
    old = b"<dave@example.org>: host said: 550 no such user\n   (in reply to RCPT TO)\n\n"
    log = read_log(old + b"recipient=erin@example.net\nstatus=4.4.1")
    assert [(e.recipient, e.reason) for e in log.entries] == [
        ("dave@example.org", "host said: 550 no such user (in reply to RCPT TO)")
    ]
    assert log.problems == [
        f"byte {len(old)}: a record no empty line ends (an append cut short): Postfix ignores it"
    ]
    assert read_log(b"\ngarbage line\n\n").problems == ["byte 1: not a log line: 'garbage line'"]


def test_where_postfix_keeps_a_queue_id_at_every_hash_depth() -> None:
    from mqforensics.systems.postfix.queue_dir import hash_string, possible_paths

    # A long id hashes on its microseconds re-encoded as %05X (seen: deferred/6/C/ at depth 2).
    assert hash_string("4jbvsT385tz1XM6K") == "6C572"
    assert hash_string("9564D9841D2") == "9564D"
    assert possible_paths("/q", "deferred", "4jbvsT385tz1XM6K")[:3] == [
        "/q/deferred/4jbvsT385tz1XM6K",
        "/q/deferred/6/4jbvsT385tz1XM6K",
        "/q/deferred/6/C/4jbvsT385tz1XM6K",
    ]
    assert len(possible_paths("/q", "hold", "9564D9841D2")) == 6  # depths 0 to 5
