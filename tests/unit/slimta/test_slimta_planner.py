"""The slimta planner reads findings only: each action's target and precondition come from the
``detail`` the checks recorded, and every action and deferral cites the findings behind it.
Findings here are written by hand as the checks write them (Redis and S3 without servers)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mqforensics.findings import finding_id
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.slimta.plan import (
    DELETE_OBJECT,
    DELETE_REDIS_HASH,
    EVIDENCE,
    NO_ETAG,
    NOT_A_HASH,
    REMOVE_QUEUE_ENTRY,
    SQS_NOT_PURGED,
    plan,
)

AS_OF = "2026-11-22T12:00:00Z"
DAY = dt.timedelta(days=1)
SERVER, PREFIX = "10.0.0.5:6379/0", "slimta:"
LIST = PREFIX + "queue"
BUCKET = "s3://mailq/queue-"
OLD, HOSTILE, TORN, GONE = "a" * 32, "b" * 32, "c" * 32, "d" * 32
UUID1, UUID2, UUID3 = (f"{n}0000000-0000-4000-8000-000000000000" for n in (1, 2, 3))
LONG_AGO, RECENT = "2026-10-01T00:00:00.000Z", "2026-11-22T11:00:00.000Z"
MANIFEST = {"as_of": AS_OF, "options": {"retention": "7d", "stale_tmp": "1h",
                                        "redis": "redis://10.0.0.5:6379/0",
                                        "redis_prefix": PREFIX}}  # fmt: skip


def policy(*rules: Rule) -> Policy:
    return Policy("p.toml", "0" * 64, rules)


RETENTION = Rule("retention", "queued_mail", "retention", older_than=7 * DAY)
LEFTOVERS = Rule("leftovers", "queue_leftovers", "hygiene", older_than=DAY)


def finding(
    check: str, store: str, scope: str, subject: str, *, size: int = 100, **detail: Any
) -> dict[str, Any]:
    facts = {"parts": [], "files": None, "metadata": None, "entry_hex": None, "queued_by": None,
             "arrival": None, "modified": None, "next_attempt": None}  # fmt: skip
    row = {"check": check, "severity": "warning", "system": "slimta", "queue": store,
           "scope": scope, "subject": subject, "observed_at": AS_OF, "bytes": size,
           "detail": {**facts, **detail}}  # fmt: skip
    return row


def with_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from mqforensics.findings import with_ids as ids

    return ids(rows)


def redis_hash(message_id: str, digest: str, **detail: Any) -> dict[str, Any]:
    key = PREFIX + message_id
    return {"backend": "redis", "id": message_id,
            "parts": [{"name": key, "size": 100, "digest": digest}], **detail}  # fmt: skip


def entry_hex(message_id: str) -> str:
    return (b"\x80\x05" + message_id.encode()).hex()


GONE_SIZE = len(entry_hex(GONE)) // 2


def test_redis_messages_entries_and_deferrals() -> None:
    rows = with_ids([
        finding("retention_exceeded", SERVER, "message", PREFIX + OLD, **redis_hash(
            OLD, "d-old", arrival=LONG_AGO, next_attempt=RECENT,
            queued_by=[{"name": LIST, "entry_hex": entry_hex(OLD)}],
        )),
        finding("retention_exceeded", SERVER, "message", PREFIX + HOSTILE, **redis_hash(
            HOSTILE, "d-hostile", next_attempt=LONG_AGO,
            queued_by=[{"name": LIST, "entry_hex": entry_hex(HOSTILE)}],
        )),
        finding("unsafe_pickle", SERVER, "message", PREFIX + HOSTILE, backend="redis",
                id=HOSTILE, pickle="envelope"),
        # A torn hash changed recently but arrived long ago: a leftover's age is its change.
        finding("torn_write", SERVER, "message", PREFIX + TORN, **redis_hash(
            TORN, "d-torn", arrival=LONG_AGO, modified=RECENT, missing="meta",
        )),
        # The same dangling entry pushed twice: two findings, one action citing both.
        *[finding("dangling_queue_entry", SERVER, "queue_entry", LIST, size=GONE_SIZE,
                  backend="redis", id=GONE, entry_hex=entry_hex(GONE), next_attempt=LONG_AGO,
                  parts=[{"name": LIST, "size": GONE_SIZE, "digest": "e"}]) for _ in range(2)],
        finding("corrupt_meta", SERVER, "other_key", PREFIX + "stats", backend="redis",
                id="stats", modified=LONG_AGO,
                parts=[{"name": PREFIX + "stats", "size": 0, "digest": None}]),
        finding("queue_list_blocks_load", SERVER, "queue_list", LIST, backend="redis"),
    ])  # fmt: skip
    ids = [r["id"] for r in rows]
    assert ids[5] == ids[4] + "-2"
    parts = plan(rows, policy(RETENTION, LEFTOVERS), MANIFEST)
    actions = [(a.kind, a.target, a.precondition, a.rules, a.findings, a.bytes)
               for a in parts.actions]  # fmt: skip
    assert actions == [
        (DELETE_REDIS_HASH, {"backend": "redis", "server": SERVER, "key": PREFIX + OLD, "id": OLD},
         {"fields_sha256": "d-old"}, ("retention",), (ids[0],), 100),
        # GONE's entry: selected itself (dangling), before the entries of removed messages.
        (REMOVE_QUEUE_ENTRY, {"backend": "redis", "server": SERVER, "list": LIST,
                              "entry_hex": entry_hex(GONE), "id": GONE},
         {"message_key": PREFIX + GONE, "message_key_absent": True}, ("leftovers",),
         tuple(sorted(ids[4:6])), GONE_SIZE),
        # OLD's entry goes after its hash, citing the hash's finding.
        (REMOVE_QUEUE_ENTRY, {"backend": "redis", "server": SERVER, "list": LIST,
                              "entry_hex": entry_hex(OLD), "id": OLD},
         {"message_key": PREFIX + OLD, "message_key_absent": True}, ("retention",),
         (ids[0],), len(entry_hex(OLD)) // 2),
    ]  # fmt: skip
    deferred = [(d.target.get("id"), d.reason, d.findings) for d in parts.deferred]
    assert deferred == [
        (HOSTILE, EVIDENCE, tuple(sorted((ids[1], ids[2])))),
        ("stats", NOT_A_HASH, (ids[6],)),
    ]
    assert "queue entries are removed from slimta:queue after their message hash" in parts.notes


def test_s3_objects_etags_and_sqs_messages() -> None:
    def obj(uuid: str, etag: str | None, **detail: Any) -> dict[str, Any]:
        key = "queue-" + uuid
        return {"backend": "s3", "id": uuid, "metadata": {"attempts": "1", "timestamp": "1.5"},
                "parts": [{"name": key, "size": 300, "digest": etag}], **detail}  # fmt: skip

    rows = with_ids([
        finding("retention_exceeded", BUCKET, "message", "queue-" + UUID1, **obj(
            UUID1, "etag1", arrival=LONG_AGO,
            queued_by=[{"name": "sqs:msg-1", "entry_hex": None}],
        )),
        finding("retention_exceeded", BUCKET, "message", "queue-" + UUID2,
                **obj(UUID2, None, arrival=LONG_AGO)),
        # No SQS message names it, but an export is rarely the whole queue: never a leftover.
        finding("torn_write", BUCKET, "message", "queue-" + UUID3,
                **obj(UUID3, "etag3", arrival=LONG_AGO, missing="queue_message")),
    ])  # fmt: skip
    ids = [r["id"] for r in rows]
    parts = plan(rows, policy(RETENTION, LEFTOVERS), {"as_of": AS_OF})
    (action,) = parts.actions
    assert (action.kind, action.target, action.precondition, action.findings) == (
        DELETE_OBJECT,
        {"backend": "s3", "bucket": "mailq", "key": "queue-" + UUID1, "id": UUID1},
        {"etag": "etag1", "size": 300, "metadata": {"attempts": "1", "timestamp": "1.5"}},
        (ids[0],),
    )
    assert [(d.kind, d.target, d.reason, d.findings) for d in parts.deferred] == [
        (DELETE_OBJECT, {"backend": "s3", "bucket": "mailq", "key": "queue-" + UUID2,
                         "id": UUID2}, NO_ETAG, (ids[1],)),
        (REMOVE_QUEUE_ENTRY, {"backend": "s3", "store": BUCKET, "message": "sqs:msg-1",
                              "id": UUID1}, SQS_NOT_PURGED, (ids[0],)),
    ]  # fmt: skip
    assert parts.notes == []


def test_rules_select_by_age_store_and_subject() -> None:
    disk = "/var/spool/slimta/env"
    env, meta = f"{disk}/{OLD}.env", f"/var/spool/slimta/meta/{OLD}.meta"
    facts = {"backend": "disk", "id": OLD, "files": [env, meta],
             "parts": [{"name": env, "size": 10, "digest": "s1"}]}  # fmt: skip
    rows = with_ids([
        finding("retention_exceeded", disk, "message", env, arrival=LONG_AGO, **facts),
        finding("personal_data", disk, "message", env, subjects=["k1"], arrival=LONG_AGO,
                **facts),
    ])  # fmt: skip
    erase_other = Rule("erase-other", "erase_subject", "art. 17", subjects=("k2",))
    erase = Rule("erase", "erase_subject", "art. 17", subjects=("k1", "k3"))
    elsewhere = Rule("elsewhere", "queued_mail", "x", older_than=DAY, queues=("/other",))
    young = Rule("young", "queued_mail", "x", older_than=365 * DAY)
    short = Rule("short", "queued_mail", "x", older_than=DAY)
    parts = plan(rows, policy(erase_other, erase, elsewhere, young, short), MANIFEST)
    (action,) = parts.actions
    assert action.rules == ("short", "erase")  # queued_mail rules first, then erasures
    assert action.findings == tuple(sorted(r["id"] for r in rows))
    assert action.target == {"backend": "disk", "store": disk, "id": OLD, "files": [env, meta]}
    assert action.precondition == {"files": {env: {"size": 10, "sha256": "s1"}}}
    assert action.reason == "queued message selected by short, erase"
    assert any(
        n.startswith("rule short (queued_mail) selects queued mail older than 1d, but the audit "
                     "only found those older than --retention 7d") for n in parts.notes
    )  # fmt: skip
    assert plan(rows, policy(erase_other, young), MANIFEST).actions == []


def test_ids_cited_are_the_findings_ids() -> None:
    row = finding("retention_exceeded", SERVER, "message", PREFIX + OLD,
                  **redis_hash(OLD, "d", arrival=LONG_AGO))  # fmt: skip
    (identified,) = with_ids([row])
    assert identified["id"] == finding_id("slimta", "retention_exceeded", SERVER, "message",
                                          PREFIX + OLD)  # fmt: skip
    assert plan([identified], policy(RETENTION), MANIFEST).actions[0].findings == (
        identified["id"],
    )
