"""The slimta S3 executor on the real SeaweedFS, objects stored as slimta's SimpleStorageService
stores them: exact deletions, objects slimta rewrote after the plan skipped, a conditional delete
that loses a race to an overwrite, and refused credentials."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqforensics.errors import AuthenticationFailed, InputError
from mqforensics.purge.engine import Operations, run_purge
from mqforensics.retention.manifest import Action, Plan, read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.services.seaweedfs import s3_endpoint
from mqforensics.systems.slimta.purge_executor import (
    CHANGED_OBJECT,
    CHANGED_OBJECT_METADATA,
    DELETE_OBJECT,
    S3Executor,
    build_executors,
)

pytestmark = pytest.mark.integration

POLICY = Policy(
    "p.toml",
    "0" * 64,
    (Rule("old-queued", "queued_mail", "retention", older_than=dt.timedelta(days=30)),),
)
PREFIX = "queue/"
T0 = 1_760_000_000.25


@pytest.fixture
def s3_env(s3: dict, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """Credentials in the environment, the endpoint on the command line (as for James)."""
    monkeypatch.delenv("MQF_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3["region"])
    return argparse.Namespace(s3_endpoint=s3["endpoint"], redis=None)


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
                  "old")  # fmt: skip


def make_plan(directory: Path, actions: list[Action]) -> Plan:
    written = write_plan(
        directory, system="slimta", as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=POLICY, inputs={"stores": ["s3 (test)"]}, actions=actions, deferred=[], notes=[],
    )  # fmt: skip
    plan = read_plan(written.directory)
    record_approval(plan, "ops")
    return plan


def snapshot(client: Any, bucket: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            got = client.get_object(Bucket=bucket, Key=obj["Key"])
            out[obj["Key"]] = (got["Body"].read(), got["Metadata"])
    return out


def test_purge_deletes_exactly_the_planned_objects(
    bucket: tuple[Any, str], s3_env: argparse.Namespace, tmp_path: Path
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
    client.copy_object(
        Bucket=name, Key=retried, CopySource={"Bucket": name, "Key": retried},
        Metadata={"timestamp": json.dumps(T0 + 300), "attempts": "1"},
        MetadataDirective="REPLACE",
    )  # fmt: skip
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


class Overwriting(Operations):
    """Stores a new body under the key right before the DeleteObject (slimta writing)."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        super().__init__()
        self.client, self.bucket, self.key = client, bucket, key

    def destructive(self, label: str) -> None:
        super().destructive(label)
        self.client.put_object(Bucket=self.bucket, Key=self.key, Body=b"written meanwhile")


def test_the_delete_is_conditional_on_the_planned_etag(
    bucket: tuple[Any, str], s3_env: argparse.Namespace, tmp_path: Path
) -> None:
    client, name = bucket
    key = put_message(client, name, 1)
    plan = make_plan(tmp_path / "plan", [object_action(client, name, key)])
    (executor,) = build_executors(plan, s3_env)
    (action,) = plan.actions()
    assert executor.verify(action).ok
    with pytest.raises(InputError, match="was overwritten while being deleted"):
        executor.apply(action, Overwriting(client, name, key))
    assert client.get_object(Bucket=name, Key=key)["Body"].read() == b"written meanwhile"
    verdict = executor.verify(action)
    assert (verdict.ok, verdict.reason) == (False, CHANGED_OBJECT)


def test_refused_credentials_stop_the_purge_with_nothing_changed(
    bucket: tuple[Any, str],
    s3_env: argparse.Namespace,
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
