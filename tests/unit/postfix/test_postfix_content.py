"""The Postfix content search: the message rebuilt from a queue file's records (``N``/``L``,
pointers followed, as postcat shows it), and `personal_data` / `unreadable_content` on queue
files with a subject placed in each position (`placed_subjects`) at depths headers and full:
exact (subject, where) pairs per file, no false positive, the encrypted ones unreadable; damaged
files searched as far as they read; the planner acting per rule depth and deferring files that
could not be searched."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from mqforensics.content_search import Unreadable
from mqforensics.findings import with_ids
from mqforensics.retention.policy import Policy, Rule
from mqforensics.spec import AuditArgs
from mqforensics.systems.postfix import plan as planner
from mqforensics.systems.postfix.checks import personal_data, unreadable_content
from mqforensics.systems.postfix.content import (
    message_content,
    search_queue_file,
    search_row,
)
from mqforensics.systems.postfix.fleet import read_queue_dirs
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import PostfixOptions, Settings
from mqforensics.systems.postfix.queue_dir import QueueDir
from mqforensics.systems.postfix.records import read_records
from tests.unit.postfix import placed_subjects as placed
from tests.unit.postfix import planted_queue
from tests.unit.postfix.placed_subjects import CASES, KEY, queue_file, record

AS_OF = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
NAMES = placed.hashes()
# A queue id per case (hex, as Postfix's short ids), in deferred/<first character>/.
IDS = {case.name: f"{0xA0000000000 + i:011X}" for i, case in enumerate(CASES)}


def settings(depth: str) -> Settings:
    searched = placed.searched(depth)
    return Settings(
        as_of=AS_OF, subjects=searched.headers, subject_key=KEY, full_subjects=searched.full
    )


@pytest.fixture(scope="module")
def queue(spark, tmp_path_factory) -> tuple[Path, PostfixFrames]:
    root = tmp_path_factory.mktemp("postfix-content") / "queue"
    for case in CASES:
        queue_id = IDS[case.name]
        path = root / "deferred" / queue_id[0] / queue_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(queue_file(case))
        path.chmod(0o700)
    files = read_queue_dirs(spark, [QueueDir("mx1", str(root))]).localCheckpoint()
    return root, PostfixFrames(files)


def by_case(rows: list, field: str) -> dict[str, set[tuple[str, str]] | set[str]]:
    """Each finding's file (its case name) -> its (subject name, where) pairs or unreadable
    places."""
    names = {v: k for k, v in IDS.items()}
    out: dict[str, set] = {}
    for row in rows:
        detail = json.loads(row["detail"])
        case = names[detail["queue_id"]]
        if field == "found":
            out[case] = {(NAMES[f["subject"]], f["where"]) for f in detail["found"]}
            assert sorted({f["subject"] for f in detail["found"]}) == detail["subjects"]
        else:
            out[case] = {u["where"] for u in detail["unreadable"]}
    return out


def expected(depth: str) -> dict[str, set[tuple[str, str]]]:
    pairs = {c.name: set(c.at_full if depth == "full" else c.at_headers) for c in CASES}
    return {name: found for name, found in pairs.items() if found}


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_exact_pairs_per_file_at_each_depth(queue, depth: str) -> None:
    _, frames = queue
    rows = personal_data(frames, settings(depth)).collect()
    assert by_case(rows, "found") == expected(depth)
    assert {json.loads(r["detail"])["depth"] for r in rows} == {depth}
    for row in rows:  # keyed hashes only: no address anywhere in a finding
        assert "@" not in row["detail"] and "example" not in row["detail"]


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_encrypted_files_unreadable_at_full_only(queue, depth: str) -> None:
    _, frames = queue
    rows = unreadable_content(frames, settings(depth)).collect()
    want = {c.name: set(c.unreadable_full) for c in CASES if c.unreadable_full}
    assert by_case(rows, "unreadable") == (want if depth == "full" else {})
    for row in rows:
        assert (row["check"], row["severity"]) == ("unreadable_content", "warning")
        detail = json.loads(row["detail"])
        assert detail["unreadable"] == [
            {"where": "attachment", "reason": "encrypted (S/MIME enveloped-data)"}
        ]
        assert detail["depth"] == "full" and detail["digest"]


def test_nothing_searched_nothing_found(queue) -> None:
    _, frames = queue
    assert personal_data(frames, Settings(as_of=AS_OF)).count() == 0
    assert unreadable_content(frames, Settings(as_of=AS_OF)).count() == 0


def test_message_rebuilt_as_postcat_shows_it() -> None:
    """The real deferred file's content records give the lines postcat printed for it (offsets
    340 to 623 of its .postcat), each ended by a line end."""
    postcat = (planted_queue.DATA / "deferred-9564D9841D2.postcat").read_text().splitlines()
    start = postcat.index(next(line for line in postcat if "MESSAGE CONTENTS" in line))
    end = postcat.index(next(line for line in postcat if "HEADER EXTRACTED" in line))
    lines = [line.split(" ", 1)[1] if " " in line.strip() else "" for line in
             (row.lstrip() for row in postcat[start + 1 : end])]  # fmt: skip
    content = message_content(read_records(planted_queue.REAL_DEFERRED))
    assert content is not None and content.complete and content.headers_complete
    assert content.message.decode().split("\n")[:-1] == lines


def test_continued_lines_and_pointers_followed() -> None:
    """``L`` records continue a line without a line end; a header inserted later through a
    pointer into the heap after the end record is read in its place, as Postfix reads it."""
    before = record("N", b"From: olga@example.org") + record("L", b"To: carol@exa")
    before += record("N", b"mple.net")
    head = record("S", b"olga@example.org") + record("R", b"team@example.org") + record("M", b"")
    start = head + before
    # p -> heap: an added header, then back to the rest of the content.
    pointer_len = len(record("p", b"%15d" % 0))
    rest_at = len(start) + pointer_len
    rest = record("N", b"") + record("N", b"Body.") + record("X", b"") + record("E", b"")
    heap_at = rest_at + len(rest)
    heap = record("N", b"X-Added: carol@example.net") + record("p", b"%15d" % rest_at)
    data = start + record("p", b"%15d" % heap_at) + rest + heap
    content = message_content(read_records(data))
    assert content is not None
    assert content.message == (
        b"From: olga@example.org\nTo: carol@example.net\nX-Added: carol@example.net\n\nBody.\n"
    )
    found = search_queue_file(data, ["olga@example.org", "team@example.org"],
                              placed.searched("headers"))  # fmt: skip
    assert {(NAMES[h.subject], h.where) for h in found.hits} == {
        ("carol", "header:to"), ("carol", "header:x-added"),
    }  # fmt: skip
    assert found.unreadable == []


@pytest.mark.parametrize(
    ("cut", "unreadable_headers", "unreadable_full"),
    [
        # inside the body's first record: the headers searched whole, the body not
        (b"Please write", ["envelope"], ["envelope", "body"]),
        # inside a header line: the lines before it searched
        (b"To: team", ["envelope", "headers"], ["envelope", "headers", "body"]),
        # at the content record: no content at all
        (b"M\x00", ["envelope", "headers"], ["envelope", "headers", "body"]),
    ],
)
def test_a_damaged_file_is_searched_as_far_as_it_reads(
    cut: bytes, unreadable_headers: list[str], unreadable_full: list[str]
) -> None:
    """The text_body case (carol in its body only) cut short: what reads is searched, the
    places after the cut are unreadable at the depths that search them."""
    case = placed.BY_NAME["text_body"]
    data = queue_file(case)
    at = data.index(cut) + (3 if cut != b"M\x00" else 0)
    envelope = [case.sender, *case.recipients]
    for depth, places in (("headers", unreadable_headers), ("full", unreadable_full)):
        found = search_queue_file(data[:at], envelope, placed.searched(depth))
        assert found.hits == set()
        assert [u.where for u in found.unreadable] == places
        assert all("the queue file is damaged at byte " in u.reason for u in found.unreadable)
    whole = search_queue_file(data, envelope, placed.searched("full"))
    assert {(NAMES[h.subject], h.where) for h in whole.hits} == {("carol", "body")}


def test_a_file_gone_or_unreadable_is_said() -> None:
    row = {"path": "/nonexistent/queue/deferred/A/A0000000000", "read_error": None,
           "sender": "carol@example.net", "recipients": []}  # fmt: skip
    found = search_row(row, placed.searched("headers"))
    assert {(NAMES[h.subject], h.where) for h in found.hits} == {("carol", "envelope")}
    assert found.unreadable == [
        Unreadable("file", "the file is gone since the audit listed it (delivered or deleted)")
    ]
    found = search_row({**row, "read_error": "cannot read: Permission denied"},
                       placed.searched("headers"))  # fmt: skip
    assert found.unreadable == [Unreadable("file", "cannot read: Permission denied")]


def test_the_loader_searches_once_for_both_checks(spark, queue, tmp_path: Path) -> None:
    """`read.load` with subjects searched computes the content frame the checks read."""
    from mqforensics.systems.postfix.read import load
    from mqforensics.systems.postfix.read import settings as settings_of

    root, _ = queue
    searched = placed.searched("full")
    common = AuditArgs(tmp_path / "out", AS_OF, False, searched.headers, KEY, searched.full)
    options = PostfixOptions(queue_dir=[f"mx1={root}"])
    loaded = load(spark, options, common)
    assert loaded.frames.content is not None
    judged = settings_of(options, common, loaded)
    assert judged.searched == searched
    got = by_case(personal_data(loaded.frames, judged).collect(), "found")
    assert got["nested_message"] == {("carol", "attachment")}
    assert set(got) == set(expected("full"))


# -- planning ---------------------------------------------------------------------------------


def _findings(frames: PostfixFrames) -> list[dict]:
    rows = [r.asDict() for r in personal_data(frames, settings("full")).collect()]
    rows += [r.asDict() for r in unreadable_content(frames, settings("full")).collect()]
    rows.sort(key=lambda r: (r["check"], r["subject"]))
    return [{**r, "detail": json.loads(r["detail"])} for r in with_ids(rows)]


def test_plans_act_per_rule_depth_and_defer_what_could_not_be_searched(queue) -> None:
    root, frames = queue
    findings = _findings(frames)
    carol = tuple(h for h, name in NAMES.items() if name == "carol")
    policy = Policy("p.toml", "0" * 64, (
        Rule("carol-headers", "erase_subject", "GDPR Art. 17", subjects=carol),
        Rule("carol-full", "erase_subject", "GDPR Art. 17", subjects=carol, search="full",
             queues=("deferred",)),
    ))  # fmt: skip
    parts = planner.plan(findings, policy, {"as_of": AS_OF.isoformat()})
    ids = {v: k for k, v in IDS.items()}
    actions = {ids[a.target["queue_id"]]: a.rules for a in parts.actions}
    headers_cases = {c.name for c in CASES if any(n == "carol" for n, _ in c.at_headers)}
    full_cases = {c.name for c in CASES if any(n == "carol" for n, _ in c.at_full)}
    assert set(actions) == full_cases
    assert {k for k, rules in actions.items() if "carol-headers" in rules} == headers_cases
    assert all("carol-full" in rules for rules in actions.values())
    # every action cites its personal_data finding
    pd = {f["detail"]["queue_id"]: f["id"] for f in findings if f["check"] == "personal_data"}
    assert all(a.findings == (pd[a.target["queue_id"]],) for a in parts.actions)
    # smime_to_subject holds carol in its envelope: acted on. smime: deferred, under the full
    # rule only (its headers were searched whole).
    deferred = [(ids[d.target["queue_id"]], d.rules, d.reason) for d in parts.deferred]
    assert deferred == [("smime", ("carol-full",),
                         "content could not be searched: attachment: encrypted (S/MIME "
                         "enveloped-data)")]  # fmt: skip
    unreadable = {f["detail"]["queue_id"]: f["id"] for f in findings
                  if f["check"] == "unreadable_content"}  # fmt: skip
    assert parts.deferred[0].findings == (unreadable[IDS["smime"]],)
    assert parts.deferred[0].target["path"] == str(root / "deferred/A" / IDS["smime"])
