"""A RedisStorage written by the real python-slimta 5.0.5 on a real Redis: exact findings, and a
cleanup plan the purger applies removing exactly the keys and queue entries it names."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.purge.journal import read_journal
from mqforensics.systems.slimta.safe_pickle import SlimtaPickleError, decode_queue_entry
from tests.integration.slimta.slimta_support import (
    MARKER,
    audit,
    plan_both_ways,
    redis_expected,
    triples,
    write_redis_store,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def login(redis, monkeypatch) -> list[str]:
    monkeypatch.setenv("MQF_REDIS_PASSWORD", redis["password"])
    return ["--redis", redis["url"]]


def _client(redis):
    import redis as redis_py

    return redis_py.Redis(host=redis["host"], port=redis["port"], password=redis["password"])


def _state(redis, prefix: str) -> dict[bytes, object]:
    """Every key under `prefix` with its full value (hash fields, list items, string)."""
    client = _client(redis)
    out: dict[bytes, object] = {}
    for key in client.scan_iter(match=prefix + "*"):
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"list":
            out[key] = client.lrange(key, 0, -1)
        else:
            out[key] = client.get(key)
    return out


@pytest.fixture
def prefix(redis) -> Iterator[str]:
    """A prefix of this test's own: a long-lived server (MQF_TEST_SERVICES_DIR) keeps the keys
    of earlier runs, which must not show up as findings here."""
    name = f"slimta-{uuid.uuid4().hex[:8]}:"
    yield name
    client = _client(redis)
    for key in list(client.scan_iter(match=name + "*")):
        client.delete(key)
    client.close()


def _entry_id(value: bytes) -> str | None:
    try:
        return decode_queue_entry(value)[1]
    except SlimtaPickleError:
        return None


def test_every_check_returns_exactly_the_planted_findings(
    redis, login, slimta_python, prefix: str, tmp_path: Path
) -> None:
    MARKER.unlink(missing_ok=True)
    truth = write_redis_store(redis, prefix)
    assert truth["hostile_payload_ran"] is False
    before = _state(redis, prefix)
    status, rows = audit([*login, "--redis-prefix", prefix], tmp_path / "audit")
    assert status == 1
    assert triples(rows) == redis_expected(truth, prefix)
    assert not MARKER.exists()
    assert _state(redis, prefix) == before  # reading changed nothing
    # Real slimta's own restart fails on its non-empty notification list: our finding's claim.
    assert truth["load_error"].startswith("ResponseError: WRONGTYPE")
    by = {(r["check"], r["subject"], r["detail"].get("id")): r for r in rows}
    queue = prefix + "queue"
    assert by[("queue_list_blocks_load", queue, None)]["detail"]["entries"] == 7
    assert (("dangling_queue_entry", queue, truth["roles"]["dangling"])) in by
    # Queue's partial delivery stored a pickled *set*; a second one fails in real slimta.
    assert truth["partial_delivered_indexes"] == "{0}"
    partial = by[("delivered_indexes_unreliable", prefix + truth["roles"]["partial"],
                  truth["roles"]["partial"])]  # fmt: skip
    assert partial["detail"]["stored_as"] == "set"
    assert partial["detail"]["reasons"] == ["stored_as_set", "relative_to_reduced_recipients"]
    assert redis["password"] not in (tmp_path / "audit" / "findings.json").read_text()


def test_wrong_or_missing_password_is_a_clear_error(redis, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("MQF_REDIS_PASSWORD", "not-the-password")
    status, rows = audit(["--redis", redis["url"]], tmp_path / "out")
    err = capsys.readouterr().err
    assert status == 2 and rows == []
    assert "refused the login" in err and "Traceback" not in err
    assert "not-the-password" not in err


def test_a_plan_applied_by_the_purger_removes_exactly_what_it_names(
    redis, login, slimta_python, prefix: str, tmp_path: Path
) -> None:
    truth = write_redis_store(redis, prefix)
    roles = truth["roles"]
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "version = 1\n"
        '[[rules]]\nid = "retention"\nkind = "queued_mail"\nolder_than = "7d"\n'
        'legal_basis = "queue retention 7 days"\n'
        '[[rules]]\nid = "leftovers"\nkind = "queue_leftovers"\nolder_than = "1h"\n'
        'legal_basis = "storage hygiene"\n'
    )
    # Judged two hours later: the crash leftovers are then over an hour old.
    as_of = dt.datetime.fromtimestamp(truth["now"] + 7200, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan = plan_both_ways([*login, "--redis-prefix", prefix], policy, tmp_path, as_of)
    actions = [json.loads(line) for line in (plan / "actions.jsonl").read_text().splitlines()]
    hashes = {a["target"]["id"] for a in actions if a["kind"] == "slimta.delete_redis_hash"}
    entries = [a["target"]["id"] for a in actions if a["kind"] == "slimta.remove_queue_entry"]
    assert hashes == {roles[r] for r in ("old", "torn_env", "torn_meta", "retried", "partial")}
    assert sorted(entries) == sorted(roles[r] for r in ("old", "retried", "partial", "dangling"))
    # Every hash goes before the queue entries that name it.
    seqs = {(a["kind"], a["target"]["id"]): a["seq"] for a in actions}
    assert all(seqs[("slimta.delete_redis_hash", i)] < seqs[("slimta.remove_queue_entry", i)]
               for i in entries if i != roles["dangling"])  # fmt: skip
    # An entry naming a removed message cites that message's findings; a dangling one its own.
    findings = {r["id"]: r for r in json.loads((tmp_path / "audit" / "findings.json").read_text())}
    cited = {(a["kind"], a["target"]["id"]): sorted(findings[f]["check"] for f in a["findings"])
             for a in actions}  # fmt: skip
    assert cited[("slimta.remove_queue_entry", roles["old"])] == ["retention_exceeded"]
    assert cited[("slimta.remove_queue_entry", roles["dangling"])] == ["dangling_queue_entry"]
    assert cited[("slimta.delete_redis_hash", roles["torn_meta"])] == ["torn_write"]
    assert cited[("slimta.remove_queue_entry", roles["retried"])] == ["retry_exhausted"]
    # The hostile entry and the string key have no age to judge: findings, not plan items.
    assert (plan / "deferred.jsonl").read_text() == ""
    assert redis["password"] not in "".join(p.read_text() for p in plan.iterdir())

    client = _client(redis)
    client.hincrby(prefix + roles["retried"], "attempts", 1)  # slimta retried it meanwhile
    before = _state(redis, prefix)
    assert cli.main(["approve", str(plan), "--by", "ops"]) == 0
    assert cli.main(["purge", str(plan), "--apply"]) == 0
    after = _state(redis, prefix)
    gone = {(prefix + roles[r]).encode() for r in ("old", "torn_env", "torn_meta", "partial")}
    assert set(before) - set(after) == gone
    for key, value in after.items():
        if key != (prefix + "queue").encode():
            assert value == before[key]
    queue_before = before[(prefix + "queue").encode()]
    queue_after = after[(prefix + "queue").encode()]
    named = [_entry_id(v) for v in queue_before]
    removed = {roles[r] for r in ("old", "partial", "dangling")}
    assert queue_after == [v for v, i in zip(queue_before, named, strict=True) if i not in removed]
    skipped = [r for r in read_journal(plan / "journal.jsonl") if r["event"] == "skipped"]
    assert sorted(r["kind"] for r in skipped) == [
        "slimta.delete_redis_hash",
        "slimta.remove_queue_entry",
    ]
    assert not os.path.exists(MARKER)


def test_an_unreachable_server_is_a_clear_error(tmp_path: Path, capsys) -> None:
    from mqforensics.services.process import free_ports

    (port,) = free_ports(1)
    status, rows = audit(["--redis", f"redis://127.0.0.1:{port}/0"], tmp_path / "out")
    err = capsys.readouterr().err
    assert status == 2 and rows == []
    assert f"Redis at 127.0.0.1:{port}/0 is unreachable" in err and "Traceback" not in err
