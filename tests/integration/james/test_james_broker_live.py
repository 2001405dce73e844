"""The view reconciled with a real RabbitMQ: a generated James state in the real Cassandra, its
live mails' MailReferenceDTOs published to James's topology on a private broker, then some
messages never published (lost), some dead-lettered the real way, some orphans published.
The audit finds exactly those, counts only from the live management API and one by one from
an export taken on a copy of the broker; the broker's queues are the same afterwards (depths,
and the order of every message)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from datasets.james import generate as gen
from datasets.james.broker import export_from_copy, reference
from datasets.james.load import load_into_cassandra
from mqforensics.cli import main
from mqforensics.services import rabbitmq as broker_service
from mqforensics.services.harness import Harness
from mqforensics.sources.cassandra_connection import close_cluster

pytestmark = pytest.mark.integration

QUEUE = "spool"
LOST, DEAD, ORPHANS = 3, 2, 2


@pytest.fixture(scope="module")
def planted(cassandra_endpoint, tmp_path_factory):
    as_of = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).replace(microsecond=0)
    spec = gen.GenerationSpec(seed=23, queues=(QUEUE,), as_of=as_of, normal_mails=200,
                              live_fraction=0.2)  # fmt: skip
    state = gen.generate(spec)
    consumed = {(d["queuename"], str(d["enqueueid"])) for d in state.deleted}
    browse = {b["queuename"]: b["browsestart"] for b in state.browse_start}
    live = [r for r in state.entries if (r["queuename"], str(r["enqueueid"])) not in consumed]
    visible = sorted(
        (r for r in live if r["timerangestart"] >= browse[r["queuename"]]),
        key=lambda r: r["enqueuedtime"],
    )
    # Lost and dead-lettered mails among those older than the grace (and then some).
    old = [r for r in visible if r["enqueuedtime"] < as_of - dt.timedelta(hours=2)]
    gone = next(r for r in state.entries if (r["queuename"], str(r["enqueueid"])) in consumed)
    assert len(old) >= LOST + DEAD + 1, "enough old visible live mails to plant each case"
    keyspace = f"james_broker_{uuid.uuid4().hex[:8]}"
    root = tmp_path_factory.mktemp("broker")
    harness = Harness(root / "node")
    try:
        load_into_cassandra(state, cassandra_endpoint, keyspace)
        info = harness.ensure("rabbitmq")
        api = broker_service.management(info)
        names = broker_service.declare_james_queue(api, QUEUE)
        broker_service.declare_james_queue(api, "outgoing")  # declared, empty: nothing to report
        dead, lost = old[:DEAD], old[DEAD : DEAD + LOST]
        delivered = [r for r in visible if r not in dead and r not in lost]
        orphans = [str(uuid.uuid4()) for _ in range(ORPHANS - 1)]
        # Dead-lettered first (the head of the queue), the rest in enqueue order, then orphans:
        # ids with no view row, and the message of a consumed mail.
        for row in [*dead, *delivered]:
            broker_service.publish(api, names["exchange"], reference(row))
        for enqueueid in orphans:
            broker_service.publish(
                api, names["exchange"], reference({**gone, "enqueueid": enqueueid})
            )
        broker_service.publish(api, names["exchange"], reference(gone))
        assert broker_service.dead_letter(api, names["workqueue"], DEAD) == DEAD
        expected = {
            *{("broker_missing_mail", str(r["enqueueid"])) for r in lost},
            *{("broker_orphan_message", e) for e in [*orphans, str(gone["enqueueid"])]},
            *{("dead_lettered_mail", str(r["enqueueid"])) for r in dead},
        }
        order = [reference(r) for r in delivered]
        order += [reference({**gone, "enqueueid": e}) for e in orphans] + [reference(gone)]
        yield {
            "state": state, "keyspace": keyspace, "harness": harness, "names": names,
            "expected": expected, "order": order, "root": root,
            "counts": {"view_live": len(live), "work": len(order), "dead": DEAD},
        }  # fmt: skip
    finally:
        harness.stop_all()
        cluster, session = cassandra_endpoint.connect()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        finally:
            close_cluster(cluster)


def depths(harness: Harness, names: dict) -> dict[str, tuple[int, int, int]]:
    api = broker_service.management(harness.running("rabbitmq") or {})
    out = {}
    for role in ("workqueue", "dead_letter_queue"):
        q = broker_service.queue_info(api, names[role])
        out[role] = (q["messages_ready"], q["messages_unacknowledged"], q["consumers"])
    return out


def audit(planted, cassandra_endpoint, out: Path, *broker: str) -> tuple[int, list[dict]]:
    state = planted["state"]
    status = main([
        "audit", "james", "--cassandra", cassandra_endpoint.where,
        "--keyspace", planted["keyspace"], "--scan", "--out", str(out),
        "--as-of", state.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"), *broker,
    ])  # fmt: skip
    return status, json.loads((out / "findings.json").read_text())


BROKER_CHECKS = ("broker_missing_mail", "broker_orphan_message", "dead_lettered_mail",
                 "queue_without_consumer", "broker_count_mismatch")  # fmt: skip


def test_the_audit_reconciles_view_and_broker_and_changes_nothing(
    spark, planted, cassandra_endpoint, cassandra, tmp_path, monkeypatch, capsys
):
    harness, names = planted["harness"], planted["names"]
    info = harness.running("rabbitmq")
    assert info is not None
    monkeypatch.setenv("MQF_CASSANDRA_USERNAME", cassandra["username"])
    monkeypatch.setenv("MQF_CASSANDRA_PASSWORD", cassandra["password"])
    monkeypatch.setenv("MQF_RABBITMQ_USERNAME", info["username"])
    monkeypatch.setenv("MQF_RABBITMQ_PASSWORD", info["password"])
    before = depths(harness, names)
    assert before == {"workqueue": (planted["counts"]["work"], 0, 0),
                      "dead_letter_queue": (DEAD, 0, 0)}  # fmt: skip

    # Live: counts only. Every live mail against the work and dead-letter queues.
    status, rows = audit(planted, cassandra_endpoint, tmp_path / "live",
                         "--rabbitmq", info["management_url"])  # fmt: skip
    found = {(r["check"], r["subject"]): r["detail"] for r in rows if r["check"] in BROKER_CHECKS}
    counts = planted["counts"]
    difference = counts["view_live"] - counts["work"] - counts["dead"]
    assert found == {
        ("broker_count_mismatch", QUEUE): {
            "view_live": counts["view_live"], "work_messages": counts["work"],
            "dead_letter_messages": DEAD, "difference": difference, "declared": True,
        },
        ("dead_lettered_mail", names["dead_letter_queue"]): {
            "broker_queue": names["dead_letter_queue"], "ready": DEAD, "unacked": 0},
        ("queue_without_consumer", names["workqueue"]): {
            "broker_queue": names["workqueue"], "ready": counts["work"], "unacked": 0},
        ("queue_without_consumer", "JamesMailQueue-workqueue-outgoing"): {
            "broker_queue": "JamesMailQueue-workqueue-outgoing", "ready": 0, "unacked": 0},
    }  # fmt: skip
    assert status == 1
    manifest = json.loads((tmp_path / "live" / "manifest.json").read_text())
    [broker_input] = [i for i in manifest["inputs"] if i["kind"] == "rabbitmq management"]
    assert broker_input["location"] == info["management_url"] and broker_input["read"] == "counts"
    printed = capsys.readouterr()
    assert info["password"] not in printed.out + printed.err
    assert depths(harness, names) == before

    # An export taken on a copy: every mail one by one.
    export = tmp_path / "export"
    export_from_copy(harness, planted["root"] / "copy", export)
    status, rows = audit(planted, cassandra_endpoint, tmp_path / "exported",
                         "--broker-export", str(export))  # fmt: skip
    found = {(r["check"], r["subject"]) for r in rows if r["check"] in BROKER_CHECKS}
    idle = {("queue_without_consumer", names["workqueue"]),
            ("queue_without_consumer", "JamesMailQueue-workqueue-outgoing")}  # fmt: skip
    assert found == planted["expected"] | idle
    details = {r["subject"]: r["detail"] for r in rows if r["check"] == "dead_lettered_mail"}
    assert {(d["view"], d["blobs"]) for d in details.values()} == {("live", "unknown")}

    # Nothing changed on the broker: the same depths, and every message in the same order.
    assert depths(harness, names) == before
    api = broker_service.management(harness.running("rabbitmq") or {})
    assert broker_service.drain(api, names["workqueue"]) == planted["order"]
