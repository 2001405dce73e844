"""Cleanup plans for slimta queue stores, made from an audit's findings: which items a retention
policy removes, and why. No store is read here: every fact an action records comes from the
``detail`` of the findings that justify it (`checks`), and every action cites their ids.

Rule kinds (system ``slimta``; a rule's ``queues`` name stores as findings do):

- ``queued_mail`` (``older_than``): the items of `retention_exceeded` findings (queued
  messages, and ``tmp_dir`` files holding an envelope) that arrived longer ago than that
  (personal data past its retention). The audit's ``--retention`` bounds what it found: a
  shorter ``older_than`` is said in a note.
- ``queue_leftovers`` (``older_than``): what slimta itself will never deliver or clean up, older
  than that: torn writes on disk and in Redis (`torn_write`; an S3 object no exported SQS
  message names is not one: an export is rarely the whole queue), stale ``tmp_dir`` files
  (`stale_tmp`), dangling or undecodable queue entries (`dangling_queue_entry`), messages past
  the retry maximum (`retry_exhausted`) and Redis keys that are not hashes (`corrupt_meta`).
- ``erase_subject``: the items of `personal_data` findings holding one of the rule's subjects
  (every message and ``tmp_dir`` envelope whose envelope, header fields or, for a rule with
  ``search = "full"``, body or attachments name one). The items of `unreadable_content`
  findings (places the search could not read: an envelope that does not decode, an encrypted
  or damaged part) that nothing else plans are deferred under every erase_subject rule that
  applies to their store, with the places and reasons: never deleted blindly.

Age is the envelope's arrival time, else the file's modification time, else the next-attempt
time (for a leftover, the modification time first: a torn write left an hour ago may hold a
message that arrived a moment before). A whole message is one action (both files, the hash,
the object), so a plan never leaves a half message behind, and the Redis queue entries naming
it follow it, citing the same findings. Never planned, always deferred with the reason and the
findings: items holding an unsafe pickle (evidence: preserve them; the `unsafe_pickle` finding
is cited too), Redis keys of another type, objects the store gave no ETag for, and SQS
messages (the purger does not consume queues: delete them with the SQS API after the objects
are gone).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mqforensics.retention.erasure import rules_found, rules_unsearched, unsearched_reason
from mqforensics.retention.manifest import Action, Deferred
from mqforensics.retention.policy import Policy, Rule
from mqforensics.spec import PlanParts
from mqforensics.systems.slimta.items import MESSAGE, OTHER_KEY, QUEUE_ENTRY, SYSTEM, TMP_FILE
from mqforensics.systems.slimta.redis_store import QUEUE_SUFFIX
from mqforensics.units import duration_text, parse_duration, parse_instant

DELETE_FILES = "slimta.delete_files"
DELETE_REDIS_HASH = "slimta.delete_redis_hash"
REMOVE_QUEUE_ENTRY = "slimta.remove_queue_entry"
DELETE_OBJECT = "slimta.delete_object"
KINDS = (DELETE_FILES, DELETE_REDIS_HASH, REMOVE_QUEUE_ENTRY, DELETE_OBJECT)
RULE_KINDS = ("queued_mail", "queue_leftovers", "erase_subject")

EVIDENCE = (
    "holds an unsafe pickle (unsafe_pickle): evidence of tampering, preserve and investigate "
    "before anything removes it"
)
NOT_A_HASH = "the key is not a hash: inspect it by hand"
SQS_NOT_PURGED = "an SQS message: the purger does not consume queues, delete it with the SQS API"
NO_ETAG = "the store gave no ETag for the object: nothing to re-check it against"

# The checks whose findings a queue_leftovers rule selects (torn_write only on disk and Redis,
# corrupt_meta only for keys that are not hashes).
LEFTOVER_CHECKS = ("torn_write", "stale_tmp", "dangling_queue_entry", "retry_exhausted",
                   "corrupt_meta")  # fmt: skip
_WHAT = {MESSAGE: "queued message", TMP_FILE: "tmp_dir file", QUEUE_ENTRY: "queue entry",
         OTHER_KEY: "Redis key"}  # fmt: skip


def _instant(value: Any) -> dt.datetime | None:
    return parse_instant(value) if isinstance(value, str) and value else None


def _age_basis(detail: Mapping[str, Any], kind: str) -> dt.datetime | None:
    """When the item's age starts: its arrival for mail past retention, its last change for a
    leftover."""
    order = ("arrival", "modified") if kind == "queued_mail" else ("modified", "arrival")
    for name in (*order, "next_attempt"):
        instant = _instant(detail.get(name))
        if instant is not None:
            return instant
    return None


def _older(detail: Mapping[str, Any], rule: Rule, as_of: dt.datetime) -> bool:
    basis = _age_basis(detail, rule.kind)
    return basis is not None and rule.older_than is not None and basis < as_of - rule.older_than


def _rule_kind(finding: Mapping[str, Any]) -> str | None:
    """The rule kind that may select the item of `finding`, or None."""
    check, detail = finding["check"], finding["detail"]
    if check == "retention_exceeded":
        return "queued_mail"
    if check == "personal_data":
        return "erase_subject"
    if check == "torn_write" and detail.get("missing") == "queue_message":
        return None  # S3 without an SQS message: the export may not be the whole queue
    if check == "corrupt_meta" and finding["scope"] != OTHER_KEY:
        return None
    if check in LEFTOVER_CHECKS:
        return "queue_leftovers"
    return None


_Key = tuple[str, str, str, str]


def _key(finding: Mapping[str, Any]) -> _Key:
    """What names one item across the findings about it: its store, kind and first part (and,
    for a Redis queue entry, the entry itself: every entry of a list has the list as subject)."""
    entry = finding["detail"].get("entry_hex") if finding["scope"] == QUEUE_ENTRY else None
    return (finding["queue"] or "", finding["scope"], finding["subject"] or "", entry or "")


@dataclass
class _Item:
    """One stored item some rules selected, with the findings that justify each rule."""

    finding: dict[str, Any]
    by_rule: dict[str, set[str]] = field(default_factory=dict)

    @property
    def detail(self) -> dict[str, Any]:
        return self.finding["detail"]

    @property
    def backend(self) -> str:
        return str(self.detail.get("backend") or "")

    @property
    def scope(self) -> str:
        return str(self.finding["scope"])

    @property
    def store(self) -> str:
        return str(self.finding["queue"])

    def order(self) -> tuple[Any, ...]:
        """Messages before queue entries; then as the audit listed items."""
        return (self.scope == QUEUE_ENTRY, self.backend, self.store, self.scope,
                self.detail.get("id") or "", *_key(self.finding))  # fmt: skip


class SlimtaPlanner:
    """Turns findings into actions; rules in the order of `RULE_KINDS`, then the policy's."""

    def __init__(self, policy: Policy, as_of: dt.datetime) -> None:
        self.as_of = as_of
        self.rules = [r for kind in RULE_KINDS for r in policy.rules_of(kind, SYSTEM)]
        self.out = PlanParts()

    def _selecting(self, finding: Mapping[str, Any]) -> list[Rule]:
        kind = _rule_kind(finding)
        if kind is None:
            return []
        chosen = []
        for rule in self.rules:
            if rule.kind != kind or not rule.applies_to(SYSTEM, finding["queue"]):
                continue
            if kind == "erase_subject":
                chosen.extend(rules_found(finding["detail"], [rule]))
            elif _older(finding["detail"], rule, self.as_of):
                chosen.append(rule)
        return chosen

    def _rules_and_findings(self, item: _Item) -> tuple[tuple[str, ...], tuple[str, ...]]:
        rules = tuple(r.id for r in self.rules if r.id in item.by_rule)
        findings = tuple(sorted(set().union(*item.by_rule.values())))
        return rules, findings

    def plan(self, findings: Iterable[dict[str, Any]]) -> PlanParts:
        """The actions and deferrals of every finding some rule selects."""
        items: dict[tuple[str, str, str, str], _Item] = {}
        unsafe: dict[tuple[str, str, str, str], list[str]] = {}
        unreadable: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for finding in findings:
            if finding["system"] != SYSTEM:
                continue
            if finding["check"] == "unsafe_pickle":
                unsafe.setdefault(_key(finding), []).append(finding["id"])
            if finding["check"] == "unreadable_content":
                unreadable[_key(finding)] = finding
            for rule in self._selecting(finding):
                item = items.setdefault(_key(finding), _Item(finding))
                item.by_rule.setdefault(rule.id, set()).add(finding["id"])
        later: list[tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]] = []
        removed: list[tuple[_Item, tuple[str, ...], tuple[str, ...]]] = []
        acted: set[_Key] = set()  # the items an action removes
        for item in sorted(items.values(), key=_Item.order):
            rules, cited = self._rules_and_findings(item)
            if item.scope == QUEUE_ENTRY:
                later.append((self._entry_target(item), rules, cited))
                continue
            kind, target = self._kind(item), self._target(item)
            evidence = unsafe.get(_key(item.finding))
            if evidence:
                why = tuple(sorted({*cited, *evidence}))
                self.out.deferred.append(Deferred(kind, target, rules, EVIDENCE, why))
                continue
            if item.backend == "s3" and not self._parts(item)[0].get("digest"):
                self.out.deferred.append(Deferred(kind, target, rules, NO_ETAG, cited))
                continue
            if item.scope == OTHER_KEY:
                self.out.deferred.append(Deferred(kind, target, rules, NOT_A_HASH, cited))
                continue
            self.out.actions.append(
                self._action(kind, target, self._precondition(item), rules, cited,
                             int(item.finding["bytes"] or 0), item.scope)
            )  # fmt: skip
            acted.add(_key(item.finding))
            if item.scope == MESSAGE:
                removed.append((item, rules, cited))
        selected = {k: set(item.by_rule) for k, item in items.items()}
        self._unsearched(list(unreadable.values()), unsafe, selected, acted)
        # Queue entries naming a removed message go with it, after it, citing its findings.
        for item, rules, cited in removed:
            for entry in item.detail.get("queued_by") or ():
                later.append((self._named_entry(item, entry), rules, cited))
        seen: dict[str, int] = {}
        for target, rules, cited in later:
            if target["backend"] != "redis":
                self.out.deferred.append(
                    Deferred(REMOVE_QUEUE_ENTRY, target, rules, SQS_NOT_PURGED, cited)
                )
                continue
            prefix = target["list"][: -len(QUEUE_SUFFIX)]
            precondition = {"message_key": prefix + (target["id"] or ""),
                            "message_key_absent": True}  # fmt: skip
            size = len(target["entry_hex"]) // 2
            action = self._action(REMOVE_QUEUE_ENTRY, target, precondition, rules, cited, size,
                                  QUEUE_ENTRY)  # fmt: skip
            if action.id in seen:  # one action removes every copy of an entry
                index = seen[action.id]
                first = self.out.actions[index]
                merged_rules = tuple(dict.fromkeys((*first.rules, *rules)))
                merged = tuple(sorted({*first.findings, *cited}))
                self.out.actions[index] = self._action(
                    REMOVE_QUEUE_ENTRY, first.target, first.precondition, merged_rules, merged,
                    first.bytes, QUEUE_ENTRY,
                )  # fmt: skip
                continue
            seen[action.id] = len(self.out.actions)
            self.out.actions.append(action)
        return self.out

    def _unsearched(
        self,
        findings: list[dict[str, Any]],
        unsafe: Mapping[_Key, list[str]],
        selected: Mapping[_Key, set[str]],
        acted: set[_Key],
    ) -> None:
        """The items of `unreadable_content` findings no action removes (`acted`): deferred
        under every erase_subject rule applying to their store that would have searched the
        unread place and did not select the item (`selected`; as
        `erasure.unsearched_deferrals`), citing the finding (and the unsafe_pickle finding of a
        hostile envelope, which stays evidence)."""
        for item in sorted((_Item(f) for f in findings), key=_Item.order):
            key = _key(item.finding)
            if key in acted:
                continue
            covering = [
                r for r in self.rules
                if r.kind == "erase_subject" and r.applies_to(SYSTEM, item.store)
                and r.id not in selected.get(key, ())
            ]  # fmt: skip
            rules = tuple(r.id for r in rules_unsearched(item.detail, covering))
            if not rules:
                continue
            reason = unsearched_reason(item.detail)
            cited = (item.finding["id"],)
            evidence = unsafe.get(_key(item.finding))
            if evidence:
                reason, cited = EVIDENCE, tuple(sorted({*cited, *evidence}))
            target = self._target(item)
            self.out.deferred.append(Deferred(self._kind(item), target, rules, reason, cited))

    @staticmethod
    def _kind(item: _Item) -> str:
        if item.scope == QUEUE_ENTRY:
            return REMOVE_QUEUE_ENTRY
        return {"disk": DELETE_FILES, "redis": DELETE_REDIS_HASH, "s3": DELETE_OBJECT}[item.backend]

    @staticmethod
    def _parts(item: _Item) -> list[dict[str, Any]]:
        parts = item.detail.get("parts") or []
        if not parts:
            raise ValueError(f"finding {item.finding['id']}: detail names no stored part")
        return list(parts)

    def _target(self, item: _Item) -> dict[str, Any]:
        part = self._parts(item)[0]
        message_id = item.detail.get("id")
        if item.backend == "disk":
            files = item.detail.get("files")
            if not files:
                raise ValueError(f"finding {item.finding['id']}: detail names no files")
            return {"backend": "disk", "store": item.store, "id": message_id,
                    "files": list(files)}  # fmt: skip
        if item.backend == "redis":
            return {"backend": "redis", "server": item.store, "key": part["name"],
                    "id": message_id}  # fmt: skip
        bucket = item.store.removeprefix("s3://").split("/", 1)[0]
        return {"backend": "s3", "bucket": bucket, "key": part["name"], "id": message_id}

    def _entry_target(self, item: _Item) -> dict[str, Any]:
        """A queue entry selected itself (a dangling one)."""
        name = self._parts(item)[0]["name"]
        return self._entry(item.backend, item.store, name, item.detail.get("entry_hex"),
                           item.detail.get("id"))  # fmt: skip

    def _named_entry(self, message: _Item, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A queue entry naming the message `message` (from its ``queued_by``)."""
        return self._entry(message.backend, message.store, entry["name"], entry.get("entry_hex"),
                           message.detail.get("id"))  # fmt: skip

    @staticmethod
    def _entry(
        backend: str, store: str, name: str, entry_hex: str | None, message_id: str | None
    ) -> dict[str, Any]:
        if backend == "redis":
            return {"backend": backend, "server": store, "list": name, "entry_hex": entry_hex,
                    "id": message_id}  # fmt: skip
        return {"backend": backend, "store": store, "message": name, "id": message_id}

    def _precondition(self, item: _Item) -> dict[str, Any]:
        parts = self._parts(item)
        if item.backend == "disk":
            return {"files": {p["name"]: {"size": p["size"], "sha256": p["digest"]}
                              for p in parts}}  # fmt: skip
        if item.backend == "redis":
            return {"fields_sha256": parts[0]["digest"]}
        # slimta counts an attempt by rewriting the metadata, which keeps the ETag.
        return {"etag": parts[0]["digest"], "size": parts[0]["size"],
                "metadata": dict(item.detail.get("metadata") or {})}  # fmt: skip

    @staticmethod
    def _action(
        kind: str,
        target: dict[str, Any],
        precondition: dict[str, Any],
        rules: tuple[str, ...],
        findings: tuple[str, ...],
        size: int,
        scope: str,
    ) -> Action:
        reason = f"{_WHAT.get(scope, scope)} selected by {', '.join(rules)}"
        return Action(kind, target, precondition, rules, size, 0, reason, findings=findings)


def _shorter_than_audit(
    rules: list[Rule], kind: str, options: Mapping[str, Any], option: str, what: str
) -> list[str]:
    """Notes for `kind` rules whose ``older_than`` is under the audit's `option` threshold:
    `what` between the two was never found, so it is not planned."""
    text = options.get(option.lstrip("-").replace("-", "_"))
    if not isinstance(text, str):
        return []
    threshold = parse_duration(text)
    return [
        f"rule {rule.id} ({kind}) selects {what} older than {duration_text(rule.older_than)}, "
        f"but the audit only found those older than {option} {text}: audit with {option} "
        f"{duration_text(rule.older_than)} to plan the others"
        for rule in rules
        if rule.kind == kind and rule.older_than is not None and rule.older_than < threshold
    ]


def plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    """The actions, deferrals and notes of `policy` over an audit's raw `findings`; `manifest`
    is the audit's (its ``as_of`` judges ages; its options give the thresholds it used)."""
    as_of = parse_instant(str(manifest["as_of"]))
    planner = SlimtaPlanner(policy, as_of)
    out = planner.plan(findings)
    if not planner.rules:
        out.notes.append("the policy has no queued_mail, queue_leftovers or erase_subject rule")
    options: Mapping[str, Any] = manifest.get("options") or {}
    out.notes += _shorter_than_audit(
        planner.rules, "queued_mail", options, "--retention", "queued mail"
    )
    out.notes += _shorter_than_audit(
        planner.rules, "queue_leftovers", options, "--stale-tmp", "tmp_dir files"
    )
    if any(r.kind == "erase_subject" for r in planner.rules):
        depth = (
            "headers and bodies"
            if any(r.kind == "erase_subject" and r.search == "full" for r in planner.rules)
            else "headers"
        )
        out.notes.append(
            f"erasure searched envelope senders and recipients and message {depth} "
            "(personal_data detail.found says where); items the search could not read are "
            "deferred (unreadable_content)"
        )
    if options.get("redis"):
        prefix = options.get("redis_prefix") or ""
        out.notes.append(f"queue entries are removed from {prefix}{QUEUE_SUFFIX} "
                         "after their message hash")  # fmt: skip
    return out
