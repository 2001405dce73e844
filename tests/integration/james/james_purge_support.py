"""Shared by the purge integration tests: a generated James state with a planted data subject,
loaded into the real Cassandra and SeaweedFS; an independent oracle of the expected plan; full
dumps of both stores; and the CLI steps (plan, approve, purge) as an operator runs them."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import subprocess
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets.james import generate as gen

SUBJECT = "subject.person@privacy.example"
BUDGET = 2
QUEUES_UNDER_CONSUMED_RULE = ("spool", "outgoing", "bounces")
LEAKED_PER_QUEUE = 4

ANOMALIES = gen.AnomalyCounts(
    unreclaimed_partitions=1,
    cleanup_pending_partitions=1,
    pinned_browse_start=1,
    invisible_mails=2,
    stuck_mails=1,
    orphaned_blobs=3,
    dangling_blob_refs=1,
)


def policy_text(subject: str = SUBJECT) -> str:
    return f"""version = 1
tombstone_budget_per_partition = {BUDGET}

[[rules]]
id = "consumed-1d"
kind = "consumed_mail"
older_than = "1d"
queues = {list(QUEUES_UNDER_CONSUMED_RULE)!r}
legal_basis = "GDPR Art. 5(1)(e): delivered mail is kept one day"

[[rules]]
id = "erasure-42"
kind = "erase_subject"
addresses = ["{subject}"]
legal_basis = "GDPR Art. 17, request 42"

[[rules]]
id = "orphans"
kind = "orphaned_blobs"
older_than = "0s"
references_complete = true
legal_basis = "GDPR Art. 5(1)(c): content nothing refers to"
""".replace("'", '"')


def bucket_for(keyspace: str) -> str:
    """S3 bucket names allow no underscore."""
    return keyspace.replace("_", "-")


def _partition(row: dict[str, Any]) -> tuple[str, dt.datetime, int]:
    return (row["queuename"], row["timerangestart"], row["bucketid"])


def build_state(seed: int = 7) -> gen.GeneratedState:
    """A generated state with SUBJECT planted where every erasure outcome shows: consumed mail
    in fully consumed partitions, 3 consumed rows in a partition that also holds live mail
    (budget 2: 2 row deletes, 1 deferred), consumed mail after browseStart, live mail."""
    state = gen.generate(
        gen.GenerationSpec(seed=seed, normal_mails=240, anomalies=ANOMALIES, pinning_mails=1)
    )
    consumed = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    browse = {b["queuename"]: b["browsestart"] for b in state.browse_start}
    live_partitions = {
        _partition(e) for e in state.entries if (e["queuename"], e["enqueueid"]) not in consumed
    }

    def is_consumed(e: dict[str, Any]) -> bool:
        return (e["queuename"], e["enqueueid"]) in consumed

    def before(e: dict[str, Any]) -> bool:
        return e["timerangestart"] < browse[e["queuename"]]

    spool = [e for e in state.entries if e["queuename"] == "spool"]
    fully = [
        e for e in spool if is_consumed(e) and before(e) and _partition(e) not in live_partitions
    ]
    after = [e for e in spool if is_consumed(e) and not before(e)]
    live = [e for e in spool if not is_consumed(e) and not before(e)]
    invisible = [e for e in state.entries if not is_consumed(e) and before(e)]
    assert fully and after and live and invisible, "the generated state lacks a category"
    for row in (fully[0], fully[-1], after[0], live[0]):
        row["recipients"] = [*row["recipients"], SUBJECT]
    host = invisible[0]
    for i in range(3):
        header, body = (
            str(uuid.UUID(int=seed * 1000 + 2 * i)),
            str(uuid.UUID(int=seed * 1000 + 2 * i + 1)),
        )
        enqueueid = str(uuid.UUID(int=seed * 1000 + 500 + i))
        row = {**host, "enqueueid": enqueueid, "name": f"planted-{i}", "sender": SUBJECT,
               "recipients": ["someone@example.org"], "headerblobid": header, "bodyblobid": body,
               "enqueuedtime": host["enqueuedtime"] + dt.timedelta(seconds=i + 1)}  # fmt: skip
        state.entries.append(row)
        state.deleted.append({"queuename": host["queuename"], "enqueueid": enqueueid})
        state.blobs[header] = f"Header of planted mail {i}\r\n\r\n".encode()
        state.blobs[body] = f"Body of planted mail {i}\r\n".encode()
    # Content James failed to delete at dequeue (or never deletes: cassandra.view.enabled=false).
    for queue in QUEUES_UNDER_CONSUMED_RULE:
        mails = [e for e in state.entries if e["queuename"] == queue and is_consumed(e)]
        for row in sorted(mails, key=lambda e: e["enqueueid"])[:LEAKED_PER_QUEUE]:
            for key in (row["headerblobid"], row["bodyblobid"]):
                state.blobs.setdefault(key, f"leaked content of {key}\r\n".encode())
    return state


def _hash(address: str) -> str:
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()


def _mentions(row: dict[str, Any], subjects: set[str]) -> bool:
    addresses = [row.get("sender"), *(row.get("recipients") or [])]
    addresses += [t[0] for t in row.get("perrecipientspecificheaders") or []]
    return any(a is not None and _hash(a) in subjects for a in addresses)


# A header blob starts with a header field: a name of printable ASCII but ':' (RFC 5322 2.2),
# then ':'. The planted and leaked blobs of `build_state` are not header sections.
_FIELD = re.compile(rb"[!-9;-~]+[ \t]*:")


def _unsearchable(state: gen.GeneratedState, e: dict[str, Any], live: bool, objects: set[str]
                  ) -> bool:  # fmt: skip
    """Whether the erasure rule (depth ``headers``: the header blob only) cannot search the
    content of view row `e`: its header blob is not in the bucket (a live mail's only: a
    consumed mail's blobs are deleted by James) or does not start as a header section does."""
    key = e["headerblobid"]
    if key not in objects:
        return live
    head = state.blobs[key].lstrip(b"\r\n")
    return bool(head) and _FIELD.match(head) is None


def _passthrough(key: str) -> bool:
    """James's passthrough blob ids are random (version 4) UUIDs; others may be shared."""
    try:
        return str(uuid.UUID(key)) == key and uuid.UUID(key).version == 4
    except ValueError:
        return False


def _iso(value: dt.datetime) -> str:
    value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


@dataclass
class Expected:
    partitions: set[tuple[str, str, int]]  # (queue, timerangestart ISO, bucket)
    rows: set[tuple[str, str]]  # delete_row (queue, enqueueid)
    deferred_rows: dict[tuple[str, str], str]  # (queue, enqueueid) -> reason start
    advances: dict[str, str]  # queue -> new contentStart ISO
    blobs: set[str]


def expected_plan(state: gen.GeneratedState, as_of: dt.datetime, objects: set[str]) -> Expected:
    """The plan the policy of `policy_text` must give, computed from the generated rows and
    blobs alone; `objects`: the keys in the bucket."""
    subjects = {_hash(SUBJECT)}
    consumed = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    browse = {b["queuename"]: b["browsestart"] for b in state.browse_start}
    content = {c["queuename"]: c["contentstart"] for c in state.content_start}
    cutoff = as_of - dt.timedelta(days=1)
    by_partition: dict[tuple[str, dt.datetime, int], list[dict[str, Any]]] = defaultdict(list)
    for e in state.entries:
        by_partition[_partition(e)].append(e)

    def key(e: dict[str, Any]) -> tuple[str, str]:
        return (e["queuename"], e["enqueueid"])

    planned: set[tuple[str, dt.datetime, int]] = set()
    rows: set[tuple[str, str]] = set()
    deferred: dict[tuple[str, str], str] = {}
    # A row whose content could not be searched, and whose envelope does not name the subject,
    # is deferred under the erasure rule (never deleted blindly: the subject may be there).
    for e in state.entries:
        if not _mentions(e, subjects) and _unsearchable(state, e, key(e) not in consumed, objects):
            deferred[key(e)] = "content could not be searched"
    for part, members in by_partition.items():
        queue, start, _ = part
        before = queue in browse and start < browse[queue]
        all_consumed = all(key(e) in consumed for e in members)
        by_age = (
            queue in QUEUES_UNDER_CONSUMED_RULE and max(e["enqueuedtime"] for e in members) < cutoff
        )
        erased = [e for e in members if _mentions(e, subjects)]
        if before and all_consumed and (by_age or erased):
            planned.add(part)
            continue
        budget = BUDGET
        for e in sorted(erased, key=lambda e: e["enqueueid"]):
            if key(e) not in consumed:
                deferred[key(e)] = "live mail"
            elif not before:
                deferred[key(e)] = "partition at or after browseStart"
            elif budget > 0:
                rows.add(key(e))
                budget -= 1
            else:
                deferred[key(e)] = "tombstone budget"
    advances: dict[str, str] = {}
    for queue, start in content.items():
        mine = [p for p in planned if p[0] == queue and p[1] >= start]
        remaining = [
            p[1] for p in by_partition if p[0] == queue and p[1] >= start and p not in planned
        ]
        to = min([browse[queue], *remaining])
        if mine and to > start:
            advances[queue] = _iso(to)
    live_keys = {
        k
        for e in state.entries
        if key(e) not in consumed
        for k in (e["headerblobid"], e["bodyblobid"])
    }
    referenced = {k for e in state.entries for k in (e["headerblobid"], e["bodyblobid"])}
    blobs: set[str] = set()
    for e in state.entries:
        if key(e) in consumed and (
            (e["queuename"] in QUEUES_UNDER_CONSUMED_RULE and e["enqueuedtime"] < cutoff)
            or _mentions(e, subjects)
        ):
            blobs.update((e["headerblobid"], e["bodyblobid"]))
    blobs |= objects - referenced
    blobs = {b for b in blobs if b in objects and b not in live_keys and _passthrough(b)}
    return Expected({(q, _iso(t), b) for q, t, b in planned}, rows, deferred, advances, blobs)


# -- dumps of the live stores -------------------------------------------------------------------

TABLES = ("enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore")


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "items"):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    return value


def dump(endpoint: Any, keyspace: str, s3_client: Any, bucket: str) -> dict[str, dict[Any, Any]]:
    """Every row (by primary key, full content) and every object (key -> bytes)."""
    cluster, session = endpoint.connect(keyspace)
    result: dict[str, dict[Any, Any]] = {}
    try:
        for table in TABLES:
            rows = {}
            for row in session.execute(f"SELECT * FROM {table}"):
                values = row._asdict()
                if table.startswith("enqueued") or table == "deletedmailsv2":
                    pk: Any = (values["queuename"], str(values["enqueueid"]))
                elif table == "eventstore":
                    pk = (values["aggregateid"], values["eventid"])
                else:
                    pk = values["queuename"]
                rows[pk] = tuple(sorted((k, _plain(v)) for k, v in values.items()))
            result[table] = rows
    finally:
        cluster.shutdown()
    objects = {}
    bucket = bucket_for(bucket)
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            objects[obj["Key"]] = s3_client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    result["objects"] = objects
    return result


# -- the operator's commands ---------------------------------------------------------------------


def environment(cassandra: dict[str, Any], s3: dict[str, Any]) -> dict[str, str]:
    return {
        "MQF_CASSANDRA_USERNAME": str(cassandra["username"]),
        "MQF_CASSANDRA_PASSWORD": str(cassandra["password"]),
        "MQF_S3_ENDPOINT": str(s3["endpoint"]),
        "AWS_ACCESS_KEY_ID": str(s3["access_key"]),
        "AWS_SECRET_ACCESS_KEY": str(s3["secret_key"]),
        "AWS_DEFAULT_REGION": str(s3["region"]),
    }


def make_plan(
    monkeypatch: Any, env: dict[str, str], where: str, keyspace: str, bucket: str,
    policy: Path, out: Path, as_of: dt.datetime,
) -> int:  # fmt: skip
    from mqforensics import cli

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # The objects were uploaded moments ago (S3 sets LastModified at upload): with the audit's
    # default one-hour grace, an orphan uploaded within the second before `as_of` - 1h would be
    # too young to be one. No grace: every unreferenced object is an orphan, as the oracle says.
    return cli.main([
        "plan", "james", "--policy", str(policy), "--cassandra", where, "--keyspace", keyspace,
        "--scan", "--blobs", f"s3://{bucket_for(bucket)}", "--blob-grace", "0s",
        "--as-of", as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--out", str(out),
    ])  # fmt: skip


# The purger measures James's browse before and after each purge (`JamesExecutor.measure`,
# 2,000 traced queries by default, most of them of the empty partitions between the generated
# state's browseStart and now). These tests do not examine it: they trace 20 queries.
# test_james_tombstones.py examines it, at the default and with --trace-queries.
TRACED = 20
TRACE_QUERIES = ("--trace-queries", str(TRACED))


def purge(
    plan: Path, env: dict[str, str], *args: str, fault_at: int | None = None,
    trace: Path | None = None, timeout: float = 600,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`mqforensics purge PLAN ... --trace-queries 20` in its own process, as an operator (or
    cron) runs it."""
    full = {**os.environ, **env}
    full.pop("MQF_PURGE_FAULT_AT", None)
    if fault_at is not None:
        full["MQF_PURGE_FAULT_AT"] = str(fault_at)
    if trace is not None:
        full["MQF_PURGE_FAULT_TRACE"] = str(trace)
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", "purge", str(plan), *args, *TRACE_QUERIES],
        env=full, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
