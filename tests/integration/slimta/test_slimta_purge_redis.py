"""The slimta Redis executor on a real Redis laid out as RedisStorage writes it: exact deletions,
hashes slimta touched after the plan skipped, queue entries removed only when dangling, and a
refused login stopping the purge with nothing changed and no password anywhere; a target slimta
writes during the rate wait or between the last check and the delete (WATCH) kept."""

from __future__ import annotations

import datetime as dt
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from mqforensics.purge.engine import PurgeResult, run_purge
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Action, Plan, read_plan, record_approval, write_plan
from mqforensics.retention.policy import Policy, Rule
from mqforensics.systems.slimta import purge as slimta_purge
from mqforensics.systems.slimta.digests import hash_fields_digest
from mqforensics.systems.slimta.purge import (
    CHANGED_HASH,
    DELETE_REDIS_HASH,
    ENTRY_MESSAGE_EXISTS,
    REMOVE_QUEUE_ENTRY,
    RedisExecutor,
    build_executors,
)
from tests.purge_hooks import apply_with_hook, skipped_records

pytestmark = pytest.mark.integration

THIRTY_DAYS = dt.timedelta(days=30)
POLICY = Policy(
    "p.toml",
    "0" * 64,
    (
        Rule("old-queued", "queued_mail", "retention period", older_than=THIRTY_DAYS),
        Rule("leftovers", "queue_leftovers", "storage hygiene", older_than=THIRTY_DAYS),
    ),
)
OLD1, OLD2, RETRIED, DELIVERED = "a" * 32, "b" * 32, "c" * 32, "d" * 32
KEEP, BROKEN, GONE, NEW, LATE = "1" * 32, "2" * 32, "3" * 32, "4" * 32, "5" * 32
T0 = 1_760_000_000.25
FINDING = "0123456789abcdef"  # the finding every action here cites (plans are made from findings)


@pytest.fixture(autouse=True)
def no_settle(monkeypatch: pytest.MonkeyPatch, redis: dict) -> None:
    monkeypatch.setattr(slimta_purge, "CENSUS_SETTLE_SECONDS", 0)
    monkeypatch.setenv("MQF_REDIS_PASSWORD", redis["password"])
    monkeypatch.delenv("MQF_REDIS_USERNAME", raising=False)


@pytest.fixture
def client(redis: dict) -> Iterator[redis_py.Redis]:
    conn = redis_py.Redis(host=redis["host"], port=redis["port"], password=redis["password"])
    yield conn
    conn.close()


@pytest.fixture
def prefix(client: redis_py.Redis) -> Iterator[str]:
    """A prefix of this test's own, so tests sharing the server never see each other's keys."""
    name = f"slimta-{uuid.uuid4().hex[:8]}:"
    yield name
    for key in list(client.scan_iter(match=name + "*")):
        client.delete(key)


def server_of(redis: dict) -> str:
    return f"{redis['host']}:{redis['port']}/0"


def entry(message_id: str, timestamp: float = T0) -> bytes:
    return pickle.dumps((timestamp, message_id), protocol=pickle.HIGHEST_PROTOCOL)


def store_message(
    client: redis_py.Redis, prefix: str, message_id: str, *, queued: bool = True
) -> None:
    """What RedisStorage.write does: claim the envelope, then timestamp, attempts and the entry."""
    key = prefix + message_id
    envelope = pickle.dumps(("envelope stand-in", message_id), protocol=pickle.HIGHEST_PROTOCOL)
    assert client.hsetnx(key, "envelope", envelope)
    client.hset(key, mapping={"timestamp": str(T0), "attempts": "0"})
    if queued:
        client.rpush(prefix + "queue", entry(message_id))


def hash_action(client: redis_py.Redis, server: str, prefix: str, message_id: str) -> Action:
    key = prefix + message_id
    fields = client.hgetall(key)
    size = sum(len(k) + len(v) for k, v in fields.items())
    target = {"backend": "redis", "server": server, "key": key, "id": message_id}
    precondition = {"fields_sha256": hash_fields_digest(fields)}
    return Action(DELETE_REDIS_HASH, target, precondition, ("old-queued",), size, 0, "old",
                  findings=(FINDING,))  # fmt: skip


def entry_action(server: str, prefix: str, message_id: str) -> Action:
    value = entry(message_id)
    target = {"backend": "redis", "server": server, "list": prefix + "queue",
              "entry_hex": value.hex(), "id": message_id}  # fmt: skip
    precondition = {"message_key": prefix + message_id, "message_key_absent": True}
    return Action(REMOVE_QUEUE_ENTRY, target, precondition, ("leftovers",), len(value), 0, "gone",
                  findings=(FINDING,))  # fmt: skip


def make_plan(directory: Path, actions: list[Action]) -> Plan:
    written = write_plan(
        directory, system="slimta", as_of=dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
        policy=POLICY, inputs={"stores": ["redis (test)"]}, actions=actions, deferred=[],
        notes=[],
    )  # fmt: skip
    plan = read_plan(written.directory)
    record_approval(plan, "ops")
    return plan


def snapshot(client: redis_py.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under the prefix with its full content."""
    out: dict[bytes, Any] = {}
    for key in client.scan_iter(match=prefix + "*"):
        kind = client.type(key)
        out[key] = client.lrange(key, 0, -1) if kind == b"list" else client.hgetall(key)
    return out


def queue_spool(client: redis_py.Redis, server: str, prefix: str) -> list[Action]:
    """A RedisStorage as planned, and the plan's actions (hashes first, then entries)."""
    for message_id in (OLD1, OLD2, RETRIED, DELIVERED, KEEP):
        store_message(client, prefix, message_id)
    client.hsetnx(prefix + BROKEN, "envelope", b"half written")  # never got its timestamp
    client.rpush(prefix + "queue", entry(GONE), entry(GONE))  # dangling, twice
    hashes = [hash_action(client, server, prefix, i) for i in (OLD1, OLD2, RETRIED, DELIVERED)]
    entries = [entry_action(server, prefix, i) for i in (OLD1, RETRIED, GONE, DELIVERED)]
    return hashes + entries


def queue_moves_on(client: redis_py.Redis, prefix: str) -> None:
    """What a running slimta does after the plan was made."""
    client.hincrby(prefix + RETRIED, "attempts", 1)  # a delivery attempt failed
    client.delete(prefix + DELIVERED)  # delivered: RedisStorage.remove
    client.lrem(prefix + "queue", 0, entry(DELIVERED))  # its entry was popped (BLPOP)
    store_message(client, prefix, NEW)


def test_purge_deletes_exactly_the_planned_keys_and_entries(
    redis: dict, client: redis_py.Redis, prefix: str, tmp_path: Path
) -> None:
    server = server_of(redis)
    plan = make_plan(tmp_path / "plan", queue_spool(client, server, prefix))
    queue_moves_on(client, prefix)
    before = snapshot(client, prefix)
    lines: list[str] = []

    dry = run_purge(plan, build_executors(plan), apply=False,
                    out=lines.append)  # fmt: skip
    assert (dry.would_apply, dry.skipped, dry.already_final) == (4, 2, 2)
    assert snapshot(client, prefix) == before

    executors = build_executors(plan)
    result = run_purge(plan, executors, apply=True, out=lines.append)
    for executor in executors:
        executor.close()
    assert result.verification is not None and result.verification["ok"], lines
    assert (result.done, result.skipped) == (6, 2)
    assert [(seq, reason) for seq, _, reason in result.skips] == [
        (2, CHANGED_HASH),
        (5, "the message exists"),
    ]
    after = snapshot(client, prefix)
    queue = (prefix + "queue").encode()
    gone = {(prefix + i).encode() for i in (OLD1, OLD2)}
    assert set(after) == set(before) - gone
    # OLD2's entry is dangling now, but no action names it: it stays.
    assert after[queue] == [entry(OLD2), entry(RETRIED), entry(KEEP), entry(NEW)]
    assert {k: v for k, v in after.items() if k != queue} == {
        k: v for k, v in before.items() if k not in gone and k != queue
    }
    assert result.verification["census_before"] == {
        "RedisExecutor": {f"{server} {prefix}*": {"hashes_without_envelope_or_timestamp": 1}}
    }
    removed = {r["seq"]: r["removed"] for r in read_journal(result.journal) if "removed" in r}
    assert removed[6] == {"entries": 2, "bytes": 2 * len(entry(GONE))}
    assert removed[3] == {"keys": 0, "bytes": 0}  # DELIVERED: slimta removed it first

    again = run_purge(plan, build_executors(plan), apply=True,
                      out=lines.append)  # fmt: skip
    assert (again.done, again.operations) == (0, 0)
    assert snapshot(client, prefix) == after


def hash_size(fields: dict[bytes, bytes]) -> int:
    return sum(len(k) + len(v) for k, v in fields.items())


def removed_by_seq(result: PurgeResult) -> dict[int, dict[str, int]]:
    assert result.journal is not None
    return {r["seq"]: r["removed"] for r in read_journal(result.journal) if r["event"] == "done"}


def test_a_hash_or_message_written_during_the_rate_wait_is_kept(
    redis: dict, client: redis_py.Redis, prefix: str, tmp_path: Path
) -> None:
    server = server_of(redis)
    for message_id in (OLD1, RETRIED, OLD2, KEEP):
        store_message(client, prefix, message_id, queued=False)
    client.rpush(prefix + "queue", entry(GONE), entry(NEW), entry(KEEP))
    plan = make_plan(
        tmp_path / "plan",
        [hash_action(client, server, prefix, i) for i in (OLD1, RETRIED, OLD2)]
        + [entry_action(server, prefix, i) for i in (NEW, GONE)],
    )
    before = snapshot(client, prefix)
    queue = prefix + "queue"

    retried, new = f"delete hash {prefix}{RETRIED}", f"remove the entry naming {NEW} from {queue}"
    seen: list[str] = []

    def slimta(label: str) -> None:
        # Both planned targets pass the engine's verify, then change while they wait for their
        # rate slot: an attempt counted, and NEW's message stored (its entry no longer dangles).
        if label not in seen and label == f"rate slot {retried}":
            client.hincrby(prefix + RETRIED, "attempts", 1)
        elif label not in seen and label == f"rate slot {new}":
            store_message(client, prefix, NEW, queued=False)
        seen.append(label)

    result = apply_with_hook(plan, build_executors(plan), slimta)
    # The check after the wait saw the change (not a refused EXEC, which would take a second
    # slot): one rate slot each, and no delete began.
    for label in (retried, new):
        assert [x for x in seen if x.endswith(label)] == [f"rate slot {label}"]
    assert result.skips == [
        (1, DELETE_REDIS_HASH, CHANGED_HASH),
        (3, REMOVE_QUEUE_ENTRY, ENTRY_MESSAGE_EXISTS),
    ]
    assert skipped_records(result.journal) == [
        (1, CHANGED_HASH, True, 0),
        (3, ENTRY_MESSAGE_EXISTS, True, 0),
    ]
    assert result.done == 3 and result.verification is not None and result.verification["ok"]
    after = snapshot(client, prefix)
    retried = (prefix + RETRIED).encode()
    assert after.pop(retried) == {**before[retried], b"attempts": b"1"}
    assert after.pop((prefix + NEW).encode())[b"attempts"] == b"0"
    assert after.pop(queue.encode()) == [entry(NEW), entry(KEEP)]  # GONE's entry removed
    keep = (prefix + KEEP).encode()
    assert after == {keep: before[keep]}
    assert removed_by_seq(result) == {
        0: {"keys": 1, "bytes": hash_size(before[(prefix + OLD1).encode()])},
        2: {"keys": 1, "bytes": hash_size(before[(prefix + OLD2).encode()])},
        4: {"entries": 1, "bytes": len(entry(GONE))},
    }


def test_a_write_between_the_check_and_the_delete_aborts_it(
    redis: dict, client: redis_py.Redis, prefix: str, tmp_path: Path
) -> None:
    server = server_of(redis)
    for message_id in (OLD1, OLD2, RETRIED, DELIVERED, KEEP):
        store_message(client, prefix, message_id, queued=False)
    client.rpush(prefix + "queue", entry(GONE), entry(LATE), entry(KEEP))
    plan = make_plan(
        tmp_path / "plan",
        [hash_action(client, server, prefix, i) for i in (OLD1, OLD2, RETRIED, DELIVERED)]
        + [entry_action(server, prefix, i) for i in (GONE, LATE)],
    )
    before = snapshot(client, prefix)
    queue = prefix + "queue"
    seen: list[str] = []

    def slimta(label: str) -> None:
        """slimta writes right after the last check passed (the key is WATCHed), once per
        target, except RETRIED, rewritten (same content) before every EXEC."""
        first = label not in seen
        seen.append(label)
        if label == f"before delete hash {prefix}{OLD1}" and first:
            client.hincrby(prefix + OLD1, "attempts", 1)  # a delivery attempt counted
        elif label == f"before delete hash {prefix}{OLD2}" and first:
            client.hset(prefix + OLD2, "attempts", "0")  # written, content unchanged
        elif label == f"before delete hash {prefix}{RETRIED}":
            client.hset(prefix + RETRIED, "attempts", "0")
        elif label == f"before delete hash {prefix}{DELIVERED}" and first:
            client.delete(prefix + DELIVERED)  # delivered: RedisStorage.remove
        elif label == f"before remove the entry naming {GONE} from {queue}" and first:
            store_message(client, prefix, NEW)  # another message enqueued: the list pushed
        elif label == f"before remove the entry naming {LATE} from {queue}" and first:
            store_message(client, prefix, LATE, queued=False)  # its message stored again

    result = apply_with_hook(plan, build_executors(plan), slimta)
    kept_changing = (
        f"Redis key {prefix}{RETRIED} kept changing between the check and the delete "
        f"(WATCH aborted {slimta_purge.WATCH_ATTEMPTS} attempts)"
    )
    assert skipped_records(result.journal) == [
        (0, CHANGED_HASH, True, 0),
        (2, kept_changing, True, 0),
        (5, ENTRY_MESSAGE_EXISTS, True, 0),
    ]
    # Every refused EXEC was followed by a new rate slot and a new check.
    assert seen.count(f"rate slot delete hash {prefix}{RETRIED}") == slimta_purge.WATCH_ATTEMPTS
    assert seen.count(f"rate slot delete hash {prefix}{OLD2}") == 2
    assert result.done == 3 and result.verification is not None and result.verification["ok"]
    after = snapshot(client, prefix)
    old1 = (prefix + OLD1).encode()
    assert after.pop(old1) == {**before[old1], b"attempts": b"1"}
    assert after.pop(queue.encode()) == [entry(LATE), entry(KEEP), entry(NEW)]
    assert after.pop((prefix + NEW).encode())[b"attempts"] == b"0"
    assert after.pop((prefix + LATE).encode())[b"attempts"] == b"0"
    unchanged = {(prefix + i).encode() for i in (RETRIED, KEEP)}
    assert after == {k: v for k, v in before.items() if k in unchanged}
    assert removed_by_seq(result) == {
        1: {"keys": 1, "bytes": hash_size(before[(prefix + OLD2).encode()])},
        3: {"keys": 0, "bytes": 0},  # deleted by slimta between the check and the EXEC
        4: {"entries": 1, "bytes": len(entry(GONE))},
    }


def test_census_sees_a_hash_losing_its_timestamp(
    redis: dict, client: redis_py.Redis, prefix: str, tmp_path: Path
) -> None:
    server = server_of(redis)
    actions = queue_spool(client, server, prefix)
    executor = RedisExecutor(make_plan(tmp_path / "plan", actions))
    key = f"{server} {prefix}*"
    assert executor.census() == {key: {"hashes_without_envelope_or_timestamp": 1}}
    client.hdel(prefix + OLD1, "timestamp")  # named by the plan: not counted
    store_message(client, prefix, NEW)
    assert executor.census() == {key: {"hashes_without_envelope_or_timestamp": 1}}
    client.hdel(prefix + KEEP, "timestamp")
    assert executor.census() == {key: {"hashes_without_envelope_or_timestamp": 2}}
    executor.close()


def _all_text(*parts: str, directory: Path) -> str:
    files = [p.read_text(errors="replace") for p in sorted(directory.rglob("*")) if p.is_file()]
    return "\n".join([*parts, *files])


def test_the_purge_command_takes_the_password_from_the_environment_only(
    redis: dict,
    client: redis_py.Redis,
    prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mqforensics import cli

    # The plan names a server where nothing listens; --redis says where it is now.
    actions = queue_spool(client, "127.0.0.1:1/0", prefix)
    plan = make_plan(tmp_path / "plan", actions)
    before = snapshot(client, prefix)
    url = f"redis://{redis['host']}:{redis['port']}/0"
    secret = redis["password"]

    monkeypatch.setenv("MQF_REDIS_PASSWORD", "not-the-password")
    for extra in ([], ["--apply"]):
        assert cli.main(["purge", str(plan.directory), "--redis", url, *extra]) == 2
        captured = capsys.readouterr()
        assert "AuthenticationFailed" in captured.err and "Traceback" not in captured.err
        assert "not-the-password" not in captured.out + captured.err
    assert snapshot(client, prefix) == before

    monkeypatch.delenv("MQF_REDIS_PASSWORD")
    with_password = f"redis://:{secret}@{redis['host']}:{redis['port']}/0"
    assert cli.main(["purge", str(plan.directory), "--redis", with_password, "--apply"]) == 2
    captured = capsys.readouterr()
    assert "ConfigError: --redis redis://[hidden]@" in captured.err
    assert "set MQF_REDIS_USERNAME and MQF_REDIS_PASSWORD instead" in captured.err
    assert secret not in captured.out + captured.err
    assert snapshot(client, prefix) == before

    monkeypatch.setenv("MQF_REDIS_PASSWORD", secret)
    assert cli.main(["purge", str(plan.directory), "--redis", url, "--apply"]) == 0
    captured = capsys.readouterr()
    assert "verification: ok" in captured.out
    assert secret not in _all_text(captured.out, captured.err, directory=plan.directory)
    assert not client.exists(prefix + OLD1)


def test_redis_errors_are_classified() -> None:
    from mqforensics.systems.slimta.purge import classify_redis_error

    assert classify_redis_error(redis_py.AuthenticationError("invalid password")) == "auth"
    assert classify_redis_error(redis_py.ResponseError("NOAUTH Authentication required.")) == (
        "auth"
    )
    assert classify_redis_error(redis_py.ResponseError("WRONGPASS invalid username")) == "auth"
    assert classify_redis_error(redis_py.ConnectionError("Error 111 connecting")) == "retry"
    assert classify_redis_error(redis_py.TimeoutError("Timeout reading")) == "retry"
    assert classify_redis_error(redis_py.BusyLoadingError("LOADING")) == "retry"
    assert classify_redis_error(redis_py.ResponseError("WRONGTYPE Operation")) is None
