"""The James cleanup planner: a retention policy and a queue state in, the exact deletions out.

It knows *why* (the policy's rules) and turns it into the objects a purger may remove and the
preconditions under which it still may (docs/retention.md, "What the planner plans"). It follows
James's own cleanup (james.md §2.4): whole partitions before browseStart whose every mail was
consumed go with their ``deletedmailsv2`` markers, then contentStart moves past them. It never
plans live mail (James deletes that itself, through its WebAdmin API), nothing at or after
browseStart (every browse reads a tombstone there), and never a deduplicated blob (other mails
may share it).

Everything is computed by Spark on the state's frames; only the per-partition, per-row (for
erased subjects) and per-blob results are collected, at the end. Addresses are compared by their
SHA-256 only and never leave the executors.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from mqforensics.retention.manifest import Action, Deferred
from mqforensics.systems.james.blob_ids import PASSTHROUGH, with_parsed_blob_ids
from mqforensics.systems.james.checks import classify, config_events, metadata_bytes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.retention.policy import Policy, Rule
    from mqforensics.systems.james.state import JamesState

SYSTEM = "james"
DELETE_PARTITION = "james.delete_partition"
DELETE_ROW = "james.delete_row"
ADVANCE_CONTENT_START = "james.advance_content_start"
DELETE_BLOB = "james.delete_blob"
KINDS = (DELETE_PARTITION, DELETE_ROW, ADVANCE_CONTENT_START, DELETE_BLOB)
V4_TABLE = "enqueuedmailsv4"

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

# A row without an enqueue time cannot be shown old enough: it compares as the far future.
_FAR_FUTURE = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
_STRINGS = "array<string>"


@dataclass
class JamesPlan:
    """What `plan_cleanup` decided: actions in execution order, what it would not do, and why."""

    actions: list[Action]
    deferred: list[Deferred]
    notes: list[str] = field(default_factory=list)


def iso_millis(column: str | Column) -> Column:
    """ISO-8601 UTC with milliseconds (``2026-11-03T10:00:00.000Z``), the plan's one timestamp
    format: the purger compares these strings with what it reads live, so there must be only one
    (the session time zone is UTC, see spark.py)."""
    value = F.col(column) if isinstance(column, str) else column
    return F.date_format(value, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def _address_hashes() -> Column:
    """SHA-256 of every address a row holds (sender, recipients, per-recipient headers' first
    element), lower-cased and trimmed like `policy.subject_hash` (``\\s`` also trims tabs and
    line breaks, as Python's ``strip`` does)."""
    headers = F.coalesce(
        F.col("perrecipientspecificheaders"),
        F.array().cast("array<struct<_1:string,_2:string,_3:string>>"),
    )
    addresses = F.concat(
        F.array(F.col("sender")),
        F.coalesce(F.col("recipients"), F.array().cast(_STRINGS)),
        F.transform(headers, lambda t: t["_1"]),
    )
    hashed = F.transform(
        addresses,
        lambda a: F.sha2(F.lower(F.regexp_replace(a, r"^\s+|\s+$", "")), 256),
    )
    return F.filter(hashed, lambda h: h.isNotNull())


def _rule_ids(pairs: list[tuple[Rule, Column]]) -> Column:
    """The ids of the rules whose condition holds, as an array (empty when none)."""
    if not pairs:
        return F.array().cast(_STRINGS)
    return F.filter(
        F.array(*[F.when(condition, F.lit(rule.id)) for rule, condition in pairs]),
        lambda x: x.isNotNull(),
    )


def _in_queues(queues: list[str]) -> Column:
    return F.col("queuename").isin(queues) if queues else F.lit(False)


def _cutoff(state: JamesState, rule: Rule) -> Column:
    assert rule.older_than is not None  # load_policy requires it for these kinds
    return F.lit(state.as_of - rule.older_than).cast("timestamp")


def _queue_names(state: JamesState) -> list[str]:
    """Every queue the state knows of. Collected (a handful of names) so that each rule's own
    `applies_to` decides which queues it covers, rather than a re-implementation in Spark."""
    frames = [state.entries, state.deleted, state.browse_start, state.content_start]
    names = frames[0].select("queuename")
    for frame in frames[1:]:
        names = names.union(frame.select("queuename"))
    return sorted(r.queuename for r in names.distinct().collect() if r.queuename is not None)


@dataclass
class _Rules:
    consumed: list[Rule]
    erase: list[Rule]
    orphans: list[Rule]
    queues: dict[str, list[str]]  # rule id -> queues it applies to

    def consumed_by_age(self, state: JamesState, time: str) -> Column:
        """Consumed-mail rules covering the row's queue under whose cutoff `time` falls."""
        return _rule_ids(
            [
                (r, _in_queues(self.queues[r.id]) & (F.col(time) < _cutoff(state, r)))
                for r in self.consumed
            ]
        )

    def erasing(self, hashes: Column) -> Column:
        """Erasure rules covering the row's queue that name one of its addresses."""
        pairs = []
        for r in self.erase:
            if r.subjects:
                subjects = F.array(*[F.lit(s) for s in r.subjects])
                pairs.append(
                    (r, _in_queues(self.queues[r.id]) & F.arrays_overlap(hashes, subjects))
                )
        return _rule_ids(pairs)


_ROW_COLUMNS = (
    *("table", "queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime"),
    *("consumed", "browsestart", "contentstart", "metadata_bytes", "headerblobid"),
    *("bodyblobid", "aged_rules", "erase_rules"),
)


def _rows(state: JamesState, rules: _Rules) -> DataFrame:
    """Every view row with what the plan needs to know about it."""
    # One withColumns: each withColumn would analyse the whole plan again.
    return (
        classify(state)
        .withColumns(
            {
                "enqueueid": F.lower(F.col("enqueueid")),
                "table": F.concat(F.lit("enqueuedmails"), F.col("table_version")),
                "metadata_bytes": metadata_bytes(),
                "aged_rules": rules.consumed_by_age(state, "enqueuedtime"),
                "erase_rules": rules.erasing(_address_hashes()),
            }
        )
        .select(*_ROW_COLUMNS)
    )


PARTITION = ["table", "queuename", "timerangestart", "bucketid"]


def _partitions(state: JamesState, rows: DataFrame, rules: _Rules) -> DataFrame:
    """One row per partition, with `planned` set when it is to be deleted whole."""
    parts = rows.groupBy(*PARTITION, "browsestart", "contentstart").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(~F.col("consumed"), 1).otherwise(0)).alias("live_rows"),
        F.sort_array(F.collect_list("enqueueid")).alias("enqueueids"),
        F.sort_array(F.collect_list(F.when(F.col("consumed"), F.col("enqueueid")))).alias(
            "markers"
        ),
        F.sum("metadata_bytes").alias("bytes"),
        F.max(F.coalesce(F.col("enqueuedtime"), F.lit(_FAR_FUTURE).cast("timestamp"))).alias(
            "newest"
        ),
        F.array_distinct(F.flatten(F.collect_list("erase_rules"))).alias("erase_rules"),
    )
    selecting = F.array_union(rules.consumed_by_age(state, "newest"), F.col("erase_rules"))
    before = F.col("browsestart").isNotNull() & (F.col("timerangestart") < F.col("browsestart"))
    return (
        parts.withColumn("rules", selecting)
        .withColumn("planned", before & (F.col("live_rows") == 0) & (F.size("rules") > 0))
        .withColumn("planned", F.coalesce(F.col("planned"), F.lit(False)))
    )


def _planned_partitions(parts: DataFrame) -> list[Any]:
    """The partitions to delete, each with what its queue's contentStart advance needs: the
    start of the queue's first partition at or after contentStart that stays (one Spark job
    for both, as only planned partitions are collected)."""
    c, trs = F.col("contentstart"), F.col("timerangestart")
    kept = F.when(~F.col("planned") & (trs >= c), trs)
    return (
        parts.withColumn("next_kept", F.min(kept).over(Window.partitionBy("table", "queuename")))
        .where("planned")
        .select(
            "table",
            "queuename",
            iso_millis("timerangestart").alias("trs"),
            "bucketid",
            "enqueueids",
            "markers",
            iso_millis("browsestart").alias("browsestart"),
            iso_millis("contentstart").alias("contentstart"),
            iso_millis("next_kept").alias("next_kept"),
            "bytes",
            "rows",
            "rules",
        )
        .collect()
    )


def _partition_actions(planned: list[Any], keyspace: str) -> list[Action]:
    actions = []
    for r in sorted(planned, key=lambda r: (r.queuename, r.trs, r.bucketid)):
        count = f"{r.rows} row" if r.rows == 1 else f"{r.rows} rows"
        actions.append(
            Action(
                kind=DELETE_PARTITION,
                target={
                    "keyspace": keyspace,
                    "table": r.table,
                    "queue": r.queuename,
                    "timerangestart": r.trs,
                    "bucketid": r.bucketid,
                },
                precondition={
                    "enqueueids": list(r.enqueueids),
                    "markers": list(r.markers),
                    "browsestart": r.browsestart,
                },
                rules=tuple(sorted(r.rules)),
                bytes=int(r.bytes or 0),
                tombstones=1 + len(r.markers),
                reason=f"fully consumed partition before browseStart ({count})",
            )
        )
    return actions


def _subject_rows(
    rows: DataFrame, parts: DataFrame, keyspace: str, budget: int
) -> tuple[list[Action], list[Deferred]]:
    """Rows of erased subjects that their partition's deletion does not cover: budgeted row
    deletions before browseStart, and everything else deferred with its reason."""
    live_rows = parts.select(*PARTITION, "live_rows")
    b, trs = F.col("browsestart"), F.col("timerangestart")
    category = (
        F.when(~F.col("consumed"), "live")
        .when(b.isNull(), "no_browse_start")
        .when(trs >= b, "after_browse_start")
        .when(F.col("live_rows") > 0, "row")
    )
    order = Window.partitionBy(*PARTITION).orderBy("enqueueid")
    subject = (
        rows.where(F.size("erase_rules") > 0)
        .join(live_rows, PARTITION)
        .withColumn("category", category)
        .where(F.col("category").isNotNull())
    )
    ranked = subject.withColumn(
        "rank", F.when(F.col("category") == "row", F.row_number().over(order))
    )
    collected = ranked.select(
        *("table", "queuename", "bucketid", "enqueueid", "erase_rules", "category", "rank"),
        iso_millis("timerangestart").alias("trs"),
        iso_millis("browsestart").alias("browsestart"),
        "metadata_bytes",
    ).collect()
    actions: list[Action] = []
    deferred: list[Deferred] = []
    reasons = {
        "after_browse_start": AFTER_BROWSE_START,
        "no_browse_start": NO_BROWSE_START,
    }
    for r in sorted(collected, key=lambda r: (r.queuename, r.trs, r.bucketid, r.enqueueid)):
        target = {
            "keyspace": keyspace,
            "table": r.table,
            "queue": r.queuename,
            "timerangestart": r.trs,
            "bucketid": r.bucketid,
            "enqueueid": r.enqueueid,
        }
        rules = tuple(sorted(r.erase_rules))
        if r.category == "row" and r.rank <= budget:
            actions.append(
                Action(
                    kind=DELETE_ROW,
                    target=target,
                    precondition={"marker": True, "browsestart": r.browsestart},
                    rules=rules,
                    bytes=int(r.metadata_bytes or 0),
                    tombstones=2,
                    reason="consumed mail of an erased data subject, in a partition that "
                    "also holds live mail",
                )
            )
            continue
        if r.category == "row":
            reason = OVER_BUDGET.format(budget=budget)
        elif r.category == "live":
            reason = LIVE_MAIL.replace("{queue}", r.queuename)
        else:
            reason = reasons[r.category]
        deferred.append(Deferred(kind=DELETE_ROW, target=target, rules=rules, reason=reason))
    return actions, deferred


def _content_start_advances(
    state: JamesState, planned: list[Any], keyspace: str, notes: list[str]
) -> list[Action]:
    """After the planned deletions, contentStart may move up to the first partition that stays
    (or browseStart): James's own cleanup would otherwise walk those emptied slices again.

    Only V4 has contentStart. The ISO strings compare as the instants they name."""
    targets: dict[str, tuple[str, str, set[str]]] = {}
    for r in planned:
        if r.table != V4_TABLE or r.contentstart is None or r.trs < r.contentstart:
            continue
        to = min(t for t in (r.browsestart, r.next_kept) if t is not None)
        if to <= r.contentstart:
            continue
        _, _, rules = targets.setdefault(r.queuename, (r.contentstart, to, set()))
        rules.update(r.rules)
    if not targets:
        return []
    history = config_events(state)
    if not history:
        notes.append(
            "no CassandraMailQueueViewConfiguration event: contentStart advances not planned "
            "(the slice window and bucket count are unknown)"
        )
        return []
    window = history[-1].window
    buckets = max(e.bucket_count for e in history)
    return [
        Action(
            kind=ADVANCE_CONTENT_START,
            target={"keyspace": keyspace, "queue": queue, "to": to},
            precondition={"from": start, "window_seconds": window, "bucket_count": buckets},
            rules=tuple(sorted(rules)),
            bytes=0,
            tombstones=0,
            reason="contentStart past the deleted partitions (James's cleanup would walk "
            "their emptied slices again)",
        )
        for queue, (start, to, rules) in sorted(targets.items())
    ]


def _orphan_rules(state: JamesState, rules: _Rules, notes: list[str]) -> list[Rule]:
    """The orphaned_blobs rules that may plan: an orphan is only known as one when every
    referrer of the bucket was read (the rule's assertion) and every reference was (the read)."""
    usable = []
    for rule in rules.orphans:
        if not rule.references_complete:
            notes.append(
                f"rule {rule.id} planned nothing: it does not say references_complete = true "
                "(other referrers of the bucket, such as mailboxes, may use these blobs)"
            )
        elif not state.references_complete:
            notes.append(
                f"rule {rule.id} planned nothing: the blob references read are not complete "
                "(a live --scan limited to some queues)"
            )
        else:
            usable.append(rule)
    return usable


def _blob_actions(
    state: JamesState, rows: DataFrame, rules: _Rules, notes: list[str]
) -> list[Action]:
    listing = state.blobs
    if listing is None:
        notes.append("no blob listing given: blob deletions not planned")
        for rule in rules.orphans:
            notes.append(f"rule {rule.id} planned nothing: no blob listing given")
        return []
    orphan_rules = _orphan_rules(state, rules, notes)
    if "id_kind" not in listing.columns:
        listing = with_parsed_blob_ids(listing)
    listing = listing.where(F.col("id_kind") == PASSTHROUGH).select(
        "bucket", "key", "size", "etag", "last_modified"
    )
    consumed = F.col("consumed")
    # One pass over every reference: whether a live mail uses the key (then it stays, whatever
    # selected it), its consumed referrers, and the rules that selected those.
    by_key = (
        rows.select(
            F.explode(F.array("headerblobid", "bodyblobid")).alias("key"),
            *("consumed", "queuename", "enqueueid", "aged_rules", "erase_rules"),
        )
        .where(F.col("key").isNotNull())
        .groupBy("key")
        .agg(
            F.max((~consumed).cast("int")).alias("live"),
            F.sort_array(
                F.collect_set(
                    F.when(consumed, F.struct(F.col("queuename").alias("queue"), "enqueueid"))
                )
            ).alias("referrers"),
            F.array_distinct(
                F.flatten(F.collect_list(F.when(consumed, F.col("aged_rules"))))
            ).alias("aged"),
            F.array_distinct(
                F.flatten(F.collect_list(F.when(consumed, F.col("erase_rules"))))
            ).alias("erased"),
        )
    )
    selected = F.array_union("aged", "erased")
    contents = by_key.where((F.col("live") == 0) & (F.size(selected) > 0)).select(
        "key",
        "referrers",
        selected.alias("rules"),
        F.when(F.size("aged") > 0, F.lit(CONSUMED_CONTENT))
        .otherwise(F.lit(ERASED_CONTENT))
        .alias("reason"),
        F.lit(False).alias("orphan"),
    )
    candidates = listing.join(contents, "key")
    if orphan_rules:
        unreferenced = listing.join(by_key.select("key"), "key", "left_anti")
        if state.blob_references is not None:
            known = state.blob_references.select("key").where(F.col("key").isNotNull())
            unreferenced = unreferenced.join(known.distinct(), "key", "left_anti")
        aged = _rule_ids([(r, F.col("last_modified") < _cutoff(state, r)) for r in orphan_rules])
        orphans = (
            unreferenced.withColumn("rules", aged)
            .where(F.size("rules") > 0)
            .withColumns(
                {
                    "referrers": F.array().cast("array<struct<queue:string,enqueueid:string>>"),
                    "reason": F.lit(ORPHAN),
                    "orphan": F.lit(True),
                }
            )
        )
        candidates = candidates.unionByName(orphans)
    planned = candidates.withColumn("last_modified", iso_millis("last_modified")).collect()
    return [
        Action(
            kind=DELETE_BLOB,
            target={"bucket": r.bucket, "key": r.key},
            precondition={
                "size": int(r.size),
                "etag": r.etag,
                "last_modified": r.last_modified,
                "referrers": [{"queue": x.queue, "enqueueid": x.enqueueid} for x in r.referrers],
                "orphan": bool(r.orphan),
            },
            rules=tuple(sorted(r.rules)),
            bytes=int(r.size),
            tombstones=0,
            reason=r.reason,
        )
        for r in sorted(planned, key=lambda r: (r.key, r.bucket))
    ]


def _rule_notes(policy: Policy, actions: list[Action], deferred: list[Deferred]) -> list[str]:
    notes = []
    for rule in policy.rules:
        if not rule.applies_to_system(SYSTEM):
            continue
        kinds: Counter[str] = Counter(a.kind for a in actions if rule.id in a.rules)
        if kinds:
            detail = ", ".join(f"{kinds[k]} {k}" for k in KINDS if kinds[k])
            total = sum(kinds.values())
            notes.append(f"rule {rule.id} selected {total} action(s): {detail}")
        else:
            notes.append(f"rule {rule.id} selected no action")
    live = sum(1 for d in deferred if d.reason.startswith("live mail:"))
    notes.append(
        "live mail is never planned: James deletes it itself, through its WebAdmin API "
        f"({live} live mail(s) of erased data subjects deferred)"
    )
    return notes


def plan_cleanup(state: JamesState, policy: Policy, *, keyspace: str) -> JamesPlan:
    """Every deletion `policy` asks for in `state` that is safe to do behind James's back.

    Actions come in execution order: partition and row deletions, then contentStart advances,
    then blobs, so no step leaves a reference to something already gone. Rules apply per queue
    (`Rule.applies_to("james", queue)`); cutoffs are `state.as_of - older_than`.
    """
    # Every frame is read several times (a live source would otherwise be queried each time).
    state.persist()
    queues = _queue_names(state)
    consumed = policy.rules_of("consumed_mail", SYSTEM)
    erase = policy.rules_of("erase_subject", SYSTEM)
    rules = _Rules(
        consumed=consumed,
        erase=erase,
        orphans=[r for r in policy.rules_of("orphaned_blobs", SYSTEM) if r.applies_to(SYSTEM)],
        queues={r.id: [q for q in queues if r.applies_to(SYSTEM, q)] for r in consumed + erase},
    )
    rows = _rows(state, rules).cache()
    parts = _partitions(state, rows, rules).cache()
    notes: list[str] = []
    try:
        planned = _planned_partitions(parts)
        partitions = _partition_actions(planned, keyspace)
        row_actions, deferred = (
            _subject_rows(rows, parts, keyspace, policy.tombstone_budget_per_partition)
            if rules.erase
            else ([], [])
        )
        advances = _content_start_advances(state, planned, keyspace, notes)
        blobs = _blob_actions(state, rows, rules, notes)
    finally:
        parts.unpersist()
        rows.unpersist()
    actions = [*partitions, *row_actions, *advances, *blobs]
    return JamesPlan(actions, deferred, [*notes, *_rule_notes(policy, actions, deferred)])


def plan_summary(plan: JamesPlan) -> dict[str, Any]:
    """Actions, bytes and tombstones per kind, and deferred items per reason."""
    totals: dict[str, dict[str, int]] = {}
    for action in plan.actions:
        total = totals.setdefault(action.kind, {"actions": 0, "bytes": 0, "tombstones": 0})
        total["actions"] += 1
        total["bytes"] += action.bytes
        total["tombstones"] += action.tombstones
    return {"totals": totals, "deferred": dict(Counter(d.reason for d in plan.deferred))}
