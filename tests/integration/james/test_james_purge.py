"""Plan and purge a James state on the real Cassandra and SeaweedFS: exact plan, exact deletions,
SIGKILL at random points, drift after planning, a server going away mid-purge."""

from __future__ import annotations

import datetime as dt
import functools
import json
import random
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from datasets.james.load import load_into_cassandra, load_into_s3
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import read_plan
from mqforensics.services import seaweedfs
from tests.integration.james import james_purge_support as support
from tests.purge_hooks import apply_with_hook

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def generated():
    return support.build_state()


@pytest.fixture
def loaded(generated, cassandra_endpoint, s3, cassandra):
    """The generated state in a fresh keyspace and bucket; dropped afterwards."""
    name = f"purge_{uuid.uuid4().hex[:10]}"
    load_into_cassandra(generated, cassandra_endpoint, name)
    client = seaweedfs.s3_endpoint(s3).client()
    load_into_s3(generated, seaweedfs.s3_endpoint(s3), support.bucket_for(name))
    yield name, client
    cluster, session = cassandra_endpoint.connect()
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    finally:
        cluster.shutdown()


def _plan(tmp_path, monkeypatch, cassandra, s3, keyspace, as_of, name="plan") -> Path:
    policy = tmp_path / "policy.toml"
    policy.write_text(support.policy_text())
    out = tmp_path / name
    env = support.environment(cassandra, s3)
    where = f"{cassandra['host']}:{cassandra['port']}"
    assert support.make_plan(monkeypatch, env, where, keyspace, keyspace, policy, out, as_of) == 0
    return out


def _approve(plan: Path) -> None:
    from mqforensics import cli

    assert cli.main(["approve", str(plan), "--by", "integration-test"]) == 0


def _targets(plan_dir: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for action in read_plan(plan_dir).actions():
        found.setdefault(action.kind, []).append({**action.target, "_pre": action.precondition})
    return found


def _removed_by(plan_dir: Path, done_ids: set[str] | None = None):
    """Rows, markers, objects and contentStart values the plan's (done) actions name."""
    rows, markers, objects, advances = set(), set(), set(), {}
    for action in read_plan(plan_dir).actions():
        if done_ids is not None and action.id not in done_ids:
            continue
        t = action.target
        if action.kind == "james.delete_partition":
            rows |= {(t["queue"], e) for e in action.precondition["enqueueids"]}
            markers |= {(t["queue"], e) for e in action.precondition["markers"]}
        elif action.kind == "james.delete_row":
            rows.add((t["queue"], t["enqueueid"]))
            markers.add((t["queue"], t["enqueueid"]))
        elif action.kind == "james.delete_blob":
            objects.add(t["key"])
        else:
            advances[t["queue"]] = t["to"]
    return rows, markers, objects, advances


def _assert_exactly_removed(before, after, removed) -> None:
    rows, markers, objects, advances = removed
    assert after["enqueuedmailsv4"] == {
        k: v for k, v in before["enqueuedmailsv4"].items() if k not in rows
    }
    assert after["deletedmailsv2"] == {
        k: v for k, v in before["deletedmailsv2"].items() if k not in markers
    }
    assert after["objects"] == {k: v for k, v in before["objects"].items() if k not in objects}
    assert after["browsestart"] == before["browsestart"]
    assert after["eventstore"] == before["eventstore"]
    for queue, value in before["contentstart"].items():
        if queue not in advances:
            assert after["contentstart"][queue] == value
        else:
            stored = dict(after["contentstart"][queue])["contentstart"].replace(tzinfo=dt.UTC)
            assert support._iso(stored) == advances[queue]


def _last_outcome(journal: list[dict[str, Any]]) -> dict[str, Any]:
    """The journal's last record but the executor's ``measured`` one (written after the
    verification)."""
    return [r for r in journal if r["event"] != "measured"][-1]


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)


def _drop_keyspaces(cassandra_endpoint, names: list[str]) -> None:
    cluster, session = cassandra_endpoint.connect()
    try:
        for name in names:
            session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    finally:
        cluster.shutdown()


def test_plan_matches_the_oracle_and_purge_removes_exactly_it_and_sigkill_resume_equals_it(
    generated, loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint
):
    """The plan of the loaded state is the oracle's; unapproved, a dry run and a refused login
    change nothing; the purge removes exactly what the plan names. That purge is also the
    uninterrupted run a copy of the state, planned as of the same instant, must end equal to
    when its purge is SIGKILLed at random points and resumed (one load, plan and purge fewer
    than two separate tests)."""
    keyspace, client = loaded
    env = support.environment(cassandra, s3)
    as_of = _now()
    crashed = f"purge_{uuid.uuid4().hex[:10]}"
    try:
        load_into_cassandra(generated, cassandra_endpoint, crashed)
        load_into_s3(generated, seaweedfs.s3_endpoint(s3), support.bucket_for(crashed))
        plan_dir = _plan(tmp_path, monkeypatch, cassandra, s3, keyspace, as_of)
        before = support.dump(cassandra_endpoint, keyspace, client, keyspace)
        _check_plan_against_the_oracle(generated, plan_dir, before, as_of, tmp_path, s3)

        # Unapproved: the purger refuses to apply, and a dry run changes nothing.
        refused = support.purge(plan_dir, env, "--apply")
        assert refused.returncode == 2 and "PlanNotApproved" in refused.stderr, refused.stderr
        dry = support.purge(plan_dir, env)
        assert dry.returncode == 0, dry.stderr
        assert support.dump(cassandra_endpoint, keyspace, client, keyspace) == before
        assert not (plan_dir / "journal.jsonl").exists()

        _approve(plan_dir)
        # A wrong password stops at once with a clear error, before any action.
        wrong = {**env, "MQF_CASSANDRA_PASSWORD": "not-the-password"}
        denied = support.purge(plan_dir, wrong, "--apply")
        assert denied.returncode == 2
        assert "AuthenticationFailed" in denied.stderr
        assert "not-the-password" not in denied.stderr
        assert "Traceback" not in denied.stderr
        journal_file = plan_dir / "journal.jsonl"
        assert not journal_file.exists() or all(
            r["event"] in ("begin",) for r in read_journal(journal_file)
        )

        trace = tmp_path / "trace.txt"
        result = support.purge(plan_dir, env, "--apply", trace=trace)
        assert result.returncode == 0, result.stdout + result.stderr
        after = support.dump(cassandra_endpoint, keyspace, client, keyspace)
        _assert_exactly_removed(before, after, _removed_by(plan_dir))
        journal = read_journal(journal_file)
        assert not [r for r in journal if r["event"] == "skipped"]
        assert (
            _last_outcome(journal)["event"] == "verified" and _last_outcome(journal)["ok"] is True
        )
        assert s3["secret_key"] not in journal_file.read_text()

        # A second run finds every action final and changes nothing.
        again = support.purge(plan_dir, env, "--apply")
        assert again.returncode == 0, again.stderr
        assert support.dump(cassandra_endpoint, keyspace, client, keyspace) == after

        # The copy: SIGKILLed at random points, then resumed, it ends as the run above did.
        crash_plan = _plan(tmp_path, monkeypatch, cassandra, s3, crashed, as_of, crashed)
        _approve(crash_plan)
        crash_before = support.dump(cassandra_endpoint, crashed, client, crashed)
        points = len(trace.read_text().splitlines())
        assert points > 100

        # 11 kill points spread over the whole run; each rerun resumes where the last died, so
        # the next point is the gap to it (a few points are re-done by each resume).
        rng = random.Random(20261122)
        spread = sorted(rng.sample(range(1, points), 11))
        gaps = [b - a for a, b in zip([0, *spread], spread, strict=False)]
        kills = 0
        for gap in gaps:
            run = support.purge(crash_plan, env, "--apply", fault_at=max(1, gap))
            if run.returncode != -signal.SIGKILL:
                assert run.returncode == 0, run.stderr
                break
            kills += 1
        assert kills >= 10
        final = support.purge(crash_plan, env, "--apply")
        assert final.returncode == 0, final.stderr
        journal = read_journal(crash_plan / "journal.jsonl")
        assert _last_outcome(journal)["event"] == "verified" and _last_outcome(journal)["ok"]

        crash_after = support.dump(cassandra_endpoint, crashed, client, crashed)
        assert crash_after == after
        _assert_exactly_removed(crash_before, crash_after, _removed_by(crash_plan))
    finally:
        _drop_keyspaces(cassandra_endpoint, [crashed])


class Reason(str):
    """Equal to a deferral reason that starts with it."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(str(self))


def _check_plan_against_the_oracle(generated, plan_dir, before, as_of, tmp_path, s3) -> None:
    """The plan in `plan_dir` is exactly the oracle's, cites findings of its own audit (a plan
    made from that audit's findings is the same plan), and holds no secret and no subject."""
    expected = support.expected_plan(generated, as_of, set(before["objects"]))

    targets = _targets(plan_dir)
    assert {(t["queue"], t["timerangestart"], t["bucketid"])
            for t in targets.get("james.delete_partition", [])} == expected.partitions  # fmt: skip
    assert {(t["queue"], t["enqueueid"]) for t in targets.get("james.delete_row", [])} == (
        expected.rows
    )
    assert {t["queue"]: t["to"] for t in targets.get("james.advance_content_start", [])} == (
        expected.advances
    )
    assert {t["key"] for t in targets["james.delete_blob"]} == expected.blobs
    # Every erasure outcome is exercised: row deletes, and each deferral reason.
    assert len(expected.rows) == support.BUDGET
    assert sorted(set(expected.deferred_rows.values())) == [
        "content could not be searched", "live mail", "partition at or after browseStart",
        "tombstone budget",
    ]  # fmt: skip
    deferred = [json.loads(line) for line in (plan_dir / "deferred.jsonl").read_text().splitlines()]
    assert {(d["target"]["queue"], d["target"]["enqueueid"]): d["reason"] for d in deferred} == {
        k: Reason(v) for k, v in expected.deferred_rows.items()
    }
    header = json.loads((plan_dir / "plan.json").read_text())
    text = "".join(p.read_text() for p in plan_dir.iterdir() if p.is_file())
    assert support.SUBJECT not in text and s3["secret_key"] not in text
    # `plan james SOURCE` audited into PLAN.audit: a plan made from that audit's findings is
    # the same plan, and every action and deferral cites findings of it.
    audit = plan_dir.with_name(plan_dir.name + ".audit")
    again = tmp_path / "from-findings"
    from mqforensics import cli

    assert cli.main(["plan", "--findings", str(audit), "--policy", str(tmp_path / "policy.toml"),
                     "--out", str(again)]) == 0  # fmt: skip
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (again / name).read_bytes() == (plan_dir / name).read_bytes(), name
    found = {f["id"]: f for f in json.loads((audit / "findings.json").read_text())}
    plan = read_plan(plan_dir)
    for item in [*plan.actions(), *plan.deferred()]:
        assert item.findings and set(item.findings) <= set(found), item
    leaked = [a for a in plan.actions() if a.reason == "content of a consumed mail"]
    assert leaked and all(
        {found[i]["check"] for i in a.findings} == {"consumed_blob"} for a in leaked
    )
    assert header["inputs"]["audit"]["directory"] == str(audit.resolve())
    assert support.SUBJECT not in (audit / "findings.json").read_text()
    assert "password" not in text
    assert header["totals"]["james.delete_blob"]["bytes"] == sum(
        len(before["objects"][k]) for k in expected.blobs
    )


def test_drift_after_planning_makes_those_actions_skip(
    generated, loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint
):
    keyspace, client = loaded
    plan_dir = _plan(tmp_path, monkeypatch, cassandra, s3, keyspace, _now())
    _approve(plan_dir)
    actions = list(read_plan(plan_dir).actions())
    timed = sorted(
        (a for a in actions if "timerangestart" in a.target),
        key=lambda a: a.target["timerangestart"],
    )
    # Drift 1: a mail enqueued into the earliest planned partition.
    enqueue_into = next(a for a in timed if a.kind == "james.delete_partition")
    # Drift 2: browseStart of the latest action's queue moved back onto that action's slice.
    latest = timed[-1]
    move_back, new_browse = latest.target["queue"], _instant(latest.target["timerangestart"])
    assert enqueue_into.target["timerangestart"] < latest.target["timerangestart"]
    # Drift 3: a live mail now references an orphan.
    orphan = next(a for a in actions if a.kind == "james.delete_blob" and a.precondition["orphan"])

    cluster, session = cassandra_endpoint.connect(keyspace)
    try:
        t = enqueue_into.target
        start = _instant(t["timerangestart"])
        insert = session.prepare(
            "INSERT INTO enqueuedmailsv4 (queuename, timerangestart, bucketid, enqueueid, "
            "enqueuedtime, name, headerblobid, bodyblobid) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        session.execute(
            insert, (t["queue"], start, t["bucketid"], uuid.uuid4(), start, "drift-mail", "h", "b")
        )
        newest = session.execute(
            "SELECT browsestart FROM browsestart WHERE queuename = %s", ("spool",)
        ).one()[0]
        key = orphan.target["key"]
        session.execute(insert, ("spool", newest, 0, uuid.uuid4(), newest, "revived", key, "x"))
        session.execute(
            "UPDATE browsestart SET browsestart = %s WHERE queuename = %s", (new_browse, move_back)
        )
    finally:
        cluster.shutdown()

    before = support.dump(cassandra_endpoint, keyspace, client, keyspace)
    result = support.purge(plan_dir, support.environment(cassandra, s3), "--apply")
    assert result.returncode == 0, result.stdout + result.stderr
    journal = read_journal(plan_dir / "journal.jsonl")
    skipped = {r["id"]: r["reason"] for r in journal if r["event"] == "skipped"}
    assert "enqueued into partition" in skipped[enqueue_into.id]
    assert "referenced again" in skipped[orphan.id]
    last_slice = latest.target["timerangestart"]
    moved = [
        a
        for a in timed
        if a.target["queue"] == move_back and a.target["timerangestart"] >= last_slice
    ]
    for action in moved:
        assert "no longer after the partition" in skipped[action.id], action
    expected_skips = {enqueue_into.id, orphan.id} | {a.id for a in moved}
    for a in actions:
        if a.kind != "james.advance_content_start":
            continue
        queue, to = a.target["queue"], a.target["to"]
        holds = queue == t["queue"] and a.precondition["from"] <= t["timerangestart"] < to
        if queue == move_back and _instant(to) > new_browse:
            assert "is before" in skipped[a.id]  # browseStart is now before the new contentStart
            expected_skips.add(a.id)
        elif holds:
            assert "still holds rows" in skipped[a.id]
            expected_skips.add(a.id)
    assert set(skipped) == expected_skips
    done = {r["id"] for r in journal if r["event"] == "done"}
    assert done == {a.id for a in actions} - expected_skips
    after = support.dump(cassandra_endpoint, keyspace, client, keyspace)
    _assert_exactly_removed(before, after, _removed_by(plan_dir, done))

    from mqforensics import cli

    assert cli.main(["report", "plan", str(plan_dir)]) == 0
    report = (plan_dir / "report.txt").read_text()
    assert "enqueued into partition" in report and "referenced again" in report


# -- a target changed at its last check (in-process purge, fault-point hooks) --------------------


def _purge_in_process(plan_dir: Path, changes: dict[str, Any]) -> set[str]:
    """Apply the plan in this process; at each fault point named in `changes` its function runs
    once (the live system changing a target there). The labels whose change ran."""
    from mqforensics.systems.james.options import PurgeOptions
    from mqforensics.systems.james.purge import build_executors

    plan = read_plan(plan_dir)
    executors = build_executors(plan, PurgeOptions(trace_queries=support.TRACED))
    fired: set[str] = set()

    def hook(label: str) -> None:
        if label in changes and label not in fired:
            fired.add(label)
            changes[label]()

    apply_with_hook(plan, executors, hook)
    return fired


@dataclass
class _Change:
    """One planned partition that got a new live mail (`mail`) and one planned object that got
    new bytes, both at the same fault point of their delete."""

    partition: Any
    blob: Any
    mail: tuple[str, str]
    new_bytes: bytes

    def partition_name(self) -> str:
        t = self.partition.target
        return f"{t['queue']}/{t['timerangestart']}/{t['bucketid']}"


@dataclass
class _Changed:
    """A purge during which targets changed at fault points (`changes`, by point)."""

    plan_dir: Path
    actions: list[Any]
    changes: dict[str, _Change]
    before: dict[str, Any]
    after: dict[str, Any]
    journal: list[dict[str, Any]]

    def done(self, last_check: dict[str, dict[str, Any]]) -> set[str]:
        """Asserts the outcome: the actions skipped at their last check are exactly
        `last_check` (id -> fields of the skipped record); besides them only the contentStart
        advances over a changed partition are skipped (it still holds rows), at the engine's
        verify; the verification sees the new mails in the census and nothing else. The done
        ids."""
        skipped = {r["id"]: r for r in self.journal if r["event"] == "skipped"}
        over = {
            a.id
            for a in self.actions
            for t in (change.partition.target for change in self.changes.values())
            if a.kind == "james.advance_content_start"
            and a.target["queue"] == t["queue"]
            and a.precondition["from"] <= t["timerangestart"] < a.target["to"]
        }
        assert set(skipped) == set(last_check) | over
        for action_id, fields in last_check.items():
            record = skipped[action_id]
            assert {k: record.get(k) for k in fields} == fields, record
        for action_id in over:
            assert "still holds rows" in skipped[action_id]["reason"]
            assert "at_last_check" not in skipped[action_id]
        done = {r["id"] for r in self.journal if r["event"] == "done"}
        assert done == {a.id for a in self.actions} - set(skipped)
        verified = _last_outcome(self.journal)
        assert verified["event"] == "verified" and verified["ok"] is False
        assert [p.split(":")[0] for p in verified["problems"]] == [
            "census JamesExecutor enqueuedmailsv4 rows outside the plan"
        ]
        # The new mails and the objects' new bytes are there; the dumps compare without them.
        for change in self.changes.values():
            assert dict(self.after["enqueuedmailsv4"].pop(change.mail))["name"] == "enqueued"
            key = change.blob.target["key"]
            assert self.after["objects"][key] == change.new_bytes
            self.before["objects"][key] = change.new_bytes
        return done


def _change_at(
    points: tuple[str, ...], loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint
) -> _Changed:
    """Plan, then purge in this process while, for the i-th of `points` ("rate slot" or
    "before"), the i-th planned partition gets a new live mail and the i-th planned object
    (with an ETag) new bytes, at that point of their delete."""
    keyspace, client = loaded
    plan_dir = _plan(tmp_path, monkeypatch, cassandra, s3, keyspace, _now())
    _approve(plan_dir)
    actions = list(read_plan(plan_dir).actions())
    partitions = [a for a in actions if a.kind == "james.delete_partition"]
    blobs = [a for a in actions if a.kind == "james.delete_blob" and a.precondition["etag"]]
    assert len(partitions) >= len(points) and len(blobs) >= len(points)
    before = support.dump(cassandra_endpoint, keyspace, client, keyspace)

    cluster, session = cassandra_endpoint.connect(keyspace)
    insert = session.prepare(
        "INSERT INTO enqueuedmailsv4 (queuename, timerangestart, bucketid, enqueueid, "
        "enqueuedtime, name, headerblobid, bodyblobid) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    def enqueue(t: dict[str, Any], mail: uuid.UUID) -> None:
        start = _instant(t["timerangestart"])
        values = (t["queue"], start, t["bucketid"], mail, start, "enqueued", "h", "b")
        session.execute(insert, values)

    def overwrite(b: dict[str, Any], new_bytes: bytes) -> None:
        client.put_object(Bucket=b["bucket"], Key=b["key"], Body=new_bytes)

    made: dict[str, _Change] = {}
    hooks: dict[str, Any] = {}
    for point, partition, blob in zip(points, partitions, blobs, strict=False):
        t, b = partition.target, blob.target
        new_mail, new_bytes = uuid.uuid4(), f"rewritten at {point}\r\n".encode()
        assert len(new_bytes) != len(before["objects"][b["key"]])
        made[point] = _Change(partition, blob, (t["queue"], str(new_mail)), new_bytes)
        name = made[point].partition_name()
        hooks[f"{point} delete partition {name}"] = functools.partial(enqueue, t, new_mail)
        hooks[f"{point} delete object s3://{b['bucket']}/{b['key']}"] = functools.partial(
            overwrite, b, new_bytes
        )
    try:
        assert _purge_in_process(plan_dir, hooks) == set(hooks)
    finally:
        cluster.shutdown()
    return _Changed(
        plan_dir, actions, made, before,
        support.dump(cassandra_endpoint, keyspace, client, keyspace),
        read_journal(plan_dir / "journal.jsonl"),
    )  # fmt: skip


def test_targets_changed_in_the_rate_wait_or_between_check_and_delete_are_kept(
    loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint
):
    """One purge, two changes (one load and plan fewer than a purge each): the first planned
    partition and object change during their rate wait and are skipped at their last check;
    the second ones change between that check and the delete and are kept by the conditional
    deletes."""
    run = _change_at(
        ("rate slot", "before"), loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint
    )
    waited, raced = run.changes["rate slot"], run.changes["before"]
    b = raced.blob.target
    done = run.done({
        waited.partition.id: {
            "reason": f"1 mail(s) enqueued into partition {waited.partition_name()} since "
            "planning",
            "at_last_check": True, "completed_operations": 0,
        },
        waited.blob.id: {
            "reason": "object changed since planning (size or ETag differs)",
            "at_last_check": True, "completed_operations": 0,
        },
        raced.partition.id: {
            "reason": f"1 mail(s) enqueued into partition {raced.partition_name()} between the "
            "check and the delete were kept (the delete was timestamped at the check)",
            "at_last_check": True, "completed_operations": 1,
        },
        raced.blob.id: {
            "reason": f"object s3://{b['bucket']}/{b['key']} was overwritten between the check "
            "and the delete (If-Match refused)",
            "at_last_check": True, "completed_operations": 0,
        },
    })  # fmt: skip
    rows, markers, objects, advances = _removed_by(run.plan_dir, done)
    # Changed in the rate wait: nothing of the partition was touched.
    queue = waited.partition.target["queue"]
    for enqueueid in waited.partition.precondition["enqueueids"]:
        assert (queue, enqueueid) in run.after["enqueuedmailsv4"]
        assert (queue, enqueueid) in run.after["deletedmailsv2"]
    # Changed after the check: the partition's planned rows are gone (the tombstone is
    # timestamped at the check), the mail enqueued after the check is not (popped by `done`),
    # and its markers are all kept. Everything else in the plan is gone, exactly.
    queue = raced.partition.target["queue"]
    planned = {(queue, e) for e in raced.partition.precondition["enqueueids"]}
    assert planned and not planned & rows
    _assert_exactly_removed(run.before, run.after, (rows | planned, markers, objects, advances))
    assert raced.partition.precondition["markers"]
    for enqueueid in raced.partition.precondition["markers"]:
        assert (queue, enqueueid) in run.after["deletedmailsv2"]


def test_cassandra_stopped_mid_purge_then_rerun_completes(
    generated, tmp_path, monkeypatch, s3, cassandra
):
    """A dedicated Cassandra goes away while the purger runs: a clear error, a consistent
    journal; once it is back (on a new port), the rerun finishes the plan."""
    from mqforensics.services.harness import Harness
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    harness = Harness(tmp_path / "servers")
    try:
        info = harness.ensure("cassandra")
        endpoint = CassandraEndpoint(
            (info["host"],), info["port"], info["username"], info["password"]
        )
        keyspace = "james_outage"
        load_into_cassandra(generated, endpoint, keyspace)
        load_into_s3(generated, seaweedfs.s3_endpoint(s3), support.bucket_for(keyspace))
        plan_dir = _plan(tmp_path, monkeypatch, info, s3, keyspace, _now())
        _approve(plan_dir)
        env = support.environment(info, s3)

        import subprocess
        import sys

        process = subprocess.Popen(
            [sys.executable, "-m", "mqforensics", "purge", str(plan_dir), "--apply",
             "--rate", "3", "--retries", "2", *support.TRACE_QUERIES],
            env={**__import__("os").environ, **env}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        journal_file = plan_dir / "journal.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (
                journal_file.exists()
                and sum(1 for r in read_journal(journal_file) if r["event"] == "done") >= 5
            ):
                break
            time.sleep(0.2)
        harness.stop("cassandra")
        out, err = process.communicate(timeout=180)
        assert process.returncode == 2, out + err
        assert "ServerUnavailable" in err and "Traceback" not in err, err
        records = read_journal(journal_file)
        done = [r for r in records if r["event"] == "done"]
        assert len(done) >= 5
        assert records[-1]["event"] in ("started", "done")

        info = harness.start_again("cassandra")
        rerun = support.purge(
            plan_dir, support.environment(info, s3), "--apply", "--cassandra",
            f"{info['host']}:{info['port']}",
        )  # fmt: skip
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        records = read_journal(journal_file)
        assert _last_outcome(records)["event"] == "verified" and _last_outcome(records)["ok"]
        finals = {r["id"] for r in records if r["event"] in ("done", "skipped")}
        assert finals == {a.id for a in read_plan(plan_dir).actions()}
        assert not [r for r in records if r["event"] == "skipped"]
    finally:
        harness.stop_all()


def test_plan_from_a_cqlsh_export_purges_the_live_cluster(
    generated, loaded, tmp_path, monkeypatch, cassandra, s3, cassandra_endpoint, cqlsh
):
    """The operator's offline flow: export with cqlsh, plan from the export on any machine,
    purge the live cluster named on the command line."""
    keyspace, client = loaded
    export = tmp_path / "export"
    export.mkdir()
    tables = ["enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore"]
    cqlsh("; ".join(
        f"COPY {keyspace}.{table} TO '{export / table}.csv' WITH HEADER=true" for table in tables
    ))  # fmt: skip
    policy = tmp_path / "policy.toml"
    policy.write_text(support.policy_text())
    env = support.environment(cassandra, s3)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    as_of = _now()
    from mqforensics import cli

    plan_dir = tmp_path / "plan"
    assert cli.main([
        "plan", "james", "--policy", str(policy), "--snapshot", str(export), "--keyspace",
        keyspace, "--blobs", f"s3://{support.bucket_for(keyspace)}", "--blob-grace", "0s",
        "--as-of", as_of.strftime("%Y-%m-%dT%H:%M:%SZ"), "--out", str(plan_dir),
    ]) == 0  # fmt: skip
    header = json.loads((plan_dir / "plan.json").read_text())
    assert header["inputs"]["cassandra"] is None and header["inputs"]["snapshot"] == str(export)
    before = support.dump(cassandra_endpoint, keyspace, client, keyspace)
    expected = support.expected_plan(generated, as_of, set(before["objects"]))
    targets = _targets(plan_dir)
    assert {(t["queue"], t["timerangestart"], t["bucketid"])
            for t in targets["james.delete_partition"]} == expected.partitions  # fmt: skip
    assert {t["key"] for t in targets["james.delete_blob"]} == expected.blobs
    _approve(plan_dir)

    where = f"{cassandra['host']}:{cassandra['port']}"
    missing = support.purge(plan_dir, env, "--apply")
    assert missing.returncode == 2 and "--cassandra" in missing.stderr, missing.stderr
    result = support.purge(plan_dir, env, "--apply", "--cassandra", where)
    assert result.returncode == 0, result.stdout + result.stderr
    after = support.dump(cassandra_endpoint, keyspace, client, keyspace)
    _assert_exactly_removed(before, after, _removed_by(plan_dir))
