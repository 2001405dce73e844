"""Cleanup plans for slimta queue stores: which items a retention policy removes, and why.

Rule kinds (system ``slimta``; a rule's ``queues`` name stores as findings do):

- ``queued_mail`` (``older_than``): queued messages, and ``tmp_dir`` files holding an envelope,
  that arrived longer ago than that (personal data past its retention: `retention_exceeded`).
- ``queue_leftovers`` (``older_than``): what slimta itself will never deliver or clean up, older
  than that: torn writes, ``tmp_dir`` files, dangling or undecodable Redis queue entries, and
  messages past the retry maximum (`retry_exhausted`).
- ``erase_subject``: every message and ``tmp_dir`` envelope whose envelope sender or recipients
  include a subject, with the Redis queue entries naming it.

Age is the envelope's arrival time, else the file's modification time, else the next-attempt
time. A whole message is one action (both files, the hash, the object), so a plan never leaves a
half message behind. Never planned, always deferred with the reason: items holding an unsafe
pickle (evidence: preserve them), Redis keys of another type, and SQS messages (the purger does
not consume queues: delete them with the SQS API after the objects are gone).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqforensics.retention.manifest import Action, Deferred
from mqforensics.retention.policy import Policy, Rule, subject_hash
from mqforensics.systems.slimta.disk import ENV_SUFFIX, META_SUFFIX
from mqforensics.systems.slimta.items import MESSAGE, OK, OTHER_KEY, QUEUE_ENTRY, SYSTEM, TMP_FILE
from mqforensics.systems.slimta.redis_store import QUEUE_SUFFIX

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.slimta.fleet import Stores

DELETE_FILES = "slimta.delete_files"
DELETE_REDIS_HASH = "slimta.delete_redis_hash"
REMOVE_QUEUE_ENTRY = "slimta.remove_queue_entry"
DELETE_OBJECT = "slimta.delete_object"
KINDS = (DELETE_FILES, DELETE_REDIS_HASH, REMOVE_QUEUE_ENTRY, DELETE_OBJECT)

UNSAFE = "unsafe_pickle"
EVIDENCE = (
    "holds an unsafe pickle (unsafe_pickle): evidence of tampering, preserve and investigate "
    "before anything removes it"
)
NOT_A_HASH = "the key is not a hash: inspect it by hand"
SQS_NOT_PURGED = "an SQS message: the purger does not consume queues, delete it with the SQS API"
NO_ETAG = "the store gave no ETag for the object: nothing to re-check it against"


@dataclass
class PlanParts:
    actions: list[Action] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _age_basis(row: dict[str, Any], kind: str) -> dt.datetime | None:
    """When the item's age starts: its arrival for mail past retention, its last change for a
    leftover (a torn write left an hour ago may hold a message that arrived a moment before)."""
    order = ("arrival", "modified") if kind == "queued_mail" else ("modified", "arrival")
    return _utc(row[order[0]] or row[order[1]] or row["next_attempt"])


def _older(row: dict[str, Any], rule: Rule, as_of: dt.datetime) -> bool:
    basis = _age_basis(row, rule.kind)
    return basis is not None and rule.older_than is not None and basis < as_of - rule.older_than


def _torn(row: dict[str, Any]) -> bool:
    halves = (row["envelope_state"] == "missing", row["meta_state"] == "missing")
    return row["backend"] in ("disk", "redis") and halves[0] != halves[1]


def _names_subject(row: dict[str, Any], subjects: set[str]) -> bool:
    addresses = [row["sender"] or "", *(row["recipients"] or [])]
    return any(a and subject_hash(a) in subjects for a in addresses)


class SlimtaPlanner:
    """Turns item rows into actions; `stores` gives the paths and keys items do not carry."""

    def __init__(
        self, stores: Stores, policy: Policy, as_of: dt.datetime, retry_maximum: int
    ) -> None:
        self.stores = stores
        self.as_of = _utc(as_of) or as_of
        self.retry_maximum = retry_maximum
        self.rules = [
            r
            for kind in ("queued_mail", "queue_leftovers", "erase_subject")
            for r in policy.rules_of(kind, SYSTEM)
        ]
        self.out = PlanParts()

    def _selecting(self, row: dict[str, Any], held: set[tuple[str, str]]) -> list[Rule]:
        rules = []
        for rule in self.rules:
            if not rule.applies_to(SYSTEM, row["store"]):
                continue
            kind, item = rule.kind, row["kind"]
            holds_mail = item == MESSAGE or (item == TMP_FILE and row["envelope_state"] == OK)
            if kind == "queued_mail":
                chosen = holds_mail and _older(row, rule, self.as_of)
            elif kind == "erase_subject":
                chosen = holds_mail and _names_subject(row, set(rule.subjects))
            else:
                leftover = (
                    item in (TMP_FILE, OTHER_KEY)
                    or (item == MESSAGE and _torn(row))
                    or (item == MESSAGE and (row["attempts"] or 0) > self.retry_maximum)
                    or (item == QUEUE_ENTRY and (row["store"], row["id"]) not in held)
                )
                chosen = leftover and _older(row, rule, self.as_of)
            if chosen:
                rules.append(rule)
        return rules

    def plan(self, rows: Iterable[dict[str, Any]], held: set[tuple[str, str]]) -> PlanParts:
        """Actions for `rows` (all items); `held`: (store, id) of every message."""
        entries: dict[tuple[str, str], list[dict[str, Any]]] = {}
        later: list[tuple[dict[str, Any], tuple[str, ...]]] = []
        removed: dict[tuple[str, str], tuple[str, ...]] = {}
        for row in rows:
            if row["kind"] == QUEUE_ENTRY:
                entries.setdefault((row["store"], row["id"]), []).append(row)
            rules = self._selecting(row, held)
            if not rules:
                continue
            ids = tuple(r.id for r in rules)
            item_kind = row["kind"]
            if item_kind == QUEUE_ENTRY:
                later.append((row, ids))
                continue
            if UNSAFE in (row["envelope_state"], row["meta_state"]):
                self.out.deferred.append(
                    Deferred(self._kind(row), self._target(row), ids, EVIDENCE)
                )
                continue
            if row["backend"] == "s3" and not row["parts"][0]["digest"]:
                target = self._target(row)
                self.out.deferred.append(Deferred(DELETE_OBJECT, target, ids, NO_ETAG))
                continue
            if item_kind == OTHER_KEY:
                target = self._target(row)
                self.out.deferred.append(Deferred(DELETE_REDIS_HASH, target, ids, NOT_A_HASH))
                continue
            self.out.actions.append(self._action(row, ids))
            if row["kind"] == MESSAGE:
                removed[(row["store"], row["id"])] = ids
        # Queue entries naming a removed message go with it, after it.
        for key, ids in removed.items():
            for entry in entries.get(key, []):
                later.append((entry, ids))
        seen: set[str] = set()
        for entry, ids in later:
            target = self._target(entry)
            if entry["backend"] != "redis":
                self.out.deferred.append(Deferred(REMOVE_QUEUE_ENTRY, target, ids, SQS_NOT_PURGED))
                continue
            if entry["envelope_state"] == UNSAFE:
                self.out.deferred.append(Deferred(REMOVE_QUEUE_ENTRY, target, ids, EVIDENCE))
                continue
            action = self._action(entry, ids)
            if action.id not in seen:  # one action removes every copy of an entry
                seen.add(action.id)
                self.out.actions.append(action)
        return self.out

    @staticmethod
    def _kind(row: dict[str, Any]) -> str:
        if row["kind"] == QUEUE_ENTRY:
            return REMOVE_QUEUE_ENTRY
        return {"disk": DELETE_FILES, "redis": DELETE_REDIS_HASH, "s3": DELETE_OBJECT}[
            row["backend"]
        ]

    def _files(self, row: dict[str, Any]) -> list[str]:
        layout = self.stores.disk
        assert layout is not None
        if row["kind"] == TMP_FILE:
            assert layout.tmp_dir is not None
            return [os.path.join(layout.tmp_dir, row["id"])]
        return [
            os.path.join(layout.env_dir, row["id"] + ENV_SUFFIX),
            os.path.join(layout.meta_dir, row["id"] + META_SUFFIX),
        ]

    def _target(self, row: dict[str, Any]) -> dict[str, Any]:
        backend, part = row["backend"], row["parts"][0]
        if row["kind"] == QUEUE_ENTRY:
            if backend == "redis":
                return {"backend": backend, "server": row["store"], "list": part["name"],
                        "entry_hex": row["entry_hex"], "id": row["id"]}  # fmt: skip
            return {"backend": backend, "store": row["store"], "message": part["name"],
                    "id": row["id"]}  # fmt: skip
        if backend == "disk":
            return {"backend": backend, "store": row["store"], "id": row["id"],
                    "files": self._files(row)}  # fmt: skip
        if backend == "redis":
            return {"backend": backend, "server": row["store"], "key": part["name"],
                    "id": row["id"]}  # fmt: skip
        assert self.stores.s3 is not None
        return {"backend": backend, "bucket": self.stores.s3.bucket, "key": part["name"],
                "id": row["id"]}  # fmt: skip

    def _precondition(self, row: dict[str, Any]) -> dict[str, Any]:
        backend, parts = row["backend"], row["parts"]
        if row["kind"] == QUEUE_ENTRY:
            prefix = self.stores.redis_prefix
            return {"message_key": prefix + (row["id"] or ""), "message_key_absent": True}
        if backend == "disk":
            return {"files": {p["name"]: {"size": p["size"], "sha256": p["digest"]}
                              for p in parts}}  # fmt: skip
        if backend == "redis":
            return {"fields_sha256": parts[0]["digest"]}
        # slimta counts an attempt by rewriting the metadata, which keeps the ETag.
        metadata = json.loads(row["metadata"]) if row["metadata"] else {}
        return {"etag": parts[0]["digest"], "size": parts[0]["size"], "metadata": metadata}

    def _action(self, row: dict[str, Any], rules: tuple[str, ...]) -> Action:
        what = {MESSAGE: "queued message", TMP_FILE: "tmp_dir file", QUEUE_ENTRY: "queue entry"}
        reason = f"{what[row['kind']]} selected by {', '.join(rules)}"
        return Action(
            self._kind(row), self._target(row), self._precondition(row), rules,
            int(row["stored_bytes"] or 0), 0, reason,
        )  # fmt: skip


def item_rows(items: DataFrame) -> Iterator[dict[str, Any]]:
    """Every item as a dict (streamed to the driver, messages before queue entries)."""
    ordered = items.orderBy(
        (items.kind == QUEUE_ENTRY).cast("int"), "backend", "store", "kind", "id"
    )
    for row in ordered.toLocalIterator():
        yield row.asDict(recursive=True)


def plan_cleanup(
    items: DataFrame, stores: Stores, policy: Policy, as_of: dt.datetime, retry_maximum: int
) -> PlanParts:
    """The actions, deferrals and notes of `policy` over the computed `items` frame."""
    held = {
        (r["store"], r["id"])
        for r in items.where(items.kind == MESSAGE).select("store", "id").toLocalIterator()
    }
    planner = SlimtaPlanner(stores, policy, as_of, retry_maximum)
    out = planner.plan(item_rows(items), held)
    if not planner.rules:
        out.notes.append("the policy has no queued_mail, queue_leftovers or erase_subject rule")
    if any(r.kind == "erase_subject" for r in planner.rules):
        out.notes.append(
            "erasure matches envelope senders and recipients; addresses that appear only in "
            "headers or bodies are not searched"
        )
    if stores.redis is not None:
        out.notes.append(f"queue entries are removed from {stores.redis_prefix}{QUEUE_SUFFIX} "
                         "after their message hash")  # fmt: skip
    return out
