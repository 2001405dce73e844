"""The harness's real RabbitMQ (Debian): loopback only, its own admin, James's topology, held
messages, and a stop that leaves no process behind."""

from __future__ import annotations

import base64
import os
import time
import uuid
from pathlib import Path

import pika
import pytest

from mqforensics.services import rabbitmq as rabbitmq_service
from mqforensics.services.harness import Harness
from mqforensics.services.process import pid_alive

pytestmark = pytest.mark.integration

IPV4_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
IPV6_LOOPBACK = "00000000000000000000000001000000"  # ::1


def listening_sockets(pids: list[int]) -> set[tuple[str, int, str]]:
    """(local address in hex, port, process name) of every socket the `pids` listen on."""
    inodes: dict[str, str] = {}
    for pid in pids:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd) if fd.is_symlink() else ""
            if target.startswith("socket:["):
                inodes[target[8:-1]] = name
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add((address, int(port, 16), inodes[fields[9]]))
    return found


def process_names(pids: list[int]) -> set[str]:
    return {Path(f"/proc/{pid}/comm").read_text().strip() for pid in pids if pid_alive(pid)}


def counts(record: dict) -> tuple[int, int, int]:
    return (
        record["messages_ready"],
        record["messages_unacknowledged"],
        record["consumers"],
    )


def test_loopback_only_with_a_private_admin(rabbitmq):
    port = rabbitmq["management_port"]
    assert rabbitmq["host"] == "127.0.0.1"
    assert rabbitmq["management_url"] == f"http://127.0.0.1:{port}"
    assert rabbitmq["version"].startswith("3.10.")
    assert rabbitmq["vhost"] == "/"
    mgmt = rabbitmq_service.management(rabbitmq)
    assert mgmt.get("/api/whoami")["tags"] == ["administrator"]
    # The generated admin is the only user: no guest, over HTTP or AMQP.
    assert [user["name"] for user in mgmt.get("/api/users")] == [rabbitmq["username"]]
    assert mgmt.get("/api/overview")["node"] == rabbitmq["nodename"]
    assert not rabbitmq_service.management_ready(rabbitmq["management_url"], "guest", "guest")
    guest = rabbitmq_service.Management(rabbitmq["management_url"], "guest", "guest")
    with pytest.raises(rabbitmq_service.ManagementError, match="GET /api/whoami: HTTP 401"):
        guest.get("/api/whoami")
    # An HTTP error names the method, path and status, never the login.
    with pytest.raises(rabbitmq_service.ManagementError) as failed:
        mgmt.get(mgmt.path("queues", "no-such-queue"))
    assert failed.value.status == 404
    assert "GET /api/queues/%2F/no-such-queue: HTTP 404" in str(failed.value)
    assert rabbitmq["password"] not in str(failed.value)
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(
            pika.ConnectionParameters(
                "127.0.0.1",
                rabbitmq["amqp_port"],
                credentials=pika.PlainCredentials("guest", "guest"),
                connection_attempts=1,
            )
        )
    # Every socket its processes listen on is on the loopback: AMQP, management, distribution
    # and epmd on 127.0.0.1 (epmd always adds ::1 too, the IPv6 loopback).
    pids = rabbitmq_service.instance_pids(rabbitmq)
    assert {"epmd", "beam.smp", "erl_child_setup"} <= process_names(pids)
    sockets = listening_sockets(pids)
    assert {(address, name) for address, _, name in sockets} <= {
        (IPV4_LOOPBACK, "beam.smp"),
        (IPV4_LOOPBACK, "epmd"),
        (IPV6_LOOPBACK, "epmd"),
    }
    assert {port for address, port, _ in sockets if address == IPV4_LOOPBACK} == {
        rabbitmq["amqp_port"],
        rabbitmq["management_port"],
        rabbitmq["dist_port"],
        rabbitmq["epmd_port"],
    }


def test_james_queue_publish_dead_letter_and_hold(rabbitmq):
    mgmt = rabbitmq_service.management(rabbitmq)
    name = f"spool-{uuid.uuid4().hex[:8]}"
    names = rabbitmq_service.declare_james_queue(mgmt, name)
    work, dead = names["workqueue"], names["dead_letter_queue"]
    assert names == {
        "exchange": f"JamesMailQueue-exchange-{name}",
        "dead_letter_exchange": f"JamesMailQueue-dead-letter-exchange-{name}",
        "workqueue": f"JamesMailQueue-workqueue-{name}",
        "dead_letter_queue": f"JamesMailQueue-dead-letter-queue-{name}",
    }
    for exchange in (names["exchange"], names["dead_letter_exchange"]):
        record = mgmt.get(mgmt.path("exchanges", exchange))
        assert (record["type"], record["durable"], record["auto_delete"]) == ("direct", True, False)
        assert (record["internal"], record["arguments"]) == (False, {})
    record = mgmt.get(mgmt.path("queues", work))
    assert (record["durable"], record["exclusive"], record["auto_delete"]) == (True, False, False)
    assert record["type"] == "classic"
    assert record["arguments"] == {
        "x-dead-letter-exchange": names["dead_letter_exchange"],
        "x-queue-version": 2,
    }
    record = mgmt.get(mgmt.path("queues", dead))
    assert (record["durable"], record["exclusive"], record["auto_delete"]) == (True, False, False)
    assert record["arguments"] == {}
    bindings = {
        (b["source"], b["destination"], b["routing_key"])
        for b in mgmt.get("/api/bindings/%2F")
        if b["source"] and name in b["destination"]
    }
    assert bindings == {(names["exchange"], work, ""), (names["dead_letter_exchange"], dead, "")}
    quorum = rabbitmq_service.declare_james_queue(mgmt, f"{name}-q", quorum=True)
    record = mgmt.get(mgmt.path("queues", quorum["workqueue"]))
    assert record["type"] == "quorum"
    assert record["arguments"] == {
        "x-dead-letter-exchange": quorum["dead_letter_exchange"],
        "x-queue-type": "quorum",
    }

    bodies = [f"mail-{i}".encode() for i in range(6)]
    for body in bodies:
        rabbitmq_service.publish(mgmt, names["exchange"], body)
    assert counts(rabbitmq_service.queue_info(mgmt, work)) == (6, 0, 0)

    assert rabbitmq_service.dead_letter(mgmt, work, 2) == 2
    assert counts(rabbitmq_service.queue_info(mgmt, work)) == (4, 0, 0)
    assert counts(rabbitmq_service.queue_info(mgmt, dead)) == (2, 0, 0)
    # Dead-lettered with James's properties and an x-death record (peeked, requeued).
    (peeked,) = mgmt.post(
        mgmt.path("queues", dead, "get"),
        {"count": 1, "ackmode": "ack_requeue_true", "encoding": "base64"},
    )
    assert base64.b64decode(peeked["payload"]) == b"mail-0"
    properties = peeked["properties"]
    assert (properties["delivery_mode"], properties["priority"]) == (2, 0)
    assert properties["content_type"] == "text/plain"
    assert properties["headers"]["x-dead-letter-routing-key"] == ""
    assert properties["headers"]["x-death"][0]["reason"] == "rejected"

    with rabbitmq_service.holding_consumer(rabbitmq, work, prefetch=3) as held:
        assert held.wait_for(3) == bodies[2:5]
        assert counts(rabbitmq_service.queue_info(mgmt, work)) == (1, 3, 1)
    assert counts(rabbitmq_service.queue_info(mgmt, work)) == (4, 0, 0)

    assert rabbitmq_service.drain(mgmt, work) == bodies[2:]
    assert rabbitmq_service.drain(mgmt, dead) == bodies[:2]
    assert counts(rabbitmq_service.queue_info(mgmt, work)) == (0, 0, 0)


def test_stop_leaves_no_process_and_start_again(tmp_path):
    # A private server that this test may stop without disturbing the session's.
    harness = Harness(tmp_path / "private")
    try:
        first = harness.ensure("rabbitmq")
        assert Harness(tmp_path / "private").ensure("rabbitmq")["pid"] == first["pid"]  # reused
        assert harness.environment() == {
            "MQF_RABBITMQ_URL": first["management_url"],
            "MQF_RABBITMQ_USERNAME": first["username"],
            "MQF_RABBITMQ_PASSWORD": first["password"],
        }
        mgmt = rabbitmq_service.management(first)
        names = rabbitmq_service.declare_james_queue(mgmt, "outgoing")
        pids = rabbitmq_service.instance_pids(first)
        assert {"epmd", "beam.smp", "erl_child_setup", "inet_gethost"} <= process_names(pids)
        assert harness.stop("rabbitmq")
        assert harness.running("rabbitmq") is None
        deadline = time.monotonic() + 10
        while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in pids if pid_alive(pid)] == []
        assert rabbitmq_service.instance_pids(first) == []

        # Back on its data: same node, login and durable queues, new ports.
        again = harness.start_again("rabbitmq")
        assert again["pid"] != first["pid"]
        assert (again["nodename"], again["username"]) == (first["nodename"], first["username"])
        mgmt = rabbitmq_service.management(again)
        assert mgmt.get(mgmt.path("queues", names["workqueue"]))["durable"]
    finally:
        harness.stop_all(["rabbitmq"])
    assert harness.running("rabbitmq") is None
