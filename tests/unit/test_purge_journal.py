"""The purge journal: durable records, torn-line recovery, binding to one plan, fault points."""

from __future__ import annotations

import json

import pytest

from mqforensics.errors import ConfigError, InputError, PlanModified
from mqforensics.purge import faults
from mqforensics.purge.journal import Journal, read_journal

PLAN = "a" * 64
OTHER = "b" * 64


def lines(path):
    return path.read_bytes().decode().splitlines()


def test_a_new_journal_starts_with_begin_bound_to_the_plan(tmp_path):
    path = tmp_path / "sub" / "journal.jsonl"
    with Journal.open(path, PLAN) as journal:
        assert [r["event"] for r in journal.records] == ["begin"]
    (line,) = lines(path)
    record = json.loads(line)
    assert record["event"] == "begin" and record["plan_sha256"] == PLAN
    assert record["at"].endswith("Z")
    # Canonical: sorted keys, no spaces.
    assert line == json.dumps(record, sort_keys=True, separators=(",", ":"))


def test_records_are_appended_and_indexed_across_reopens(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, PLAN) as journal:
        journal.record("census", Fake={"others": 2})
        journal.record("started", seq=0, id="0" * 16, kind="k")
        journal.record("done", seq=0, id="0" * 16, kind="k", removed={"rows": 1})
        journal.record("started", seq=1, id="1" * 16, kind="k")
        returned = journal.record("skipped", seq=2, id="2" * 16, kind="k", reason="drift")
    assert returned["reason"] == "drift" and returned["event"] == "skipped"
    with Journal.open(path, PLAN) as journal:
        assert journal.census is not None and journal.census["Fake"] == {"others": 2}
        assert journal.final("0" * 16)["removed"] == {"rows": 1}
        assert journal.final("1" * 16) is None and journal.was_started("1" * 16)
        assert journal.final("2" * 16)["event"] == "skipped"
        assert not journal.was_started("2" * 16)
        journal.record("census", Fake={"others": 3})  # a later census never replaces the first
        assert journal.census["Fake"] == {"others": 2}
    assert [r["event"] for r in read_journal(path)] == [
        "begin", "census", "started", "done", "started", "skipped", "census",
    ]  # fmt: skip


def test_a_torn_last_line_is_cut_on_open(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, PLAN) as journal:
        journal.record("started", seq=0, id="0" * 16, kind="k")
    intact = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(b'{"event":"done","id":"00000000')  # the crash came mid-write
    # Readers ignore it without touching the file.
    assert [r["event"] for r in read_journal(path)] == ["begin", "started"]
    assert path.read_bytes().endswith(b'"id":"00000000')
    with Journal.open(path, PLAN) as journal:
        assert path.read_bytes() == intact
        assert journal.final("0" * 16) is None and journal.was_started("0" * 16)
        journal.record("done", seq=0, id="0" * 16, kind="k", removed={})
    assert [json.loads(line)["event"] for line in lines(path)] == ["begin", "started", "done"]


def test_a_journal_torn_inside_its_begin_record_is_begun_again(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"event":"beg')
    with Journal.open(path, PLAN) as journal:
        assert [r["event"] for r in journal.records] == ["begin"]
    assert len(lines(path)) == 1


def test_a_damaged_line_before_the_last_names_file_and_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, PLAN) as journal:
        journal.record("started", seq=0, id="0" * 16, kind="k")
    data = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(data[0] + b"garbage\n" + data[1])
    with pytest.raises(InputError, match=r"journal .*journal\.jsonl line 2"):
        Journal.open(path, PLAN)
    with pytest.raises(InputError, match="line 2"):
        read_journal(path)


def test_a_journal_of_another_plan_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    Journal.open(path, OTHER).close()
    before = path.read_bytes()
    with pytest.raises(PlanModified, match=r"belongs to plan b{64}"):
        Journal.open(path, PLAN)
    assert path.read_bytes() == before


def test_a_journal_without_begin_is_refused(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"event":"started","id":"x"}\n')
    with pytest.raises(InputError, match="line 1: not a begin record"):
        Journal.open(path, PLAN)


def test_a_second_purger_cannot_open_the_same_journal(tmp_path):
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, PLAN), pytest.raises(ConfigError, match="in use"):
        Journal.open(path, PLAN)
    Journal.open(path, PLAN).close()  # released by close


def test_read_journal_names_a_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot be read"):
        read_journal(tmp_path / "nope.jsonl")


def test_every_record_is_a_fault_point_and_the_trace_names_it(tmp_path, monkeypatch):
    trace = tmp_path / "trace"
    monkeypatch.setenv(faults.FAULT_TRACE, str(trace))
    start = faults.count()
    with Journal.open(tmp_path / "journal.jsonl", PLAN) as journal:
        journal.record("started", seq=0, id="0" * 16, kind="k")
    assert trace.read_text().splitlines() == [
        f"{start + 1} journal begin",
        f"{start + 2} journal started",
    ]
