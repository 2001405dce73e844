"""python-slimta's RedisStorage, read without slimta: ``<prefix><id>`` hashes and ``<prefix>queue``.

slimta (``slimta/redisstorage/__init__.py``, 5.0.5) claims a message with ``HSETNX <key>
envelope <pickle>``, then pipelines ``HMSET timestamp attempts`` (plain strings) and ``RPUSH
<prefix>queue <pickle of (timestamp, id)>``; ``delivered_indexes`` is a pickled list, or a
pickled *set* when `Queue` passed one. Its restart (``load``) takes ``KEYS <prefix>*`` and reads
``HGET <key> timestamp`` of every key but the queue list; ``get`` raises KeyError for a hash
without ``envelope``.

Every key under the prefix is read with its ``TYPE`` first (never assuming a hash): the list
becomes ``queue_entry`` items, a hash a ``message`` item, anything else an ``other_key`` item
(slimta's load would fail on it). Keys come from ``SCAN``, never ``KEYS``.
"""

from __future__ import annotations

from collections.abc import Iterator

from mqforensics.systems.slimta import safe_pickle
from mqforensics.systems.slimta.digests import hash_fields_digest
from mqforensics.systems.slimta.items import MESSAGE, OK, OTHER_KEY, QUEUE_ENTRY, Item, Part
from mqforensics.systems.slimta.redis_server import RedisServer, redis_error

BACKEND = "redis"
DEFAULT_PREFIX = "slimta:"
QUEUE_SUFFIX = "queue"
SCAN_COUNT = 1000
LIST_PAGE = 1000


def queue_key(prefix: str) -> bytes:
    return (prefix + QUEUE_SUFFIX).encode()


def glob_escape(prefix: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix)


def list_keys(server: RedisServer, prefix: str) -> list[bytes]:
    """Every key under `prefix` (SCAN, so a live server is never blocked), sorted."""
    import redis

    client = server.client()
    try:
        keys = set(client.scan_iter(match=glob_escape(prefix) + "*", count=SCAN_COUNT))
    except redis.RedisError as exc:
        raise redis_error(exc, server, f"listing {prefix}*") from None
    finally:
        client.close()
    return sorted(keys)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="backslashreplace")


def _number(raw: bytes | None, kind: type) -> float | int | None:
    if raw is None:
        return None
    return kind(raw.decode("ascii"))


def message_item(server: RedisServer, prefix: str, key: bytes, fields: dict[bytes, bytes]) -> Item:
    """A message hash: its envelope, timestamp, attempts and delivered indexes decoded."""
    message_id = _text(key[len(prefix.encode()) :])
    size = sum(len(k) + len(v) for k, v in fields.items())
    item = Item(BACKEND, server.where, MESSAGE, message_id)
    item.parts.append(Part(_text(key), size, hash_fields_digest(fields), None))
    envelope = fields.get(b"envelope")
    if envelope is not None:
        item.take_envelope(envelope)
    if b"timestamp" in fields or b"attempts" in fields:
        try:
            timestamp = _number(fields.get(b"timestamp"), float)
            attempts = _number(fields.get(b"attempts"), int)
        except (UnicodeDecodeError, ValueError, OverflowError):
            item.meta_state = safe_pickle.WRONG_TYPE
            item.meta_error = "timestamp or attempts is not a number"
            return item
        item.meta_state = OK
        item.next_attempt, item.attempts = timestamp, attempts  # type: ignore[assignment]
        if timestamp is None or attempts is None:
            missing = "timestamp" if timestamp is None else "attempts"
            item.meta_state, item.meta_error = safe_pickle.WRONG_TYPE, f"no {missing} field"
    indexes = fields.get(b"delivered_indexes")
    if indexes is not None and item.meta_state == OK:
        try:
            listed, kind = safe_pickle.decode_delivered_indexes(indexes)
            item.delivered_indexes, item.delivered_indexes_type = listed, kind
        except safe_pickle.SlimtaPickleError as exc:
            item.meta_state, item.meta_error = exc.kind, f"delivered_indexes: {exc.detail}"
    return item


def entry_items(server: RedisServer, key: bytes, values: list[bytes]) -> Iterator[Item]:
    """The items of the notification list, each decoded as slimta's ``wait`` would."""
    import hashlib

    for value in values:
        item = Item(BACKEND, server.where, QUEUE_ENTRY, None, entry_hex=value.hex())
        item.parts.append(Part(_text(key), len(value), hashlib.sha256(value).hexdigest(), None))
        try:
            timestamp, message_id = safe_pickle.decode_queue_entry(value)
            item.id, item.next_attempt, item.envelope_state = message_id, timestamp, OK
        except safe_pickle.SlimtaPickleError as exc:
            item.envelope_state, item.envelope_error = exc.kind, exc.detail
        yield item


def read_items(server: RedisServer, prefix: str, keys: list[bytes]) -> Iterator[Item]:
    """The items of `keys` (one partition), read with one TYPE and one read per key."""
    import redis

    client = server.client()
    try:
        types = client.pipeline(transaction=False)
        for key in keys:
            types.type(key)
        kinds = [t.decode() if isinstance(t, bytes) else str(t) for t in types.execute()]
        for key, kind in zip(keys, kinds, strict=True):
            if kind == "none":  # deleted since it was listed: the queue is running
                continue
            if kind == "hash":
                yield message_item(server, prefix, key, client.hgetall(key))
            elif kind == "list" and key == queue_key(prefix):
                length = client.llen(key)
                for start in range(0, length, LIST_PAGE):
                    page = client.lrange(key, start, start + LIST_PAGE - 1)
                    yield from entry_items(server, key, page)
            else:
                item = Item(BACKEND, server.where, OTHER_KEY, _text(key[len(prefix.encode()) :]))
                item.parts.append(Part(_text(key), 0, None, None))
                item.envelope_state = item.meta_state = safe_pickle.WRONG_TYPE
                item.meta_error = f"the key is a Redis {kind}, not a hash"
                yield item
    except redis.RedisError as exc:
        raise redis_error(exc, server, "reading the queue") from None
    finally:
        client.close()
