"""`mqforensics demo`: the James audit of the bundled sample finds exactly what was planted
(and the rows holding the data subject of its erasure request), then plans from the findings."""

import json
from pathlib import Path

from mqforensics.cli import main

BUNDLED = Path(__file__).resolve().parents[2] / "datasets" / "james" / "sample"


def planted() -> set[tuple]:
    truth = json.loads((BUNDLED / "ground_truth.json").read_text())["findings"]
    return {(f["check"], f["severity"], f["queue"], f["subject"]) for f in truth}


def test_demo_finds_exactly_the_planted_anomalies(spark, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "findings.json").read_text())
    assert {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows} == planted()
    assert len(rows) == len(planted())  # no duplicates either
    assert (tmp_path / "findings.parquet").is_dir()
    printed = capsys.readouterr().out
    assert (
        f"The {len(rows)} findings match the {len(rows)} planted in ground_truth.json." in printed
    )
    assert "judged at 2026-11-03T12:00:00Z" in printed  # the snapshot's time, not today's

    # The cleanup plan: old fully consumed partitions the audit found unreclaimed, and the
    # passthrough orphans; nothing live, no address in any file, a pseudonymised report. Every
    # action cites findings of the audit.
    from mqforensics.retention.manifest import read_plan

    plan = read_plan(tmp_path / "plan")
    actions = list(plan.actions())
    ids = {r["id"] for r in rows}
    assert all(a.findings and set(a.findings) <= ids for a in actions)
    erased = [a for a in actions if "erasure-2026-017" in a.rules]
    assert [a.kind for a in erased] == ["james.delete_partition", "james.advance_content_start"]
    unreclaimed = {s for c, _, _, s in planted() if c == "unreclaimed_slice"}
    partitions = {
        f"{a.target['queue']}/{a.target['timerangestart'][:19]}Z/{a.target['bucketid']}"
        for a in actions
        if a.kind == "james.delete_partition"
    }
    assert partitions and partitions <= unreclaimed
    orphans = {s for c, _, _, s in planted() if c == "orphaned_blob" and s.count("-") == 4}
    assert {a.target["key"] for a in actions if a.kind == "james.delete_blob"} == orphans
    files = "".join(p.read_text() for p in (tmp_path / "plan").iterdir() if p.is_file())
    assert "victor@example.com" not in files
    assert "Review it in" in printed and (tmp_path / "plan" / "report.html").is_file()
    # The bundled history's alerts at its last run (datasets/james/HISTORY.md).
    assert "Run history" in printed and "6 alerts from the 16 bundled rules" in printed
    assert "ALERT james-browse-start-stuck (warning): browse_start of james james-sample" in printed


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    taken = tmp_path / "file"
    taken.write_text("x")
    assert main(["demo", "--out", str(taken)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"mqforensics: error: ConfigError: --out {taken} exists and is not a directory"
    assert not (tmp_path / "findings.json").exists()


def test_summary_counts_findings_and_bytes_per_check_and_severity():
    from mqforensics.findings import summarise

    rows = [
        {"check": "unreclaimed_slice", "severity": "info", "bytes": 100},
        {"check": "unreclaimed_slice", "severity": "warning", "bytes": 7},
        {"check": "unreclaimed_slice", "severity": "warning", "bytes": None},
    ]
    assert summarise(rows).splitlines()[1:] == [
        f"{'unreclaimed_slice':<22}{'info':<10}{1:>10,}{100:>16,}",
        f"{'unreclaimed_slice':<22}{'warning':<10}{2:>10,}{7:>16,}",
    ]
    assert summarise([]).splitlines()[1] == "(no findings)"
