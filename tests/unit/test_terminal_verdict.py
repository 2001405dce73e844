"""What `mqforensics audit` and `validate` print: the summary table, then one verdict line an
auditor can quote; sizes a finding does not record as ``-``; checks that did not run, one stderr
line per reason; plurals that agree; Postfix's note on the files it read. The audit itself is
stood in for (no Spark) where only what the command prints of it is under test."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

from mqforensics import systems
from mqforensics.cli import audit as audit_cli
from mqforensics.cli import main
from mqforensics.quality import ExpectationOutcome, QualityReport, SuiteOutcome, render_text

WHY = "no blob listing (give --blob-listing or --blobs)"


def _row(check: str, severity: str, subject: str, size: int | None) -> dict:
    return {"check": check, "severity": severity, "system": "logqueue", "queue": "/q",
            "scope": "segment", "subject": subject, "bytes": size, "detail": {}}  # fmt: skip


def test_audit_prints_a_verdict_and_what_did_not_run(tmp_path: Path, monkeypatch, capsys) -> None:
    spec = systems.get("logqueue")
    not_run = {spec.checks[0].name: WHY, spec.checks[1].name: WHY}
    rows = [_row("stuck_message", "error", "a", None), _row("stuck_message", "error", "b", None),
            _row("garbage_segment", "info", "seg-1.lq", 2048)]  # fmt: skip
    audit = SimpleNamespace(
        rows=rows, source="logqueue /q", as_of=dt.datetime(2026, 11, 3, 12, tzinfo=dt.UTC),
        manifest={"not_run": not_run}, notes=["files: 2 segments"], partial={}, outputs=[],
        status=1, close=lambda: None,
    )  # fmt: skip
    monkeypatch.setattr(audit_cli.api, "run_audit", lambda *args, **kwargs: audit)
    assert main(["audit", "logqueue", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"{spec.title}: logqueue /q, judged at 2026-11-03T12:00:00Z:"
    table = {line.split()[0]: line.split()[1:] for line in lines[2:4]}
    assert table == {"garbage_segment": ["info", "1", "2,048"],
                     "stuck_message": ["error", "2", "-"]}  # fmt: skip
    ran = len(spec.checks) - 2
    assert lines[4] == (
        f"verdict: 3 findings (2 errors, 1 info) from 2 of the {ran} checks run, 2 checks not "
        "run; "
        "2.0 KiB held by 1 stored object (each counted once)"
    )
    assert lines[5] == "note: files: 2 segments"
    names = ", ".join(sorted(not_run))
    assert err.splitlines() == [f"warning: not run: {names}: {WHY}"]


def _outcome(success: bool) -> ExpectationOutcome:
    return ExpectationOutcome("expect_column_values_to_not_be_null", "id", None, success,
                              0 if success else 2)  # fmt: skip


def test_validate_prints_a_verdict_and_plurals_that_agree() -> None:
    one = SuiteOutcome("logqueue_segments", "segments", "x.json", True, 0.5, [_outcome(True)])
    text = render_text(QualityReport("logqueue", True, [one]))
    assert text.splitlines() == [
        "quality logqueue: 1 suite, 1 expectation, 0 failed (0.5s)",
        "verdict: every expectation passed",
    ]
    bad = SuiteOutcome("logqueue_records", "records", "y.json", False, 0.25,
                       [_outcome(False), _outcome(True)])  # fmt: skip
    lines = render_text(QualityReport("logqueue", False, [one, bad])).splitlines()
    assert lines[0] == "quality logqueue: 2 suites, 3 expectations, 1 failed (0.8s)"
    assert lines[-1] == "verdict: 1 of 3 expectations failed, in 1 of 2 suites"


def test_postfix_says_its_files_per_kind_then_per_queue(spark) -> None:
    # Queue files and log files apart, each by the queue it is in: never "8 logs (8 defer,
    # 1 corrupt, 6 deferred ...)", which counted queue files among the logs.
    from mqforensics import api

    frames = api.read("postfix", sample=True, spark=spark)
    frames.close()
    [note] = [n for n in frames.notes if n.startswith("files: ")]
    assert note == (
        "files: 10 queue files (1 in corrupt, 6 in deferred, 2 in hold, 1 in incoming), "
        "8 log files (8 in defer)"
    )
