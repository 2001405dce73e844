"""Erasure content search on queues the REAL python-slimta 5.0.5 writes, on disk and in a real
Redis (`datasets/slimta/content_writer.py`): one audit of both stores finds exactly the
(subject, where) pairs placed in each message (envelope, header fields, bodies, attachments;
IDNA forms, mixed case, decoys), reports the S/MIME message as unreadable, and its plan erases
every message holding a subject and defers the unreadable ones."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.services.slimta_runtime import run_slimta
from mqforensics.subjects import keyed, read_key
from mqforensics.systems.slimta.plan import DELETE_FILES, DELETE_REDIS_HASH, REMOVE_QUEUE_ENTRY
from tests.integration.slimta.slimta_support import audit
from tests.unit.slimta.test_slimta_content import FULL, SMIME, SUBJECTS

pytestmark = pytest.mark.integration

WRITER = Path(__file__).resolve().parents[3] / "datasets" / "slimta" / "content_writer.py"


@pytest.fixture
def prefix(redis) -> Iterator[str]:
    import redis as redis_py

    name = f"slimta-content-{uuid.uuid4().hex[:8]}:"
    yield name
    client = redis_py.Redis(host=redis["host"], port=redis["port"], password=redis["password"])
    for key in list(client.scan_iter(match=name + "*")):
        client.delete(key)
    client.close()


def _policy(path: Path) -> Path:
    text = "version = 1\n"
    for name, address in SUBJECTS.items():
        text += (f'[[rules]]\nid = "erase-{name}"\nkind = "erase_subject"\n'
                 f'addresses = ["{address}"]\nsearch = "full"\n'
                 'legal_basis = "GDPR art. 17"\n')  # fmt: skip
    path.write_text(text, encoding="utf-8")
    return path


def test_the_audit_finds_exactly_what_slimta_queued(
    tmp_path: Path, slimta_python, redis, prefix: str, monkeypatch
) -> None:
    env_dir, meta_dir = tmp_path / "env", tmp_path / "meta"
    env_dir.mkdir()
    meta_dir.mkdir()
    on_disk = json.loads(run_slimta(WRITER, "disk", env_dir, meta_dir).stdout)
    env = {"SLIMTA_REDIS_PASSWORD": redis["password"]}
    in_redis = json.loads(
        run_slimta(WRITER, "redis", redis["host"], str(redis["port"]), prefix, env=env).stdout
    )
    assert sorted(on_disk) == sorted(in_redis) == sorted(FULL)
    monkeypatch.setenv("MQF_REDIS_PASSWORD", redis["password"])
    policy = _policy(tmp_path / "policy.toml")
    out = tmp_path / "audit"
    stores = ["--disk", str(env_dir), "--meta-dir", str(meta_dir), "--redis", redis["url"],
              "--redis-prefix", prefix]  # fmt: skip
    status, rows = audit([*stores, "--erasure-policy", str(policy)], out)
    assert status in (0, 1)
    key = read_key(out)
    from mqforensics import systems

    loaded = systems.load_policy(policy)
    names = {keyed(h, key): r.id.removeprefix("erase-") for r in loaded.rules for h in r.subjects}
    role = {("disk", i): r for r, i in on_disk.items()} | {
        ("redis", i): r for r, i in in_redis.items()
    }

    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    unreadable: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row in rows:
        if row["check"] not in ("personal_data", "unreadable_content"):
            continue
        detail = row["detail"]
        which = (detail["backend"], role[(detail["backend"], detail["id"])])
        if row["check"] == "personal_data":
            assert which not in found and detail["depth"] == "full"
            found[which] = {(names[f["subject"]], f["where"]) for f in detail["found"]}
            assert detail["subjects"] == sorted({f["subject"] for f in detail["found"]})
        elif row["check"] == "unreadable_content":
            assert row["severity"] == "warning" and detail["depth"] == "full"
            unreadable[which] = [(u["where"], u["reason"]) for u in detail["unreadable"]]
    want = {(b, r): pairs for b in ("disk", "redis") for r, pairs in FULL.items() if pairs}
    assert found == want
    assert unreadable == {("disk", "smime"): SMIME, ("redis", "smime"): SMIME}
    text = json.dumps(rows)
    for address in ("alice@example.com", "bob@example.com", "bücher", "xn--bcher"):
        assert address not in text

    plan_dir = tmp_path / "plan"
    assert cli.main(["plan", "--findings", str(out), "--policy", str(policy),
                     "--out", str(plan_dir)]) == 0  # fmt: skip
    actions = [json.loads(x) for x in (plan_dir / "actions.jsonl").read_text().splitlines()]
    deferred = [json.loads(x) for x in (plan_dir / "deferred.jsonl").read_text().splitlines()]
    erased = {(a["kind"], role[(a["target"]["backend"], a["target"]["id"])]) for a in actions}
    holding = {r for r, pairs in FULL.items() if pairs}
    assert erased == (
        {(DELETE_FILES, r) for r in holding}
        | {(DELETE_REDIS_HASH, r) for r in holding}
        | {(REMOVE_QUEUE_ENTRY, r) for r in holding}
    )
    assert len(actions) == 3 * len(holding)
    assert [(d["target"]["backend"], role[(d["target"]["backend"], d["target"]["id"])],
             d["reason"]) for d in deferred] == [
        (backend, "smime", "content could not be searched: body: encrypted (S/MIME enveloped-data)")
        for backend in ("disk", "redis")
    ]  # fmt: skip
