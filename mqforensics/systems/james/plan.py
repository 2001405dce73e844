"""The James cleanup planner: an audit's findings and a retention policy in, the exact deletions
out, each citing the findings that justify it.

It reads findings only (the rows of ``findings.raw.json``, ``detail`` decoded), never the
store: every anomaly is defined once, in its check (checks.py), and each finding carries what
deleting its object takes. The planner knows *why* (the policy's rules) and selects by them,
adding the preconditions the purger re-checks (docs/retention.md, "What the planner plans"):

* ``unreclaimed_slice`` findings: whole partitions strictly before browseStart whose every row
  is consumed, with their ``deletedmailsv2`` markers (``consumed_mail``: the newest row older
  than the cutoff; ``erase_subject``: a row holds a subject), then contentStart moved past
  them (V4) up to the first partition that stays (``first_kept_slice``) or browseStart;
* ``personal_data`` findings: the rows of erased subjects no partition deletion covers,
  deleted one by one within the tombstone budget when consumed and before browseStart in a
  partition that also holds live mail; live mail, rows at or after browseStart and rows of a
  queue without browseStart are deferred, with the reason;
* ``unreadable_content`` findings: rows whose content could not be searched and that hold no
  subject found elsewhere (no ``personal_data`` finding) are deferred under each
  ``erase_subject`` rule covering their queue, never deleted blindly;
* ``consumed_blob`` findings: passthrough blobs only consumed mails reference, whose mails a
  rule selects (by age, or holding an erased subject);
* ``orphaned_blob`` findings: passthrough orphans older than an ``orphaned_blobs`` rule's
  cutoff, when the rule asserts ``references_complete`` and every reference was read.

It never plans live mail (James deletes that itself, through its WebAdmin API), nothing at or
after browseStart (every browse reads a tombstone there), and never a deduplicated blob (other
mails may share it). Cutoffs are the audit's as-of minus ``older_than``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqforensics.retention.erasure import (
    UNSEARCHED,
    rules_found,
    rules_unsearched,
    unsearched_deferrals,
    unsearched_reason,
)
from mqforensics.retention.manifest import Action, Deferred
from mqforensics.spec import PlanParts
from mqforensics.systems.james import tombstones
from mqforensics.systems.james.blob_ids import PASSTHROUGH
from mqforensics.systems.james.broker_plan import RULE_KIND as BROKER_RULE_KIND
from mqforensics.systems.james.broker_plan import broker_deferrals
from mqforensics.units import parse_instant, plural, utc_millis_text

if TYPE_CHECKING:
    from mqforensics.retention.policy import Policy, Rule

SYSTEM = "james"
DELETE_PARTITION = "james.delete_partition"
DELETE_ROW = "james.delete_row"
ADVANCE_CONTENT_START = "james.advance_content_start"
DELETE_BLOB = "james.delete_blob"
KINDS = (DELETE_PARTITION, DELETE_ROW, ADVANCE_CONTENT_START, DELETE_BLOB)
V4_TABLE = "enqueuedmailsv4"
DEFAULT_KEYSPACE = "apache_james"

LIVE_MAIL = (
    "live mail: delete it through James "
    "(DELETE /mailQueues/{queue}/mails?recipient=<address>, or ?sender=<address>)"
)
AFTER_BROWSE_START = (
    "partition at or after browseStart: James still browses it; "
    "a tombstone there is read by every browse"
)
NO_BROWSE_START = "queue has no browseStart row"
OVER_BUDGET = "tombstone budget of {budget} rows per partition exceeded"
CONSUMED_CONTENT = "content of a consumed mail"
ERASED_CONTENT = "content of mail of an erased data subject"
ORPHAN = "orphaned blob"


def _instant(text: str | None) -> dt.datetime | None:
    return None if text is None else parse_instant(text)


@dataclass
class _Erased:
    """A `personal_data` finding some erase rule selects: one view row of an erased subject."""

    finding: dict[str, Any]
    rules: set[str]

    @property
    def detail(self) -> dict[str, Any]:
        return self.finding["detail"]

    @property
    def key(self) -> tuple[str, str]:
        return (self.finding["queue"], self.detail["enqueueid"])


@dataclass
class _Partition:
    """An `unreclaimed_slice` finding a rule selects, and why."""

    finding: dict[str, Any]
    rules: set[str]
    cited: set[str] = field(default_factory=set)

    @property
    def detail(self) -> dict[str, Any]:
        return self.finding["detail"]

    @property
    def queue(self) -> str:
        return str(self.finding["queue"])

    @property
    def start(self) -> dt.datetime:
        value = _instant(self.detail["timerangestart"])
        assert value is not None
        return value


class _Planner:
    def __init__(
        self, findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]
    ) -> None:
        self.policy = policy
        self.as_of = parse_instant(str(manifest["as_of"]))
        self.inputs: Mapping[str, Any] = manifest.get("plan_inputs") or {}
        self.keyspace = str(self.inputs.get("keyspace") or DEFAULT_KEYSPACE)
        self.by_check: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in findings:
            if row.get("system") == SYSTEM:
                self.by_check[row["check"]].append(row)
        self.consumed_rules = policy.rules_of("consumed_mail", SYSTEM)
        self.erase_rules = [r for r in policy.rules_of("erase_subject", SYSTEM) if r.subjects]
        self.orphan_rules = [
            r for r in policy.rules_of("orphaned_blobs", SYSTEM) if r.applies_to(SYSTEM)
        ]
        self.notes: list[str] = []
        self.erased = self._erased_rows()
        # The same mail (queue, enqueueid) may be a row of two partitions (a damaged view).
        self.erased_mails: dict[tuple[str, str], list[_Erased]] = defaultdict(list)
        for erased in self.erased:
            self.erased_mails[erased.key].append(erased)

    # -- selection ---------------------------------------------------------------------------

    def _cutoff(self, rule: Rule) -> dt.datetime:
        assert rule.older_than is not None  # load_policy requires it for these kinds
        return self.as_of - rule.older_than

    def _aged(self, queue: str | None, enqueued: str | None) -> set[str]:
        """The consumed_mail rules covering `queue` under whose cutoff `enqueued` falls."""
        when = _instant(enqueued)
        if when is None or queue is None:
            return set()
        return {
            r.id
            for r in self.consumed_rules
            if r.applies_to(SYSTEM, queue) and when < self._cutoff(r)
        }

    def _erased_rows(self) -> list[_Erased]:
        """The personal_data rows an erase rule covering their queue selects; their findings
        are what erasure actions cite."""
        rows = []
        for finding in self.by_check["personal_data"]:
            covering = [r for r in self.erase_rules if r.applies_to(SYSTEM, finding["queue"])]
            rules = {r.id for r in rules_found(finding["detail"], covering)}
            if rules:
                rows.append(_Erased(finding, rules))
        return rows

    # -- partitions and rows -------------------------------------------------------------------

    def partitions(self) -> tuple[list[_Partition], list[_Partition]]:
        """(planned, flagged but not planned) partitions of the unreclaimed_slice findings."""
        erased_by_partition: dict[str, list[_Erased]] = defaultdict(list)
        for row in self.erased:
            erased_by_partition[row.detail["partition"]].append(row)
        planned: list[_Partition] = []
        kept: list[_Partition] = []
        for finding in self.by_check["unreclaimed_slice"]:
            detail = finding["detail"]
            part = _Partition(finding, set(), {finding["id"]})
            browse = _instant(detail.get("browse_start"))
            plannable = browse is not None and part.start < browse and int(detail["live_rows"]) == 0
            if plannable:
                part.rules |= self._aged(finding["queue"], detail.get("newest_enqueued_time"))
                for row in erased_by_partition.get(finding["subject"], []):
                    part.rules |= row.rules
                    part.cited.add(row.finding["id"])
            (planned if plannable and part.rules else kept).append(part)
        order = lambda p: (p.queue, p.start, int(p.detail["bucketid"]))  # noqa: E731
        return sorted(planned, key=order), kept

    def partition_actions(self, planned: list[_Partition]) -> list[Action]:
        actions = []
        for part in planned:
            d = part.detail
            count = f"{d['rows']} row" if d["rows"] == 1 else f"{d['rows']} rows"
            markers = sorted(d["markers"])
            actions.append(
                Action(
                    kind=DELETE_PARTITION,
                    target={
                        "keyspace": self.keyspace,
                        "table": d["table"],
                        "queue": part.queue,
                        "timerangestart": d["timerangestart"],
                        "bucketid": int(d["bucketid"]),
                    },
                    precondition={
                        "enqueueids": sorted(d["enqueueids"]),
                        "markers": markers,
                        "browsestart": d["browse_start"],
                    },
                    rules=tuple(sorted(part.rules)),
                    bytes=int(d.get("metadata_bytes") or 0),
                    tombstones=sum(tombstones.partition_delete(d["table"], len(markers)).values()),
                    reason=f"fully consumed partition before browseStart ({count})",
                    findings=tuple(sorted(part.cited)),
                )
            )
        return actions

    def row_actions(self, planned: list[_Partition]) -> tuple[list[Action], list[Deferred]]:
        """The erased rows no planned partition deletion covers: budgeted row deletions in
        partitions before browseStart that also hold live mail, the rest deferred."""
        covered = {p.finding["subject"] for p in planned}
        budget = self.policy.tombstone_budget_per_partition
        candidates: dict[str, list[_Erased]] = defaultdict(list)
        decided: list[tuple[_Erased, str | None]] = []
        for row in self.erased:
            d = row.detail
            browse = _instant(d.get("browse_start"))
            start = _instant(d["timerangestart"])
            assert start is not None
            if not d["consumed"]:
                decided.append((row, LIVE_MAIL.replace("{queue}", str(row.finding["queue"]))))
            elif browse is None:
                decided.append((row, NO_BROWSE_START))
            elif start >= browse:
                decided.append((row, AFTER_BROWSE_START))
            elif d["partition"] in covered:
                continue
            else:
                candidates[d["partition"]].append(row)
        for rows in candidates.values():
            for rank, row in enumerate(sorted(rows, key=lambda r: r.detail["enqueueid"])):
                decided.append((row, None if rank < budget else OVER_BUDGET.format(budget=budget)))
        actions: list[Action] = []
        deferred: list[Deferred] = []
        for row, reason in sorted(decided, key=lambda item: _row_order(item[0])):
            d = row.detail
            target = {
                "keyspace": self.keyspace,
                "table": d["table"],
                "queue": row.finding["queue"],
                "timerangestart": d["timerangestart"],
                "bucketid": int(d["bucketid"]),
                "enqueueid": d["enqueueid"],
            }
            rules = tuple(sorted(row.rules))
            cited = (row.finding["id"],)
            if reason is None:
                actions.append(
                    Action(
                        kind=DELETE_ROW,
                        target=target,
                        precondition={"marker": True, "browsestart": d["browse_start"]},
                        rules=rules,
                        bytes=int(row.finding.get("bytes") or 0),
                        tombstones=sum(tombstones.row_delete(d["table"]).values()),
                        reason="consumed mail of an erased data subject, in a partition that "
                        "also holds live mail",
                        findings=cited,
                    )
                )
            else:
                deferred.append(
                    Deferred(
                        kind=DELETE_ROW, target=target, rules=rules, reason=reason, findings=cited
                    )
                )
        return actions, deferred

    def content_start_advances(
        self, planned: list[_Partition], kept: list[_Partition]
    ) -> list[Action]:
        """After the planned deletions, contentStart may move up to the first partition that
        stays (or browseStart): James's own cleanup would otherwise walk those emptied slices
        again. Only V4 has contentStart."""
        staying: dict[str, list[dt.datetime]] = defaultdict(list)
        for part in kept:
            staying[part.queue].append(part.start)
        targets: dict[str, tuple[str, dt.datetime, set[str], set[str], _Partition]] = {}
        for part in planned:
            d = part.detail
            content = _instant(d.get("content_start"))
            if d["table"] != V4_TABLE or content is None or part.start < content:
                continue
            remaining = [t for t in staying[part.queue] if t >= content]
            first_kept = _instant(d.get("first_kept_slice"))
            browse = _instant(d["browse_start"])
            to = min(t for t in (browse, first_kept, *remaining) if t is not None)
            if to <= content:
                continue
            entry = targets.setdefault(part.queue, (d["content_start"], to, set(), set(), part))
            entry[2].update(part.rules)
            entry[3].update(part.cited)
        actions = []
        for queue, (start, to, rules, cited, part) in sorted(targets.items()):
            d = part.detail
            actions.append(
                Action(
                    kind=ADVANCE_CONTENT_START,
                    target={"keyspace": self.keyspace, "queue": queue, "to": utc_millis_text(to)},
                    precondition={
                        "from": start,
                        "window_seconds": int(d["window_seconds"]),
                        "bucket_count": int(d["bucket_count"]),
                    },
                    rules=tuple(sorted(rules)),
                    bytes=0,
                    tombstones=0,
                    reason="contentStart past the deleted partitions (James's cleanup would "
                    "walk their emptied slices again)",
                    findings=tuple(sorted(cited)),
                )
            )
        return actions

    def unreadable_deferrals(self, deleting: list[Action]) -> list[Deferred]:
        """The rows whose content could not be searched (`unreadable_content`), deferred with
        what could not be searched under each erase rule covering their queue that would have
        searched it and did not select the row (`erasure.unsearched_deferrals`); none for a row
        the `deleting` actions (its partition's or its own) delete."""
        gone = {_partition_of(a.target) for a in deleting if a.kind == DELETE_PARTITION}
        rows = [_row_of(a.target) for a in deleting if a.kind == DELETE_ROW]
        selected = {_row_of({**e.finding["detail"], "queue": e.finding["queue"]}): e.rules
                    for e in self._erased_rows()}  # fmt: skip
        deferred = []
        for finding in self.by_check["unreadable_content"]:
            d = finding["detail"]
            covering = [r for r in self.erase_rules if r.applies_to(SYSTEM, finding["queue"])]
            rules = tuple(sorted(r.id for r in rules_unsearched(d, covering)))
            if not rules:
                continue
            target = {
                "keyspace": self.keyspace,
                "table": d["table"],
                "queue": finding["queue"],
                "timerangestart": d["timerangestart"],
                "bucketid": int(d["bucketid"]),
                "enqueueid": d["enqueueid"],
            }
            deferred.append(
                Deferred(
                    kind=DELETE_ROW,
                    target=target,
                    rules=rules,
                    reason=unsearched_reason(d),
                    findings=(finding["id"],),
                )
            )
        kept = [item for item in deferred if _partition_of(item.target) not in gone]
        found = unsearched_deferrals(kept, selected, rows, _row_of)
        return sorted(found, key=lambda item: _row_of(item.target))

    # -- blobs -------------------------------------------------------------------------------

    def _usable_orphan_rules(self) -> list[Rule]:
        """The orphaned_blobs rules that may plan: an orphan is only known as one when every
        referrer of the bucket was read (the rule's assertion) and every reference was (the
        read)."""
        usable = []
        for rule in self.orphan_rules:
            if not rule.references_complete:
                self.notes.append(
                    f"rule {rule.id} planned nothing: it does not say references_complete = "
                    "true (other referrers of the bucket, such as mailboxes, may use these blobs)"
                )
            elif not self.inputs.get("references_complete", True):
                self.notes.append(
                    f"rule {rule.id} planned nothing: the blob references read are not "
                    "complete (a live --scan limited to some queues)"
                )
            else:
                usable.append(rule)
        return usable

    def blob_actions(self) -> list[Action]:
        if not self.inputs.get("blobs"):
            self.notes.append("no blob listing given: blob deletions not planned")
            for rule in self.orphan_rules:
                self.notes.append(f"rule {rule.id} planned nothing: no blob listing given")
            return []
        orphan_rules = self._usable_orphan_rules()
        planned: list[Action] = []
        for finding in self.by_check["consumed_blob"]:
            d = finding["detail"]
            if d.get("id_kind") != PASSTHROUGH:
                continue
            aged: set[str] = set()
            erased: set[str] = set()
            cited = {finding["id"]}
            for referrer in d["referrers"]:
                aged |= self._aged(referrer["queue"], referrer.get("enqueued_time"))
                for row in self.erased_mails.get((referrer["queue"], referrer["enqueueid"]), []):
                    erased |= row.rules
                    cited.add(row.finding["id"])
            if not aged and not erased:
                continue
            referrers = [{"queue": r["queue"], "enqueueid": r["enqueueid"]} for r in d["referrers"]]
            planned.append(
                _blob_action(
                    finding, aged | erased, CONSUMED_CONTENT if aged else ERASED_CONTENT,
                    sorted(referrers, key=lambda r: (r["queue"], r["enqueueid"])), cited,
                )
            )  # fmt: skip
        for finding in self.by_check["orphaned_blob"] if orphan_rules else ():
            d = finding["detail"]
            modified = _instant(d.get("last_modified"))
            if d.get("id_kind") != PASSTHROUGH or modified is None:
                continue
            rules = {r.id for r in orphan_rules if modified < self._cutoff(r)}
            if rules:
                planned.append(_blob_action(finding, rules, ORPHAN, [], {finding["id"]}))
        return sorted(planned, key=lambda a: (a.target["key"], a.target["bucket"]))

    # -- the plan ----------------------------------------------------------------------------

    def plan(self) -> PlanParts:
        planned, kept = self.partitions()
        partitions = self.partition_actions(planned)
        rows, deferred = self.row_actions(planned)
        deferred += self.unreadable_deferrals([*partitions, *rows])
        advances = self.content_start_advances(planned, kept)
        blobs = self.blob_actions()
        actions = [*partitions, *rows, *advances, *blobs]
        broker, broker_notes = broker_deferrals(self.by_check, self.policy, self.as_of)
        notes = [*self.notes, *_rule_notes(self.policy, actions, deferred), *broker_notes]
        return PlanParts(actions=actions, deferred=[*deferred, *broker], notes=notes)


def _partition_of(target: Mapping[str, Any]) -> tuple[str, str, int]:
    """A view partition as action targets and findings name it: queue, slice, bucket."""
    return (str(target["queue"]), str(target["timerangestart"]), int(target["bucketid"]))


def _row_of(target: Mapping[str, Any]) -> tuple[str, str, int, str]:
    """A view row as action targets and findings name it: its partition and enqueueid."""
    return (*_partition_of(target), str(target["enqueueid"]))


def _row_order(row: _Erased) -> tuple[Any, ...]:
    d = row.detail
    return (row.finding["queue"], _instant(d["timerangestart"]), int(d["bucketid"]),
            d["enqueueid"])  # fmt: skip


def _blob_action(
    finding: dict[str, Any],
    rules: Iterable[str],
    reason: str,
    referrers: list[dict[str, str]],
    cited: set[str],
) -> Action:
    d = finding["detail"]
    size = int(finding["bytes"] or 0)
    return Action(
        kind=DELETE_BLOB,
        target={"bucket": d["bucket"], "key": finding["subject"]},
        precondition={
            "size": size,
            "etag": d.get("etag"),
            "last_modified": d.get("last_modified"),
            "referrers": referrers,
            "orphan": reason == ORPHAN,
        },
        rules=tuple(sorted(rules)),
        bytes=size,
        tombstones=0,
        reason=reason,
        findings=tuple(sorted(cited)),
    )


def _rule_notes(policy: Policy, actions: list[Action], deferred: list[Deferred]) -> list[str]:
    notes = []
    for rule in policy.rules:
        if not rule.applies_to_system(SYSTEM) or rule.kind == BROKER_RULE_KIND:
            continue
        kinds: Counter[str] = Counter(a.kind for a in actions if rule.id in a.rules)
        if kinds:
            detail = ", ".join(f"{kinds[k]} {k}" for k in KINDS if kinds[k])
            total = sum(kinds.values())
            notes.append(f"rule {rule.id} selected {plural(total, 'action')}: {detail}")
        else:
            notes.append(f"rule {rule.id} selected no action")
    live = sum(1 for d in deferred if d.reason.startswith("live mail:"))
    notes.append(
        "live mail is never planned: James deletes it itself, through its WebAdmin API "
        f"({plural(live, 'live mail')} of erased data subjects deferred)"
    )
    unsearched = sum(1 for d in deferred if d.reason.startswith(UNSEARCHED.split("{")[0]))
    if unsearched:
        notes.append(
            f"{plural(unsearched, 'view row')} whose content could not be searched deferred "
            "(unreadable_content): an erased subject may be there"
        )
    return notes


def plan(findings: list[dict[str, Any]], policy: Policy, manifest: Mapping[str, Any]) -> PlanParts:
    """Every deletion `policy` asks for among an audit's `findings` that is safe to do behind
    James's back, in execution order: partition and row deletions, then contentStart advances,
    then blobs, so no step leaves a reference to something already gone. `manifest` is the
    audit's (its ``as_of`` and ``plan_inputs``); erase rules' subjects are keyed like the
    findings' (`mqforensics.subjects.keyed_policy`)."""
    return _Planner(findings, policy, manifest).plan()
