"""Audits and validations append to the history: their figures match what they found, the
manifest names the run, a bad --history is refused before Spark starts, and the history
commands refuse bad input in one line (exit 2) without starting Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import mqforensics
from mqforensics.cli import main

ROOT = Path(__file__).resolve().parents[3]
CYRUS_DB = ROOT / "datasets" / "cyrus" / "sample" / "backend1" / "mailboxes.db"
ERROR = "mqforensics: error: "


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


def test_an_audit_appends_its_findings_figures(spark, tmp_path: Path) -> None:
    history = tmp_path / "history"
    audit = mqforensics.audit(
        "cyrus", inputs=[CYRUS_DB], out=tmp_path / "a", history=str(history),
        history_scope="backend1", spark=spark,
    )  # fmt: skip
    audit.close()
    frame = pd.read_parquet(history)
    recorded = audit.manifest["history"]
    assert recorded["scope"] == "backend1" and recorded["location"] == str(history)
    assert set(frame["run_id"]) == {recorded["run_id"]} and len(frame) == recorded["figures"]
    assert set(frame["kind"]) == {"audit"} and set(frame["system"].astype(str)) == {"cyrus"}
    findings = frame[frame["metric"] == "findings"]
    found = findings.groupby("check")["value"].sum().to_dict()
    counted: dict[str, float] = {}
    for row in audit.rows:
        counted[row["check"]] = counted.get(row["check"], 0) + 1
    assert {c: v for c, v in found.items() if v} == counted
    not_run = set(frame.loc[frame["metric"] == "check_not_run", "check"])
    assert not_run == set(audit.not_run)
    total = frame.loc[frame["metric"] == "findings_total", "value"].item()
    assert total == len(audit.rows)


def test_a_validation_appends_each_expectations_result(spark, tmp_path: Path) -> None:
    history = tmp_path / "history"
    report = mqforensics.validate("cyrus", inputs=[CYRUS_DB], history=history,
                                  history_scope="backend1", spark=spark)  # fmt: skip
    frame = pd.read_parquet(history)
    passed = frame[frame["metric"] == "expectation_passed"]
    expectations = [e for suite in report.suites for e in suite.expectations]
    assert len(passed) == len(expectations)
    assert passed["value"].sum() == sum(e.success for e in expectations)
    assert set(frame["kind"]) == {"validate"}


def test_a_history_that_is_a_file_is_refused_before_spark(no_spark, tmp_path, capsys) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    argv = ["audit", "cyrus", str(CYRUS_DB), "--out", str(tmp_path / "a"), "--history", str(taken)]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{ERROR}ConfigError: --history {taken} exists and is not a directory"]
    assert not (tmp_path / "a").exists()


def test_a_credential_in_a_history_url_is_refused_and_not_echoed(no_spark, tmp_path, capsys):
    url = "s3a://AKIAEXAMPLE:hunter2secret@bucket/history"
    argv = ["audit", "cyrus", str(CYRUS_DB), "--out", str(tmp_path / "a"), "--history", url]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "hunter2secret" not in err and "credentials on the command line are refused" in err
    with pytest.raises(mqforensics.api.ConfigError) as refused:  # the API refuses it too
        mqforensics.audit("cyrus", inputs=[CYRUS_DB], out=tmp_path / "b", history=url)
    assert "hunter2secret" not in str(refused.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["history", "alerts"], "ConfigError: no history: give one (--history DIR|URL) or set "
         "MQF_HISTORY"),
        (["history", "runs", "--history", "/nonexistent/h"],
         "InputError: history /nonexistent/h does not exist"),
        (["history", "show", "--metric", "x", "--history", "EMPTY"],
         "InputError: history EMPTY holds no run"),
    ],
)  # fmt: skip
def test_history_commands_refuse_bad_input_before_spark(
    no_spark, monkeypatch, tmp_path, capsys, argv: list[str], line: str
) -> None:
    monkeypatch.delenv("MQF_HISTORY", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [str(empty) if a == "EMPTY" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [ERROR + line.replace("EMPTY", str(empty))]


def test_the_manifest_records_no_history_without_one(spark, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MQF_HISTORY", raising=False)
    audit = mqforensics.audit("cyrus", inputs=[CYRUS_DB], out=tmp_path / "a", spark=spark)
    audit.close()
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["history"] is None
