"""The Trends section of `mqforensics report html`: for an audit that appended to a run history,
its store's series with the alerts marked and the alerts firing at its latest run; a history
that can no longer be read is one line in the section, and the report is written all the same
(exit 0); an audit with no history has no section and starts no Spark."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pytest

import mqforensics
from mqforensics.cli import main
from mqforensics.history.collect import Run
from mqforensics.history.store import append, location
from mqforensics.metrics import Metric

ROOT = Path(__file__).resolve().parents[3]
CYRUS_DB = ROOT / "datasets" / "cyrus" / "sample" / "backend1" / "mailboxes.db"
DAY1 = dt.datetime(2027, 3, 1, 6, tzinfo=dt.UTC)
SCOPE = "cluster-eu1"
PNG = re.compile(r'<img alt="trend of ([a-z_]+)" src="data:image/png;base64,[A-Za-z0-9+/=]{2000,}"')
# Text the page must never show for a missing value.
NEVER = re.compile(r"(?<![\w-])(nan|None|NaT)(?![\w-])")


def james_run(number: int) -> Run:
    """Day `number` of a James store whose spool's browseStart stops moving on day 3 (so the
    bundled james-browse-start-stuck fires from day 7), whose queue grows, and whose checks
    find a little more each day (one check never finds anything)."""
    as_of = DAY1 + dt.timedelta(days=number - 1)
    browse = (DAY1 + dt.timedelta(days=min(number, 3) - 1)).timestamp()
    figures = [
        Metric("browse_start", browse, "instant", queue="spool"),
        Metric("browse_start_lag", as_of.timestamp() - browse, "seconds", queue="spool"),
        Metric("live_mails", 10 + 3 * number, "count", queue="spool"),
        Metric("live_mails", 4, "count", queue="outgoing"),
        Metric("findings_total", 2 + number, "count"),
        Metric("bytes_held", 2048 * number**2, "bytes"),
        Metric("reclaimable_bytes", 1000 * number, "bytes", check="orphaned_blob"),
        Metric("reclaimable_bytes", 0, "bytes", check="unreclaimed_slice"),
        Metric("findings", number, "count", check="orphaned_blob", item="warning"),
        Metric("objects_read", 100, "count"),
    ]
    return Run("james", "audit", SCOPE, as_of, tuple(figures))


def planted_audit(root: Path, runs: int = 7) -> tuple[Path, Path]:
    """A history of `runs` daily James runs of the store `SCOPE` (and a validation of it, and
    another store), and the directory of the audit whose run is the last: a clean audit
    (no finding) whose manifest names the history. Returns (audit directory, history)."""
    history = root / "history"
    where = location(history)
    assert where is not None
    last = None
    for number in range(1, runs + 1):
        last = james_run(number)
        append(last, where)
    checked = [Metric("expectation_passed", 0, "success", check="suite", item="x on y")]
    append(Run("james", "validate", SCOPE, DAY1 + dt.timedelta(hours=1), tuple(checked)), where)
    other = [Metric("browse_start", DAY1.timestamp(), "instant", queue="spool")]
    for number in range(1, 7):
        append(Run("james", "audit", "elsewhere", DAY1 + dt.timedelta(days=number), tuple(other)),
               where)  # fmt: skip
    assert last is not None
    audit = root / "audit"
    audit.mkdir()
    (audit / "findings.json").write_text("[]\n")
    recorded = {"location": str(history), "scope": SCOPE, "run_id": last.run_id,
                "figures": len(last.metrics)}  # fmt: skip
    manifest = {"format": "mqforensics-audit", "system": "james", "history": recorded}
    (audit / "manifest.json").write_text(json.dumps(manifest))
    return audit, history


def trends_section(page: str) -> str:
    assert page.count("<h2>Trends: ") == 1, "no Trends section"
    return page.split("<h2>Trends: ", 1)[1].split("<h2>", 1)[0].split("</body>", 1)[0]


def visible(markup: str) -> str:
    """The text of `markup` without its tags and images."""
    return re.sub(r"<[^>]+>", " ", re.sub(r'src="[^"]*"', "", markup))


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


def test_the_section_shows_the_stores_trends_and_the_firing_alert(
    spark, tmp_path: Path, capsys
) -> None:
    audit, history = planted_audit(tmp_path)
    out = tmp_path / "report.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"trends     {audit}: " in printed and "2 alerts at its latest audit" in printed
    page = out.read_text()
    section = trends_section(page)
    text = visible(section)
    assert f"7 audits of the store {SCOPE} (james) in the history {history}" in text
    assert "this audit is the one judged at 2027-03-07T06:00:00Z." in text
    # The alerts firing at the store's latest run, each named with its metric and values.
    assert "Alerts at the store's latest audit (2 alerts)" in text
    table = section.split("<table>", 1)[1].split("</table>", 1)[0]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in table.split("<tr>")[2:]]
    # The store and its latest run are said above the table: each series by its labels.
    assert [row[:4] for row in rows] == [
        ["james-browse-start-stuck", "warning", "browse_start", "queue spool"],
        ["queue-grows", "warning", "live_mails", "queue spool"],
    ]
    assert rows[0][4] == "unchanged in each of the last 5 runs"
    assert rows[0][5] == "2027-03-03T06:00:00Z (5 times)"  # instants, in UTC
    assert rows[0][6] == "2027-03-03T06:00:00Z"  # since
    assert rows[0][7].startswith("A queue&#x27;s browseStart has not moved in five runs")
    assert rows[1][5] == "16, 19, 22, 25, 28, 31"
    # One embedded PNG per trended metric: those alerts are on first, then the verdict's
    # figures, then the system's own; no expectation, nothing of the other store.
    assert PNG.findall(section) == [
        "browse_start", "live_mails", "findings_total", "bytes_held", "reclaimable_bytes",
        "browse_start_lag",
    ]  # fmt: skip
    assert "expectation_passed" not in section and "elsewhere" not in section
    assert NEVER.search(visible(page)) is None


def test_report_trends_leaves_out_what_is_at_zero_and_keeps_alerted_series(
    spark, tmp_path: Path
) -> None:
    from mqforensics.api_history import report_trends

    audit, _ = planted_audit(tmp_path)
    trends = report_trends(json.loads((audit / "manifest.json").read_text()), spark=spark)
    assert trends is not None and trends.error is None
    assert (trends.runs, trends.system, trends.scope) == (7, "james", SCOPE)  # no validation
    by_metric = {trend.metric: trend for trend in trends.trends}
    reclaimable = by_metric["reclaimable_bytes"]
    assert set(reclaimable.points["check"]) == {"orphaned_blob"}
    assert reclaimable.note == "at 0 in every audit, not drawn: check unreclaimed_slice"
    stuck = [a for a in by_metric["browse_start"].alerts if a.rule == "james-browse-start-stuck"]
    assert [a.as_of.day for a in stuck] == [7]  # marked at every run it fired at
    assert {a.rule for a in trends.alerts} == {"james-browse-start-stuck", "queue-grows"}
    figures = trends.figures()
    assert [metric for metric, _ in figures] == list(by_metric)
    assert mqforensics.api_history.report_trends({"system": "james", "history": None}) is None


def test_a_history_gone_since_the_audit_is_one_line_and_the_report_is_written(
    tmp_path: Path, capsys, no_spark
) -> None:
    audit, history = planted_audit(tmp_path)
    shutil.rmtree(history)
    out = tmp_path / "report.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"trends     {audit}: trends not shown: history {history} does not exist" in printed
    section = trends_section(out.read_text())
    lines = [line for line in section.splitlines()[1:] if line.strip()]
    assert lines == [
        f'<p class="warn">The history this audit appended to (store {SCOPE}) could not be read: '
        f"history {history} does not exist.</p>"
    ]


def test_a_history_that_is_no_longer_one_is_one_line(tmp_path: Path, no_spark) -> None:
    audit, history = planted_audit(tmp_path)
    shutil.rmtree(history)
    history.mkdir()
    (history / "notes.txt").write_text("someone's files\n")
    out = tmp_path / "report.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    section = trends_section(out.read_text())
    assert section.count('<p class="warn">') == 1 and "could not be read" in section
    assert "<img" not in section


def test_an_audit_that_appended_nowhere_has_no_section_and_starts_no_spark(
    tmp_path: Path, no_spark
) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "findings.json").write_text("[]\n")
    (audit / "manifest.json").write_text(json.dumps({"system": "james", "history": None}))
    out = tmp_path / "report.html"
    assert main(["report", "html", str(audit), "--out", str(out)]) == 0
    assert "Trends" not in out.read_text()


def test_a_real_audit_on_a_seeded_history_shows_what_it_found_new(
    spark, tmp_path: Path, capsys
) -> None:
    """The Cyrus sample audited onto a history holding five earlier runs of its store that
    found nothing: what it finds now is new (the bundled check-finds-something-new)."""
    history = tmp_path / "history"
    where = location(history)
    assert where is not None
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    for back in range(5, 0, -1):
        quiet = [Metric("findings_total", 0, "count"), Metric("bytes_held", 0, "bytes"),
                 Metric("mailboxes", 20, "count")]  # fmt: skip
        append(Run("cyrus", "audit", "backend1", now - dt.timedelta(days=back), tuple(quiet)),
               where)  # fmt: skip
    out = tmp_path / "audit"
    audit = mqforensics.audit("cyrus", inputs=[CYRUS_DB], out=out, history=str(history),
                              history_scope="backend1", spark=spark)  # fmt: skip
    audit.close()
    assert audit.rows, "the Cyrus sample has findings"
    page_file = tmp_path / "report.html"
    capsys.readouterr()
    assert main(["report", "html", str(out), "--out", str(page_file)]) == 0
    section = trends_section(page_file.read_text())
    text = visible(section)
    assert "6 audits of the store backend1 (cyrus)" in text
    found = {r["check"] for r in audit.rows}
    for check in found:
        assert f"check {check}" in text, check  # each alert names its series
    assert "check-finds-something-new" in text and "<td>findings</td>" in section
    drawn = PNG.findall(section)
    assert drawn[0] == "findings" and {"findings_total", "bytes_held", "mailboxes"} <= set(drawn)
    assert NEVER.search(visible(page_file.read_text())) is None
