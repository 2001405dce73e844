"""The bundled Postfix sample, written by the real Postfix 3.7 (datasets/postfix), through the one
audit runner with no server: exactly the planted findings with their offsets, the reader equal to
what postqueue -j said before anything was planted, the bundled policy's plan, and a purge that
refuses to run postsuper without the queue's config directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.cli import main
from mqforensics.retention.manifest import read_plan
from mqforensics.systems.postfix.files import FILE_COLUMNS, read_files
from mqforensics.systems.postfix.plan import (
    DELETE_ORPHAN_LOG,
    NOT_A_MESSAGE_QUEUE,
    NOT_READY,
    POSTSUPER_DELETE,
)
from mqforensics.systems.postfix.queue_dir import QueueDir, list_queue_dir
from mqforensics.systems.postfix.sample import BUNDLED

PLANTED = {a["anomaly"]: a for a in json.loads((BUNDLED / "planted.json").read_text())}


def _queue(sample) -> Path:
    return Path(sample.options.queue_dir[0].split("=", 1)[1])


def _argv(sample) -> list[str]:
    """The command-line source options of the bundled sample."""
    options = sample.options
    return ["--queue-dir", *options.queue_dir[:1], "--main-cf", str(options.main_cf)]


@pytest.fixture
def sample(tmp_path: Path):
    return systems.get("postfix").sample(tmp_path)


def test_exactly_the_planted_findings_with_offsets(spark, sample, tmp_path: Path) -> None:
    out = tmp_path / "audit"
    assert main(["audit", "postfix", *_argv(sample), "--as-of", str(sample.as_of),
                 "--out", str(out)]) == 1  # fmt: skip
    rows = json.loads((out / "findings.json").read_text())
    truth = json.loads(sample.ground_truth.read_text())["findings"]
    assert {(r["check"], r["severity"], r["queue"], r["subject"], r["detail"].get("offset"))
            for r in rows} == {(f["check"], f["severity"], f["queue"], f["subject"], f["offset"])
                               for f in truth}  # fmt: skip
    assert len(rows) == 10  # 8 anomalies; expired and old_hold are also past retention
    damage = {r["detail"]["queue_id"]: r["detail"]["offset"] for r in rows
              if r["check"] == "damaged_queue_file"}  # fmt: skip
    assert damage == {PLANTED[a]["queue_id"]: PLANTED[a]["offset"]
                      for a in ("truncated", "flipped_length")}  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["objects"] == 18 and manifest["plan_inputs"]["config_dir"] is None


def test_untouched_messages_read_as_postqueue_listed_them(sample) -> None:
    queue_dir = QueueDir.parse(sample.options.queue_dir[0])
    rows = [dict(zip(FILE_COLUMNS, r, strict=True))
            for r in read_files(queue_dir, list_queue_dir(queue_dir))]  # fmt: skip
    planted_ids = {a["queue_id"] for a in PLANTED.values()}
    listed = [json.loads(line) for line in (BUNDLED / "postqueue.jsonl").read_text().splitlines()]
    untouched = [m for m in listed if m["queue_id"] not in planted_ids]
    assert len(untouched) == 3
    for shown in untouched:
        row = next(r for r in rows if r["queue_id"] == shown["queue_id"] and r["kind"] == "message")
        assert (row["queue"], int(row["arrival"].timestamp()), row["content_size"]) == (
            shown["queue_name"], shown["arrival_time"], shown["message_size"],
        )  # fmt: skip
        assert (row["sender"] or "MAILER-DAEMON") == shown["sender"]
        assert sorted(r[0] for r in row["recipients"] if r[2] == "pending") == sorted(
            r["address"] for r in shown["recipients"]
        )


def test_the_bundled_policy_plans_from_the_findings(spark, sample, tmp_path: Path) -> None:
    out, plan_dir = tmp_path / "audit", tmp_path / "plan"
    main(["audit", "postfix", *_argv(sample), "--as-of", str(sample.as_of), "--out", str(out)])
    assert main(["plan", "--findings", str(out), "--policy", str(sample.policy),
                 "--out", str(plan_dir)]) == 0  # fmt: skip
    plan = read_plan(plan_dir)
    ids = {a: PLANTED[a]["queue_id"] for a in PLANTED}
    actions = {(a.kind, a.target["queue_id"], a.rules) for a in plan.actions()}
    assert actions == {
        (POSTSUPER_DELETE, ids["expired"], ("retention-7d",)),
        (POSTSUPER_DELETE, ids["old_hold"], ("retention-7d", "hold-14d")),
        (POSTSUPER_DELETE, ids["truncated"], ("damaged-5m",)),
        (POSTSUPER_DELETE, ids["flipped_length"], ("damaged-5m",)),
        (DELETE_ORPHAN_LOG, ids["orphan_log"], ("orphan-logs-1d",)),
    }
    deferred = {d.target["queue_id"]: d.reason for d in plan.deferred()}
    assert deferred == {
        ids["incomplete"]: NOT_READY.format(mode="0600"),
        ids["corrupt"]: NOT_A_MESSAGE_QUEUE.format(queue="corrupt"),
    }
    assert main(["approve", str(plan_dir), "--by", "tests"]) == 0
    # postsuper needs the instance's config directory: refused before anything runs.
    before = {
        p: p.read_bytes()
        for p in Path(sample.options.queue_dir[0].split("=", 1)[1]).rglob("*")
        if p.is_file()
    }
    assert main(["purge", str(plan_dir), "--apply"]) == 2
    assert {
        p: p.read_bytes()
        for p in Path(sample.options.queue_dir[0].split("=", 1)[1]).rglob("*")
        if p.is_file()
    } == before
