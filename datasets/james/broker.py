"""James's RabbitMQ side of a generated state, on a real broker: publish the MailReferenceDTOs
of view rows as James's Enqueuer does, and export the queues as docs/james.md ("The broker")
tells an operator to (queues.json from the node, messages from a copy of its data).

Used by the broker tests and by `make_broker_sample` (the bundled sample's broker export).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mqforensics.services import rabbitmq
from mqforensics.services.harness import Harness


def reference(row: Mapping[str, Any]) -> bytes:
    """The MailReferenceDTO James publishes for a view row (reference §3.6): the same
    enqueueId and blob ids; ``lastUpdated`` as decimal epoch seconds."""
    updated = row.get("lastupdated")
    headers = {}
    for item in row.get("perrecipientspecificheaders") or []:
        recipient, name, value = (
            (item["_1"], item["_2"], item["_3"]) if isinstance(item, dict) else item
        )
        headers.setdefault(recipient, {"header": {}})["header"].setdefault(name, []).append(value)
    return json.dumps({
        "enqueueId": str(row["enqueueid"]).lower(),
        "recipients": list(row.get("recipients") or []),
        "name": row["name"], "sender": row.get("sender"), "state": row.get("state"),
        "errorMessage": row.get("errormessage"),
        "lastUpdated": None if updated is None else round(updated.timestamp(), 3),
        "attributes": {}, "remoteAddr": row.get("remoteaddr"),
        "remoteHost": row.get("remotehost"), "perRecipientHeaders": headers,
        "headerBlobId": row["headerblobid"], "bodyBlobId": row["bodyblobid"],
    }, separators=(",", ":")).encode()  # Jackson's compact form  # fmt: skip


def export_from_copy(
    harness: Harness, copy_root: Path, out: Path, *, held: tuple[str, int] | None = None
) -> None:
    """``queues.json`` from the running node (a GET: its depths and consumers; with `held`,
    while a consumer holds that many messages of that queue unacknowledged), then a graceful
    stop, a copy of its data, the original started again, and on the copy every James queue's
    messages (``POST .../get``, ``ack_requeue_false``: consuming, on the copy only)."""
    info = harness.running("rabbitmq")
    assert info is not None, "the broker runs"
    api = rabbitmq.management(info)
    out.mkdir(parents=True)
    if held is None:
        queues = _settled_queues(api)
    else:
        with rabbitmq.holding_consumer(info, held[0], held[1]) as holding:
            holding.wait_for(held[1])
            rabbitmq.queue_info(api, held[0])  # the hold is in the statistics
            queues = _settled_queues(api)
    (out / "queues.json").write_text(json.dumps(queues, indent=1, sort_keys=True) + "\n")
    rabbitmq.stop_app(info)
    harness.stop("rabbitmq")
    shutil.copytree(harness.root / "rabbitmq", copy_root / "rabbitmq", symlinks=True)
    harness.start_again("rabbitmq")
    copy = Harness(copy_root)
    copied = copy.start_again("rabbitmq")
    try:
        api = rabbitmq.management(copied)
        (out / "messages").mkdir()
        for queue in queues:
            if not queue["name"].startswith(rabbitmq.JAMES_PREFIX + "-"):
                continue
            body = {"count": 1_000_000, "ackmode": "ack_requeue_false", "encoding": "auto"}
            got = api.post(f"/api/queues/%2F/{queue['name']}/get", body)
            path = out / "messages" / f"{queue['name']}.json"
            path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    finally:
        copy.stop_all()


def _settled_queues(api: rabbitmq.Management) -> list[dict[str, Any]]:
    """``GET /api/queues/%2F`` once every James queue's statistics are collected and current."""
    for queue in api.get("/api/queues/%2F"):
        if queue["name"].startswith(rabbitmq.JAMES_PREFIX + "-"):
            rabbitmq.queue_info(api, queue["name"])
    queues: list[dict[str, Any]] = api.get("/api/queues/%2F")
    return queues
