"""`mqforensics report html`: findings, plans and validations in one self-contained page."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.findings import size_text
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
    # One row per finding in the per-check tables (their first cell is the severity), a check
    # of one finding as one record (a heading and a value per line).
    errors = page.count("<tr><td>error</td>") + page.count("<tr><th>severity</th><td>error</td>")
    assert errors == sum(1 for r in rows if r["severity"] == "error")
    # The bytes the verdict quotes count each stored object once: a personal_data mail row
    # inside a partition unreclaimed_slice found is part of it, not counted again.
    partitions = {r["subject"] for r in rows if r["scope"] == "partition"}
    objects = {
        (r["scope"], r["subject"]): r["bytes"]
        for r in rows
        if r["bytes"] is not None and r["detail"].get("partition") not in partitions
    }
    held = sum(objects.values())
    naive = sum(r["bytes"] or 0 for r in rows)
    assert held < naive  # the sample holds such an overlap
    verdict = page.split("<h2>Verdict</h2>", 1)[1].split("<h2>Inputs</h2>", 1)[0]
    assert f"{size_text(held)} held by {len(objects)} stored objects (each counted once)" in verdict
    assert f"{size_text(naive)} held" not in page
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
    assert '<td class="k">expect_compound_columns_to_be_unique</td>' in page
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


def _audit(tmp_path: Path, rows: list[dict]) -> Path:
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "findings.json").write_text(json.dumps(rows))
    return audit


def _finding(check: str, severity: str, **fields) -> dict:
    row = {"check": check, "severity": severity, "system": "james", "queue": "spool",
           "scope": "mail", "subject": "m1", "observed_at": "2026-11-03T12:00:00Z",
           "bytes": None, "detail": {}}  # fmt: skip
    return {**row, **fields}


def _visible(page: str) -> str:
    import html as markup

    body = page.split("<body>", 1)[-1]
    return markup.unescape(re.sub(r"<[^>]+>", " ", body))


def _assert_no_missing_value_text(page: str) -> None:
    text = _visible(page)
    for word in ("nan", "NaN", "None", "NaT", "null"):
        assert not re.search(rf"(?<![\w-]){word}(?![\w-])", text), (word, text)


def test_the_first_section_says_what_is_wrong_why_and_what_to_do(tmp_path: Path) -> None:
    from mqforensics import systems

    rows = [
        _finding("stuck_mail", "error", subject="m1"),
        _finding("stuck_mail", "error", subject="m2", queue="outgoing"),
        _finding("unreclaimed_slice", "warning", subject="p1", bytes=2048,
                 detail={"addresses": 3, "rows": 1}),
        _finding("orphaned_blob", "info", queue=None, scope="blob", subject="b1", bytes=100,
                 observed_at=None, detail={"bucket": "b", "deletable": False}),
    ]  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["report", "html", str(_audit(tmp_path, rows)), "--out", str(out)]) == 0
    page = out.read_text()
    verdict = page.split("<h2>Verdict</h2>", 1)[1].split("<h2>Inputs</h2>", 1)[0]
    assert (
        '<p class="status bad verdict">4 findings (2 errors, 1 warning, 1 info) from 3 checks; '
        "worst severity error; 2.1 KiB held by 2 stored objects (each counted once).</p>"
    ) in verdict
    # The checks that found something, worst first, with the bytes and personal data they hold;
    # a check none of whose findings records a size holds an en dash, not "0 B".
    assert (
        '<tr><td>stuck_mail</td><td>error</td><td class="n">2</td><td class="n">\u2013</td>'
        "<td>\u2013</td></tr>"
    ) in verdict
    assert (
        '<tr><td>unreclaimed_slice</td><td>warning</td><td class="n">1</td>'
        '<td class="n">2.0 KiB</td><td>3 mail addresses</td></tr>'
    ) in verdict
    assert verdict.index("stuck_mail") < verdict.index("unreclaimed_slice")
    assert verdict.index("unreclaimed_slice") < verdict.index("orphaned_blob")
    for name in ("stuck_mail", "unreclaimed_slice", "orphaned_blob"):
        check = systems.find_check("james", name)
        assert check is not None
        for text in (check.what, check.why, check.todo):
            assert html.escape(text, quote=True) in verdict, text
    assert "2 findings \u00b7 worst severity error \u00b7 no size recorded" in verdict
    assert "Not checked" not in verdict  # no manifest: nothing known to say
    assert "personal data: 3 mail addresses" in verdict
    _assert_no_missing_value_text(page)


def test_detail_tables_have_named_columns_and_no_missing_value_text(tmp_path: Path) -> None:
    rows = [
        _finding("orphaned_blob", "info", queue=None, scope="blob", subject="b1", bytes=1218,
                 detail={"bucket": "default", "deletable": False, "etag": None,
                         "windows": [1, 2, 3, 4, 5]}),
        _finding("orphaned_blob", "info", queue=None, scope="blob", subject="b2", bytes=None,
                 observed_at=None, detail={"bucket": "default", "deletable": True,
                                           "last_modified": "2026-11-03T09:23:00.000Z"}),
    ]  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["report", "html", str(_audit(tmp_path, rows)), "--out", str(out)]) == 0
    page = out.read_text()
    details = page.split("<h3>orphaned_blob (2)</h3>", 1)[1]
    # Columns with one value in every row are said once above the table; none at all: dropped.
    same = "queue: \u2013; scope: blob; bucket: default"
    assert f'<p class="same">Same in every finding below: {same}</p>' in details
    # A finding's subject is shown as its "object" (a data subject is another thing).
    head = (
        "<tr><th>severity</th><th>object</th><th>bytes</th><th>observed at</th>"
        "<th>deletable</th><th>windows</th><th>last modified</th></tr>"
    )
    assert head in details
    assert (
        '<tr><td>info</td><td>b1</td><td class="n">1,218</td>'
        '<td class="t">2026-11-03T12:00:00Z</td>'
        "<td>no</td><td>1, 2, 3, \u2026 (5 in all)</td><td>\u2013</td></tr>"
    ) in details
    # A finding that records no size: an en dash, not 0.
    assert (
        '<tr><td>info</td><td>b2</td><td class="n">\u2013</td><td>\u2013</td>'
        '<td>yes</td><td>\u2013</td><td class="t k">2026-11-03T09:23:00.000Z</td></tr>'
    ) in details
    assert "{" not in _visible(details)  # no JSON dicts
    _assert_no_missing_value_text(page)


def test_one_finding_and_a_clean_audit_read_right(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    audit = _audit(one, [_finding("stuck_mail", "warning")])
    out = tmp_path / "one.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    page = out.read_text()
    assert "1 finding (1 warning) from 1 check; worst severity warning; no size recorded." in page
    assert "1 findings" not in page and "1 checks" not in page
    clean = tmp_path / "clean"
    clean.mkdir()
    out = tmp_path / "clean.html"
    assert main(["report", "html", str(_audit(clean, [])), "--out", str(out)]) == 0
    page = out.read_text()
    assert '<p class="status ok verdict">Clean: the audit found nothing.</p>' in page
    _assert_no_missing_value_text(page)


@pytest.mark.parametrize("command", ["html", "notebook"])
def test_out_in_a_missing_directory_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys, command: str
) -> None:
    audit = _audit(tmp_path, [_finding("stuck_mail", "error")])
    notebook = tmp_path / "n.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    before = sorted(tmp_path.rglob("*"))
    out = tmp_path / "missing" / "deeper" / "r.html"
    given = str(audit) if command == "html" else str(notebook)
    assert main(["report", command, given, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"mqforensics: error: ConfigError: --out {out}: directory {out.parent} does not exist "
        "(create it first)\n"
    )
    assert sorted(tmp_path.rglob("*")) == before


def test_an_export_drops_spark_log_lines_from_stderr_and_keeps_the_rest() -> None:
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from mqforensics.views.notebook_export import static_outputs

    noise = (
        "25/11/25 12:00:01 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        'Setting default log level to "WARN".\n'
        "[Stage 3:>                                                          (0 + 2) / 2]\r"
        "a real problem\n"
    )
    only_noise = "25/11/25 12:00:02 WARN SparkContext: Another SparkContext is being constructed\n"
    notebook = new_notebook(cells=[new_code_cell("x", outputs=[
        new_output("stream", name="stderr", text=noise),
        new_output("stream", name="stderr", text=only_noise),
        new_output("stream", name="stdout", text="25/11/25 12:00:03 WARN kept on stdout\n"),
    ])])  # fmt: skip
    outputs = static_outputs(notebook).cells[0].outputs
    assert [(o.name, o.text) for o in outputs] == [
        ("stderr", "a real problem\n"),
        ("stdout", "25/11/25 12:00:03 WARN kept on stdout\n"),
    ]


def test_write_report_uses_the_find_check_and_hide_target_of_it_is_given(tmp_path: Path) -> None:
    # The view consults no registry: the check texts and the plan's target hider come from its
    # caller (the command line passes the registry's).
    from types import SimpleNamespace

    from mqforensics.views.report import summary_of, write_report
    from tests.unit.test_retention_report import make_plan

    audit = _audit(tmp_path, [_finding("stuck_mail", "error")])
    plan = make_plan(tmp_path / "plan", count=2)
    texts = SimpleNamespace(what="WHAT-TEXT", why="WHY-TEXT", todo="TODO-TEXT")
    asked: list[tuple[str, ...]] = []

    def find_check(system: str, check: str):
        asked.append((system, check))
        return texts if check == "stuck_mail" else None

    def hide_target_of(system: str):
        asked.append((system,))
        return lambda target, salt: {**target, "key": "HIDDEN-KEY"} if "key" in target else target

    out = tmp_path / "given.html"
    loaded = write_report([audit, plan], out, find_check=find_check, hide_target_of=hide_target_of)
    page = out.read_text()
    assert ("james", "stuck_mail") in asked and ("james",) in asked
    assert all(text in page for text in ("WHAT-TEXT", "WHY-TEXT", "TODO-TEXT"))
    assert "blob-000" not in page and "HIDDEN-KEY" in page
    assert [item.kind for item in loaded] == ["findings", "plan"]
    assert summary_of(loaded[0]) == "1 finding (james), worst error"
    out = tmp_path / "none.html"
    write_report([audit, plan], out)
    page = out.read_text()
    assert "stuck_mail is not a check of this version&#x27;s james system" in page
    assert "WHAT-TEXT" not in page and "blob-000" in page


def test_bytes_held_count_each_stored_object_once(tmp_path: Path) -> None:
    # One blob found by two checks, a partition and two mail rows inside it (their detail
    # names it), a mail row of another partition, and a check whose findings have no size.
    rows = [
        _finding("orphaned_blob", "info", queue=None, scope="blob", subject="b1", bytes=1000),
        _finding("consumed_blob", "info", queue=None, scope="blob", subject="b1", bytes=1000),
        _finding("unreclaimed_slice", "warning", scope="partition", subject="spool/t1/0",
                 bytes=700),
        _finding("personal_data", "info", subject="m1", bytes=300,
                 detail={"partition": "spool/t1/0", "subjects": ["h1"]}),
        _finding("personal_data", "info", subject="m2", bytes=400,
                 detail={"partition": "spool/t1/0", "subjects": ["h1"]}),
        _finding("personal_data", "info", subject="m3", bytes=200,
                 detail={"partition": "spool/t2/0", "subjects": ["h1"]}),
        _finding("stuck_mail", "error", subject="m4"),
        _finding("stuck_mail", "error", subject="m5"),
    ]  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["report", "html", str(_audit(tmp_path, rows)), "--out", str(out)]) == 0
    page = out.read_text()
    verdict = page.split("<h2>Verdict</h2>", 1)[1].split("<h2>Inputs</h2>", 1)[0]
    # 1000 (b1, once) + 700 (the partition, holding m1 and m2) + 200 (m3) = 1900 bytes.
    assert (
        "8 findings (2 errors, 1 warning, 5 info) from 5 checks; worst severity error; "
        "1.9 KiB held by 3 stored objects (each counted once)."
    ) in verdict
    assert "Bytes held: each stored object (system, scope, object)" in verdict
    # Per check, its own findings: personal_data holds its three rows (900 B), and stuck_mail,
    # whose findings record no size, an en dash.
    assert '<td>personal_data</td><td>info</td><td class="n">3</td><td class="n">900 B</td>' in (
        verdict
    )
    assert '<td>stuck_mail</td><td>error</td><td class="n">2</td><td class="n">\u2013</td>' in (
        verdict
    )


def _with_manifest(audit: Path, **manifest: object) -> Path:
    (audit / "manifest.json").write_text(json.dumps(manifest))
    return audit


def test_checks_that_did_not_run_are_said_right_after_the_verdict(tmp_path: Path) -> None:
    why = "no blob listing (give --blob-listing or --blobs)"
    not_run = {"orphaned_blob": why, "consumed_blob": why, "dangling_blob_ref": why}
    checks = ["stuck_mail", "unreclaimed_slice", *not_run]
    audit = _with_manifest(
        _audit(tmp_path, [_finding("stuck_mail", "error")]), checks=checks, not_run=not_run
    )
    out = tmp_path / "r.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    page = out.read_text()
    verdict = page.split("<h2>Verdict</h2>", 1)[1].split("<h2>Inputs</h2>", 1)[0]
    assert "1 finding (1 error) from 1 of the 2 checks run;" in verdict
    assert verdict.index("verdict") < verdict.index("<h3>Not checked</h3>")
    assert verdict.index("<h3>Not checked</h3>") < verdict.index('<div class="check')
    assert "3 checks did not run" in verdict
    for check in ("consumed_blob", "dangling_blob_ref", "orphaned_blob"):
        assert f"<tr><td>{check}</td><td>{why}</td></tr>" in verdict
    # A clean audit says how many checks it ran; a manifest without not_run shows no section.
    for name in ("clean", "older"):
        (tmp_path / name).mkdir()
    clean = _with_manifest(_audit(tmp_path / "clean", []), checks=checks, not_run=not_run)
    assert main(["report", "html", str(clean), "--out", str(out)]) == 0
    page = out.read_text()
    assert "Clean: the audit found nothing in the 2 checks run." in page
    assert "<h3>Not checked</h3>" in page
    older = _with_manifest(_audit(tmp_path / "older", [_finding("stuck_mail", "error")]),
                           checks=checks)  # fmt: skip
    assert main(["report", "html", str(older), "--out", str(out)]) == 0
    page = out.read_text()
    assert "Not checked" not in page and "from 1 of the 5 checks run;" in page


def test_durations_read_as_durations_and_wide_tables_print_whole(tmp_path: Path) -> None:
    rows = [
        _finding("expired_in_queue", "warning", system="postfix", subject=f"/q/deferred/{n}",
                 bytes=744, detail={"age_seconds": age, "lifetime": "maximal_queue_lifetime",
                                    "lifetime_seconds": 432000,
                                    "damage": f"record 'S' claims 13329 bytes, the file ends "
                                              f"{n} bytes after its length"})
        for n, age in ((1, 701970), (2, 64799))
    ] + [_finding("old_hold", "warning", system="postfix", subject="/q/hold/3", bytes=753,
                  detail={"age_days": 3})]  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["report", "html", str(_audit(tmp_path, rows)), "--out", str(out)]) == 0
    page = out.read_text()
    details = page.split("<h3>expired_in_queue (2)</h3>", 1)[1]
    # An age is a duration a person reads (the exact seconds stay in findings.json); a key
    # that would then repeat another keeps a word of its own.
    assert "<th>age</th>" in details and "<th>age seconds</th>" not in details
    assert "<td>8d 3h</td>" in details and "<td>18h</td>" in details
    assert "lifetime: maximal_queue_lifetime; lifetime duration: 5d" in details
    # A column of sentences keeps a width a sentence reads at.
    assert '<td class="p">record &#x27;S&#x27; claims 13329 bytes' in details
    # One finding reads down the page, one line per column.
    one = page.split("<h3>old_hold (1)</h3>", 1)[1]
    assert '<table class="record"><tr><th>severity</th><td>warning</td></tr>' in one
    assert "<tr><th>age</th><td>3d</td></tr>" in one
    # On paper nothing scrolls: tables wrap (long tokens anywhere) to a landscape page.
    assert "@page{size:landscape" in page and "@media print{" in page
    assert ".wide{overflow:visible}" in page and "td.k{overflow-wrap:anywhere}" in page
