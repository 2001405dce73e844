"""`mqforensics report html`: findings, plans and validations in one self-contained page."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.privacy import pseudonymize_address


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out)]) in (0, 1)
    return out


def _references(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]*)"', page)


def test_the_report_holds_every_finding_and_the_plan(demo: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report.html"
    assert main(["report", "html", str(demo), str(demo / "plan"), "--out", str(out)]) == 0
    page = out.read_text()
    rows = json.loads((demo / "findings.json").read_text())
    for check, count in Counter(r["check"] for r in rows).items():
        assert f"<h3>{check} ({count})</h3>" in page
    # One row per finding in the per-check tables (their first cell is the severity).
    assert page.count("<tr><td>error</td>") == sum(1 for r in rows if r["severity"] == "error")
    from mqforensics.retention.manifest import read_plan

    plan = read_plan(demo / "plan")
    # The plan's actions, bytes and tombstones per kind, summed here from its actions file.
    per_kind: dict[str, list[int]] = {}
    for action in plan.actions():
        sums = per_kind.setdefault(action.kind, [0, 0, 0])
        sums[0] += 1
        sums[1] += action.bytes
        sums[2] += action.tombstones
    assert sum(n for n, _, _ in per_kind.values()) == plan.action_count > 0
    for kind, (count, size, tombstones) in per_kind.items():
        cells = f'<td>{kind}</td><td class="n">{count}</td><td class="n">{size}</td>'
        assert cells in page and f"{tombstones}</td></tr>" in page.split(cells, 1)[1][:80]
    # Two plots, inline; nothing the page would fetch from anywhere.
    assert page.count('src="data:image/png;base64,') == 2
    assert all(ref.startswith("data:") for ref in _references(page))
    assert "<script" not in page and "http://" not in page and "https://" not in page
    printed = capsys.readouterr().out
    assert f"findings   {demo}: {len(rows)} findings (james), worst error" in printed
    assert printed.rstrip().endswith(f"wrote {out}")


def test_addresses_are_pseudonymised_unless_revealed(tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    detail = {"recipients": ["dave@example.net"], "source": "s3://key:secret@host/b"}
    row = {"check": "stuck_message", "severity": "warning", "system": "logqueue",
           "queue": "/var/spool/q1", "scope": "message", "subject": "to carol@example.com",
           "observed_at": "2027-01-21T08:00:00Z", "bytes": 12, "detail": detail}  # fmt: skip
    (audit / "findings.json").write_text(json.dumps([row]))
    hidden, shown = tmp_path / "hidden.html", tmp_path / "shown.html"
    assert main(["report", "html", str(audit), "--out", str(hidden)]) == 0
    assert main(["report", "html", str(audit), "--out", str(shown), "--reveal-addresses"]) == 0
    page = hidden.read_text()
    assert "carol@example.com" not in page and "dave@example.net" not in page
    assert pseudonymize_address("carol@example.com") in page
    assert "secret" not in page and "s3://[hidden]@host/b" in page
    revealed = shown.read_text()
    assert "carol@example.com" in revealed and "dave@example.net" in revealed
    assert "secret" not in revealed  # credentials are never revealed


def test_a_failing_validation_is_listed(tmp_path: Path) -> None:
    validation = tmp_path / "quality"
    validation.mkdir()
    quality = {
        "system": "james", "success": False, "pseudonymized": True,
        "suites": [{"suite": "james_deleted", "frame": "deleted", "file": "x.json",
                    "success": False, "seconds": 1.0, "expectations": [
                        {"expectation": "expect_compound_columns_to_be_unique",
                         "target": "queuename, enqueueid", "success": False, "unexpected_count": 2,
                         "unexpected_values": [{"enqueueid": "e1"}], "description": None},
                        {"expectation": "expect_column_values_to_not_be_null",
                         "target": "enqueueid", "success": True, "unexpected_count": 0,
                         "unexpected_values": [], "description": None}]}],
    }  # fmt: skip
    (validation / "quality.json").write_text(json.dumps(quality))
    out = tmp_path / "r.html"
    assert main(["report", "html", str(validation), "--out", str(out)]) == 0
    page = out.read_text()
    assert "<h3>Failing expectations</h3>" in page
    assert "<td>expect_compound_columns_to_be_unique</td>" in page
    assert "expect_column_values_to_not_be_null" not in page
    assert '<td class="n">2</td>' in page


def test_an_unknown_directory_is_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "r.html"
    assert main(["report", "html", str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"report input {empty} holds no findings.json" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [empty]
