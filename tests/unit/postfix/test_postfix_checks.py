"""The Postfix checks on a queue directory with planted anomalies (`planted_queue`): exactly the
planted findings, with the offsets where reading stops, read through the Spark data source."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from mqforensics.systems.postfix.checks import run_checks
from mqforensics.systems.postfix.files import FILE_COLUMNS
from mqforensics.systems.postfix.fleet import read_queue_dirs
from mqforensics.systems.postfix.frames import PostfixFrames
from mqforensics.systems.postfix.options import Settings as AuditOptions
from mqforensics.systems.postfix.postconf import Lifetimes
from mqforensics.systems.postfix.queue_dir import QueueDir
from tests.unit.postfix import planted_queue


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory) -> tuple[Path, PostfixFrames]:
    root = planted_queue.build(tmp_path_factory.mktemp("postfix") / "queue")
    files = read_queue_dirs(spark, [QueueDir("mx1", str(root))]).localCheckpoint()
    return root, PostfixFrames(files)


def found(frames: PostfixFrames, root: Path, options: AuditOptions) -> set[tuple]:
    rows = run_checks(frames, options).collect()
    return {
        (r["check"], r["queue"], str(Path(r["subject"]).relative_to(root)),
         json.loads(r["detail"]).get("offset"))
        for r in rows
    }  # fmt: skip


def test_the_data_source_schema_names_every_column(planted) -> None:
    _, frames = planted
    assert tuple(frames.files.columns) == FILE_COLUMNS


def test_exactly_the_planted_findings(planted) -> None:
    root, frames = planted
    assert found(frames, root, AuditOptions(as_of=planted_queue.AS_OF)) == planted_queue.PLANTED


def test_findings_carry_what_a_plan_rechecks(planted) -> None:
    root, frames = planted
    rows = run_checks(frames, AuditOptions(as_of=planted_queue.AS_OF)).collect()
    orphan = next(r for r in rows if r["check"] == "orphan_log")
    detail = json.loads(orphan["detail"])
    path = root / "defer/C/C1D2E3F40516"
    stat = path.stat()
    assert (orphan["scope"], orphan["bytes"], detail["entries"]) == ("log", stat.st_size, 2)
    assert (detail["host"], detail["queue_id"], detail["inode"]) == ("mx1", "C1D2E3F40516",
                                                                      stat.st_ino)  # fmt: skip
    assert dt.datetime.fromisoformat(detail["modified"]).timestamp() == stat.st_mtime
    expired = next(r for r in rows if r["check"] == "expired_in_queue")
    detail = json.loads(expired["detail"])
    assert (detail["lifetime"], detail["lifetime_seconds"], detail["pending_recipients"]) == (
        "maximal_queue_lifetime", 5 * 86400, 2,
    )  # fmt: skip
    # create_time (whole seconds, backdated with T) starts the clock.
    created = int(planted_queue.ARRIVAL.timestamp()) - 30 * 86400
    assert detail["age_seconds"] == int(planted_queue.AS_OF.timestamp()) - created


def test_thresholds_move_what_is_found(planted) -> None:
    root, frames = planted
    options = AuditOptions(
        as_of=planted_queue.AS_OF,
        lifetimes=Lifetimes(dt.timedelta(days=40), dt.timedelta(days=40), "test"),
        incomplete_grace=dt.timedelta(minutes=1),
        hold_age=dt.timedelta(days=30),
        retention=dt.timedelta(days=25),
    )
    result = found(frames, root, options)
    assert ("incomplete_queue_file", "incoming", "incoming/D2E3F4A5B6C", 300) in result
    assert not {r for r in result if r[0] in ("expired_in_queue", "old_hold")}
    assert {r[2] for r in result if r[0] == "retention_exceeded"} == {"deferred/F/F1A2B3C4D5E"}


def test_personal_data_names_subjects_never_addresses(planted) -> None:
    from mqforensics.retention.policy import subject_hash
    from mqforensics.subjects import keyed

    root, frames = planted
    key = b"k" * 32
    wanted = keyed(subject_hash("Erin@Example.NET"), key)
    options = AuditOptions(as_of=planted_queue.AS_OF, subjects=frozenset({wanted}), subject_key=key)
    rows = [r for r in run_checks(frames, options).collect() if r["check"] == "personal_data"]
    assert [str(Path(r["subject"]).relative_to(root)) for r in rows] == ["maildrop/F2B019841E7"]
    assert json.loads(rows[0]["detail"])["subjects"] == [wanted]
    assert "erin" not in rows[0]["detail"]


def test_a_fleet_is_judged_host_by_host(spark, tmp_path: Path) -> None:
    """Two hosts read in one frame: a log is an orphan on its own host even when a message of
    the same queue id is queued on another (short ids are unique per host only)."""
    mx1 = planted_queue.build(tmp_path / "mx1")
    mx2 = tmp_path / "mx2"
    (mx2 / "defer/9").mkdir(parents=True)
    (mx2 / "defer/9/9564D9841D2").write_bytes(planted_queue.DEFER_LOG)
    files = read_queue_dirs(spark, [QueueDir("mx1", str(mx1)), QueueDir("mx2", str(mx2))])
    rows = run_checks(PostfixFrames(files), AuditOptions(as_of=planted_queue.AS_OF)).collect()
    orphans = {(json.loads(r["detail"])["host"], r["subject"]) for r in rows
               if r["check"] == "orphan_log"}  # fmt: skip
    assert orphans == {("mx1", str(mx1 / "defer/C/C1D2E3F40516")),
                       ("mx2", str(mx2 / "defer/9/9564D9841D2"))}  # fmt: skip
    assert files.rdd.getNumPartitions() == 2  # one partition per host's batch of files


def test_a_complete_file_without_a_record_qmgr_requires_is_damaged(spark, tmp_path: Path) -> None:
    """Read to its end, but the sender record became a full-name record (one byte): the queue
    manager rejects it ("missing sender record") and moves it to corrupt/."""
    root = tmp_path / "queue"
    no_sender = bytearray(planted_queue.REAL_DEFERRED)
    assert no_sender[planted_queue.S_AT : planted_queue.S_AT + 1] == b"S"
    no_sender[planted_queue.S_AT] = ord("F")
    (root / "deferred/6").mkdir(parents=True)
    (root / "deferred/6/6A7B8C9D0E1").write_bytes(bytes(no_sender))
    (root / "deferred/6/6A7B8C9D0E1").chmod(0o700)
    (root / "maildrop").mkdir()
    (root / "maildrop/F2B019841E7").write_bytes(planted_queue.REAL_MAILDROP)  # no C: fine
    (root / "maildrop/F2B019841E7").chmod(0o744)
    files = read_queue_dirs(spark, [QueueDir("mx1", str(root))])
    rows = run_checks(PostfixFrames(files), AuditOptions(as_of=planted_queue.AS_OF)).collect()
    damaged = [(r["subject"], json.loads(r["detail"])) for r in rows
               if r["check"] == "damaged_queue_file"]  # fmt: skip
    assert [(s, d["missing"], d["offset"]) for s, d in damaged] == [
        (str(root / "deferred/6/6A7B8C9D0E1"), ["S (sender)"], None)
    ]
