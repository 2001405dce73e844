"""Findings written by `write_findings`: one job's rows, sorted as Spark sorts, in both files,
each with a stable id; pseudonymised for people, exact in findings.raw.json for plans. And what
the terminal says of them: the summary table and the one-line verdict, bytes counted once per
stored object."""

import datetime as dt
import json

from mqforensics import findings
from mqforensics.findings import (
    held_objects,
    held_text,
    severity_counts,
    size_text,
    summarise,
    verdict_line,
    write_findings,
)

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

    from mqforensics.audit_manifest import read_manifest
    from mqforensics.errors import InputError

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


def _row(check, severity, subject, size, *, scope="mail", detail=None, system="james"):
    return {"check": check, "severity": severity, "system": system, "queue": "spool",
            "scope": scope, "subject": subject, "bytes": size, "detail": detail or {}}  # fmt: skip


ROWS = [
    _row("stuck_mail", "error", "m9", None),
    _row("stuck_mail", "error", "m8", None),
    _row("unreclaimed_slice", "warning", "spool/t1/0", 700, scope="partition"),
    # Inside that partition: part of its 700 bytes, not counted again (its detail names it).
    _row("personal_data", "info", "m1", 300, detail={"partition": "spool/t1/0"}),
    _row("personal_data", "info", "m3", 200, detail='{"partition": "spool/t2/0"}'),
    # One blob, two checks: counted once.
    _row("orphaned_blob", "info", "b1", 1000, scope="blob"),
    _row("consumed_blob", "info", "b1", 1000, scope="blob"),
]


def test_the_summary_shows_a_dash_where_no_finding_records_a_size():
    table = summarise(ROWS).splitlines()
    assert table[0].split() == ["check", "severity", "findings", "bytes"]
    assert table[-1].split() == ["unreclaimed_slice", "warning", "1", "700"]
    assert [line.split() for line in table if line.startswith("stuck_mail")] == [
        ["stuck_mail", "error", "2", "-"]
    ]


def test_bytes_held_count_each_stored_object_once():
    objects = held_objects(ROWS)
    assert objects == {
        ("james", "partition", "spool/t1/0"): 700,
        ("james", "mail", "m3"): 200,
        ("james", "blob", "b1"): 1000,
    }
    assert held_text(ROWS) == "1.9 KiB held by 3 stored objects"
    assert held_text(ROWS[:2]) == "no size recorded" and held_objects([]) == {}


def test_the_verdict_is_one_line_to_quote():
    assert verdict_line(ROWS, checks_run=9) == (
        "verdict: 7 findings (2 errors, 1 warning, 4 info) from 5 of the 9 checks run; "
        "1.9 KiB held by 3 stored objects (each counted once)"
    )
    assert verdict_line(ROWS, checks_run=5).split(" from ")[1].startswith("all 5 checks run; ")
    assert verdict_line(ROWS[:1]) == "verdict: 1 finding (1 error) from 1 check; no size recorded"
    assert verdict_line(ROWS[:1], checks_run=1).endswith("from the 1 check run; no size recorded")
    assert verdict_line([], checks_run=1) == "verdict: clean (no finding from the 1 check run)"
    assert verdict_line([]) == "verdict: clean (no finding)"
    assert (
        verdict_line(ROWS, checks_run=5, not_run=9)
        .split(" from ")[1]
        .startswith("all 5 checks run, 9 checks not run; ")
    )
    assert verdict_line([], checks_run=8, not_run=1) == (
        "verdict: clean (no finding from the 8 checks run, 1 check not run)"
    )
    assert severity_counts([_row("x", "critical", "a", 1)] * 2) == "2 critical"
    assert size_text(870) == "870 B" and size_text(1536) == "1.5 KiB"
