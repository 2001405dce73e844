"""`mqforensics validate postfix`: the suites of the messages, recipients and logs pass on the
planted queue (its damage is the checks' to report), fail (exit 1) naming the expectation on
files Postfix never writes, and each invariant catches the one row made to break it."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.quality import SUITES_DIR, load_suite, validate
from mqforensics.systems.postfix.files import FILES
from mqforensics.systems.postfix.frames import PostfixFrames
from tests.unit.postfix import planted_queue
from tests.unit.postfix.file_rows import log, message

SUITES = {"postfix_messages": 18, "postfix_recipients": 10, "postfix_logs": 16}
HOUR = dt.timedelta(hours=1)
PENDING = [("bob@example.net", "pending")]


def _failed(report: dict) -> list[dict]:
    return [e | {"frame": s["frame"]} for s in report["suites"] for e in s["expectations"]
            if not e["success"]]  # fmt: skip


def test_the_suites_load_every_expectation() -> None:
    for name, count in SUITES.items():
        suite = load_suite(SUITES_DIR / f"{name}.json")
        assert suite.name == name and len(suite.expectations) == count


def test_the_planted_queue_passes(spark, tmp_path: Path, capsys) -> None:
    root = planted_queue.build(tmp_path / "queue")
    out = tmp_path / "quality"
    assert main(["validate", "postfix", "--queue-dir", str(root), "--out", str(out)]) == 0
    report = json.loads((out / "quality.json").read_text())
    assert [s["suite"] for s in report["suites"]] == sorted(SUITES, key=lambda n: n.split("_")[1])
    assert report["success"] and _failed(report) == []
    assert "quality postfix: 3 suites, 44 expectations, 0 failed" in capsys.readouterr().out


def test_files_postfix_never_writes_fail_naming_the_expectation(spark, tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    # A copy kept by hand under a name that is no queue id, and a log left at another hash
    # depth next to the one Postfix opens.
    shutil.copyfile(root / "deferred/9/9564D9841D2", root / "deferred/9/9564D9841D2.bak")
    shutil.copyfile(root / "defer/9/9564D9841D2", root / "defer/9564D9841D2")
    out = tmp_path / "quality"
    assert main(["validate", "postfix", "--queue-dir", str(root), "--out", str(out)]) == 1
    failed = _failed(json.loads((out / "quality.json").read_text()))
    assert sorted((e["frame"], e["expectation"], e["target"], e["unexpected_count"])
                  for e in failed) == [
        ("logs", "expect_compound_columns_to_be_unique", "host, queue, queue_id", 2),
        ("messages", "expect_column_values_to_be_in_set", "id_kind", 1),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def broken(spark) -> PostfixFrames:
    """One healthy queue file and one healthy log, then one row per invariant, each breaking it
    alone."""
    ok = [("bob@example.net", "done"), ("carol@example.com", "pending")]
    files = [
        message("deferred", "A0001", "alice@example.org", ok, HOUR),
        message("deferred", "B0001", "a@example.org", PENDING, HOUR, digest=None),
        message("deferred", "B0002", "a@example.org", PENDING, HOUR, damage="cut"),
        message("deferred", "B0003", "a@example.org", PENDING, HOUR, complete=False,
                damage_offset=101),
        message("deferred", "B0004", "a@example.org", PENDING, HOUR, arrival=None),
        message("deferred", "B0005", "a@example.org", PENDING, HOUR, content_size=None),
        message("deferred", "B0006", "a@example.org", [], HOUR),
        # Not broken: postdrop writes no size record, and sendmail -t leaves the recipients in
        # the headers for cleanup; a damaged file has neither to hold.
        message("maildrop", "C0001", "a@example.org", [], HOUR, content_size=None),
        message("deferred", "C0002", None, [], HOUR, complete=False, arrival=None),
        log("defer", "defer/A/A0001", "A0001",
            [{"recipient": "carol@example.com", "status": "4.4.1", "action": "delayed"}]),
        log("defer", "defer/B/B0007", "B0007", [{"status": "4.4.1", "action": "delayed"}]),
        log("bounce", "bounce/B/B0008", "B0008",
            [{"recipient": "x@example.org", "status": "5.1", "action": "failed"}]),
        log("trace", "trace/B/B0009", "B0009",
            [{"recipient": "x@example.org", "status": "2.0.0", "action": "sent"}]),
        log("defer", "defer/B/B000A", "B000A", [], problems=["byte 0: a record no empty line"]),
        log("defer", "defer/B/B000B", "B000B", [], digest=None),
    ]  # fmt: skip
    return PostfixFrames(spark.createDataFrame(files, FILES))


def test_each_invariant_catches_the_row_that_breaks_it(broken) -> None:
    frames = {"messages": broken.messages, "recipients": broken.recipients, "logs": broken.logs}
    report = validate(frames, system="postfix")
    caught = []
    for _suite, outcome in report.failures():
        assert (outcome.expectation, outcome.error) == ("unexpected_rows_expectation", None)
        assert outcome.unexpected_count == 1, outcome
        caught.append(outcome.unexpected_values[0]["path"].rsplit("/")[-1])
    assert sorted(caught) == [
        "B0001", "B0002", "B0003", "B0004", "B0005", "B0006",
        "B0007", "B0008", "B0009", "B000A", "B000B",
    ]  # fmt: skip
