"""Reclamation plans from an audit's findings (the executor that carries them out: `purge`).

A segment may go only when the queue's own restart procedure would never read it again: its
number is below the working suffix of the *saved* restart positions (``restart.lq``). The
audit's `unreclaimed_segment` findings name every garbage segment with what decides that (the
saved suffix, whether ``restart.lq`` was whole) and the file's size and SHA-256; `plan` reads
nothing else. Garbage that the saved positions still cover is deferred (the queue must save
newer positions first: `restart_lag`), and so is every segment of a queue whose ``restart.lq``
is missing or damaged (nothing is decided from positions that cannot be read). An erasure
(``erase_subject``) deletes the segments its `personal_data` findings name when they may go by
the same rule; a segment the restart still reads cannot be edited, so it is deferred. A spool
file whose message holds a subject (`personal_data` of scope ``spool``) is deleted when no
unfinished message names it (re-checked live by the purger); the spool file of waiting or
in-flight mail is deferred (the queue removes it itself once the message is finished), and so
is every spool file the audit could not search (`unreadable_content`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqforensics.retention.erasure import (
    UNREADABLE_CONTENT as UNREADABLE,
)
from mqforensics.retention.erasure import (
    rules_found,
    rules_unsearched,
    unsearched_deferrals,
    unsearched_reason,
)
from mqforensics.retention.manifest import Action, Deferred
from mqforensics.retention.policy import ERASE_SUBJECT, Policy, Rule
from mqforensics.spec import PlanParts
from mqforensics.systems.logqueue import layout

SYSTEM = "logqueue"
GARBAGE_SEGMENTS = "garbage_segments"
DELETE_SEGMENT = "logqueue.delete_segment"
DELETE_SPOOL = "logqueue.delete_spool"
UNRECLAIMED, PERSONAL_DATA = "unreclaimed_segment", "personal_data"
SPOOL_SCOPE = "spool"
LIVE_SPOOL = (
    "holds a data subject to erase, but its message is still {state}: the queue delivers it "
    "and removes this file once the message is finished; audit and plan again then, or have "
    "the queue fail the message"
)
NO_MESSAGE_SPOOL = "a spool file no unfinished message names; holds a data subject to erase"
BELOW_SUFFIX = "entirely before the saved working suffix"
SAVED_POSITIONS_BEHIND = (
    "garbage, but the saved restart positions still cover it: the queue must save newer "
    "positions first (restart_lag)"
)
NO_SAVED_POSITIONS = (
    "the queue has no restart.lq: its restart reads every segment, none may go before it saves "
    "its positions"
)
DAMAGED_SAVED_POSITIONS = (
    "restart.lq is damaged (corrupt_segment bad_restart on restart.lq): nothing is planned "
    "from positions that cannot be read"
)
STILL_READ = (
    "holds a data subject to erase, but the queue's restart still reads it and a segment cannot "
    "be edited: it can go once the queue has finished these messages and saved newer positions"
)
NOT_READ = "the audit did not read this file (no size and SHA-256): audit again"


def _rule_applies(rule: Rule, queue: str) -> bool:
    """A rule's ``queues`` name queue directories by path or by their last component."""
    return rule.applies_to(SYSTEM, queue) or rule.applies_to(SYSTEM, Path(queue).name)


@dataclass
class _Segment:
    """One segment file some findings select, with every rule and finding that does."""

    detail: dict[str, Any]
    rules: set[str] = field(default_factory=set)
    findings: set[str] = field(default_factory=set)
    checks: set[str] = field(default_factory=set)


def _blocked(detail: Mapping[str, Any]) -> str | None:
    """Why a segment may not be deleted now (the restart may still read it), or None."""
    positions = detail.get("saved_positions")
    if positions == "damaged":
        return DAMAGED_SAVED_POSITIONS
    if positions != layout.RESTART_FILE:
        return NO_SAVED_POSITIONS
    if not detail.get("below_saved_suffix"):
        return SAVED_POSITIONS_BEHIND if detail.get("garbage") is not False else STILL_READ
    if not isinstance(detail.get("sha256"), str) or not isinstance(detail.get("size"), int):
        return NOT_READ
    return None


def plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    """`logqueue.delete_segment` actions from an audit's findings (``findings.raw.json`` rows):
    every segment an `unreclaimed_segment` finding names, under a ``garbage_segments`` rule, and
    every segment a `personal_data` finding names with a subject of an ``erase_subject`` rule;
    each may go only when it is below its queue's saved suffix, read from a whole
    ``restart.lq`` (else it is deferred with the reason). Each action cites its findings."""
    garbage_rules = policy.rules_of(GARBAGE_SEGMENTS, SYSTEM)
    erase_rules = [r for r in policy.rules_of(ERASE_SUBJECT, SYSTEM) if r.subjects]
    selected: dict[tuple[str, int], _Segment] = {}
    spool_rows = []
    for row in findings:
        queue, detail = row["queue"], row["detail"]
        if row.get("scope") == SPOOL_SCOPE and row["check"] in (PERSONAL_DATA, UNREADABLE):
            spool_rows.append(row)
            continue
        if row["check"] == UNRECLAIMED:
            rules = [r.id for r in garbage_rules if _rule_applies(r, queue)]
        elif row["check"] == PERSONAL_DATA:
            rules = [r.id for r in rules_found(detail, erase_rules) if _rule_applies(r, queue)]
        else:
            continue
        if not rules:
            continue
        entry = selected.setdefault((queue, int(detail["segment"])), _Segment(detail))
        entry.rules.update(rules)
        entry.findings.add(row["id"])
        entry.checks.add(row["check"])
    actions: list[Action] = []
    deferred: list[Deferred] = []
    notes: list[str] = []
    for (queue, number), entry in sorted(selected.items()):
        detail = entry.detail
        target = {"queue": queue, "segment": number, "file": Path(detail["path"]).name}
        chosen, cited = tuple(sorted(entry.rules)), tuple(sorted(entry.findings))
        why_not = _blocked(detail)
        if why_not is not None:
            deferred.append(Deferred(DELETE_SEGMENT, target, chosen, why_not, cited))
            continue
        precondition = {
            "size": detail["size"], "sha256": detail["sha256"],
            "saved_suffix_segment": detail["saved_suffix_segment"],
        }  # fmt: skip
        reason = BELOW_SUFFIX
        if PERSONAL_DATA in entry.checks:
            reason += "; holds a data subject to erase"
        actions.append(
            Action(DELETE_SEGMENT, target, precondition, chosen, detail["size"], 0, reason,
                   findings=cited)
        )  # fmt: skip
    spool_actions, spool_deferred = _spool_plan(spool_rows, erase_rules)
    actions.extend(spool_actions)
    deferred.extend(spool_deferred)
    for queue in sorted({q for q, _ in selected}):
        reasons = {d.reason for d in deferred if d.target["queue"] == queue}
        if NO_SAVED_POSITIONS in reasons:
            notes.append(f"{queue}: no {layout.RESTART_FILE}: nothing is below a saved suffix")
        if DAMAGED_SAVED_POSITIONS in reasons:
            notes.append(f"{queue}: {layout.RESTART_FILE} is damaged: nothing planned there")
    return PlanParts(actions=actions, deferred=deferred, notes=notes)


def _spool_plan(
    rows: list[dict[str, Any]], erase_rules: list[Rule]
) -> tuple[list[Action], list[Deferred]]:
    """`logqueue.delete_spool` of the spool files `personal_data` findings name with a rule's
    subject and no unfinished message names; the others, and the files `unreadable_content`
    findings name, deferred with the reason. Each cites its findings."""
    actions: list[Action] = []
    deferred: list[Deferred] = []
    selected: dict[tuple[str, str], set[str]] = {}
    unsearched: list[Deferred] = []
    for row in sorted(rows, key=lambda r: (r["queue"], r["detail"]["spool"], r["check"])):
        queue, detail = row["queue"], row["detail"]
        applies = [r for r in erase_rules if _rule_applies(r, queue)]
        target = {"queue": queue, "spool": detail["spool"]}
        if row["check"] == PERSONAL_DATA:
            applies = rules_found(detail, applies)
            selected.setdefault((queue, detail["spool"]), set()).update(r.id for r in applies)
        else:
            applies = rules_unsearched(detail, applies)
        if not applies:
            continue
        chosen = tuple(sorted(r.id for r in applies))
        cited = (row["id"],)
        if row["check"] == UNREADABLE:
            reason = unsearched_reason(detail)
            unsearched.append(Deferred(DELETE_SPOOL, target, chosen, reason, cited))
            continue
        state = detail.get("state")
        if state in ("waiting", "in_flight"):
            reason = LIVE_SPOOL.format(state=state.replace("_", "-"))
            deferred.append(Deferred(DELETE_SPOOL, target, chosen, reason, cited))
            continue
        if not isinstance(detail.get("sha256"), str) or not isinstance(detail.get("size"), int):
            deferred.append(Deferred(DELETE_SPOOL, target, chosen, NOT_READ, cited))
            continue
        precondition = {
            "size": detail["size"],
            "sha256": detail["sha256"],
            "named_by_unfinished": False,
        }
        actions.append(
            Action(DELETE_SPOOL, target, precondition, chosen, detail["size"], 0, NO_MESSAGE_SPOOL,
                   findings=cited)
        )  # fmt: skip
    deleted = [(a.target["queue"], a.target["spool"]) for a in actions]
    deferred += unsearched_deferrals(unsearched, selected, deleted, _spool_key)
    return actions, deferred


def _spool_key(target: Mapping[str, Any]) -> tuple[str, str]:
    return (target["queue"], target["spool"])
