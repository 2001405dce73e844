"""What a plan says of the broker findings (broker_checks.py): never an action. The plan never
publishes, acknowledges or deletes a RabbitMQ message, and never deletes live mail; it defers
to James's own WebAdmin calls, with their exact parameters in the deferral's target, for a
person to run. Selected by a ``broker_reconcile`` rule (its queues, if it names some).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mqforensics.retention.manifest import Deferred
from mqforensics.units import plural, utc_text

if TYPE_CHECKING:
    from mqforensics.retention.policy import Policy

SYSTEM = "james"
RULE_KIND = "broker_reconcile"
REPUBLISH = "james.webadmin_republish"
DELETE_MAIL = "james.webadmin_delete_mail"
DEAD_LETTER = "james.dead_letter"
BROKER_MESSAGE = "james.broker_message"

REPUBLISH_REASON = (
    "mail RabbitMQ lost: republish it through James's WebAdmin (target.call, a task; the plan "
    "never publishes to RabbitMQ); olderThan counts back from when James runs the task: add "
    "the time since target.as_of"
)
DELETE_REASON = (
    "dead-lettered mail whose blobs are gone: it can never be delivered; delete it through "
    "James's WebAdmin (target.call: every live mail of that name) and tell its sender"
)
RETRY_REASON = (
    "dead-lettered mail with its blobs: once the cause is fixed (James's log names it), "
    "RepublishNotProcessedMails republishes it (every live mail not in the work queue)"
)
ORPHAN_REASONS = {
    "deleted": "broker message of a consumed mail: James's Dequeuer acknowledges and drops it "
    "when it reaches it; no WebAdmin call removes it",
    "absent": "broker message with no view row: James delivers it (or dead-letters it if its "
    "blobs are gone) but cannot browse, count or delete it; no WebAdmin call reaches it",
    "unreadable": "broker message that is no MailReferenceDTO: James's Dequeuer dead-letters it; "
    "find its writer",
}
DEAD_REASONS = {
    "deleted": "dead-lettered message of a consumed mail: nothing in James refers to it; it "
    "stays in the dead-letter queue until the broker's operator purges it",
    "absent": "dead-lettered message with no view row: nothing in James refers to it",
    "unreadable": "dead-lettered message that is no MailReferenceDTO: find its writer",
}


def broker_deferrals(
    by_check: Mapping[str, list[dict[str, Any]]], policy: Policy, as_of: dt.datetime
) -> tuple[list[Deferred], list[str]]:
    """The deferrals and notes for the broker findings a broker_reconcile rule selects."""
    rules = policy.rules_of(RULE_KIND, SYSTEM)
    if not rules:
        return [], []

    def selecting(queue: str | None) -> tuple[str, ...]:
        return tuple(sorted(r.id for r in rules if r.applies_to(SYSTEM, queue)))

    deferred: list[Deferred] = []
    missing: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for finding in by_check.get("broker_missing_mail", []):
        missing[finding["queue"]].append(finding)
    for queue, found in sorted(missing.items()):
        chosen = selecting(queue)
        if not chosen:
            continue
        call = found[0]["detail"]["republish"]
        deferred.append(Deferred(
            kind=REPUBLISH,
            target={"queue": queue, "call": call, "as_of": utc_text(as_of), "mails": len(found)},
            rules=chosen, reason=REPUBLISH_REASON,
            findings=tuple(sorted(f["id"] for f in found)),
        ))  # fmt: skip
    for finding in sorted(by_check.get("dead_lettered_mail", []), key=_order):
        d, chosen = finding["detail"], selecting(finding["queue"])
        if not chosen or finding["scope"] != "message":
            continue
        target = {"queue": finding["queue"], "broker_queue": d["broker_queue"],
                  "message": finding["subject"]}  # fmt: skip
        if d.get("delete"):
            kind, reason = DELETE_MAIL, DELETE_REASON
            target["call"] = d["delete"]
        elif d["view"] == "live":
            kind, reason = DEAD_LETTER, RETRY_REASON
        else:
            kind, reason = DEAD_LETTER, DEAD_REASONS[d["view"]]
        deferred.append(Deferred(kind, target, chosen, reason, (finding["id"],)))
    for finding in sorted(by_check.get("broker_orphan_message", []), key=_order):
        d, chosen = finding["detail"], selecting(finding["queue"])
        if chosen:
            target = {"queue": finding["queue"], "broker_queue": d["broker_queue"],
                      "message": finding["subject"]}  # fmt: skip
            deferred.append(Deferred(BROKER_MESSAGE, target, chosen, ORPHAN_REASONS[d["view"]],
                                     (finding["id"],)))  # fmt: skip
    notes = []
    for rule in rules:
        count = plural(sum(rule.id in d.rules for d in deferred), "broker finding")
        notes.append(
            f"rule {rule.id} deferred {count} to James's WebAdmin calls or to the broker's "
            "operator (never an action)"
        )
    for item in deferred:
        if item.kind == REPUBLISH:
            target = item.target
            lost = plural(target["mails"], "mail")
            notes.append(
                f"queue {target['queue']}: RabbitMQ lost {lost}; run {target['call']} "
                f"(olderThan counted from the audit's as-of {target['as_of']}: add the time "
                "elapsed since)"
            )
    deletes = sum(1 for item in deferred if item.kind == DELETE_MAIL)
    if deletes:
        notes.append(
            f"{plural(deletes, 'dead-lettered mail')} whose blobs are gone: the DELETE calls are "
            f"the targets of the {DELETE_MAIL} items of deferred.jsonl"
        )
    for finding in by_check.get("queue_without_consumer", []):
        if selecting(finding["queue"]):
            notes.append(
                f"queue {finding['queue']}: its work queue has no consumer, so nothing is "
                "delivered; restart James's mail queue consumers before republishing"
            )
    for finding in by_check.get("broker_count_mismatch", []):
        if selecting(finding["queue"]):
            diff = int(finding["detail"]["difference"])
            side = "view" if diff > 0 else "broker"
            notes.append(
                f"queue {finding['queue']}: the {side} holds {plural(abs(diff), 'mail')} more "
                "than the other side (counts only): export the broker's messages from a copy "
                "(--broker-export) to know which"
            )
    return deferred, notes


def _order(finding: dict[str, Any]) -> tuple[str, int]:
    d = finding["detail"]
    return (str(d.get("broker_queue")), int(d.get("position") or 0))
