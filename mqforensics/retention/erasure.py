"""What an erasure rule acts on, whatever the system: the subjects a finding holds *where the rule
searches*, and the places a finding could not search that the rule would have.

A `personal_data` finding says where each subject was found (``detail.found``: ``envelope``,
``header:<field>``, ``body``, ``attachment``, ...); a rule with ``search = "headers"`` acts only
on what was found outside bodies and attachments, one with ``search = "full"`` on everything
(the same subject may be named by rules of both depths). An `unreadable_content` finding lists
places that could not be searched (``detail.unreadable``); it concerns a rule only when the rule
searches one of them. Every system's planner uses these, so an erasure means the same in all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from mqforensics.content_search import ATTACHMENT, BODY
from mqforensics.retention.manifest import Deferred
from mqforensics.retention.policy import SEARCH_FULL, Rule

# Places only a rule of depth full searches.
FULL_ONLY = frozenset((BODY, ATTACHMENT))
UNREADABLE_CONTENT = "unreadable_content"
# What identifies a stored object among a plan's targets (a path, a queue and file name...).
K = TypeVar("K", bound=Hashable)
UNSEARCHED = "content could not be searched: {reasons}"


def searches(rule: Rule, where: str | None) -> bool:
    """Whether `rule` searches the place `where`."""
    return rule.search == SEARCH_FULL or where not in FULL_ONLY


def subjects_found(detail: Mapping[str, Any], rule: Rule) -> set[str]:
    """The keyed subjects a `personal_data` finding holds where `rule` searches (a finding
    without ``found`` names only subjects of its envelope or index)."""
    found = detail.get("found")
    if found is None:
        return set(detail.get("subjects") or ())
    return {str(hit["subject"]) for hit in found if searches(rule, hit.get("where"))}


def rules_found(detail: Mapping[str, Any], rules: Iterable[Rule]) -> list[Rule]:
    """The erase rules among `rules` a `personal_data` finding holds a subject of, where each
    searches."""
    return [rule for rule in rules if subjects_found(detail, rule) & set(rule.subjects)]


def rules_unsearched(detail: Mapping[str, Any], rules: Iterable[Rule]) -> list[Rule]:
    """The erase rules among `rules` an `unreadable_content` finding's object escapes: those
    searching one of its unreadable places."""
    places = detail.get("unreadable") or ()
    return [r for r in rules if any(searches(r, p.get("where")) for p in places)]


def unsearched_reason(detail: Mapping[str, Any]) -> str:
    """The deferral reason of an `unreadable_content` finding's object: each place and why."""
    places = detail.get("unreadable") or ()
    reasons = "; ".join(f"{p.get('where')}: {p.get('reason')}" for p in places)
    return UNSEARCHED.format(reasons=reasons)


def unsearched_deferrals(
    unsearched: Iterable[Deferred],
    selected: Mapping[K, Iterable[str]],
    deleted: Iterable[K],
    key: Callable[[Mapping[str, Any]], K],
) -> list[Deferred]:
    """The deferrals of objects that could not be searched (one per `unreadable_content`
    finding, under `rules_unsearched`), each kept under the rules that would have searched it
    and did not select it (a rule that did plans or defers it already, with its own reason);
    none for an object an action deletes (`deleted`). `selected` maps an object's `key` (of its
    target) to the ids of the rules that selected it."""
    gone = set(deleted)
    out = []
    for item in unsearched:
        which = key(item.target)
        if which in gone:
            continue
        taken = set(selected.get(which, ()))
        rules = tuple(r for r in item.rules if r not in taken)
        if rules:
            out.append(dataclasses.replace(item, rules=rules))
    return out
