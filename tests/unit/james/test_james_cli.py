"""`audit james`, `plan` and their options through the one runner and planning, on snapshots
(no server): a plan made from an audit's findings is the plan of `plan james SOURCE`, every
action cites findings of that audit, an erasure goes from its personal_data findings to row
deletions, and what is wrong with the options or the inputs fails before Spark starts."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqforensics.cli import main
from mqforensics.retention.manifest import read_plan

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"
LISTING = SAMPLE / "blob_inventory.parquet"
POLICY = SAMPLE / "policy.toml"
SOURCE = ["--snapshot", str(SAMPLE), "--blob-listing", str(LISTING)]
UTC = dt.UTC


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_plan_from_the_findings_is_the_plan_of_the_source(spark, tmp_path, capsys):
    audit = tmp_path / "audit"
    argv = ["audit", "james", *SOURCE, "--erasure-policy", str(POLICY), "--out", str(audit)]
    assert main(argv) == 1  # errors (stuck, invisible, dangling, config) were found
    from_findings, from_source = tmp_path / "from-findings", tmp_path / "from-source"
    assert main(["plan", "--findings", str(audit), "--policy", str(POLICY),
                 "--out", str(from_findings)]) == 0  # fmt: skip
    assert main(["plan", "james", *SOURCE, "--policy", str(POLICY),
                 "--out", str(from_source)]) == 0  # fmt: skip
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (from_findings / name).read_bytes() == (from_source / name).read_bytes(), name
    # `plan james SOURCE` audited into PLAN.audit, with the policy's data subjects searched.
    again = json.loads((tmp_path / "from-source.audit" / "findings.json").read_text())
    found = json.loads((audit / "findings.json").read_text())
    assert sorted(f["id"] for f in again) == sorted(f["id"] for f in found)

    ids = {f["id"]: f for f in found}
    plan = read_plan(from_findings)
    actions, deferred = list(plan.actions()), list(plan.deferred())
    assert actions and deferred
    for item in [*actions, *deferred]:
        assert item.findings and all(ident in ids for ident in item.findings), item
    checks = {ids[i]["check"] for a in actions for i in a.findings}
    assert checks == {"unreclaimed_slice", "orphaned_blob", "personal_data"}
    assert {ids[i]["check"] for d in deferred for i in d.findings} == {"personal_data"}
    header = plan.header
    assert header["system"] == "james" and header["as_of"] == "2026-11-03T12:00:00Z"
    assert {k: v for k, v in header["inputs"].items() if k not in ("audit", "source")} == {
        "cassandra": None, "keyspace": "apache_james", "snapshot": str(SAMPLE),
        "snapshot_time": "2026-11-03T12:00:00Z", "blobs": str(LISTING),
        "references_complete": True,
    }  # fmt: skip
    assert header["inputs"]["audit"]["directory"] == str(audit.resolve())
    manifest = json.loads((audit / "manifest.json").read_text())
    assert [i["kind"] for i in manifest["inputs"]] == ["snapshot", "blob listing"]
    assert all(i["fingerprint"].startswith("sha256:") for i in manifest["inputs"])
    assert manifest["objects"] == 320 + 3  # view rows and queues
    for directory in (audit, from_findings):
        text = "".join(p.read_text() for p in directory.iterdir() if p.is_file())
        assert "victor@" not in text.lower()
    printed = capsys.readouterr().out
    assert f"mqforensics report plan {from_findings}" in printed


# -- an erasure, end to end ------------------------------------------------------------------

SUBJECT = "Erased.Person@Example.org"
AS_OF = dt.datetime(2026, 11, 21, 12, tzinfo=UTC)
EVENT = (
    '{{"type":"cassandra-mail-queue-view-configuration","eventId":0,"sliceWindow":3600.0,'
    '"bucketCount":1,"updateBrowseStartPace":1000}}'
)
ERASURE_POLICY = f"""version = 1
tombstone_budget_per_partition = 1

[[rules]]
id = "erasure-7"
kind = "erase_subject"
legal_basis = "GDPR Art. 17, request 7"
addresses = ["{SUBJECT}"]
"""


def at(day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


class Snapshot:
    """A small V4 export: rows of the view (consumed or live), and passthrough blobs."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.deleted: list[tuple] = []
        self.blobs: list[dict] = []
        self.ids: dict[str, str] = {}

    def mail(self, label: str, trs: dt.datetime, minute: int, *, consumed: bool,
             recipient: str = "someone@example.net", listed: bool = False) -> None:  # fmt: skip
        ident = str(uuid.uuid4())
        header, body = str(uuid.uuid4()), str(uuid.uuid4())
        self.ids[label] = ident
        self.entries.append((
            "spool", trs, 0, ident, trs + dt.timedelta(minutes=minute), f"Mail-{label}", "root",
            header, body, {}, None, "sender@example.net", [recipient], "host", "10.0.0.1", None,
            [(recipient, "X-H", "1")], "v4",
        ))  # fmt: skip
        if consumed:
            self.deleted.append(("spool", ident))
        if listed:
            for key in (header, body):
                self.blobs.append({"bucket": "default", "key": key, "size": 100,
                                   "last_modified": at(1), "etag": key[:8],
                                   "storage_class": "STANDARD"})  # fmt: skip

    def write(self, spark, directory: Path) -> tuple[Path, Path]:
        from mqforensics.systems.james import schema
        from mqforensics.systems.james.frames import JamesState
        from mqforensics.systems.james.snapshot import write_parquet_snapshot

        state = JamesState(
            entries=spark.createDataFrame(self.entries, schema.ENTRIES),
            deleted=spark.createDataFrame(self.deleted, schema.DELETED),
            browse_start=spark.createDataFrame([("spool", at(21))], schema.BROWSE_START),
            content_start=spark.createDataFrame([("spool", at(18))], schema.CONTENT_START),
            config_history=spark.createDataFrame([], schema.CONFIG_HISTORY),
            as_of=AS_OF,
        )
        events = spark.createDataFrame(
            [("CassandraMailQueueViewConfiguration", 0, None, EVENT.format())],
            schema.EVENT_STORE,
        )
        write_parquet_snapshot(state, events, directory)
        listing = directory.parent / "listing.parquet"
        pq.write_table(pa.Table.from_pylist(self.blobs), listing)
        return directory, listing


def test_an_erasure_goes_from_personal_data_findings_to_row_deletions(spark, tmp_path):
    s = Snapshot()
    # A fully consumed partition before browseStart holding the subject: deleted whole, with
    # the content of the subject's mail.
    s.mail("whole", at(18), 1, consumed=True, recipient=SUBJECT, listed=True)
    s.mail("whole-other", at(18), 2, consumed=True)
    # A partition that also holds live mail: one row within the budget (1), one over it.
    s.mail("row-1", at(18, 1), 1, consumed=True, recipient=SUBJECT.upper())
    s.mail("row-2", at(18, 1), 2, consumed=True, recipient=f" {SUBJECT} ")
    s.mail("live-other", at(18, 1), 3, consumed=False)
    # Live mail of the subject, and consumed mail at browseStart: deferred.
    s.mail("live", at(21), 1, consumed=False, recipient=SUBJECT)
    s.mail("at-browse", at(21), 2, consumed=True, recipient=SUBJECT)
    snapshot, listing = s.write(spark, tmp_path / "snapshot")
    policy = tmp_path / "policy.toml"
    policy.write_text(ERASURE_POLICY)
    audit, plan_dir = tmp_path / "audit", tmp_path / "plan"
    # 1: the live mail before browseStart is invisible_mail and stuck_mail (errors).
    assert main(["audit", "james", "--snapshot", str(snapshot), "--blob-listing", str(listing),
                 "--erasure-policy", str(policy), "--out", str(audit)]) == 1  # fmt: skip
    found = json.loads((audit / "findings.json").read_text())
    personal = {f["detail"]["enqueueid"]: f for f in found if f["check"] == "personal_data"}
    ids = s.ids
    assert sorted(personal) == sorted(ids[k] for k in ("whole", "row-1", "row-2", "live",
                                                       "at-browse"))  # fmt: skip
    assert main(["plan", "--findings", str(audit), "--policy", str(policy),
                 "--out", str(plan_dir)]) == 0  # fmt: skip
    plan = read_plan(plan_dir)
    by_id = {f["id"]: f for f in found}
    # The budget takes the rows in enqueueid order.
    first, over = sorted([ids["row-1"], ids["row-2"]])
    rows = [a for a in plan.actions() if a.kind == "james.delete_row"]
    assert [(a.target["enqueueid"], a.findings) for a in rows] == [
        (first, (personal[first]["id"],))
    ]
    assert rows[0].rules == ("erasure-7",) and rows[0].precondition["marker"] is True
    deferred = {d.target["enqueueid"]: (d.reason.split(":")[0].split(" of ")[0], d.findings)
                for d in plan.deferred()}  # fmt: skip
    browsing = ids["at-browse"]
    assert deferred == {
        over: ("tombstone budget", (personal[over]["id"],)),
        ids["live"]: ("live mail", (personal[ids["live"]]["id"],)),
        browsing: ("partition at or after browseStart", (personal[browsing]["id"],)),
    }  # fmt: skip
    (partition,) = [a for a in plan.actions() if a.kind == "james.delete_partition"]
    assert partition.target["timerangestart"] == "2026-11-18T00:00:00.000Z"
    assert {by_id[i]["check"] for i in partition.findings} == {"unreclaimed_slice",
                                                               "personal_data"}  # fmt: skip
    blobs = [a for a in plan.actions() if a.kind == "james.delete_blob"]
    assert len(blobs) == 2 and all(a.reason == "content of mail of an erased data subject"
                                   for a in blobs)  # fmt: skip
    for blob in blobs:
        assert {by_id[i]["check"] for i in blob.findings} == {"consumed_blob", "personal_data"}
        assert blob.precondition["referrers"] == [{"queue": "spool", "enqueueid": ids["whole"]}]
    for directory in (audit, plan_dir):
        text = "".join(p.read_text() for p in directory.iterdir() if p.is_file()).lower()
        assert SUBJECT.lower() not in text
    # An audit that did not look for the subject cannot plan the erasure: refused, not missed.
    blind = tmp_path / "blind"
    assert main(["audit", "james", "--snapshot", str(snapshot), "--out", str(blind)]) == 1
    assert main(["plan", "--findings", str(blind), "--policy", str(policy),
                 "--out", str(tmp_path / "never")]) == 2  # fmt: skip


# -- what fails before Spark starts ----------------------------------------------------------


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--scan"], "--scan"), (["--since", "2026-11-01T00:00:00Z"], "--since"),
     (["--queue", "spool"], "--queue"), (["--consistency", "ONE"], "--consistency"),
     (["--partitions-per-query", "4"], "--partitions-per-query")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["audit", "validate", "plan"])
def test_live_only_options_are_refused_with_a_snapshot(
    no_spark, tmp_path, capsys, extra, flag, command
):
    argv = [command, "james", *SOURCE, *extra, "--out", str(tmp_path / "out")]
    if command == "plan":
        argv += ["--policy", str(POLICY)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"mqforensics: error: ConfigError: {flag} is for a live read (--cassandra): it cannot be "
        "given with --snapshot"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad", ["0", "-2", "many"])
def test_a_bad_partitions_per_query_fails_before_spark_starts(no_spark, tmp_path, capsys, bad):
    argv = ["audit", "james", "--cassandra", "127.0.0.1:1", f"--partitions-per-query={bad}",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"mqforensics: error: ConfigError: --partitions-per-query {bad!r} is not a positive integer"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--snapshot", "snapshot directory {path} does not exist or is not a directory"),
        ("--blob-dir", "--blob-dir {path} does not exist or is not a directory"),
        ("--blob-listing", "blob listing {path} does not exist"),
        ("--blob-inventory", "--blob-inventory {path} does not exist"),
    ],
)
def test_a_missing_path_fails_before_spark_starts(no_spark, tmp_path, capsys, option, message):
    missing = tmp_path / "missing"
    source = ["--snapshot", str(SAMPLE)] if option != "--snapshot" else []
    argv = ["audit", "james", *source, option, str(missing), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"mqforensics: error: InputError: {message.format(path=missing)}"


def test_a_snapshot_without_its_tables_and_other_refusals(no_spark, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["audit", "james", "--snapshot", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "lacks table(s) enqueuedmailsv4 or enqueuedmailsv3" in capsys.readouterr().err
    argv = ["audit", "james", *SOURCE, "--blob-split", "hex", "--out", str(tmp_path / "o")]
    assert main([a for a in argv if a not in ("--blob-listing", str(LISTING))]) == 2
    assert "--blob-split is how --blobs s3://BUCKET is listed" in capsys.readouterr().err
    assert main(["audit", "james", "--cassandra", "h:x", "--out", str(tmp_path / "o")]) == 2
    assert "bad Cassandra port" in capsys.readouterr().err
    assert main(["audit", "james", *SOURCE, "--out", str(POLICY)]) == 2  # a file, not a dir
    assert "exists and is not a directory" in capsys.readouterr().err


def test_every_option_has_help_text():
    from mqforensics.cli import build_parser

    parser = build_parser()
    for command in ("audit", "validate", "plan"):
        sub = next(a for a in parser._actions if getattr(a, "choices", None))
        james = sub.choices[command]._subparsers._group_actions[0].choices["james"]
        for action in james._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{command} james {action.option_strings[0]} has no help"


def test_a_snapshot_holding_nothing_is_nothing_to_audit(spark, tmp_path, capsys):
    empty = tmp_path / "empty"
    shutil.copytree(SAMPLE, empty, ignore=shutil.ignore_patterns("blobs"))
    for table in ("enqueuedmailsv4", "browsestart", "deletedmailsv2", "contentstart"):
        path = empty / f"{table}.parquet"
        schema = pq.read_schema(next(path.glob("*.parquet")))
        shutil.rmtree(path)
        path.mkdir()
        pq.write_table(schema.empty_table(), path / "part-0.parquet")
    assert main(["audit", "james", "--snapshot", str(empty), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"mqforensics: error: InputError: nothing to audit: snapshot {empty} (enqueuedmailsv4) "
        "holds nothing james keeps"
    )
    assert not (tmp_path / "o" / "findings.json").exists()
