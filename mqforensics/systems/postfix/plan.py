"""Cleanup plans for Postfix queues, made from an audit's findings: which queue files and logs a
policy removes, and why. No queue is read here: every fact an action records comes from the
``detail`` of the findings that justify it (`checks`), and every action cites their ids.

Rule kinds (system ``postfix``; a rule's ``queues`` name Postfix queues, e.g. ``["hold"]``):

- ``queued_mail`` (``older_than``): messages of `retention_exceeded` and `expired_in_queue`
  findings that arrived longer ago than that.
- ``held_mail`` (``older_than``): messages of `old_hold` findings older than that.
- ``damaged_mail`` (``older_than``): the files of `damaged_queue_file`, `corrupt_queue_file` and
  `incomplete_queue_file` findings whose file changed longer ago than that.
- ``orphan_logs`` (``older_than``): the logs of `orphan_log` findings older than that.
- ``erase_subject``: the messages of `personal_data` findings holding one of its subjects
  where the rule searches (its envelope and header fields; with ``search = "full"`` also its
  bodies and attachments). A message of an `unreadable_content` finding that no rule selected
  is deferred under each ``erase_subject`` rule that applies to it, never deleted blindly: its
  content could not be searched at that rule's depth.

A message is removed by Postfix's own deleter, ``postsuper -d ID QUEUE`` (action
``postfix.postsuper_delete``), which removes its defer, bounce and trace logs with it; only an
orphan log, which no queue file names, is removed by the purger itself
(``postfix.delete_orphan_log``). Each action's precondition is the file as the audit saw it:
size, modification time, inode and SHA-256. Never planned, deferred with the reason: what
``postsuper -d`` does not delete (a file not marked ready, such as a dead writer's; a file in
``corrupt`` or ``saved``; a name that is not a queue id), a message in ``active`` (the queue
manager is delivering it), and a file the audit could not read (no digest to re-check).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mqforensics.retention.erasure import (
    UNREADABLE_CONTENT,
    rules_found,
    rules_unsearched,
    unsearched_deferrals,
    unsearched_reason,
)
from mqforensics.retention.manifest import Action, Deferred
from mqforensics.retention.policy import ERASE_SUBJECT, Policy, Rule
from mqforensics.spec import PlanParts
from mqforensics.systems.postfix.files import SYSTEM
from mqforensics.systems.postfix.queue_dir import LISTED_QUEUES, READY, READY_BITS
from mqforensics.units import parse_instant

POSTSUPER_DELETE = "postfix.postsuper_delete"
DELETE_ORPHAN_LOG = "postfix.delete_orphan_log"
KINDS = (POSTSUPER_DELETE, DELETE_ORPHAN_LOG)

# (rule kind, keys beyond the common ones, needs older_than), in planning order.
RULE_KINDS = (
    ("queued_mail", ("older_than",), True),
    ("held_mail", ("older_than",), True),
    ("damaged_mail", ("older_than",), True),
    ("orphan_logs", ("older_than",), True),
)
_SELECTS = {
    "retention_exceeded": "queued_mail",
    "expired_in_queue": "queued_mail",
    "old_hold": "held_mail",
    "damaged_queue_file": "damaged_mail",
    "corrupt_queue_file": "damaged_mail",
    "incomplete_queue_file": "damaged_mail",
    "orphan_log": "orphan_logs",
    "personal_data": ERASE_SUBJECT,
}
# What each rule kind's age is judged from, the first known: a message's arrival, a log's last
# change. A damaged file's is the earlier of the two: the queue manager sets a deferred file's
# mtime to its next retry, in the future, and a damaged file may have no arrival time.
_AGE_FROM = {
    "queued_mail": ("arrival", "modified"),
    "held_mail": ("arrival", "modified"),
    "orphan_logs": ("modified",),
}
NOT_AN_ID = "the file name is not a queue id: postsuper cannot name it; remove it by hand"
NOT_READY = (
    "not marked ready (mode {mode}): postsuper -d deletes only ready files; postsuper -p removes "
    "unfinished ones 7 days after their last change"
)
NOT_A_MESSAGE_QUEUE = (
    "in {queue}, which postsuper does not delete from: inspect it (postcat), then remove it by hand"
)
ACTIVE = "in the active queue: the queue manager is delivering it; plan again once it is deferred"
NOT_READ = "the audit could not read the file: there is no digest to re-check it against"


def _instant(value: Any) -> dt.datetime | None:
    return parse_instant(value) if isinstance(value, str) and value else None


def _age_start(detail: Mapping[str, Any], kind: str) -> dt.datetime | None:
    known = [_instant(detail.get(name)) for name in _AGE_FROM.get(kind, ("arrival", "modified"))]
    starts = [start for start in known if start is not None]
    if not starts:
        return None
    return min(starts) if kind == "damaged_mail" else starts[0]


def _older(detail: Mapping[str, Any], rule: Rule, as_of: dt.datetime) -> bool:
    start = _age_start(detail, rule.kind)
    return start is not None and rule.older_than is not None and start < as_of - rule.older_than


@dataclass
class _File:
    """One file some rules selected, with the findings that justify each rule."""

    finding: dict[str, Any]
    by_rule: dict[str, set[str]] = field(default_factory=dict)

    @property
    def detail(self) -> dict[str, Any]:
        return self.finding["detail"]

    def order(self) -> tuple[str, ...]:
        d = self.detail
        return (str(d.get("host")), str(self.finding["queue"]), str(self.finding["subject"]))


class PostfixPlanner:
    """Turns findings into actions; rules in the order of `RULE_KINDS`, then the policy's."""

    def __init__(self, policy: Policy, as_of: dt.datetime) -> None:
        self.as_of = as_of
        kinds = [k for k, _, _ in RULE_KINDS] + [ERASE_SUBJECT]
        self.rules = [r for kind in kinds for r in policy.rules_of(kind, SYSTEM)]

    def _selecting(self, finding: Mapping[str, Any]) -> list[Rule]:
        kind = _SELECTS.get(finding["check"])
        chosen = []
        for rule in self.rules:
            if rule.kind != kind or not rule.applies_to(SYSTEM, finding["queue"]):
                continue
            if kind == ERASE_SUBJECT:
                if rules_found(finding["detail"], [rule]):
                    chosen.append(rule)
            elif _older(finding["detail"], rule, self.as_of):
                chosen.append(rule)
        return chosen

    def _unsearched(self, finding: Mapping[str, Any]) -> tuple[list[Rule], str]:
        """The erase_subject rules an `unreadable_content` finding's file escapes (the rules
        that apply to its queue and search a place that could not be read), and the reason."""
        rules = [
            r for r in self.rules
            if r.kind == ERASE_SUBJECT and r.applies_to(SYSTEM, finding["queue"])
        ]  # fmt: skip
        detail = finding["detail"]
        return rules_unsearched(detail, rules), unsearched_reason(detail)

    def plan(self, findings: Iterable[dict[str, Any]]) -> PlanParts:
        out = PlanParts()
        selected: dict[str, _File] = {}
        unsearched: list[tuple[_File, str]] = []
        for finding in findings:
            if finding["system"] != SYSTEM:
                continue
            if finding["check"] == UNREADABLE_CONTENT:
                escaping, reasons = self._unsearched(finding)
                if escaping:
                    item = _File(finding, {r.id: {finding["id"]} for r in escaping})
                    unsearched.append((item, reasons))
                continue
            for rule in self._selecting(finding):
                item = selected.setdefault(finding["subject"], _File(finding))
                item.by_rule.setdefault(rule.id, set()).add(finding["id"])
        for item in sorted(selected.values(), key=_File.order):
            rules = tuple(r.id for r in self.rules if r.id in item.by_rule)
            cited = tuple(sorted(set().union(*item.by_rule.values())))
            log = item.finding["scope"] == "log"
            kind = DELETE_ORPHAN_LOG if log else POSTSUPER_DELETE
            target = self._target(item)
            detail = item.detail
            if not detail.get("digest"):
                out.deferred.append(Deferred(kind, target, rules, NOT_READ, cited))
                continue
            why = None if log else self._not_deletable(item)
            if why is not None:
                out.deferred.append(Deferred(kind, target, rules, why, cited))
                continue
            precondition = {
                "size": detail["size"],
                "sha256": detail["digest"],
                "modified": detail["modified"],
                "inode": detail["inode"],
            }
            what = f"{item.finding['queue']} log" if log else f"message in {item.finding['queue']}"
            reason = f"{what} selected by {', '.join(rules)}"
            out.actions.append(
                Action(
                    kind,
                    target,
                    precondition,
                    rules,
                    int(detail["size"]),
                    0,
                    reason,
                    findings=cited,
                )
            )
        # Never deleted blindly, never passed over in silence: a file whose content could not
        # be searched (`erasure.unsearched_deferrals`).
        items = [
            Deferred(POSTSUPER_DELETE, self._target(item),
                     tuple(r.id for r in self.rules if r.id in item.by_rule), reasons,
                     (item.finding["id"],))
            for item, reasons in sorted(unsearched, key=lambda pair: pair[0].order())
        ]  # fmt: skip
        chosen = {path: set(item.by_rule) for path, item in selected.items()}
        deleted = [a.target.get("path") for a in out.actions]
        out.deferred += unsearched_deferrals(items, chosen, deleted, _path_of)
        return out

    @staticmethod
    def _not_deletable(item: _File) -> str | None:
        """Why postsuper -d would not delete the message of `item`, or None."""
        detail, queue = item.detail, str(item.finding["queue"])
        if queue not in LISTED_QUEUES:
            return NOT_A_MESSAGE_QUEUE.format(queue=queue)
        if queue == "active":
            return ACTIVE
        if detail.get("id_kind") == "not_an_id":
            return NOT_AN_ID
        mode = str(detail.get("mode") or "0")
        if int(mode, 8) & READY_BITS != READY:
            return NOT_READY.format(mode=mode)
        return None

    @staticmethod
    def _target(item: _File) -> dict[str, Any]:
        d = item.detail
        return {"host": d.get("host"), "queue_dir": d.get("queue_dir"),
                "queue": item.finding["queue"], "queue_id": d.get("queue_id"),
                "path": item.finding["subject"]}  # fmt: skip


def _path_of(target: Mapping[str, Any]) -> Any:
    return target.get("path")


def plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    """The actions, deferrals and notes of `policy` over an audit's raw `findings`; `manifest`
    is the audit's (its ``as_of`` judges ages)."""
    planner = PostfixPlanner(policy, parse_instant(str(manifest["as_of"])))
    out = planner.plan(findings)
    if not planner.rules:
        kinds = ", ".join([k for k, _, _ in RULE_KINDS] + [ERASE_SUBJECT])
        out.notes.append(f"the policy has no Postfix rule ({kinds})")
    if any(a.kind == POSTSUPER_DELETE for a in out.actions):
        out.notes.append(
            "messages are deleted with postsuper -d ID QUEUE, which removes their defer, bounce "
            "and trace logs too; each file is re-checked (size, mtime, inode, SHA-256) right "
            "before"
        )
    if any(r.kind == ERASE_SUBJECT for r in planner.rules):
        out.notes.append(
            "erasure matches envelope senders and recipients (current and original) and the "
            'message\'s header fields; rules with search = "full" also its decoded bodies and '
            "attachments; a file whose content could not be searched is deferred, never deleted "
            "blindly"
        )
    return out
