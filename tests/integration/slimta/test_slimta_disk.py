"""A DiskStorage written by the real python-slimta 5.0.5: exact findings, and a cleanup plan the
purger applies deleting exactly the files it names."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest

from mqforensics import cli
from mqforensics.purge.journal import read_journal
from mqforensics.units import utc_text
from tests.integration.slimta.slimta_support import (
    MARKER,
    audit,
    disk_expected,
    plan_both_ways,
    triples,
    write_disk_store,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def store(tmp_path_factory, slimta_python) -> dict:
    MARKER.unlink(missing_ok=True)
    truth = write_disk_store(tmp_path_factory.mktemp("slimta-disk"))
    assert truth["hostile_payload_ran"] is False
    return truth


def _store_args(truth: dict) -> list[str]:
    dirs = truth["dirs"]
    return ["--disk", dirs["env"], "--meta-dir", dirs["meta"], "--tmp-dir", dirs["tmp"]]


def _snapshot(truth: dict) -> dict[str, str]:
    out = {}
    for directory in truth["dirs"].values():
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def test_every_check_returns_exactly_the_planted_findings(store: dict, tmp_path: Path) -> None:
    status, rows = audit(_store_args(store), tmp_path / "audit")
    assert status == 1  # errors and critical findings
    assert triples(rows) == disk_expected(store)
    # The hostile pickles were reported, never executed, by the product.
    assert not MARKER.exists()
    by_check = {(r["check"], r["subject"]): r for r in rows}
    roles, env = store["roles"], store["dirs"]["env"]
    unsafe = by_check[("unsafe_pickle", os.path.join(env, roles["hostile_env"] + ".env"))]
    assert unsafe["detail"]["pickle"] == "envelope"
    assert "posix.system" in unsafe["detail"]["reason"]
    meta = by_check[("unsafe_pickle", os.path.join(env, roles["hostile_meta"] + ".env"))]
    assert meta["detail"]["pickle"] == "meta"
    # Real slimta's own load stops at the corrupt .meta (not an OSError): our corrupt_meta claim.
    assert store["load_error"].startswith("UnpicklingError")
    corrupt = by_check[("corrupt_meta", os.path.join(env, roles["corrupt_meta"] + ".env"))]
    listed = [n for n in os.listdir(env) if n.endswith(".env")]
    position = listed.index(roles["corrupt_meta"] + ".env")
    assert corrupt["detail"]["blocks_later"] == len(listed) - position - 1
    # Real slimta could not record the partial delivery's set of indexes in its list.
    assert store["partial_error"].startswith("TypeError")
    old = by_check[("retention_exceeded", os.path.join(env, roles["old"] + ".env"))]
    assert old["detail"]["age_days"] == 30 and old["detail"]["age_from"] == "arrival"
    # Addresses are pseudonymised in every finding unless revealed (by the runner).
    text = (tmp_path / "audit" / "findings.json").read_text()
    assert "carol@" not in text and old["detail"]["sender"].endswith("@example.com")
    assert old["detail"]["sender"].startswith("u-")
    # What a plan needs is in the finding: the message's files, their sizes and digests.
    old_env = os.path.join(env, roles["old"] + ".env")
    old_meta = os.path.join(store["dirs"]["meta"], roles["old"] + ".meta")
    assert old["detail"]["files"] == [old_env, old_meta]
    assert [(p["name"], p["size"], p["digest"]) for p in old["detail"]["parts"]] == [
        (path, os.path.getsize(path), hashlib.sha256(Path(path).read_bytes()).hexdigest())
        for path in (old_env, old_meta)
    ]


def test_revealed_addresses_and_custom_thresholds(store: dict, tmp_path: Path) -> None:
    args = [*_store_args(store), "--reveal-addresses", "--retry-maximum", "1",
            "--retention", "60d", "--stale-tmp", "3h"]  # fmt: skip
    _, rows = audit(args, tmp_path / "audit")
    checks = {(r["check"], r["subject"]) for r in rows}
    env, roles = store["dirs"]["env"], store["roles"]
    assert ("retry_exhausted", os.path.join(env, roles["retried"] + ".env")) in checks  # 2 > 1
    assert ("retry_exhausted", os.path.join(env, roles["partial"] + ".env")) not in checks  # 1
    assert not any(c == "retention_exceeded" or c == "stale_tmp" for c, _ in checks)


def test_a_missing_directory_is_a_clear_error_and_writes_nothing(tmp_path: Path, capsys) -> None:
    status, rows = audit(["--disk", str(tmp_path / "nope")], tmp_path / "out")
    assert status == 2 and rows == []
    err = capsys.readouterr().err
    assert "no such slimta queue directory" in err and "Traceback" not in err


def _policy(path: Path) -> Path:
    path.write_text(
        "version = 1\n"
        '[[rules]]\nid = "retention"\nkind = "queued_mail"\nolder_than = "7d"\n'
        'legal_basis = "queue retention 7 days"\n'
        '[[rules]]\nid = "leftovers"\nkind = "queue_leftovers"\nolder_than = "30m"\n'
        'legal_basis = "storage hygiene"\n'
        '[[rules]]\nid = "erasure"\nkind = "erase_subject"\n'
        'addresses = ["rose@example.com", "pat@example.com"]\nlegal_basis = "GDPR art. 17"\n'
    )
    return path


def test_a_plan_applied_by_the_purger_removes_exactly_what_it_names(
    tmp_path_factory, slimta_python
) -> None:
    root = tmp_path_factory.mktemp("slimta-disk-purge")
    truth = write_disk_store(root)
    dirs, roles = truth["dirs"], truth["roles"]
    policy = _policy(root / "policy.toml")
    as_of = utc_text(dt.datetime.fromtimestamp(int(truth["now"]) + 60, dt.UTC))
    plan = plan_both_ways(_store_args(truth), policy, root, as_of)
    actions = [json.loads(line) for line in (plan / "actions.jsonl").read_text().splitlines()]

    def env(role: str) -> str:
        return os.path.join(dirs["env"], roles[role] + ".env")

    def meta(role: str) -> str:
        return os.path.join(dirs["meta"], roles[role] + ".meta")

    def tmp(role: str) -> str:
        return os.path.join(dirs["tmp"], roles[role])

    planned = {(a["kind"], tuple(a["target"]["files"]), tuple(a["rules"])) for a in actions}
    kind = "slimta.delete_files"
    assert planned == {
        (kind, (env("old"), meta("old")), ("retention",)),
        (kind, (env("torn_env"), meta("torn_env")), ("leftovers",)),
        (kind, (env("torn_meta"), meta("torn_meta")), ("leftovers",)),
        (kind, (tmp("stale_tmp"),), ("leftovers", "erasure")),
        (kind, (tmp("fresh_tmp"),), ("erasure",)),
    }
    deferred = [json.loads(line) for line in (plan / "deferred.jsonl").read_text().splitlines()]
    # The envelopes that do not decode could not be searched (unreadable_content): deferred
    # under the erasure, never deleted blindly; the hostile one stays evidence.
    assert [(d["target"]["id"], d["rules"], d["reason"].split(":")[0]) for d in deferred] == [
        (roles["hostile_meta"], ["erasure"], "holds an unsafe pickle (unsafe_pickle)"),
        (roles["broken_env"], ["erasure"], "content could not be searched"),
        (roles["hostile_env"], ["erasure"], "holds an unsafe pickle (unsafe_pickle)"),
    ]
    assert deferred[1]["reason"] == (
        "content could not be searched: envelope: the envelope does not decode (corrupt_pickle)"
    )
    # The erasure cites the personal_data findings, the deferral the unsafe pickle too.
    findings = {r["id"]: r for r in json.loads((root / "audit" / "findings.json").read_text())}
    cited = {tuple(a["target"]["files"]): sorted(findings[f]["check"] for f in a["findings"])
             for a in actions}  # fmt: skip
    assert cited[(tmp("stale_tmp"),)] == ["personal_data", "stale_tmp"]
    assert cited[(tmp("fresh_tmp"),)] == ["personal_data"]
    assert cited[(env("old"), meta("old"))] == ["retention_exceeded"]
    assert sorted(findings[f]["check"] for f in deferred[0]["findings"]) == [
        "personal_data", "unsafe_pickle",
    ]  # fmt: skip
    assert "unsafe pickle" in deferred[0]["reason"]
    assert sorted(findings[f]["check"] for f in deferred[1]["findings"]) == ["unreadable_content"]
    assert sorted(findings[f]["check"] for f in deferred[2]["findings"]) == [
        "unreadable_content", "unsafe_pickle",
    ]  # fmt: skip
    plan_text = "".join(p.read_text() for p in plan.iterdir())
    assert "rose@" not in plan_text and "pat@" not in plan_text

    # A dry run changes nothing; an unapproved plan is refused.
    before = _snapshot(truth)
    assert cli.main(["purge", str(plan)]) == 0
    assert _snapshot(truth) == before
    assert cli.main(["purge", str(plan), "--apply"]) == 2
    # slimta retries `old` after the plan: its .meta is rewritten (attempts 1).
    with open(meta("old"), "wb") as handle:
        handle.write(pickle.dumps({"timestamp": truth["now"] + 300, "attempts": 1}, 5))
    before = _snapshot(truth)
    assert cli.main(["approve", str(plan), "--by", "dpo"]) == 0
    assert cli.main(["purge", str(plan), "--apply"]) == 0
    after = _snapshot(truth)
    removed = {env("torn_env"), meta("torn_meta"), tmp("stale_tmp"), tmp("fresh_tmp")}
    assert set(before) - set(after) == removed
    assert all(after[path] == digest for path, digest in before.items() if path not in removed)
    journal = read_journal(plan / "journal.jsonl")
    skipped = [r for r in journal if r["event"] == "skipped"]
    assert len(skipped) == 1 and "changed since the plan" in skipped[0]["reason"]
    # A rerun does nothing more.
    assert cli.main(["purge", str(plan), "--apply"]) == 0
    assert _snapshot(truth) == after
    assert not MARKER.exists()
