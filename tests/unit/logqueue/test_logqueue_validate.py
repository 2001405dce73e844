"""`mqforensics validate logqueue`: the expectation suites of the canonical frames pass on the
bundled sample, fail (exit 1) naming exactly the broken expectations on a planted defect, and
an input that cannot be read is exit 2, never failed expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqforensics import cli, systems
from mqforensics.quality import SUITES_DIR, load_suite
from mqforensics.systems.logqueue.sample import SAMPLE
from tests.unit.logqueue.planted_quality import BROKEN, defective_queue, kind_of

FRAMES = ("records", "segment_files", "messages", "queues", "orphans", "spool")


def _validate(tmp_path: Path, *dirs: Path) -> tuple[int, dict]:
    out = tmp_path / "quality"
    code = cli.main(["validate", "logqueue", *map(str, dirs), "--out", str(out)])
    report = json.loads((out / "quality.json").read_text()) if code in (0, 1) else {}
    return code, report


@pytest.mark.parametrize("frame", FRAMES)
def test_suite_files_are_exactly_gx_serialisations(frame) -> None:
    path = SUITES_DIR / f"logqueue_{frame}.json"
    stored = json.loads(path.read_text())
    suite = load_suite(path)
    assert suite.to_json_dict() == stored and stored["meta"]["frame"] == frame


def test_every_canonical_frame_has_a_suite() -> None:
    assert sorted(p.stem for p in SUITES_DIR.glob("logqueue_*.json")) == sorted(
        f"logqueue_{f}" for f in FRAMES
    )
    assert systems.get("logqueue").validation_frames is not None


def test_the_bundled_sample_passes_every_expectation(spark, tmp_path) -> None:
    code, report = _validate(tmp_path, SAMPLE / "outbound", SAMPLE / "inbound")
    assert code == 0 and report["success"] is True
    assert sorted(s["frame"] for s in report["suites"]) == sorted(FRAMES)
    for suite in report["suites"]:
        assert suite["expectations"], suite["suite"]
        assert all(e["success"] for e in suite["expectations"])
        # GX counts nothing on an empty frame: the sample has no orphan record.
        counts = {e["unexpected_count"] for e in suite["expectations"]}
        assert counts <= ({0, None} if suite["frame"] == "orphans" else {0}), suite["suite"]


def test_a_planted_defect_fails_exactly_its_expectations(spark, tmp_path, capsys) -> None:
    queue = defective_queue(tmp_path / "queue")
    audit = tmp_path / "audit"
    # The audit itself has nothing to say about it: only the data's rules do.
    assert cli.main(["audit", "logqueue", str(queue), "--out", str(audit)]) == 0
    assert json.loads((audit / "findings.json").read_text()) == []
    code, report = _validate(tmp_path, queue)
    assert code == 1 and report["success"] is False
    failed = {
        (s["frame"], e["expectation"], kind_of(e["target"])): e["unexpected_count"]
        for s in report["suites"]
        for e in s["expectations"]
        if not e["success"]
    }
    assert failed == BROKEN
    out = capsys.readouterr().out
    assert "logqueue_records: expect_column_values_to_be_in_set [type_name]: 1 unexpected" in out


def test_an_input_that_cannot_be_read_is_exit_2_not_a_failed_expectation(
    spark, tmp_path, capsys
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    for given, error in (
        (a_file, f"InputError: {a_file}: not a directory"),
        (tmp_path / "absent", f"InputError: {tmp_path / 'absent'}: no such queue directory"),
        (empty, f"InputError: nothing to audit: log queue(s) {empty}"),
    ):
        assert _validate(tmp_path, given) == (2, {})
        assert error in capsys.readouterr().err
        assert not (tmp_path / "quality" / "quality.json").exists()
