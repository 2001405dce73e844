"""The one frame every slimta backend reads into: one row per stored item (`ITEMS`).

An *item* is what a person or a plan acts on as a whole:

- ``message``: one queued message, whatever it is made of: ``<id>.env`` + ``<id>.meta`` on disk,
  the hash ``<prefix><id>`` in Redis, the object ``<prefix><uuid>`` in S3. A torn write is a
  message item with one part missing.
- ``tmp_file``: a file in DiskStorage's ``tmp_dir`` (slimta writes there, then renames).
- ``queue_entry``: one notification naming a message: an item of Redis's ``<prefix>queue``
  list, or an SQS message body from an export file.
- ``other_key``: a Redis key under the prefix that is neither a hash nor the queue list.

``parts`` are the stored things that make up the item, each with its ``name`` (absolute path,
Redis key or S3 key), ``size``, ``digest`` (sha256 of a file, `digests.hash_fields_digest` of
a hash, the ETag of an object) and ``modified``: exactly what a cleanup plan's precondition
re-checks (with ``metadata``, an S3 object's user metadata as JSON: slimta rewrites it on
every attempt without changing the ETag). ``envelope_state`` / ``meta_state`` say whether
each half decoded: ``ok``, ``missing``, or a `safe_pickle` error kind (``unsafe_pickle``,
``corrupt_pickle``, ``wrong_type``) with the reason in ``*_error`` (never message content).
Everything decoded from the envelope is null when it did not decode.

Content search (only when an erasure policy's subjects are searched, `content_search.Searched`):
``subjects``, ``found`` and ``unreadable`` (`content_search.FOUND_SCHEMA`) say where in a
message or ``tmp_dir`` envelope the subjects are: its envelope sender and recipients
(``envelope``), its header fields (``header:<name>``) and, for subjects searched in full, its
body and attachments, in the message as slimta would send it (`EnvelopeData.flatten`). An
envelope that does not decode cannot be searched: ``unreadable`` says so (``envelope``). Null
when nothing is searched, and for items that hold no envelope.

Times: ``arrival`` is the envelope's own ``timestamp`` (set by slimta's edge when it received
the message); ``next_attempt`` is the meta ``timestamp``, which slimta sets to *now* at enqueue
and to *now + backoff* after a transient failure: it is not an arrival time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from mqforensics.content_search import (
    ENVELOPE,
    FOUND_SCHEMA,
    Found,
    Searched,
    search_envelope,
    search_message,
)
from mqforensics.systems.slimta import safe_pickle
from mqforensics.systems.slimta.safe_pickle import EnvelopeData, MetaData
from mqforensics.units import utc_from_unix as instant
from mqforensics.units import valid_utf8 as text

SYSTEM = "slimta"
MESSAGE, TMP_FILE, QUEUE_ENTRY, OTHER_KEY = "message", "tmp_file", "queue_entry", "other_key"
OK, MISSING = "ok", "missing"

ITEMS = (
    "backend string, store string, kind string, id string, "
    "parts array<struct<name:string, size:bigint, digest:string, modified:timestamp>>, "
    "stored_bytes bigint, modified timestamp, load_position int, "
    "envelope_state string, envelope_error string, meta_state string, meta_error string, "
    "sender string, recipients array<string>, attempts int, next_attempt timestamp, "
    "arrival timestamp, message_bytes bigint, client_ip string, client_host string, "
    "client_name string, client_protocol string, receiver string, is_bounce boolean, "
    "message_id string, delivered_indexes array<int>, delivered_indexes_type string, "
    "entry_hex string, metadata string, " + FOUND_SCHEMA
)

_INT32 = (1 << 31) - 1


@dataclass
class Part:
    name: str
    size: int
    digest: str | None
    modified: dt.datetime | None

    def as_row(self) -> tuple:
        return (self.name, self.size, self.digest, self.modified)


@dataclass
class Item:
    """One `ITEMS` row being assembled by a backend reader."""

    backend: str
    store: str
    kind: str
    id: str | None
    parts: list[Part] = field(default_factory=list)
    load_position: int | None = None
    envelope_state: str = MISSING
    envelope_error: str | None = None
    meta_state: str = MISSING
    meta_error: str | None = None
    envelope: EnvelopeData | None = None
    attempts: int | None = None
    next_attempt: float | None = None
    delivered_indexes: list[int] | None = None
    delivered_indexes_type: str | None = None
    entry_hex: str | None = None
    metadata: str | None = None
    found: Found | None = None

    def take_envelope(self, data: bytes) -> None:
        """Decode `data` as the envelope; `envelope_state` says how that went."""
        try:
            self.envelope = safe_pickle.decode_envelope(data)
            self.envelope_state = OK
        except safe_pickle.SlimtaPickleError as exc:
            self.envelope_state, self.envelope_error = exc.kind, exc.detail

    def take_meta(self, data: bytes) -> None:
        """Decode `data` as a pickled meta dict; `meta_state` says how that went."""
        try:
            self.set_meta(safe_pickle.decode_meta(data))
        except safe_pickle.SlimtaPickleError as exc:
            self.meta_state, self.meta_error = exc.kind, exc.detail

    def set_meta(self, meta: MetaData) -> None:
        self.meta_state = OK
        self.attempts = meta.attempts
        self.next_attempt = meta.timestamp
        self.delivered_indexes = meta.delivered_indexes
        self.delivered_indexes_type = meta.delivered_indexes_type

    def search(self, searched: Searched) -> None:
        """Search the message or ``tmp_dir`` envelope for `searched` (`found`): its envelope
        addresses and its message as slimta would send it. One that does not decode is
        unreadable; a half without an envelope (a meta) holds nothing to search."""
        if not searched or self.kind not in (MESSAGE, TMP_FILE):
            return
        env = self.envelope
        found = Found()
        if self.envelope_state == OK and env is not None:
            found.hits |= search_envelope([env.sender, *env.recipients], searched)
            found.merge(search_message(b"".join(env.flatten()), searched))
        elif self.envelope_state not in (OK, MISSING):
            found.cannot(ENVELOPE, f"the envelope does not decode ({self.envelope_state})")
        else:
            return
        self.found = found

    def as_row(self) -> tuple:
        env = self.envelope
        client: dict[str, Any] = env.client if env is not None else {}
        modified = max((p.modified for p in self.parts if p.modified), default=None)
        attempts = self.attempts if self.attempts is None or self.attempts <= _INT32 else _INT32
        indexes = self.delivered_indexes
        if indexes is not None:
            indexes = [i for i in indexes if -_INT32 <= i <= _INT32]
        return (
            self.backend,
            self.store,
            self.kind,
            self.id,
            [p.as_row() for p in self.parts],
            sum(p.size for p in self.parts),
            modified,
            self.load_position,
            self.envelope_state,
            text(self.envelope_error),
            self.meta_state,
            text(self.meta_error),
            text(env.sender) if env else None,
            [text(r) for r in env.recipients] if env else None,
            attempts,
            instant(self.next_attempt),
            instant(env.timestamp) if env else None,
            env.message_bytes if env else None,
            text(client.get("ip")),
            text(client.get("host")),
            text(client.get("name")),
            text(client.get("protocol")),
            text(env.receiver) if env else None,
            env.is_bounce if env else None,
            text(env.message_id) if env else None,
            indexes,
            self.delivered_indexes_type,
            self.entry_hex,
            self.metadata,
            *self._found_row(),
        )

    def _found_row(self) -> tuple:
        if self.found is None:
            return (None, None, None)
        row = self.found.as_row()
        return (
            row["subjects"],
            [(f["subject"], f["where"]) for f in row["found"]],
            [(u["where"], u["reason"]) for u in row["unreadable"]],
        )
