"""Queue files written by the real Postfix (3.7.11, Debian 12: one deferred by the queue manager,
one left in maildrop by postdrop while Postfix was stopped), decoded as ``postcat -o`` printed
them: every record at postcat's offset, with postcat's value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mqforensics.systems.postfix.records import RECORD_NAMES, read_records

DATA = Path(__file__).resolve().parents[2] / "data" / "postfix"
FILES = sorted(p.name for p in DATA.iterdir() if not p.suffix)
SECTIONS = {"MESSAGE CONTENTS": "M", "HEADER EXTRACTED": "X", "MESSAGE FILE END": "E"}
# postcat prints these with their value as written; the others (sizes, times) it formats.
VERBATIM = {"sender", "sender_fullname", "recipient", "original_recipient", "named_attribute"}


def postcat_lines(name: str) -> list[tuple[int, str, str]]:
    """(offset, record name or section type, value) of each line of ``postcat -o``."""
    found = []
    for line in (DATA / f"{name}.postcat").read_text().splitlines():
        section = re.fullmatch(r"\s*(\d+) \*\*\* (.+) /\S+ \*\*\*", line)
        record = re.fullmatch(r"\s*(\d+) (?:([a-z_]+): )?(.*)", line)
        if section:
            found.append((int(section[1]), SECTIONS[section[2]], ""))
        elif record:
            found.append((int(record[1]), record[2] or "regular_text", record[3]))
    return found


@pytest.mark.parametrize("name", FILES)
def test_every_record_is_where_postcat_shows_it_with_its_value(name: str):
    result = read_records((DATA / name).read_bytes())
    assert result.complete, result.damage
    shown = postcat_lines(name)
    assert [r.offset for r in result.records] == [offset for offset, _, _ in shown]
    for record, (offset, what, value) in zip(result.records, shown, strict=True):
        if what in SECTIONS.values():
            assert record.type == what, offset
        elif what in VERBATIM:
            assert (RECORD_NAMES[record.type], record.data.decode()) == (what, value), offset
        elif what == "regular_text":
            assert (record.type, record.data.decode()) == ("N", value), offset
        elif what == "create_time":  # a named attribute postcat shows as a date
            assert record.type == "A" and record.data.startswith(b"create_time="), offset
        else:
            assert RECORD_NAMES[record.type] == what, offset


def test_the_fixtures_cover_the_queue_manager_and_postdrop():
    assert {name.partition("-")[0] for name in FILES} == {"deferred", "maildrop"}
