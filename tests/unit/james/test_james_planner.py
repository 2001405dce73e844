"""The James cleanup planner on tiny hand-built states: the checks' findings of each planted case,
and exactly the plan made from them (the planner reads findings only, never the store)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections import defaultdict

import pytest

from datasets.james import generate as gen
from mqforensics import subjects
from mqforensics.findings import read_findings, write_findings
from mqforensics.retention.manifest import read_plan, write_plan
from mqforensics.retention.policy import Policy, Rule, subject_hash
from mqforensics.spec import PlanParts
from mqforensics.systems.james import schema
from mqforensics.systems.james.checks import run_checks
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.options import Settings
from mqforensics.systems.james.plan import AFTER_BROWSE_START, NO_BROWSE_START, plan
from mqforensics.units import utc_text

UTC = dt.UTC
AS_OF = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
KEYSPACE = "apache_james"
SUBJECT = "Victor.Subject@Example.org"  # matched case- and space-insensitively
OTHER = "olga@example.net"
HISTORY = [(0, 7200, 1, 1000), (1, 3600, 2, 1000)]
KEY = bytes(range(32))  # the audit's subject key (`mqforensics.subjects`)


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def iso(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def passthrough_key(n: int) -> str:
    return str(uuid.UUID(int=(0xB10B << 64) + n, version=4))


class Builder:
    """Rows of a small state; every mail gets its own passthrough header and body ids."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.deleted: list[tuple] = []
        self.blobs: list[tuple] = []
        self.counter = 0
        self.rows: dict[str, tuple] = {}

    def mail(
        self,
        queue: str,
        trs: dt.datetime,
        enqueued: dt.datetime,
        *,
        consumed: bool,
        bucket: int = 0,
        sender: str | None = "alice@example.org",
        recipients: tuple[str, ...] = ("bob@example.com",),
        header_address: str | None = None,
        listed: bool = False,
        header_key: str | None = None,
    ) -> str:
        self.counter += 1
        # Upper case in the data: the plan must carry lower-case enqueue ids.
        ident = str(uuid.UUID(int=self.counter, version=4)).upper()
        header = header_key or passthrough_key(2 * self.counter)
        body = passthrough_key(2 * self.counter + 1)
        headers = [(header_address or recipients[0], "X-H", "1")]
        row = (
            queue, trs, bucket, ident, enqueued, f"Mail{self.counter}", "root", header, body,
            {"k": b"v"}, None, sender, list(recipients), "host", "10.0.0.1", None, headers, "v4",
        )  # fmt: skip
        self.entries.append(row)
        self.rows[ident.lower()] = row
        if consumed:
            self.deleted.append((queue, ident))
        if listed:
            self.blob(header, 100 + self.counter, at(1))
            self.blob(body, 1000 + self.counter, at(1))
        return ident.lower()

    def blob(self, key: str, size: int, modified: dt.datetime, kind: str = "passthrough") -> None:
        self.blobs.append(("default", key, size, modified, f"etag-{key[:8]}", "STANDARD", kind,
                           None, None, None))  # fmt: skip

    def state(
        self,
        spark,
        browse: dict[str, dt.datetime],
        content: dict[str, dt.datetime],
        *,
        with_blobs: bool = True,
        references_complete: bool = True,
    ) -> JamesState:
        return JamesState(
            entries=spark.createDataFrame(self.entries, schema.ENTRIES),
            deleted=spark.createDataFrame(self.deleted, schema.DELETED),
            browse_start=spark.createDataFrame(list(browse.items()), schema.BROWSE_START),
            content_start=spark.createDataFrame(list(content.items()), schema.CONTENT_START),
            config_history=spark.createDataFrame(HISTORY, schema.CONFIG_HISTORY),
            blobs=spark.createDataFrame(self.blobs, schema.BLOBS) if with_blobs else None,
            as_of=AS_OF,
            references_complete=references_complete,
        )

    def metadata_bytes(self, ident: str) -> int:
        """docs/james.md's definition, computed independently of the Spark expression."""
        row = self.rows[ident]
        strings = [row[i] for i in (5, 6, 11, 10, 13, 14, 7, 8)]
        total = 16 + sum(len(s.encode()) for s in strings if s is not None)
        total += sum(len(r.encode()) for r in row[12])
        total += sum(len(x.encode()) for t in row[16] for x in t)
        total += sum(len(k.encode()) + len(v) for k, v in row[9].items())
        return total


def rule(rule_id: str, kind: str, **kw) -> Rule:
    return Rule(id=rule_id, kind=kind, legal_basis=f"basis of {rule_id}", **kw)


CONSUMED = rule("consumed-1d", "consumed_mail", older_than=dt.timedelta(days=1),
                queues=("spool", "outgoing", "relay"))  # fmt: skip
ERASE = rule("erase-all", "erase_subject", subjects=(subject_hash(SUBJECT),))
ERASE_OUTGOING = rule("erase-outgoing", "erase_subject", subjects=(subject_hash(OTHER),),
                      queues=("outgoing",))  # fmt: skip
ORPHANS = rule("orphans-7d", "orphaned_blobs", older_than=dt.timedelta(days=7),
               references_complete=True)  # fmt: skip


def policy(*rules: Rule, budget: int = 1) -> Policy:
    return Policy("test-policy.toml", "0" * 64, tuple(rules), budget)


POLICY = policy(CONSUMED, ERASE, ERASE_OUTGOING, ORPHANS)


@pytest.fixture(scope="module")
def planted(spark):
    b = Builder()
    ids: dict[str, str] = {}
    keys: dict[str, str] = {}
    # spool: contentStart 18th 00:00, browseStart 21st 00:00; consumed-1d cutoff 20th 12:00.
    ids["before_content"] = b.mail("spool", at(17), at(17, 0, 5), consumed=True)
    ids["p1a"] = b.mail("spool", at(18), at(18, 0, 5), consumed=True, listed=True)
    ids["p1b"] = b.mail("spool", at(18), at(18, 0, 9), consumed=True)
    ids["p2"] = b.mail("spool", at(18, 1), at(18, 1, 5), consumed=True)  # blobs not listed
    # A partition that still holds a live (invisible) mail: only erasure rows go, one by one.
    ids["mixed_subject_1"] = b.mail("spool", at(18, 2), at(18, 2, 1), consumed=True,
                                    recipients=(f"  {SUBJECT.upper()} ",))  # fmt: skip
    ids["mixed_subject_2"] = b.mail("spool", at(18, 2), at(18, 2, 2), consumed=True,
                                    sender=SUBJECT)  # fmt: skip
    ids["mixed_live"] = b.mail("spool", at(18, 2), at(18, 2, 3), consumed=False,
                               header_address=SUBJECT)  # fmt: skip
    ids["mixed_other"] = b.mail(
        "spool", at(18, 2), at(18, 2, 4), consumed=True, recipients=(OTHER,)
    )  # erase-outgoing does not cover spool
    # The newest row is exactly at the cutoff: not older than it, so not planned; the older
    # row's blobs still go (consumed content, wherever its row is).
    ids["cutoff_old"] = b.mail("spool", at(20, 11), at(20, 11, 10), consumed=True, listed=True)
    ids["cutoff_new"] = b.mail("spool", at(20, 11), at(20, 12), consumed=True, listed=True)
    # At browseStart: old enough and fully consumed, yet never planned.
    ids["at_browse"] = b.mail("spool", at(21), at(20, 1), consumed=True, bucket=1,
                              recipients=(SUBJECT,))  # fmt: skip
    # A deduplicated id (may be shared with a mailbox message) and a key a live mail still uses.
    keys["dedup"] = "1_20000_MfemXjFVhqwZi9eYtmKc5JA9CJlHbVdBqfMuLlIbamY="
    ids["dedup"] = b.mail("spool", at(17, 5), at(17, 5, 1), consumed=True, header_key=keys["dedup"])
    b.blob(keys["dedup"], 77, at(1), kind="generation_aware")
    keys["shared"] = passthrough_key(999_001)
    ids["shared_consumed"] = b.mail("spool", at(17, 6), at(17, 6, 1), consumed=True,
                                    header_key=keys["shared"])  # fmt: skip
    ids["shared_live"] = b.mail("spool", at(21, 10), at(21, 10, 1), consumed=False,
                                header_key=keys["shared"])  # fmt: skip
    b.blob(keys["shared"], 55, at(1))
    # outgoing: the advance reaches browseStart (where the live mail is); a young partition is
    # erased by a rule of that queue only.
    ids["out_old"] = b.mail("outgoing", at(18), at(18, 0, 5), consumed=True)
    ids["out_erased"] = b.mail("outgoing", at(18, 5), at(21, 11), consumed=True,
                               recipients=(OTHER,), listed=True)  # fmt: skip
    ids["out_live"] = b.mail("outgoing", at(21, 11), at(21, 11, 30), consumed=False)
    # bounces: no rule covers it.
    ids["bounced"] = b.mail("bounces", at(10), at(10, 0, 5), consumed=True)
    # relay: no browseStart row at all.
    ids["relay_subject"] = b.mail("relay", at(10), at(10, 0, 5), consumed=True,
                                  recipients=(SUBJECT,))  # fmt: skip
    keys["orphan_old"] = passthrough_key(999_002)
    keys["orphan_young"] = passthrough_key(999_003)
    b.blob(keys["orphan_old"], 4242, at(10))
    b.blob(keys["orphan_young"], 7, at(20))
    b.blob("1_20000_orphanDedupAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 9, at(1),
           kind="generation_aware")  # fmt: skip
    browse = {"spool": at(21), "outgoing": at(21, 11), "bounces": at(15)}
    content = {"spool": at(18), "outgoing": at(18)}
    return b, ids, keys, browse, content


def audit(state: JamesState, policy: Policy, directory) -> tuple[list[dict], dict]:
    """The findings of every check on `state` (searching the policy's data subjects, keyed as
    an audit keys them) as planning reads them, and the audit manifest's planning part."""
    searched = frozenset(subjects.keyed_all(subjects.erasure_subjects(policy), KEY))
    frame = run_checks(state, Settings(subjects=searched, subject_key=KEY))
    write_findings(frame, directory)
    manifest = {
        "as_of": utc_text(state.as_of),
        "plan_inputs": {
            "keyspace": KEYSPACE,
            "blobs": None if state.blobs is None else "listing.parquet",
            "references_complete": state.references_complete,
        },
    }
    return read_findings(directory, raw=True), manifest


def plan_of(state: JamesState, policy: Policy, directory) -> PlanParts:
    rows, manifest = audit(state, policy, directory)
    return plan(rows, subjects.keyed_policy(policy, KEY), manifest)


@pytest.fixture(scope="module")
def audited(spark, planted, tmp_path_factory):
    b, _, _, browse, content = planted
    return audit(b.state(spark, browse, content), POLICY, tmp_path_factory.mktemp("audit"))


@pytest.fixture(scope="module")
def plan_parts(audited) -> PlanParts:
    rows, manifest = audited
    return plan(rows, subjects.keyed_policy(POLICY, KEY), manifest)


def partition_target(table_queue: str, trs: dt.datetime, bucket: int = 0) -> dict:
    return {"keyspace": KEYSPACE, "table": "enqueuedmailsv4", "queue": table_queue,
            "timerangestart": iso(trs), "bucketid": bucket}  # fmt: skip


def of_kind(parts: PlanParts, kind: str) -> list:
    return [a for a in parts.actions if a.kind == kind]


def test_fully_consumed_partitions_before_browse_start_are_planned_exactly(planted, plan_parts):
    b, ids, _, _, _ = planted
    partitions = of_kind(plan_parts, "james.delete_partition")
    got = [(a.target, a.rules) for a in partitions]
    assert got == [
        (partition_target("outgoing", at(18)), ("consumed-1d",)),
        (partition_target("outgoing", at(18, 5)), ("erase-outgoing",)),
        (partition_target("spool", at(17)), ("consumed-1d",)),
        (partition_target("spool", at(17, 5)), ("consumed-1d",)),
        (partition_target("spool", at(17, 6)), ("consumed-1d",)),
        (partition_target("spool", at(18)), ("consumed-1d",)),
        (partition_target("spool", at(18, 1)), ("consumed-1d",)),
    ]
    p1 = next(a for a in partitions if a.target == partition_target("spool", at(18)))
    both = sorted([ids["p1a"], ids["p1b"]])
    assert p1.precondition == {"enqueueids": both, "markers": both,
                               "browsestart": "2026-11-21T00:00:00.000Z"}  # fmt: skip
    assert p1.tombstones == 3
    assert p1.bytes == b.metadata_bytes(ids["p1a"]) + b.metadata_bytes(ids["p1b"]) > 0
    assert p1.reason == "fully consumed partition before browseStart (2 rows)"
    one = next(a for a in partitions if a.target == partition_target("spool", at(18, 1)))
    assert (one.tombstones, one.reason) == (
        2,
        "fully consumed partition before browseStart (1 row)",
    )


def test_partitions_not_planned(plan_parts):
    planned = {(a.target["queue"], a.target["timerangestart"])
               for a in of_kind(plan_parts, "james.delete_partition")}  # fmt: skip
    assert ("spool", iso(at(21))) not in planned  # at browseStart
    assert ("spool", iso(at(18, 2))) not in planned  # holds a live mail
    assert ("spool", iso(at(20, 11))) not in planned  # newest row not older than the cutoff
    assert ("bounces", iso(at(10))) not in planned  # no rule covers the queue
    assert ("relay", iso(at(10))) not in planned  # no browseStart row
    assert ("outgoing", iso(at(21, 11))) not in planned  # live


def row_target(queue: str, trs: dt.datetime, enqueueid: str, bucket: int = 0) -> dict:
    return {**partition_target(queue, trs, bucket), "enqueueid": enqueueid}


def test_erased_rows_in_a_partition_with_live_mail_within_the_budget(planted, plan_parts):
    b, ids, _, _, _ = planted
    first, second = sorted([ids["mixed_subject_1"], ids["mixed_subject_2"]])
    rows = of_kind(plan_parts, "james.delete_row")
    assert [(a.target, a.rules, a.precondition, a.tombstones) for a in rows] == [
        (row_target("spool", at(18, 2), first), ("erase-all",),
         {"marker": True, "browsestart": "2026-11-21T00:00:00.000Z"}, 2),
    ]  # fmt: skip
    assert rows[0].bytes == b.metadata_bytes(first)
    over = [d for d in plan_parts.deferred if d.target == row_target("spool", at(18, 2), second)]
    assert [(d.kind, d.rules, d.reason) for d in over] == [
        ("james.delete_row", ("erase-all",), "tombstone budget of 1 rows per partition exceeded")
    ]


def test_deferred_items_and_their_reasons(planted, plan_parts):
    _, ids, _, _, _ = planted
    second = max(ids["mixed_subject_1"], ids["mixed_subject_2"])
    got = [(d.target, d.rules, d.reason) for d in plan_parts.deferred]
    assert got == [
        (row_target("relay", at(10), ids["relay_subject"]), ("erase-all",), NO_BROWSE_START),
        (row_target("spool", at(18, 2), second), ("erase-all",),
         "tombstone budget of 1 rows per partition exceeded"),
        (row_target("spool", at(18, 2), ids["mixed_live"]), ("erase-all",),
         "live mail: delete it through James "
         "(DELETE /mailQueues/spool/mails?recipient=<address>, or ?sender=<address>)"),
        (row_target("spool", at(21), ids["at_browse"], bucket=1), ("erase-all",),
         AFTER_BROWSE_START),
    ]  # fmt: skip
    assert all(d.kind == "james.delete_row" for d in plan_parts.deferred)


def test_content_start_advances_to_the_first_remaining_partition_or_browse_start(plan_parts):
    advances = of_kind(plan_parts, "james.advance_content_start")
    assert [(a.target, a.precondition, a.rules, a.bytes, a.tombstones) for a in advances] == [
        ({"keyspace": KEYSPACE, "queue": "outgoing", "to": "2026-11-21T11:00:00.000Z"},
         {"from": "2026-11-18T00:00:00.000Z", "window_seconds": 3600, "bucket_count": 2},
         ("consumed-1d", "erase-outgoing"), 0, 0),
        ({"keyspace": KEYSPACE, "queue": "spool", "to": "2026-11-18T02:00:00.000Z"},
         {"from": "2026-11-18T00:00:00.000Z", "window_seconds": 3600, "bucket_count": 2},
         ("consumed-1d",), 0, 0),
    ]  # fmt: skip


def test_blob_deletions(planted, plan_parts):
    b, ids, keys, _, _ = planted
    blobs = {a.target["key"]: a for a in of_kind(plan_parts, "james.delete_blob")}
    row = {ident: b.rows[ident] for ident in ids.values()}

    def content(name: str) -> set[str]:
        return {row[ids[name]][7], row[ids[name]][8]}

    expected = content("p1a") | content("cutoff_old") | content("out_erased") | {keys["orphan_old"]}
    assert set(blobs) == expected
    assert keys["dedup"] not in blobs and keys["shared"] not in blobs
    assert content("cutoff_new").isdisjoint(blobs)  # not older than the cutoff
    header = blobs[row[ids["p1a"]][7]]
    assert header.target == {"bucket": "default", "key": row[ids["p1a"]][7]}
    assert header.precondition == {
        "size": header.bytes, "etag": f"etag-{row[ids['p1a']][7][:8]}",
        "last_modified": "2026-11-01T00:00:00.000Z",
        "referrers": [{"queue": "spool", "enqueueid": ids["p1a"]}], "orphan": False,
    }  # fmt: skip
    assert (header.rules, header.reason, header.tombstones) == (
        ("consumed-1d",), "content of a consumed mail", 0,
    )  # fmt: skip
    erased = blobs[row[ids["out_erased"]][8]]
    assert (erased.rules, erased.reason) == (
        ("erase-outgoing",), "content of mail of an erased data subject",
    )  # fmt: skip
    orphan = blobs[keys["orphan_old"]]
    assert (orphan.bytes, orphan.rules, orphan.reason) == (4242, ("orphans-7d",), "orphaned blob")
    assert orphan.precondition["referrers"] == [] and orphan.precondition["orphan"] is True
    assert [a.target["key"] for a in of_kind(plan_parts, "james.delete_blob")] == sorted(blobs)


def test_actions_are_in_execution_order(plan_parts):
    order = ["james.delete_partition", "james.delete_row", "james.advance_content_start",
             "james.delete_blob"]  # fmt: skip
    kinds = [a.kind for a in plan_parts.actions]
    assert kinds == sorted(kinds, key=order.index)


def test_no_address_anywhere(plan_parts):
    texts = [a.to_json() for a in plan_parts.actions] + [d.to_json() for d in plan_parts.deferred]
    texts += plan_parts.notes
    for address in (SUBJECT, SUBJECT.lower(), OTHER):
        assert not any(address in text for text in texts)
    assert not any("@" in text for text in texts)


def test_notes_count_actions_per_rule(plan_parts):
    consumed = (
        "rule consumed-1d selected 12 actions: 6 james.delete_partition, "
        "2 james.advance_content_start, 4 james.delete_blob"
    )
    assert consumed in plan_parts.notes
    assert any(n.startswith("live mail is never planned") for n in plan_parts.notes)
    assert "rule erase-all selected 1 action: 1 james.delete_row" in plan_parts.notes


def test_every_action_and_deferral_cites_the_findings_that_justify_it(audited, plan_parts):
    rows, _ = audited
    by_id = {r["id"]: r for r in rows}
    # A partition (and contentStart moved past it) selected by an erasure also cites the
    # personal_data findings of its erased rows.
    erasing = {"unreclaimed_slice", "personal_data"}
    expected = {
        "james.delete_partition": {"unreclaimed_slice"},
        "james.advance_content_start": {"unreclaimed_slice"},
        "james.delete_row": {"personal_data"},
    }
    for item in [*plan_parts.actions, *plan_parts.deferred]:
        assert item.findings, item
        checks = {by_id[ident]["check"] for ident in item.findings}
        if item.kind == "james.delete_blob":
            orphan = item.precondition["orphan"]
            assert checks <= ({"orphaned_blob"} if orphan else {"consumed_blob", "personal_data"})
            assert ("consumed_blob" in checks) != orphan
        elif any(r.startswith("erase") for r in item.rules) and item.kind != "james.delete_row":
            assert checks == erasing, item
        else:
            assert checks == expected[item.kind], item
    # A partition cites its own finding; an erased row's blob its personal_data finding too.
    partition = of_kind(plan_parts, "james.delete_partition")[0]
    cited = by_id[next(i for i in partition.findings if by_id[i]["check"] == "unreclaimed_slice")]
    t = partition.target
    assert cited["subject"] == f"{t['queue']}/{t['timerangestart'][:19]}Z/{t['bucketid']}"
    erased = next(
        a for a in of_kind(plan_parts, "james.delete_blob") if "erase-outgoing" in a.rules
    )
    data = [by_id[i] for i in erased.findings if by_id[i]["check"] == "personal_data"]
    assert [(d["queue"], d["detail"]["enqueueid"]) for d in data] == [
        (r["queue"], r["enqueueid"]) for r in erased.precondition["referrers"]
    ]


def test_the_plan_depends_on_the_findings_alone(audited, plan_parts):
    """Findings dropped: what they justified goes, nothing else changes."""
    rows, manifest = audited
    keyed = subjects.keyed_policy(POLICY, KEY)
    without = [r for r in rows if r["check"] != "consumed_blob"]
    again = plan(without, keyed, manifest)
    assert [a for a in again.actions if a.kind != "james.delete_blob"] == [
        a for a in plan_parts.actions if a.kind != "james.delete_blob"
    ]
    assert {a.target["key"] for a in of_kind(again, "james.delete_blob")} == {
        a.target["key"]
        for a in of_kind(plan_parts, "james.delete_blob")
        if a.precondition["orphan"]
    }
    assert plan(rows, keyed, manifest) == plan_parts  # and the same findings, the same plan


@pytest.mark.parametrize(
    ("rule_complete", "state_complete", "planned"),
    [(True, True, True), (False, True, False), (True, False, False)],
)
def test_orphans_only_when_both_reference_flags_are_true(
    spark, planted, tmp_path, rule_complete, state_complete, planned
):
    b, _, keys, browse, content = planted
    state = b.state(spark, browse, content, references_complete=state_complete)
    orphans = dataclasses.replace(ORPHANS, references_complete=rule_complete)
    result = plan_of(state, policy(orphans), tmp_path)
    assert [a.target["key"] for a in result.actions] == ([keys["orphan_old"]] if planned else [])
    if not planned:
        assert any(n.startswith("rule orphans-7d planned nothing: ") for n in result.notes)


def test_without_a_blob_listing_no_blob_is_planned(spark, planted, tmp_path):
    b, _, _, browse, content = planted
    state = b.state(spark, browse, content, with_blobs=False)
    result = plan_of(state, POLICY, tmp_path)
    assert not of_kind(result, "james.delete_blob")
    assert "no blob listing given: blob deletions not planned" in result.notes
    assert len(of_kind(result, "james.delete_partition")) == 7


def test_the_plan_is_accepted_by_write_plan(plan_parts, tmp_path):
    written = write_plan(
        tmp_path / "plan", system="james", as_of=AS_OF, policy=POLICY, inputs={"source": "t"},
        actions=plan_parts.actions, deferred=plan_parts.deferred, notes=plan_parts.notes,
    )  # fmt: skip
    again = read_plan(written.directory)
    assert [a.to_json() for a in again.actions()] == [
        dataclasses.replace(a, seq=i).to_json() for i, a in enumerate(plan_parts.actions)
    ]


# -- against the generator --------------------------------------------------------------------


def _state_from(spark, generated: gen.GeneratedState) -> JamesState:
    columns = [name for name, _ in schema.TABLE_COLUMNS["enqueuedmailsv4"]] + ["table_version"]
    entries = [tuple(row.get(c) for c in columns) for row in generated.entries]
    events = []
    for event in generated.event_store:
        if event["aggregateid"] == gen.CONFIG_AGGREGATE:
            body = json.loads(event["event"])
            events.append((event["eventid"], int(float(body["sliceWindow"])),
                           body["bucketCount"], body["updateBrowseStartPace"]))  # fmt: skip
    return JamesState(
        entries=spark.createDataFrame(entries, schema.ENTRIES),
        deleted=spark.createDataFrame(
            [(d["queuename"], d["enqueueid"]) for d in generated.deleted], schema.DELETED
        ),
        browse_start=spark.createDataFrame(
            [(r["queuename"], r["browsestart"]) for r in generated.browse_start],
            schema.BROWSE_START,
        ),
        content_start=spark.createDataFrame(
            [(r["queuename"], r["contentstart"]) for r in generated.content_start],
            schema.CONTENT_START,
        ),
        config_history=spark.createDataFrame(events, schema.CONFIG_HISTORY),
        as_of=generated.as_of,
    )


def test_generated_state_fully_consumed_partitions_before_browse_start(spark, tmp_path):
    spec = gen.GenerationSpec(
        seed=5,
        normal_mails=200,
        anomalies=gen.AnomalyCounts(
            unreclaimed_partitions=2, cleanup_pending_partitions=2, lagging_browse_start=1,
            invisible_mails=2, stuck_mails=1, bucket_mismatches=1, slice_mismatches=1,
        ),
    )  # fmt: skip
    generated = gen.generate(spec)
    consumed = {(d["queuename"], d["enqueueid"]) for d in generated.deleted}
    browse = {r["queuename"]: r["browsestart"] for r in generated.browse_start}
    partitions: dict[tuple, list[dict]] = defaultdict(list)
    for row in generated.entries:
        partitions[(row["queuename"], row["timerangestart"], row["bucketid"])].append(row)
    expected = {}
    for (queue, trs, bucket), rows in partitions.items():
        if (
            queue in browse
            and trs < browse[queue]
            and all((queue, r["enqueueid"]) in consumed for r in rows)
            and max(r["enqueuedtime"] for r in rows) < generated.as_of
        ):
            expected[(queue, iso(trs), bucket)] = sorted(r["enqueueid"].lower() for r in rows)
    assert len(expected) >= 4  # the planted pending and unreclaimed partitions at least
    everything = rule("consumed-0s", "consumed_mail", older_than=dt.timedelta(0))
    result = plan_of(_state_from(spark, generated), policy(everything), tmp_path)
    got = {
        (a.target["queue"], a.target["timerangestart"], a.target["bucketid"]):
            a.precondition["enqueueids"]
        for a in of_kind(result, "james.delete_partition")
    }  # fmt: skip
    assert got == expected
    assert all(
        a.target["table"] == "enqueuedmailsv4" for a in of_kind(result, "james.delete_partition")
    )
    assert not of_kind(result, "james.delete_row") and not result.deferred
