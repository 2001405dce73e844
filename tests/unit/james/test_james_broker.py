"""The broker side of James's queue (broker.py, broker_checks.py): management API replies read
as RabbitMQ writes them, and each planted mismatch between view and broker found exactly."""

import base64
import datetime as dt
import json
import uuid

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.james import broker
from mqforensics.systems.james.checks import run_checks
from mqforensics.systems.james.options import Settings
from tests.unit.james.test_james_checks import AS_OF, HISTORY, Builder, at

BROKER_CHECKS = (
    "broker_missing_mail", "broker_orphan_message", "dead_lettered_mail",
    "queue_without_consumer", "broker_count_mismatch",
)  # fmt: skip


def reference(enqueueid: str, name: str, last_updated: object = 1763726400.5) -> bytes:
    """A MailReferenceDTO body as James's Jackson writes it (reference §3.6)."""
    return json.dumps({
        "enqueueId": enqueueid, "recipients": ["bob@example.com"], "name": name,
        "sender": "alice@example.org", "state": "root", "errorMessage": None,
        "lastUpdated": last_updated, "attributes": {}, "remoteAddr": "10.0.0.1",
        "remoteHost": "host", "perRecipientHeaders": {}, "headerBlobId": "h",
        "bodyBlobId": "b",
    }, separators=(",", ":")).encode()  # fmt: skip


def got(*bodies: bytes, queue: str = "spool") -> list[dict]:
    """A ``POST /api/queues/{vhost}/{queue}/get`` reply (encoding auto: JSON is a string)."""
    out = []
    for i, body in enumerate(bodies):
        try:
            payload, encoding = body.decode("utf-8"), "string"
        except UnicodeDecodeError:
            payload, encoding = base64.b64encode(body).decode(), "base64"
        out.append({
            "payload_bytes": len(body), "redelivered": False,
            "exchange": f"JamesMailQueue-exchange-{queue}", "routing_key": "",
            "message_count": len(bodies) - i - 1,
            "properties": {"delivery_mode": 2, "priority": 0, "content_type": "text/plain",
                           "headers": {"x-dead-letter-routing-key": ""}},
            "payload": payload, "payload_encoding": encoding,
        })  # fmt: skip
    return out


def listing(*queues: tuple[str, int, int, int]) -> list[dict]:
    """A ``GET /api/queues/%2F`` reply, with a queue James did not declare."""
    items = [{"name": "unrelated", "vhost": "/", "type": "classic", "messages_ready": 9,
              "messages_unacknowledged": 0, "consumers": 0}]  # fmt: skip
    for name, ready, unacked, consumers in queues:
        items.append({"name": name, "vhost": "/", "type": "classic", "messages_ready": ready,
                      "messages_unacknowledged": unacked, "consumers": consumers,
                      "arguments": {"x-queue-version": 2}})  # fmt: skip
    return items


WORK = "JamesMailQueue-workqueue-spool"
DLQ = "JamesMailQueue-dead-letter-queue-spool"
OUT_WORK = "JamesMailQueue-workqueue-outgoing"
OUT_DLQ = "JamesMailQueue-dead-letter-queue-outgoing"


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory):
    b = Builder()
    ids = {}
    # spool, browseStart 10:00: messages read one by one (an export with both queues).
    ids["delivered"] = b.mail("spool", at(21, 10), at(21, 10, 5))
    ids["lost"] = b.mail("spool", at(21, 10), at(21, 10, 20))
    ids["lost_newest"] = b.mail("spool", at(21, 10), at(21, 10, 40))
    ids["recent"] = b.mail("spool", at(21, 11), at(21, 11, 30))  # inside the 1 h grace
    ids["invisible"] = b.mail("spool", at(21, 9), at(21, 9, 5))  # before browseStart
    ids["dead_ok"] = b.mail("spool", at(21, 10), at(21, 10, 7))
    ids["dead_gone"] = b.mail("spool", at(21, 10), at(21, 10, 8), missing_body=True,
                              name="Mail 1/2 with space")  # fmt: skip
    ids["consumed"] = b.mail("spool", at(21, 10), at(21, 10, 9), consumed=True)
    ids["absent"] = str(uuid.UUID(int=999))
    # outgoing: counts only. Two live mails, one work message, three dead letters, no consumer.
    b.mail("outgoing", at(21, 10), at(21, 10, 1))
    b.mail("outgoing", at(21, 10), at(21, 10, 2))
    state = b.state(spark, browse={"spool": at(21, 10), "outgoing": at(21, 10)}, content={},
                    history=HISTORY)  # fmt: skip
    names = {row[3]: row[5] for row in b.entries}
    export = tmp_path_factory.mktemp("broker")
    (export / "messages").mkdir()
    (export / "queues.json").write_text(json.dumps(listing(
        (WORK, 4, 0, 2), (DLQ, 2, 0, 0), (OUT_WORK, 1, 0, 0), (OUT_DLQ, 3, 0, 0),
    )))  # fmt: skip
    work = got(
        reference(ids["delivered"], names[ids["delivered"]]),
        reference(ids["consumed"].upper(), names[ids["consumed"]], 1763726400),
        reference(ids["absent"], "ghost", None),
        b"\x00\x01 not json",
    )
    (export / "messages" / f"{WORK}.json").write_text(json.dumps(work))
    dead = got(
        reference(ids["dead_ok"], names[ids["dead_ok"]]),
        reference(ids["dead_gone"], names[ids["dead_gone"]]),
    )
    (export / "messages" / f"{DLQ}.json").write_text(json.dumps(dead))
    read = broker.read_export(export)
    state.broker_queues, state.broker_messages = read.frames(spark)
    return state, ids


def found(state, **options):
    rows = run_checks(state, Settings(**options), only=list(BROKER_CHECKS)).collect()
    return {(r.check, r.subject): json.loads(r.detail) for r in rows}


def test_each_planted_mismatch_is_found_exactly(planted):
    state, ids = planted
    findings = found(state)
    assert set(findings) == {
        ("broker_missing_mail", ids["lost"]),
        ("broker_missing_mail", ids["lost_newest"]),
        ("broker_orphan_message", ids["consumed"]),
        ("broker_orphan_message", ids["absent"]),
        ("broker_orphan_message", f"{WORK}#3"),
        ("dead_lettered_mail", ids["dead_ok"]),
        ("dead_lettered_mail", ids["dead_gone"]),
        ("dead_lettered_mail", OUT_DLQ),
        ("queue_without_consumer", OUT_WORK),
        ("broker_count_mismatch", "outgoing"),
    }
    orphan = {s: d for (c, s), d in findings.items() if c == "broker_orphan_message"}
    assert orphan[ids["consumed"]]["view"] == "deleted"
    assert orphan[ids["absent"]]["view"] == "absent"
    assert orphan[f"{WORK}#3"]["view"] == "unreadable"
    assert orphan[f"{WORK}#3"]["problem"] == "body is not JSON"
    assert orphan[ids["consumed"]]["last_updated"] == "2025-11-21T12:00:00.000Z"
    dead = {s: d for (c, s), d in findings.items() if c == "dead_lettered_mail"}
    assert (dead[ids["dead_ok"]]["view"], dead[ids["dead_ok"]]["blobs"]) == ("live", "present")
    assert dead[ids["dead_ok"]]["delete"] is None
    assert (dead[ids["dead_gone"]]["view"], dead[ids["dead_gone"]]["blobs"]) == ("live", "missing")
    assert dead[ids["dead_gone"]]["delete"] == (
        "DELETE /mailQueues/spool/mails?name=Mail+1%2F2+with+space"
    )
    assert dead[OUT_DLQ] == {"broker_queue": OUT_DLQ, "ready": 3, "unacked": 0}
    mismatch = findings[("broker_count_mismatch", "outgoing")]
    assert mismatch == {"view_live": 2, "work_messages": 1, "dead_letter_messages": 3,
                        "difference": -2, "declared": True}  # fmt: skip


def test_republish_older_than_reaches_every_missing_mail_and_no_newer_one(planted):
    state, ids = planted
    missing = {s: d for (c, s), d in found(state).items() if c == "broker_missing_mail"}
    # The newest missing mail is 1h19m20s old at the as-of: olderThan one second less.
    age = int((AS_OF - at(21, 10, 40)).total_seconds())
    call = f"POST /mailQueues/spool?action=RepublishNotProcessedMails&olderThan={age - 1}s"
    assert {d["republish"] for d in missing.values()} == {call}
    # A grace longer than the newest missing mail's age leaves only the older one.
    later = found(state, broker_grace=dt.timedelta(minutes=80))
    assert [s for (c, s) in later if c == "broker_missing_mail"] == [ids["lost"]]


def test_without_a_broker_no_broker_check_runs(spark):
    b = Builder()
    b.mail("spool", at(21, 10), at(21, 10, 5))
    state = b.state(spark, browse={"spool": at(21, 10)}, content={}, history=HISTORY)
    assert found(state) == {}


def test_a_live_read_reconciles_counts_only(spark, planted):
    state, _ = planted
    read = broker.BrokerRead(
        broker.parse_queues(listing((WORK, 5, 1, 1), (DLQ, 2, 0, 0)), "api"), [], "live", "x"
    )
    saved = state.broker_queues, state.broker_messages
    state.broker_queues, state.broker_messages = read.frames(spark)[0], None
    try:
        findings = found(state)
    finally:
        state.broker_queues, state.broker_messages = saved
    # spool: 7 live mails (the invisible one too) against 6 work + 2 dead-lettered messages.
    assert findings[("broker_count_mismatch", "spool")]["difference"] == -1
    assert findings[("dead_lettered_mail", DLQ)] == {"broker_queue": DLQ, "ready": 2, "unacked": 0}
    assert {c for c, _ in findings} == {"broker_count_mismatch", "dead_lettered_mail"}


def test_replies_are_read_as_rabbitmq_writes_them(tmp_path):
    queues = broker.parse_queues({"items": listing((WORK, 1, 2, 3))}, "api", vhost="/")
    assert [(q.queuename, q.role, q.ready, q.unacked, q.consumers) for q in queues] == [
        ("spool", "work", 1, 2, 3)
    ]
    enqueueid = str(uuid.uuid4())
    messages = broker.parse_messages(got(reference(enqueueid, "n", 1473344752.000000000)), "f", DLQ)
    assert messages[0].enqueueid == enqueueid and messages[0].role == "dead_letter"
    assert messages[0].last_updated == dt.datetime(2016, 9, 8, 14, 25, 52, tzinfo=dt.UTC)
    truncated = got(reference(enqueueid, "n"))
    truncated[0]["payload"] = truncated[0]["payload"][:20]
    assert broker.parse_messages(truncated, "f", WORK)[0].problem.startswith("payload truncated")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "has no queues.json"),
        ({"queues.json": "[{"}, "queues.json: not JSON at offset 2"),
        ({"queues.json": '{"a": 1}'}, "not a RabbitMQ queue listing"),
        ({"queues.json": "[]", f"messages/{WORK}.json": "[]"}, f"queue {WORK} is not in"),
        ({"queues.json": "[]", "messages/other.json": "[]"}, "not a James work or dead-letter"),
    ],
)
def test_a_bad_export_is_an_input_error_naming_the_file(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=message):
        broker.read_export(tmp_path)


def test_a_plan_defers_every_broker_finding_to_james_with_exact_calls(planted, tmp_path):
    from mqforensics.findings import read_findings, write_findings
    from mqforensics.retention.manifest import read_plan, write_plan
    from mqforensics.retention.policy import Policy, Rule
    from mqforensics.systems.james import broker_plan
    from mqforensics.systems.james.plan import plan
    from mqforensics.units import utc_text

    state, ids = planted
    write_findings(run_checks(state, Settings(), only=list(BROKER_CHECKS)), tmp_path)
    rows = read_findings(tmp_path, raw=True)
    manifest = {"as_of": utc_text(AS_OF), "plan_inputs": {"keyspace": "apache_james"}}
    reconcile = Rule(id="reconcile", kind="broker_reconcile", legal_basis="delivery")
    policy = Policy("p.toml", "0" * 64, (reconcile,), 100)
    parts = plan(rows, policy, manifest)
    assert parts.actions == []
    by_kind = {}
    for item in parts.deferred:
        by_kind.setdefault(item.kind, []).append(item)
    [republish] = by_kind[broker_plan.REPUBLISH]
    age = int((AS_OF - at(21, 10, 40)).total_seconds())
    assert republish.target == {
        "queue": "spool", "as_of": "2026-11-21T12:00:00Z", "mails": 2,
        "call": f"POST /mailQueues/spool?action=RepublishNotProcessedMails&olderThan={age - 1}s",
    }  # fmt: skip
    missing = {r["id"] for r in rows if r["check"] == "broker_missing_mail"}
    assert set(republish.findings) == missing and len(missing) == 2
    [delete] = by_kind[broker_plan.DELETE_MAIL]
    assert delete.target["message"] == ids["dead_gone"]
    assert delete.target["call"] == "DELETE /mailQueues/spool/mails?name=Mail+1%2F2+with+space"
    assert [d.target["message"] for d in by_kind[broker_plan.DEAD_LETTER]] == [ids["dead_ok"]]
    assert [d.reason for d in by_kind[broker_plan.BROKER_MESSAGE]] == [
        broker_plan.ORPHAN_REASONS[view] for view in ("deleted", "absent", "unreadable")
    ]
    assert any("outgoing: its work queue has no consumer" in n for n in parts.notes)
    assert any("the broker holds 2 mails more" in n for n in parts.notes)
    # A plan with these deferrals is written and read back (every one cites the rule).
    write_plan(tmp_path / "plan", system="james", as_of=AS_OF, policy=policy, inputs={},
               actions=parts.actions, deferred=parts.deferred, notes=parts.notes)  # fmt: skip
    written = read_plan(tmp_path / "plan")
    assert list(written.deferred()) == parts.deferred
    # The report lists the calls for a person to run.
    from mqforensics.views.plan_report import render_text

    text = render_text(written)
    section = text[text.index("Calls to run, not made by the purger (2)") :]
    assert republish.target["call"] in section and delete.target["call"] in section
    # No broker_reconcile rule: the broker findings are not in the plan.
    other = Rule(id="c", kind="consumed_mail", legal_basis="b", older_than=dt.timedelta(days=1))
    assert plan(rows, Policy("p.toml", "0" * 64, (other,), 100), manifest).deferred == []


def test_a_message_ahead_of_its_row_is_not_judged_within_the_grace(spark, planted):
    """James writes the row and publishes at once: a young message with no row yet is not an
    orphan; the same message, older than the grace, is."""
    state, _ = planted
    young = reference(str(uuid.UUID(int=4242)), "young", AS_OF.timestamp() - 60)
    read = broker.BrokerRead([], broker.parse_messages(got(young), "f", WORK), "x", "y")
    saved = state.broker_messages
    state.broker_messages = read.frames(spark)[1].unionByName(saved)
    try:
        subjects = {s for c, s in found(state) if c == "broker_orphan_message"}
        assert str(uuid.UUID(int=4242)) not in subjects
        later = found(state, broker_grace=dt.timedelta(seconds=30))
        assert ("broker_orphan_message", str(uuid.UUID(int=4242))) in later
    finally:
        state.broker_messages = saved


def test_a_partial_enumeration_marks_every_check_that_reads_view_rows():
    """Every check is either marked partial when an enumeration misses partitions, or reads
    what it needs whole (the history, every reference, the broker's counts)."""
    from mqforensics.systems.james.read import ROW_CHECKS
    from mqforensics.systems.james.spec import CHECKS

    whole = {"config_violation", "orphaned_blob", "queue_without_consumer"}
    assert set(ROW_CHECKS) | whole == {check.name for check in CHECKS}
    assert not set(ROW_CHECKS) & whole
