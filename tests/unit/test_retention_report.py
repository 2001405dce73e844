import dataclasses
import datetime as dt
import json
import re
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.privacy import pseudonymize_address
from mqforensics.retention.manifest import Action, Deferred, approve, read_plan, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.views.plan_report import (
    render_html,
    render_html_body,
    render_text,
    summary_line,
)

POLICY = Policy(
    "policy.toml",
    "ab" * 32,
    (
        Rule(
            "consumed-30d",
            "consumed_mail",
            "GDPR Art. 5(1)(e) <kept 30 days> & no more",
            older_than=dt.timedelta(days=30),
        ),
        Rule("erasure-1", "erase_subject", "GDPR Art. 17", subjects=("cd" * 32,)),
    ),
)
AS_OF = dt.datetime(2026, 11, 22, 2, 30, tzinfo=dt.UTC)


def blob(number: int) -> Action:
    return Action(
        kind="james.delete_blob",
        target={"bucket": "default", "key": f"blob-{number:03d}"},
        precondition={"size": 2048, "etag": None, "orphan": False, "referrers": []},
        rules=("consumed-30d",),
        bytes=2048,
        tombstones=0,
        reason="passthrough blob of a consumed mail",
        findings=("f0123456789abcdef",),
    )


PARTITION = Action(
    kind="james.delete_partition",
    target={
        "keyspace": "apache_james",
        "table": "enqueuedmailsv4",
        "queue": "spool",
        "timerangestart": "2026-11-03T10:00:00.000Z",
        "bucketid": 3,
    },
    precondition={"enqueueids": ["e1"], "markers": ["e1"], "browsestart": "x"},
    rules=("consumed-30d", "erasure-1"),
    bytes=0,
    tombstones=2,
    reason="fully consumed partition before browseStart",
    findings=("f0123456789abcdef",),
)


def make_plan(out: Path, count: int = 3) -> Path:
    write_plan(
        out,
        system="james",
        as_of=AS_OF,
        policy=POLICY,
        inputs={"source": "snapshot /data/snap", "blobs": "s3://default", "snapshot": None},
        actions=[PARTITION, *(blob(n) for n in range(count - 1))],
        deferred=[
            Deferred("james.delete_row", {"enqueueid": "e9"}, ("erasure-1",), "live mail: X"),
            Deferred("james.delete_row", {"enqueueid": "e8"}, ("erasure-1",), "live mail: X"),
        ],
        notes=["rule orphans-7d planned nothing: references incomplete"],
    )
    return out


def test_the_text_report_shows_what_an_approver_needs(tmp_path):
    plan = read_plan(make_plan(tmp_path / "plan"))
    text = render_text(plan)
    assert f"mqforensics cleanup plan {plan.directory}" in text
    assert "*** NOT APPROVED ***" in text
    assert re.search(r"system: +james", text)
    assert re.search(r"as of: +2026-11-22T02:30:00Z", text)
    assert re.search(r"created at: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
    assert re.search(rf"plan hash: +{plan.sha256}", text)
    assert "GDPR Art. 5(1)(e) <kept 30 days> & no more" in text
    assert re.search(r"\b1 subject\b(?!s|\()", text) and "30d" in text
    assert re.search(r"source: +snapshot /data/snap", text)
    assert re.search(r"james\.delete_blob +2 +4096 +4\.0 KiB +0", text)
    assert re.search(r"james\.delete_partition +1 +0 +0 B +2", text)
    assert re.search(r"total +3 +4096 +4\.0 KiB +2", text)
    assert re.search(r"live mail: X +2", text)
    assert "rule orphans-7d planned nothing: references incomplete" in text
    assert re.search(
        r"0 +james\.delete_partition +keyspace=apache_james table=enqueuedmailsv4 queue=spool "
        r"timerangestart=2026-11-03T10:00:00\.000Z bucketid=3 +consumed-30d, erasure-1 +0",
        text,
    )
    assert re.search(
        r"2 +james\.delete_blob +bucket=default key=blob-001 +consumed-30d +2048", text
    )
    assert "Journal" not in text


def test_the_approval_is_shown_with_who_and_when(tmp_path):
    directory = make_plan(tmp_path / "plan")
    record = approve(directory, "ops-oncall", "CHG-42")
    text = render_text(read_plan(directory))
    assert f"approved by ops-oncall at {record['approved_at']} (CHG-42)" in text
    assert "NOT APPROVED" not in text


def test_an_approval_of_another_version_of_the_plan_is_shown_as_invalid(tmp_path):
    directory = make_plan(tmp_path / "plan")
    approve(directory, "ops")
    header = json.loads((directory / "plan.json").read_text())
    (directory / "plan.json").write_text(json.dumps({**header, "notes": []}))
    text = render_text(read_plan(directory))
    assert "*** APPROVAL INVALID: plan" in text and "the plan changed after approval" in text


def test_only_the_first_50_actions_are_listed(tmp_path):
    plan = read_plan(make_plan(tmp_path / "plan", count=60))
    text = render_text(plan)
    assert "Actions (first 50 of 60, in execution order)" in text
    assert "key=blob-048" in text
    assert "key=blob-049" not in text


def test_addresses_are_pseudonymised_unless_revealed(tmp_path):
    directory = make_plan(tmp_path / "plan")
    approve(directory, "carol@example.com", "requested by alice@example.org")
    journal = [
        {"event": "begin", "plan_sha256": read_plan(directory).sha256, "at": "t"},
        {"event": "started", "seq": 1, "id": blob(0).id, "at": "t"},
        {"event": "skipped", "seq": 1, "id": blob(0).id, "reason": "re-sent by bob@example.net"},
    ]
    plan = read_plan(directory)
    for render in (render_text, render_html):
        hidden = render(plan, journal)
        for address in ("alice@example.org", "bob@example.net", "carol@example.com"):
            assert address not in hidden
            assert pseudonymize_address(address) in hidden
        salted = render(plan, journal, salt="case-7")
        assert pseudonymize_address("alice@example.org", "case-7") in salted
        shown = render(plan, journal, reveal=True)
        for address in ("alice@example.org", "bob@example.net", "carol@example.com"):
            assert address in shown


def test_targets_go_through_the_hide_target_given_unless_revealed(tmp_path):
    # The system's `hide_target` comes from the caller (the views consult no registry).
    plan = read_plan(make_plan(tmp_path / "plan", count=2))
    calls = []

    def hide_target(target, salt):
        calls.append(salt)
        return {**target, "key": f"hidden-{salt}"} if "key" in target else target

    for render in (render_text, render_html, lambda *a, **k: render_html_body(*a, **k)[1]):
        assert "blob-000" in render(plan)  # none given: plain addresses only
        hidden = render(plan, salt="s1", hide_target=hide_target)
        assert "blob-000" not in hidden and "hidden-s1" in hidden
        calls.clear()
        shown = render(plan, salt="s1", reveal=True, hide_target=hide_target)
        assert "blob-000" in shown and "hidden-" not in shown and calls == []


def test_html_is_escaped_and_self_contained(tmp_path):
    directory = make_plan(tmp_path / "plan")
    approve(directory, "ops", "<script>alert(1)</script>")
    page = render_html(read_plan(directory))
    assert page.startswith("<!DOCTYPE html>")
    assert "<style>" in page
    assert "GDPR Art. 5(1)(e) &lt;kept 30 days&gt; &amp; no more" in page
    assert "<kept" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page.lower()
    assert not re.search(r"\b(src|href)=", page)
    assert "http" not in page
    assert page.count("<table") == page.count("</table>")
    assert 'class="status bad"' not in page and 'class="status ok"' in page


def test_a_journal_is_summarised_per_action_outcome(tmp_path):
    directory = make_plan(tmp_path / "plan", count=8)
    plan = read_plan(directory)
    actions = list(plan.actions())
    records = [{"event": "begin", "plan_sha256": plan.sha256, "at": "t0"}, {"event": "census"}]
    for action in actions[:6]:
        records.append({"event": "started", "seq": action.seq, "id": action.id, "at": "t"})
    # A crash, then a resumed run: seq 0 started twice, finished the second time.
    records.append({"event": "begin", "plan_sha256": plan.sha256, "at": "t1"})
    records.append({"event": "started", "seq": 0, "id": actions[0].id, "at": "t"})
    records.append({"event": "done", "seq": 0, "id": actions[0].id, "removed": {"rows": 1}})
    records.append({"event": "done", "seq": 1, "id": actions[1].id, "removed": {}})
    for seq, reason in ((2, "object changed"), (3, "object changed"), (4, "row re-enqueued")):
        records.append({"event": "skipped", "seq": seq, "id": actions[seq].id, "reason": reason})
    records[-1]["at_last_check"] = True  # seq 4 drifted during its rate wait
    records.append(
        {
            "event": "verified",
            "ok": False,
            "checked": 2,
            "problem_count": 1,
            "problems": ["seq 0: partition still has rows"],
        }
    )
    text = render_text(plan, records)
    assert re.search(r"bound to: +this plan", text)
    assert re.search(r"runs: +2", text)
    assert re.search(r"done: +2", text)
    assert re.search(r"skipped: +3", text)
    assert re.search(r"skipped at their last check: +1", text)
    assert re.search(r"failed: +0", text)
    assert re.search(r"started without outcome: +1", text)
    assert re.search(r"not reached: +2", text)
    assert re.search(
        r"object changed +2 +seq 2 james\.delete_blob bucket=default key=blob-001; "
        r"seq 3 james\.delete_blob bucket=default key=blob-002",
        text,
    )
    assert re.search(r"row re-enqueued +1 +seq 4 james\.delete_blob .*key=blob-003", text)
    assert "*** VERIFICATION FAILED ***" in text
    assert re.search(r"checked: +2", text)
    assert "seq 0: partition still has rows" in text


def test_a_journal_of_another_plan_is_flagged(tmp_path):
    plan = read_plan(make_plan(tmp_path / "plan"))
    text = render_text(plan, [{"event": "begin", "plan_sha256": "f" * 64}])
    assert re.search(r"bound to: +ANOTHER PLAN \(f{64}\)", text)


def test_summary_line(tmp_path):
    plan = read_plan(make_plan(tmp_path / "plan"))
    assert summary_line(plan) == (
        "james plan as of 2026-11-22T02:30:00Z: 3 actions (james.delete_blob 2, "
        "james.delete_partition 1), 4.0 KiB, 2 tombstones, 2 deferred"
    )
    one = read_plan(make_plan(tmp_path / "one", count=1))
    assert ": 1 action (james.delete_partition 1), 0 B, 2 tombstones," in summary_line(one)


def test_approve_and_report_commands(tmp_path, capsys):
    directory = make_plan(tmp_path / "plan")
    assert main(["report", "plan", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "NOT APPROVED" in out
    assert (directory / "report.txt").read_text() == out
    assert (directory / "report.html").read_text().startswith("<!DOCTYPE html>")

    assert main(["approve", str(directory), "--by", "ops", "--note", "CHG-1"]) == 0
    out = capsys.readouterr().out
    plan = read_plan(directory)
    assert f"plan sha256 {plan.sha256}" in out
    assert summary_line(plan) in out

    journal = tmp_path / "elsewhere.jsonl"
    journal.write_text(
        json.dumps({"event": "begin", "plan_sha256": plan.sha256})
        + "\n"
        + json.dumps({"event": "done", "seq": 0, "id": PARTITION.id})
        + '\n{"event": "sta'  # a torn last line is ignored
    )
    html = tmp_path / "r.html"
    assert (
        main(["report", "plan", str(directory), "--journal", str(journal), "--html", str(html)])
        == 0
    )
    out = capsys.readouterr().out
    assert "approved by ops" in out
    assert re.search(r"done: +1", out)
    assert "Journal" in html.read_text()


def test_report_uses_the_default_journal_and_refuses_a_modified_plan(tmp_path, capsys):
    directory = make_plan(tmp_path / "plan")
    plan = read_plan(directory)
    (directory / "journal.jsonl").write_text(
        json.dumps({"event": "begin", "plan_sha256": plan.sha256}) + "\n"
    )
    assert main(["report", "plan", str(directory)]) == 0
    assert re.search(r"bound to: +this plan", capsys.readouterr().out)

    actions = directory / "actions.jsonl"
    actions.write_text(actions.read_text().replace("blob-000", "blob-999"))
    assert main(["report", "plan", str(directory)]) == 2
    assert "PlanModified: plan" in capsys.readouterr().err
    assert main(["approve", str(directory), "--by", "ops"]) == 2
    assert not (directory / "approval.json").exists()


@pytest.mark.parametrize("reveal", [False, True])
def test_the_report_never_needs_more_than_the_plan(tmp_path, reveal):
    directory = make_plan(tmp_path / "plan", count=1)
    plan = read_plan(directory)
    empty = dataclasses.replace(plan, header={**plan.header, "inputs": {}, "notes": []})
    text = render_text(empty, [], reveal=reveal)
    assert "none recorded" in text
    assert re.search(r"done: +0", text)


def test_an_out_in_a_missing_directory_is_refused_before_anything_is_written(tmp_path, capsys):
    directory = make_plan(tmp_path / "plan")
    before = sorted(p.name for p in directory.iterdir())
    missing = tmp_path / "nowhere" / "r.html"
    assert main(["report", "plan", str(directory), "--out", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"mqforensics: error: ConfigError: --out {missing}: directory {missing.parent} does not "
        "exist (create it first)"
    )
    assert sorted(p.name for p in directory.iterdir()) == before and not missing.parent.exists()


def test_the_inputs_read_as_fields_not_json(tmp_path):
    inputs = {
        "audit": {"directory": "/audits/a1", "created_at": "2026-11-22T02:00:00Z",
                  "findings_sha256": "ef" * 32, "source": "snapshot /data/snap"},
        "queue_dirs": [{"host": "mx1", "path": "/var/spool/postfix"}],
        "references_complete": True,
        "cassandra": None,
    }  # fmt: skip
    write_plan(tmp_path / "plan", system="james", as_of=AS_OF, policy=POLICY, inputs=inputs,
               actions=[PARTITION], deferred=[], notes=[])  # fmt: skip
    plan = read_plan(tmp_path / "plan")
    text = render_text(plan)
    inputs_text = text.split("\nInputs\n", 1)[1].split("\n\n", 1)[0]
    assert "{" not in inputs_text and "[" not in inputs_text and '"' not in inputs_text
    assert re.search(r"audit directory: +/audits/a1\n", inputs_text)
    assert re.search(r"audit created at: +2026-11-22T02:00:00Z\n", inputs_text)
    assert re.search(rf"audit findings sha256: +{'ef' * 32}\n", inputs_text)
    assert re.search(r"audit source: +snapshot /data/snap\n", inputs_text)
    assert re.search(r"queue dirs: +host mx1, path /var/spool/postfix\n", inputs_text)
    assert re.search(r"references complete: +yes$", inputs_text)
    assert re.search(r"cassandra: +-", inputs_text)
    page = render_html(plan)
    assert "<tr><th>audit directory</th><td>/audits/a1</td></tr>" in page
    assert "&quot;" not in page.split("<h2>Inputs</h2>", 1)[1].split("<h2>", 1)[0]
