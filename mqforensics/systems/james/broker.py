"""RabbitMQ's side of James's distributed mail queue, read without changing anything.

James delivers through RabbitMQ and browses through the Cassandra view; this reads the broker
side (docs/james.md, "The broker"). Per James queue ``Q`` it looks at two broker queues
(reference §3.5): the work queue ``JamesMailQueue-workqueue-Q`` and the dead-letter queue
``JamesMailQueue-dead-letter-queue-Q``.

Two sources:

* **live**, the management HTTP API, with GET requests only: per queue the messages ready,
  unacknowledged and the consumers (``GET /api/queues/{vhost}``). Counts only: a classic or
  quorum queue cannot be read message by message without a side effect (``basic.get`` then a
  requeue sets ``redelivered``, moves the message and, on a quorum queue, counts a delivery
  toward ``x-delivery-limit``, which dead-letters it; a shovel or a stream consumes);
* **an export directory** (``--broker-export``): ``queues.json``, the body of that same
  ``GET /api/queues`` (``rabbitmqadmin -f raw_json list queues`` prints it too), and,
  optionally, ``messages/<broker queue>.json``, the body of the management API's
  ``POST /api/queues/{vhost}/{queue}/get`` (``rabbitmqadmin -f raw_json get``) taken **on a
  copy** of the broker, never on the production node. Each message body is James's
  ``MailReferenceDTO`` JSON (reference §3.6): its ``enqueueId`` is the view row's.

Everything read is small (one row per queue, one per exported message) and becomes two frames,
`QUEUES` and `MESSAGES`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import astuple, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import AuthenticationFailed, InputError, ServerUnavailable
from mqforensics.filenames import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

WORK_QUEUE_PREFIX = "JamesMailQueue-workqueue-"
DEAD_LETTER_QUEUE_PREFIX = "JamesMailQueue-dead-letter-queue-"
WORK = "work"
DEAD_LETTER = "dead_letter"
QUEUES_FILE = "queues.json"
MESSAGES_DIR = "messages"
HTTP_SECONDS = 30.0

# One row per broker queue of a James queue. Counts are null when the broker did not give
# them (a quorum queue without a leader, statistics not yet collected).
QUEUES = (
    "queuename string, role string, broker_queue string, vhost string, type string, "
    "ready bigint, unacked bigint, consumers bigint, messages_read boolean"
)
# One row per message read from an export, in queue order (`position` from 0 at the head).
# `enqueueid` is null when the body is no MailReferenceDTO; `problem` then says why.
MESSAGES = (
    "queuename string, role string, broker_queue string, position bigint, enqueueid string, "
    "name string, last_updated timestamp, redelivered boolean, payload_bytes bigint, "
    "problem string"
)


@dataclass(frozen=True)
class BrokerQueue:
    queuename: str
    role: str
    broker_queue: str
    vhost: str
    type: str | None
    ready: int | None
    unacked: int | None
    consumers: int | None
    messages_read: bool = False


@dataclass(frozen=True)
class BrokerMessage:
    queuename: str
    role: str
    broker_queue: str
    position: int
    enqueueid: str | None
    name: str | None
    last_updated: dt.datetime | None
    redelivered: bool | None
    payload_bytes: int | None
    problem: str | None


@dataclass
class BrokerRead:
    """What was read of the broker, and from where (no credential in `location`)."""

    queues: list[BrokerQueue]
    messages: list[BrokerMessage]
    kind: str
    location: str
    notes: list[str] = field(default_factory=list)

    def frames(self, spark: SparkSession) -> tuple[DataFrame, DataFrame]:
        queues = spark.createDataFrame([astuple(q) for q in self.queues], QUEUES)
        messages = spark.createDataFrame([astuple(m) for m in self.messages], MESSAGES)
        return queues, messages


def james_queue(broker_queue: str) -> tuple[str, str] | None:
    """(James queue name, role) of a broker queue James declares, else None."""
    for prefix, role in ((WORK_QUEUE_PREFIX, WORK), (DEAD_LETTER_QUEUE_PREFIX, DEAD_LETTER)):
        if broker_queue.startswith(prefix) and len(broker_queue) > len(prefix):
            return broker_queue[len(prefix) :], role
    return None


def broker_queue_name(queuename: str, role: str) -> str:
    return (WORK_QUEUE_PREFIX if role == WORK else DEAD_LETTER_QUEUE_PREFIX) + queuename


# -- queue listings ------------------------------------------------------------------------------


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_queues(document: Any, where: str, vhost: str | None = None) -> list[BrokerQueue]:
    """The James queues of a ``GET /api/queues`` body (a list of queue objects; a paginated
    reply's ``items``), restricted to `vhost` when given."""
    items = document.get("items") if isinstance(document, dict) else document
    if not isinstance(items, list):
        raise InputError(f"{where}: not a RabbitMQ queue listing (a JSON list of queues)")
    queues = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InputError(f"{where}: queue {index} has no name")
        item_vhost = str(item["vhost"]) if isinstance(item.get("vhost"), str) else "/"
        if vhost is not None and item_vhost != vhost:
            continue
        james = james_queue(item["name"])
        if james is None:
            continue
        kind = item.get("type")
        queues.append(
            BrokerQueue(
                queuename=james[0],
                role=james[1],
                broker_queue=item["name"],
                vhost=item_vhost,
                type=kind if isinstance(kind, str) else None,
                ready=_count(item.get("messages_ready")),
                unacked=_count(item.get("messages_unacknowledged")),
                consumers=_count(item.get("consumers")),
            )
        )
    return sorted(queues, key=lambda q: (q.vhost, q.queuename, q.role))


# -- messages ------------------------------------------------------------------------------------


def _payload(item: dict[str, Any]) -> bytes | None:
    payload = item.get("payload")
    if not isinstance(payload, str):
        return None
    if item.get("payload_encoding") == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except ValueError:
            return None
    return payload.encode("utf-8")


def _instant(value: Any) -> dt.datetime | None:
    """A MailReferenceDTO ``lastUpdated``: decimal epoch seconds (``1473344752.000000000``),
    an integer for legacy writers, or null."""
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = Decimal(str(value))
    except InvalidOperation:
        return None
    if not seconds.is_finite():
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
        microseconds=int(seconds * 1_000_000)
    )


def decode_reference(body: bytes) -> tuple[str | None, str | None, dt.datetime | None, str | None]:
    """(enqueueid, name, lastUpdated, problem) of a message body: a MailReferenceDTO, or why
    not (James itself nacks such a message without requeue: "Discarding this message")."""
    try:
        dto = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, None, None, "body is not JSON"
    if not isinstance(dto, dict):
        return None, None, None, "body is not a MailReferenceDTO object"
    raw = dto.get("enqueueId")
    try:
        enqueueid = str(uuid.UUID(raw)) if isinstance(raw, str) else None
    except ValueError:
        enqueueid = None
    name = dto.get("name") if isinstance(dto.get("name"), str) else None
    if enqueueid is None:
        return None, name, None, "no enqueueId (a UUID) in the body"
    return enqueueid, name, _instant(dto.get("lastUpdated")), None


def parse_messages(document: Any, where: str, broker_queue: str) -> list[BrokerMessage]:
    """The messages of a ``POST /api/queues/{vhost}/{queue}/get`` body, in queue order."""
    james = james_queue(broker_queue)
    if james is None:
        raise InputError(f"{where}: {broker_queue} is not a James work or dead-letter queue name")
    if not isinstance(document, list):
        raise InputError(f"{where}: not a RabbitMQ get-messages reply (a JSON list of messages)")
    messages = []
    for position, item in enumerate(document):
        if not isinstance(item, dict):
            raise InputError(f"{where}: message {position} is not a JSON object")
        body = _payload(item)
        size = _count(item.get("payload_bytes"))
        redelivered = item.get("redelivered")
        problem: str | None
        if body is None:
            enqueueid, name, updated, problem = None, None, None, "payload missing or undecodable"
        elif size is not None and len(body) < size:
            enqueueid, name, updated = None, None, None
            problem = f"payload truncated to {len(body)} of {size} bytes (export without truncate)"
        else:
            enqueueid, name, updated, problem = decode_reference(body)
        messages.append(
            BrokerMessage(
                queuename=james[0],
                role=james[1],
                broker_queue=broker_queue,
                position=position,
                enqueueid=enqueueid,
                name=name,
                last_updated=updated,
                redelivered=redelivered if isinstance(redelivered, bool) else None,
                payload_bytes=size if size is not None else (len(body) if body else None),
                problem=problem,
            )
        )
    return messages


# -- sources -------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown(path)}: not UTF-8 text at byte {exc.start}") from None
    except OSError as exc:
        raise InputError(f"{shown(path)}: cannot be read ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{shown(path)}: not JSON at offset {exc.pos} ({exc.msg})") from None


def check_export(directory: Path) -> None:
    """What fails before Spark starts: no directory, no queues.json."""
    if not directory.is_dir():
        raise InputError(f"broker export {shown(directory)} does not exist or is not a directory")
    if not (directory / QUEUES_FILE).is_file():
        raise InputError(f"broker export {shown(directory)} has no {QUEUES_FILE} (GET /api/queues)")


def read_export(directory: Path, vhost: str | None = None) -> BrokerRead:
    """An export directory: ``queues.json`` and optional ``messages/<broker queue>.json``
    (files named by their escaped text, `filenames.shown`, docs/filenames.md)."""
    check_export(directory)
    where = shown(directory / QUEUES_FILE)
    queues = parse_queues(_read_json(directory / QUEUES_FILE), where, vhost)
    messages: list[BrokerMessage] = []
    read: set[str] = set()
    for path in sorted((directory / MESSAGES_DIR).glob("*.json")):
        broker_queue = shown(path.name[: -len(".json")])
        messages += parse_messages(_read_json(path), shown(path), broker_queue)
        read.add(broker_queue)
    listed = {q.broker_queue for q in queues}
    unknown = sorted(read - listed)
    if unknown:
        raise InputError(
            f"{shown(directory / MESSAGES_DIR)}/{unknown[0]}.json: queue {unknown[0]} is not in "
            f"{QUEUES_FILE}"
        )
    queues = [
        BrokerQueue(**{**q.__dict__, "messages_read": q.broker_queue in read}) for q in queues
    ]
    return BrokerRead(queues, messages, "broker export", shown(directory.resolve()))


@dataclass(frozen=True)
class Management:
    """The management HTTP API at `url` (``http[s]://host:port[/prefix]``), GET only."""

    url: str
    username: str | None
    password: str | None
    timeout: float = HTTP_SECONDS

    @property
    def where(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.url.rstrip("/") + path, method="GET")
        if self.username is not None:
            token = f"{self.username}:{self.password or ''}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise AuthenticationFailed(
                    f"RabbitMQ management API at {self.where} refused the login "
                    "(MQF_RABBITMQ_USERNAME/_PASSWORD)"
                ) from None
            if exc.code == 404:
                raise InputError(
                    f"RabbitMQ management API at {self.where}: {path.split('?')[0]} not found "
                    "(is the virtual host right?)"
                ) from None
            raise ServerUnavailable(
                f"RabbitMQ management API at {self.where} answered HTTP {exc.code} to "
                f"{path.split('?')[0]}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerUnavailable(
                f"RabbitMQ management API at {self.where} is unreachable ({reason})"
            ) from None
        try:
            return json.loads(body)
        except ValueError:
            raise ServerUnavailable(
                f"RabbitMQ management API at {self.where}: {path.split('?')[0]} is not JSON"
            ) from None


QUEUE_COLUMNS = "name,vhost,type,messages_ready,messages_unacknowledged,consumers"


def read_management(api: Management, vhost: str = "/") -> BrokerRead:
    """Counts of every James queue of `vhost`, from one ``GET /api/queues/{vhost}``."""
    path = f"/api/queues/{urllib.parse.quote(vhost, safe='')}?columns={QUEUE_COLUMNS}"
    queues = parse_queues(api.get(path), f"{api.where}/api/queues", vhost)
    note = (
        "the broker was read live through its management API: counts only (no message was "
        "read: that cannot be done on a live queue without a side effect)"
    )
    return BrokerRead(queues, [], "rabbitmq management", api.where, [note])
