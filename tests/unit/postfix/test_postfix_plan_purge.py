"""Postfix plans from the checks' findings on the planted queue, and the orphan-log executor (the
only one that deletes a file itself): exact actions and deferrals, exact bytes deleted and kept,
a log changed after planning or no longer orphaned skipped. postsuper deletions run against the
real Postfix in tests/integration/postfix."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError
from mqforensics.findings import with_ids
from mqforensics.purge.engine import run_purge
from mqforensics.retention.manifest import Plan, read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.postfix import plan as planner
from mqforensics.systems.postfix.checks import run_checks
from mqforensics.systems.postfix.fleet import read_queue_dirs
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import Settings as AuditOptions
from mqforensics.systems.postfix.purge import PostsuperExecutor, build_executors
from mqforensics.systems.postfix.queue_dir import QueueDir
from mqforensics.units import utc_text
from tests.unit.postfix import planted_queue

DAY = dt.timedelta(days=1)
POLICY = Policy(
    "p.toml",
    "0" * 64,
    (
        Rule("retention", "queued_mail", "retention", older_than=7 * DAY),
        Rule("hold", "held_mail", "hold clean-up", older_than=14 * DAY, queues=("hold",)),
        Rule("damaged", "damaged_mail", "hygiene", older_than=dt.timedelta(minutes=20)),
        Rule("orphans", "orphan_logs", "hygiene", older_than=DAY),
    ),
)


def findings_of(spark, root: Path) -> list[dict]:
    files = read_queue_dirs(spark, [QueueDir("mx1", str(root))])
    rows = [r.asDict() for r in run_checks(PostfixFrames(files), AuditOptions(
        as_of=planted_queue.AS_OF)).collect()]  # fmt: skip
    rows.sort(key=lambda r: (r["check"], r["subject"]))
    return [{**r, "detail": json.loads(r["detail"])} for r in with_ids(rows)]


def make_plan(tmp_path: Path, root: Path, parts: planner.PlanParts) -> Plan:
    written = write_plan(
        tmp_path / "plan", system="postfix", as_of=planted_queue.AS_OF, policy=POLICY,
        inputs={"queue_dirs": [{"host": "mx1", "path": str(root)}], "config_dir": None},
        actions=parts.actions, deferred=parts.deferred, notes=parts.notes,
    )  # fmt: skip
    plan = read_plan(written.directory)
    record_approval(plan, "ops")
    return plan


def test_plan_from_findings(spark, tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    findings = findings_of(spark, root)
    parts = planner.plan(findings, POLICY, {"as_of": utc_text(planted_queue.AS_OF)})
    ids = {f["id"]: (f["check"], f["subject"]) for f in findings}
    actions = {
        (a.kind, os.path.relpath(a.target["path"], root), a.rules): {ids[f][0] for f in a.findings}
        for a in parts.actions
    }
    assert actions == {
        (planner.POSTSUPER_DELETE, "deferred/F/F1A2B3C4D5E", ("retention",)): {
            "retention_exceeded", "expired_in_queue"},
        (planner.POSTSUPER_DELETE, "hold/A2B3C4D5E6F", ("retention", "hold")): {
            "retention_exceeded", "old_hold"},
        (planner.POSTSUPER_DELETE, "deferred/A/A1B2C3D4E5F", ("damaged",)): {"damaged_queue_file"},
        (planner.POSTSUPER_DELETE, "deferred/B/B1C2D3E4F50", ("damaged",)): {"damaged_queue_file"},
        (planner.DELETE_ORPHAN_LOG, "defer/C/C1D2E3F40516", ("orphans",)): {"orphan_log"},
    }  # fmt: skip
    deferred = {os.path.relpath(d.target["path"], root): d.reason for d in parts.deferred}
    assert deferred == {
        "incoming/D1E2F3A4B5C": planner.NOT_READY.format(mode="0600"),
        "corrupt/E1F2A3B4C5D": planner.NOT_A_MESSAGE_QUEUE.format(queue="corrupt"),
    }
    message = next(a for a in parts.actions if a.target["queue_id"] == "F1A2B3C4D5E")
    stat = (root / "deferred/F/F1A2B3C4D5E").stat()
    assert message.target == {"host": "mx1", "queue_dir": str(root), "queue": "deferred",
                              "queue_id": "F1A2B3C4D5E",
                              "path": str(root / "deferred/F/F1A2B3C4D5E")}  # fmt: skip
    assert (message.precondition["size"], message.precondition["inode"], message.bytes) == (
        stat.st_size, stat.st_ino, stat.st_size)  # fmt: skip


def test_orphan_logs_deleted_exactly_and_drift_skipped(spark, tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    (root / "defer/C/C2D3E4F50617").write_bytes(planted_queue.DEFER_LOG)  # a second orphan
    (root / "defer/C/C3D4E5F60718").write_bytes(planted_queue.DEFER_LOG)  # and a third
    old = (planted_queue.AS_OF - 2 * DAY).timestamp()
    for name in ("C2D3E4F50617", "C3D4E5F60718"):
        os.utime(root / "defer/C" / name, (old, old))
    parts = planner.plan(findings_of(spark, root), POLICY, {"as_of": utc_text(planted_queue.AS_OF)})
    logs = planner.PlanParts([a for a in parts.actions if a.kind == planner.DELETE_ORPHAN_LOG])
    assert len(logs.actions) == 3
    plan = make_plan(tmp_path, root, logs)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    # After planning: one log appended to, another gets its message back (no longer an orphan).
    appended = b"\nrecipient=dave@example.org\nstatus=4.4.1\n\n"
    with open(root / "defer/C/C2D3E4F50617", "ab") as log:
        log.write(appended)
    (root / "hold/C3D4E5F60718").write_bytes(planted_queue.REAL_DEFERRED)

    dry = run_purge(plan, build_executors(plan), apply=False,
                    out=lambda _: None)  # fmt: skip
    assert dry.done == 0 and all(p.exists() for p in before)
    result = run_purge(plan, build_executors(plan), apply=True,
                       out=lambda _: None)  # fmt: skip
    assert (result.done, result.skipped) == (1, 2)
    size = len(planted_queue.DEFER_LOG)
    assert {reason for _, _, reason in result.skips} == {
        f"size {size} -> {size + len(appended)}",
        f"no longer an orphan: {root / 'hold/C3D4E5F60718'} exists",
    }
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    gone = set(before) - set(after)
    assert gone == {root / "defer/C/C1D2E3F40516"}
    kept = {p for p in before if p in after and p.name != "C2D3E4F50617"}
    assert all(after[p] == before[p] for p in kept)


def test_postsuper_needs_the_config_of_the_plans_queue(spark, tmp_path: Path) -> None:
    root = planted_queue.build(tmp_path / "queue")
    parts = planner.plan(findings_of(spark, root), POLICY, {"as_of": utc_text(planted_queue.AS_OF)})
    plan = make_plan(tmp_path, root, parts)
    with pytest.raises(ConfigError, match="names no Postfix config directory"):
        PostsuperExecutor(plan, None)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "main.cf").write_text(f"queue_directory = {tmp_path / 'elsewhere'}\n")
    with pytest.raises(ConfigError, match="works on"):
        PostsuperExecutor(plan, str(conf))
