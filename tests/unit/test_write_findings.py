"""Findings written by `write_findings`: one job's rows, sorted as Spark sorts, in both files,
each with a stable id; pseudonymised for people, exact in findings.raw.json for plans."""

import datetime as dt
import json

from mqforensics import findings
from mqforensics.findings import write_findings

AT = dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC)


def test_findings_are_sorted_nulls_first_in_both_files(spark, tmp_path):
    made = [
        findings.Finding("stuck_mail", "error", "james", "spool", "mail", "b", AT, 7, {"n": 1}),
        findings.Finding("orphaned_blob", "info", "james", None, "blob", "k2", AT, 9),
        findings.Finding("stuck_mail", "error", "james", "outgoing", "mail", "c", None, None),
        findings.Finding("orphaned_blob", "info", "james", None, "blob", "k1", AT, 3),
        findings.Finding("stuck_mail", "error", "james", "spool", "mail", "a", AT, 1),
    ]
    rows = write_findings(findings.to_frame(spark, made), tmp_path)
    order = [(r["check"], r["queue"], r["subject"]) for r in rows]
    assert order == [
        ("orphaned_blob", None, "k1"), ("orphaned_blob", None, "k2"),
        ("stuck_mail", "outgoing", "c"), ("stuck_mail", "spool", "a"), ("stuck_mail", "spool", "b"),
    ]  # fmt: skip
    assert rows[3]["observed_at"] == "2026-11-01T10:00:00Z" and rows[2]["observed_at"] is None
    assert rows[4]["detail"] == {"n": 1} and rows[4]["bytes"] == 7
    assert json.loads((tmp_path / "findings.json").read_text()) == rows
    parquet = tmp_path / "findings.parquet"
    assert parquet.is_dir() and not list(tmp_path.glob(".*.tmp"))
    back = spark.read.parquet(str(parquet))
    assert (
        back.schema.simpleString()
        == spark.createDataFrame([], findings.OUTPUT_SCHEMA).schema.simpleString()
    )
    assert [(r.check, r.queue, r.subject) for r in back.collect()] == order
    assert [r.id for r in back.collect()] == [r["id"] for r in rows]
    expected = findings.finding_id("james", "stuck_mail", "spool", "mail", "a")
    assert rows[3]["id"] == expected and len(expected) == 16
    assert len({r["id"] for r in rows}) == len(rows)


def test_ids_do_not_depend_on_pseudonymisation_and_raw_keys_stay_private(spark, tmp_path):
    from mqforensics.privacy import pseudonymize_value

    made = [
        findings.Finding("stuck_mail", "error", "james", "spool", "mail", "bob@example.org", AT),
        findings.Finding("stuck_mail", "error", "james", "spool", "mail", "bob@example.org", AT),
    ]

    def hide(row):
        return {**row, "subject": pseudonymize_value(row["subject"])}

    shown = write_findings(findings.to_frame(spark, made), tmp_path / "a", hide)
    plain = write_findings(findings.to_frame(spark, made), tmp_path / "b")
    assert [r["id"] for r in shown] == [r["id"] for r in plain]
    assert shown[1]["id"] == shown[0]["id"] + "-2"  # two findings naming one thing
    assert "bob@" not in (tmp_path / "a" / "findings.json").read_text()
    raw = tmp_path / "a" / "findings.raw.json"
    assert [r["subject"] for r in json.loads(raw.read_text())] == ["bob@example.org"] * 2
    assert raw.stat().st_mode & 0o077 == 0
    assert findings.read_findings(tmp_path / "a", raw=True) == json.loads(raw.read_text())


def test_no_findings_are_two_empty_files(spark, tmp_path):
    assert write_findings(findings.empty(spark), tmp_path) == []
    assert json.loads((tmp_path / "findings.json").read_text()) == []
    assert spark.read.parquet(str(tmp_path / "findings.parquet")).count() == 0


def test_an_unreadable_audit_file_is_one_input_error_naming_it(tmp_path):
    import pytest

    from mqforensics.errors import InputError
    from mqforensics.runner import read_manifest

    with pytest.raises(InputError, match=r"findings.json does not exist: not an audit directory"):
        findings.read_findings(tmp_path)
    (tmp_path / "findings.raw.json").write_text('[{"id": "a", "che')
    with pytest.raises(InputError) as caught:
        findings.read_findings(tmp_path, raw=True)
    assert caught.value.message == (
        f"{tmp_path / 'findings.raw.json'}: not a findings file (JSONDecodeError)"
    )
    (tmp_path / "manifest.json").write_bytes(b"\xff{}")
    with pytest.raises(InputError) as caught:
        read_manifest(tmp_path)
    assert caught.value.message == (
        f"{tmp_path / 'manifest.json'}: not an audit manifest (UnicodeDecodeError)"
    )
