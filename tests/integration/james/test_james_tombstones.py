"""Tombstones, measured: a plan purged on the real Cassandra, and what Cassandra itself reports.

The generated state of the purge tests (consumed partitions before browseStart, erased-subject
rows in a partition that also holds live mail) is loaded into the session's Cassandra 5.0 with
compaction off on the measured tables. Around the purge, the tables are flushed and their
SSTables' tombstones read with Cassandra's sstablemetadata: the difference per table is the
plan's prediction, to the tombstone. The journal's ``measured`` records (the James executor's
`measure`: Cassandra's tracing of the exact queries James's browse issues) show browse reading
no tombstone before or after, and the plan report shows both.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter
from typing import Any

import pytest

from datasets.james.load import load_into_cassandra
from mqforensics import cli
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import read_plan
from mqforensics.services import cassandra as cassandra_service
from mqforensics.systems.james.config_history import history_rows
from mqforensics.views.plan_report import render_html, render_text
from tests.integration.james import james_purge_support as support

pytestmark = pytest.mark.integration

MEASURED = ("enqueuedmailsv4", "deletedmailsv2")


def _predicted(plan: Any) -> dict[str, int]:
    """Tombstones per table the plan's actions write, from the plan alone: a partition delete
    is one partition tombstone and one per marker (a deletedmailsv2 partition); a row delete a
    row tombstone and its marker's."""
    counts: Counter[str] = Counter({table: 0 for table in MEASURED})
    for action in plan.actions():
        if action.kind == "james.delete_partition":
            counts[action.target["table"]] += 1
            counts["deletedmailsv2"] += len(action.precondition["markers"])
        elif action.kind == "james.delete_row":
            counts[action.target["table"]] += 1
            counts["deletedmailsv2"] += 1
    return dict(counts)


def _browsed(state: Any, until: dt.datetime) -> tuple[int, int]:
    """(rows, live mails) in the partitions James's browse reads at `until`: from each queue's
    browseStart on the current slice grid, buckets 0..bucketCount-1."""
    *_, window, buckets, _pace = history_rows(state.event_store, "generated")[-1]
    browse = {b["queuename"]: int(b["browsestart"].timestamp()) for b in state.browse_start}
    consumed = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    end = int(until.timestamp())
    rows = live = 0
    for e in state.entries:
        start = browse.get(e["queuename"])
        ts = e["timerangestart"].timestamp()
        if (
            start is not None
            and ts == int(ts)
            and (start // window) * window <= ts <= end
            and int(ts) % window == 0
            and 0 <= e["bucketid"] < buckets
        ):
            rows += 1
            live += (e["queuename"], e["enqueueid"]) not in consumed
    return rows, live


def test_a_purge_writes_the_predicted_tombstones_and_browse_reads_none(
    cassandra, cassandra_endpoint, tmp_path, monkeypatch, capsys
):
    state = support.build_state()
    keyspace = f"tombstones_{uuid.uuid4().hex[:10]}"
    load_into_cassandra(state, cassandra_endpoint, keyspace)
    try:
        cassandra_service.nodetool(cassandra, "disableautocompaction", keyspace, *MEASURED)
        monkeypatch.setenv("MQF_CASSANDRA_USERNAME", str(cassandra["username"]))
        monkeypatch.setenv("MQF_CASSANDRA_PASSWORD", str(cassandra["password"]))
        policy = tmp_path / "policy.toml"
        policy.write_text(support.policy_text())
        plan_dir = tmp_path / "plan"
        as_of = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
        assert cli.main([
            "plan", "james", "--policy", str(policy),
            "--cassandra", f"{cassandra['host']}:{cassandra['port']}", "--keyspace", keyspace,
            "--scan", "--as-of", as_of.strftime("%Y-%m-%dT%H:%M:%SZ"), "--out", str(plan_dir),
        ]) == 0  # fmt: skip
        plan = read_plan(plan_dir)
        kinds = Counter(a.kind for a in plan.actions())
        assert kinds["james.delete_partition"] >= 2 and kinds["james.delete_row"] >= 1, kinds
        predicted = _predicted(plan)
        assert sum(predicted.values()) == sum(a.tombstones for a in plan.actions())

        def sstable_tombstones() -> dict[str, int]:
            cassandra_service.flush(cassandra, keyspace, *MEASURED)
            return {
                t: cassandra_service.sstable_tombstones(cassandra, keyspace, t) for t in MEASURED
            }

        before = sstable_tombstones()

        # A dry run shows the measurement before the first action, and writes nothing. Its
        # tracing is held to --trace-queries, and says it left partitions holding rows out.
        capsys.readouterr()
        assert cli.main(["purge", str(plan_dir), "--trace-queries", "10"]) == 0
        dry = capsys.readouterr().out
        traced = re.findall(r"observed \w+: browse queries traced (\d+)", dry)
        assert len(traced) == 3 and sum(map(int, traced)) <= 10, dry
        assert "INCOMPLETE: partitions holding rows left untraced (10 traced queries" in dry, dry
        for table in MEASURED:
            assert (
                f"measured before, JamesExecutor predicted {table}: tombstones written "
                f"{predicted[table]}" in dry
            ), dry
        assert "measured before, JamesExecutor observed enqueuedmailsv4:" in dry, dry
        assert not (plan_dir / "journal.jsonl").exists()
        assert sstable_tombstones() == before

        assert cli.main(["approve", str(plan_dir), "--by", "integration-test"]) == 0
        assert cli.main(["purge", str(plan_dir), "--apply"]) == 0
        after = sstable_tombstones()
        # Cassandra's own count of the tombstones the purge wrote, per table: the prediction.
        assert {t: after[t] - before[t] for t in MEASURED} == predicted

        journal_path = plan_dir / "journal.jsonl"
        journal = read_journal(journal_path)
        measured = [r for r in journal if r["event"] == "measured"]
        assert [r["phase"] for r in measured] == ["before", "after"]
        assert journal.index(measured[0]) < min(
            i for i, r in enumerate(journal) if r["event"] == "started"
        )
        assert journal.index(measured[1]) > max(
            i for i, r in enumerate(journal) if r["event"] == "verified"
        )
        rows, live = _browsed(state, dt.datetime.now(dt.UTC))
        assert live > 0
        for record in measured:
            figures = record["JamesExecutor"]
            assert figures["predicted"] == {
                t: {"tombstones written": n} for t, n in predicted.items()
            }
            trace = figures["detail"]["browse_trace"]
            assert trace["complete"] is True and trace["partitions_with_rows"] > 0, trace
            assert trace["queries_allowed"] == 2000  # the default of --trace-queries
            observed = figures["observed"]
            # James's browse, traced by Cassandra: no tombstone read, before or after.
            for table in ("browsestart", *MEASURED):
                assert observed[table]["tombstone cells read by browse"] == 0, (record, table)
                assert trace["tables"][table]["untraced"] == 0, trace
            # Its live rows are the browsed rows, less the consumed ones: the live mails.
            assert observed["enqueuedmailsv4"]["live rows read by browse"] == rows
            assert (
                rows - observed["deletedmailsv2"]["live rows read by browse"]
                == observed["browse"]["mails returned"]
                == live
            )

        # A rerun of the finished purge writes nothing, so no second "before".
        written = journal_path.read_bytes()
        assert cli.main(["purge", str(plan_dir), "--apply"]) == 0
        assert journal_path.read_bytes() == written

        # The plan report shows the prediction and both measurements.
        text = render_text(plan, journal)
        assert "Measured (what the live system reported)" in text
        for table in MEASURED:
            assert re.search(
                rf"JamesExecutor\s+{table}\s+tombstones written\s+{predicted[table]}\s+-\s+-", text
            ), text
            assert re.search(
                rf"JamesExecutor\s+{table}\s+tombstone cells read by browse\s+-\s+0\s+0", text
            ), text
        assert re.search(rf"browse\s+mails returned\s+-\s+{live}\s+{live}", text), text
        page = render_html(plan, journal)
        assert "Measured (what the live system reported)" in page
        for report in (text, page):
            section = report[report.index("Measured (what the live system reported)") :]
            assert not re.search(r"\b(nan|NaN|None|null)\b", section), section
    finally:
        cluster, session = cassandra_endpoint.connect()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        finally:
            cluster.shutdown()
