"""The slimta S3 executor on the real SeaweedFS, objects stored as slimta's SimpleStorageService
stores them: exact deletions, objects slimta rewrote after the plan skipped, an object rewritten
during the rate wait or between the HEAD and the delete (If-Match) kept, and refused
credentials."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqforensics.errors import AuthenticationFailed
from mqforensics.purge.engine import run_purge
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Action, Plan, read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.systems.slimta.options import PurgeOptions
from mqforensics.systems.slimta.purge import (
    CHANGED_OBJECT,
    CHANGED_OBJECT_METADATA,
    DELETE_OBJECT,
    OVERWRITTEN_AT_DELETE,
    S3Executor,
    build_executors,
)
from tests.purge_hooks import apply_with_hook, skipped_records

pytestmark = pytest.mark.integration

POLICY = Policy(
    "p.toml",
    "0" * 64,
    (Rule("old-queued", "queued_mail", "retention", older_than=dt.timedelta(days=30)),),
)
PREFIX = "queue/"
T0 = 1_760_000_000.25
FINDING = "0123456789abcdef"  # the finding every action here cites (plans are made from findings)


@pytest.fixture
def s3_env(s3: dict, monkeypatch: pytest.MonkeyPatch) -> PurgeOptions:
    """Credentials in the environment, the endpoint on the command line (as for James)."""
    monkeypatch.delenv("MQF_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3["region"])
    return PurgeOptions(s3_endpoint=s3["endpoint"])


@pytest.fixture
def bucket(s3: dict) -> Iterator[tuple[Any, str]]:
    client = s3_endpoint(s3).client()
    name = f"slimta-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    try:
        yield client, name
    finally:  # the shared SeaweedFS has few volume slots: one set per bucket
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                client.delete_object(Bucket=name, Key=obj["Key"])
        client.delete_bucket(Bucket=name)


def put_message(client: Any, bucket: str, n: int, attempts: int | None = None) -> str:
    """What SimpleStorageService.write_message stores: the pickled envelope, JSON metadata."""
    key = PREFIX + str(uuid.UUID(int=n))
    body = pickle.dumps(("envelope stand-in", n, b"x" * 100 * n), protocol=5)
    metadata = {"timestamp": json.dumps(T0), "attempts": "" if attempts is None else str(attempts),
                "delivered_indexes": ""}  # fmt: skip
    client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata)
    return key


def object_action(client: Any, bucket: str, key: str, *, with_metadata: bool = False) -> Action:
    head = client.head_object(Bucket=bucket, Key=key)
    precondition: dict[str, Any] = {"etag": head["ETag"].strip('"'), "size": head["ContentLength"]}
    if with_metadata:
        precondition["metadata"] = head["Metadata"]
    target = {"backend": "s3", "bucket": bucket, "key": key, "id": key.removeprefix(PREFIX)}
    return Action(DELETE_OBJECT, target, precondition, ("old-queued",), head["ContentLength"], 0,
                  "old", findings=(FINDING,))  # fmt: skip


def make_plan(directory: Path, actions: list[Action]) -> Plan:
    written = write_plan(
        directory, system="slimta", as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=POLICY, inputs={"stores": ["s3 (test)"]}, actions=actions, deferred=[], notes=[],
    )  # fmt: skip
    plan = read_plan(written.directory)
    record_approval(plan, "ops")
    return plan


def rewrite_metadata(client: Any, bucket: str, key: str) -> None:
    """What slimta does on a delivery attempt: the metadata rewritten, the body kept (same ETag)."""
    client.copy_object(
        Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key},
        Metadata={"timestamp": json.dumps(T0 + 300), "attempts": "1"},
        MetadataDirective="REPLACE",
    )  # fmt: skip


def snapshot(client: Any, bucket: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            got = client.get_object(Bucket=bucket, Key=obj["Key"])
            out[obj["Key"]] = (got["Body"].read(), got["Metadata"])
    return out


def test_purge_deletes_exactly_the_planned_objects(
    bucket: tuple[Any, str], s3_env: PurgeOptions, tmp_path: Path
) -> None:
    client, name = bucket
    old1, old2, overwritten, retried, delivered, keep = (
        put_message(client, name, n) for n in range(1, 7)
    )
    actions = [object_action(client, name, k) for k in (old1, old2, overwritten, delivered)]
    actions.append(object_action(client, name, retried, with_metadata=True))
    plan = make_plan(tmp_path / "plan", actions)
    # After the plan: a message stored again under the same key, an attempt counted (slimta
    # rewrites the metadata only: same body, same ETag), one delivered and removed.
    client.put_object(Bucket=name, Key=overwritten, Body=b"another envelope")
    rewrite_metadata(client, name, retried)
    client.delete_object(Bucket=name, Key=delivered)
    before = snapshot(client, name)
    lines: list[str] = []

    dry = run_purge(plan, build_executors(plan, s3_env), apply=False, out=lines.append)
    assert (dry.would_apply, dry.skipped, dry.already_final) == (2, 2, 1)
    assert snapshot(client, name) == before

    result = run_purge(plan, build_executors(plan, s3_env), apply=True, out=lines.append)
    assert result.verification is not None and result.verification["ok"], lines
    assert result.verification["census_before"] == {"S3Executor": {}}
    assert (result.done, result.skipped) == (3, 2)
    assert [(seq, reason) for seq, _, reason in result.skips] == [
        (2, CHANGED_OBJECT),
        (4, CHANGED_OBJECT_METADATA),
    ]
    after = snapshot(client, name)
    assert after == {k: v for k, v in before.items() if k not in (old1, old2)}
    assert set(after) == {overwritten, retried, keep}

    again = run_purge(plan, build_executors(plan, s3_env), apply=True, out=lines.append)
    assert (again.done, again.operations) == (0, 0)
    assert snapshot(client, name) == after


def test_an_object_rewritten_during_the_rate_wait_is_kept(
    bucket: tuple[Any, str], s3_env: PurgeOptions, tmp_path: Path
) -> None:
    client, name = bucket
    old1, overwritten, retried, old2, keep = (put_message(client, name, n) for n in range(1, 6))
    actions = [object_action(client, name, k) for k in (old1, overwritten)]
    actions.append(object_action(client, name, retried, with_metadata=True))
    actions.append(object_action(client, name, old2))
    plan = make_plan(tmp_path / "plan", actions)
    before = snapshot(client, name)
    seen: list[str] = []

    def slimta(label: str) -> None:
        # Both pass the engine's verify, then change while waiting for their rate slot.
        if label == f"rate slot delete object s3://{name}/{overwritten}":
            client.put_object(Bucket=name, Key=overwritten, Body=b"another envelope")
        elif label == f"rate slot delete object s3://{name}/{retried}":
            rewrite_metadata(client, name, retried)
        seen.append(label)

    result = apply_with_hook(plan, build_executors(plan, s3_env), slimta)
    assert skipped_records(result.journal) == [
        (1, CHANGED_OBJECT, True, 0),
        (2, CHANGED_OBJECT_METADATA, True, 0),
    ]
    for key in (overwritten, retried):  # seen at the check after the wait: no delete began
        label = f"delete object s3://{name}/{key}"
        assert [x for x in seen if x.endswith(label)] == [f"rate slot {label}"]
    assert result.done == 2 and result.verification is not None and result.verification["ok"]
    after = snapshot(client, name)
    assert after.pop(overwritten)[0] == b"another envelope"
    assert after.pop(retried) == (before[retried][0], {"timestamp": json.dumps(T0 + 300),
                                                       "attempts": "1"})  # fmt: skip
    assert after == {keep: before[keep]}


def test_an_object_overwritten_between_the_check_and_the_delete_is_kept(
    bucket: tuple[Any, str], s3_env: PurgeOptions, tmp_path: Path
) -> None:
    client, name = bucket
    overwritten, delivered, retried, old1, keep = (
        put_message(client, name, n) for n in range(1, 6)
    )
    actions = [object_action(client, name, k) for k in (overwritten, delivered)]
    actions.append(object_action(client, name, retried, with_metadata=True))
    actions.append(object_action(client, name, old1))
    plan = make_plan(tmp_path / "plan", actions)
    before = snapshot(client, name)

    def slimta(label: str) -> None:
        # The HEAD passed; slimta writes before the DeleteObject reaches the store.
        if label == f"before delete object s3://{name}/{overwritten}":
            client.put_object(Bucket=name, Key=overwritten, Body=b"another envelope")
        elif label == f"before delete object s3://{name}/{delivered}":
            client.delete_object(Bucket=name, Key=delivered)
        elif label == f"before delete object s3://{name}/{retried}":
            rewrite_metadata(client, name, retried)

    result = apply_with_hook(plan, build_executors(plan, s3_env), slimta)
    # If-Match refuses the new body; the metadata rewrite keeps the ETag, so If-Match lets that
    # delete go ahead: the window the executor's docstring states.
    assert skipped_records(result.journal) == [(0, OVERWRITTEN_AT_DELETE, True, 0)]
    assert result.done == 3 and result.verification is not None and result.verification["ok"]
    assert result.journal is not None
    removed = {r["seq"]: r["removed"] for r in read_journal(result.journal) if "removed" in r}
    assert removed == {
        1: {"objects": 0, "bytes": 0},  # deleted by slimta between the HEAD and the delete
        2: {"objects": 1, "bytes": len(before[retried][0])},
        3: {"objects": 1, "bytes": len(before[old1][0])},
    }
    after = snapshot(client, name)
    assert after.pop(overwritten) == (b"another envelope", {})
    assert after == {keep: before[keep]}


def test_refused_credentials_stop_the_purge_with_nothing_changed(
    bucket: tuple[Any, str],
    s3_env: PurgeOptions,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, name = bucket
    key = put_message(client, name, 1)
    plan = make_plan(tmp_path / "plan", [object_action(client, name, key)])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    executors = build_executors(plan, s3_env)
    assert isinstance(executors[0], S3Executor)
    with pytest.raises(AuthenticationFailed) as caught:
        run_purge(plan, executors, apply=True, out=lambda _: None)
    assert "not-the-secret" not in str(caught.value)
    assert client.head_object(Bucket=name, Key=key)["ContentLength"] > 0
