"""python-slimta's cloud storage, read without slimta: S3 objects and exported SQS messages.

slimta's ``SimpleStorageService`` (``slimta/cloudstorage/aws.py``, 5.0.5) stores each message as
the object ``<prefix><uuid4 with dashes>`` whose body is the pickled Envelope and whose user
metadata (``x-amz-meta-*``) holds JSON text: ``timestamp`` (next attempt), ``attempts`` and
``delivered_indexes`` (both ``""`` until first set). ``SimpleQueueService`` sends one SQS
message per stored object, body ``{"timestamp": ..., "storage_id": "<key>"}``; SQS itself cannot
be listed without consuming, so its messages are read from an export file (see `read_sqs_export`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mqforensics.errors import ConfigError, InputError
from mqforensics.sources.blobstore import Location, S3Endpoint, s3_error
from mqforensics.systems.slimta import safe_pickle
from mqforensics.systems.slimta.items import MESSAGE, OK, QUEUE_ENTRY, Item, Part

BACKEND = "s3"


@dataclass(frozen=True)
class Bucket:
    """``s3://BUCKET[/PREFIX]``: slimta's prefix is prepended to the UUID as it is (no ``/``)."""

    bucket: str
    prefix: str = ""

    @property
    def store(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @classmethod
    def parse(cls, text: str) -> Bucket:
        url = urlparse(text)
        if url.scheme not in ("s3", "s3a") or not url.netloc:
            raise ConfigError(f"--s3 {text!r}: expected s3://BUCKET[/PREFIX]")
        return cls(url.netloc, url.path[1:] if url.path.startswith("/") else url.path)

    def location(self) -> Location:
        return Location("s3", self.bucket, self.prefix)


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    etag: str | None
    modified: Any


def list_objects(endpoint: S3Endpoint, bucket: Bucket) -> list[Listed]:
    """Every object under the prefix (ListObjectsV2, paged)."""
    client = endpoint.client()
    out: list[Listed] = []
    try:
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket.bucket, Prefix=bucket.prefix
        )
        for page in pages:
            for obj in page.get("Contents", []):
                etag = (obj.get("ETag") or "").strip('"') or None
                out.append(Listed(obj["Key"], int(obj["Size"]), etag, obj.get("LastModified")))
    except Exception as exc:
        raise s3_error(exc, endpoint, bucket.location()) from None
    return out


def _json_meta(metadata: dict[str, str], name: str) -> Any:
    text = metadata.get(name, "")
    return json.loads(text) if text else None


def message_item(bucket: Bucket, listed: Listed, body: bytes, metadata: dict[str, str]) -> Item:
    """One stored object: the body decoded as an envelope, the metadata as slimta's meta."""
    item = Item(BACKEND, bucket.store, MESSAGE, listed.key[len(bucket.prefix) :])
    item.parts.append(Part(listed.key, listed.size, listed.etag, listed.modified))
    item.metadata = json.dumps(metadata, sort_keys=True)
    item.take_envelope(body)
    if not any(metadata.get(k) for k in ("timestamp", "attempts", "delivered_indexes")):
        return item  # meta_state stays "missing"
    try:
        timestamp = _json_meta(metadata, "timestamp")
        attempts = _json_meta(metadata, "attempts")
        indexes = _json_meta(metadata, "delivered_indexes")
    except ValueError:
        item.meta_state, item.meta_error = safe_pickle.WRONG_TYPE, "metadata is not JSON"
        return item
    numbers = (int, float)
    if (
        (timestamp is not None and not isinstance(timestamp, numbers))
        or (attempts is not None and not isinstance(attempts, int))
        or (indexes is not None and not (
            isinstance(indexes, list) and all(isinstance(i, int) for i in indexes)
        ))
    ):  # fmt: skip
        item.meta_state = safe_pickle.WRONG_TYPE
        item.meta_error = "timestamp, attempts or delivered_indexes has the wrong type"
        return item
    item.meta_state = OK
    # slimta writes attempts="" at first; its own `get` then reads 0 attempts.
    item.next_attempt, item.attempts = timestamp, attempts if attempts is not None else 0
    if indexes is not None:
        item.delivered_indexes, item.delivered_indexes_type = indexes, "list"
    return item


def read_items(endpoint: S3Endpoint, bucket: Bucket, objects: list[Listed]) -> Iterator[Item]:
    """The message items of `objects` (one partition): one GetObject each."""
    from botocore.exceptions import ClientError

    client = endpoint.client()
    for listed in objects:
        try:
            response = client.get_object(Bucket=bucket.bucket, Key=listed.key)
            body = response["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                continue  # deleted since the listing: the queue is running
            raise s3_error(exc, endpoint, bucket.location()) from None
        except Exception as exc:
            raise s3_error(exc, endpoint, bucket.location()) from None
        etag = (response.get("ETag") or "").strip('"') or listed.etag
        current = Listed(listed.key, len(body), etag, response.get("LastModified"))
        yield message_item(bucket, current, body, dict(response.get("Metadata") or {}))


def _sqs_messages(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, message) of an export: ``aws sqs receive-message`` output (``{"Messages": [...]}``),
    a JSON list of such messages, or JSON Lines of messages or of bare bodies."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the SQS export ({exc})") from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("Messages"), list):
        whole = whole["Messages"]
    if isinstance(whole, list):
        for index, message in enumerate(whole):
            yield f"{path.name}[{index}]", message
        return
    if whole is not None:
        yield f"{path.name}", whole
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"{path.name}:{number}", json.loads(line)
            except ValueError:
                yield f"{path.name}:{number}", line


def read_sqs_export(path: Path, bucket: Bucket) -> list[Item]:
    """One ``queue_entry`` item per exported SQS message, naming the object it points to."""
    items = []
    for where, message in _sqs_messages(path):
        body: Any = message
        name = where
        if isinstance(message, dict) and "Body" in message:
            body = message["Body"]
            name = f"sqs:{message.get('MessageId') or where}"
        raw = body if isinstance(body, str) else json.dumps(body, sort_keys=True)
        item = Item(BACKEND, bucket.store, QUEUE_ENTRY, None)
        digest = hashlib.sha256(raw.encode()).hexdigest()
        item.parts.append(Part(name, len(raw.encode()), digest, None))
        try:
            payload = json.loads(body) if isinstance(body, str) else body
            storage_id = payload["storage_id"]
            timestamp = payload.get("timestamp")
            if not isinstance(storage_id, str) or not isinstance(timestamp, int | float | None):
                raise TypeError
        except (ValueError, TypeError, KeyError):
            item.envelope_state = safe_pickle.WRONG_TYPE
            item.envelope_error = f"{where}: not a slimta SQS body"
            items.append(item)
            continue
        item.envelope_state, item.next_attempt = OK, timestamp
        item.id = (
            storage_id[len(bucket.prefix) :]
            if storage_id.startswith(bucket.prefix)
            else (storage_id)
        )
        items.append(item)
    return items
