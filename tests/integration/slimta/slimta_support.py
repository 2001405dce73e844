"""Real slimta stores for the tests: written by python-slimta 5.0.5 (`datasets/slimta/
slimta_writer.py`, run under the separate slimta runtime), plus what each store must yield.

The writer reports every item's role (``fresh``, ``torn_env``, ...) and its id; the expected
findings below are derived from the roles by the rules in docs/slimta.md, never from a run of the
product, and checked against what real slimta itself does (``load_error``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mqforensics.cli import main
from mqforensics.services.slimta_runtime import run_slimta

WRITER = Path(__file__).resolve().parents[3] / "datasets" / "slimta" / "slimta_writer.py"
MARKER = Path("/tmp/mqforensics-slimta-hostile-payload-ran")


def write_disk_store(root: Path) -> dict:
    """A DiskStorage under `root` (env/, meta/, tmp/) written by real slimta; the writer's
    report with ``dirs`` added."""
    dirs = {name: root / name for name in ("env", "meta", "tmp")}
    for path in dirs.values():
        path.mkdir(parents=True)
    result = run_slimta(WRITER, "disk", dirs["env"], dirs["meta"], dirs["tmp"])
    truth = json.loads(result.stdout)
    truth["dirs"] = {k: str(v) for k, v in dirs.items()}
    return truth


def write_redis_store(redis: dict, prefix: str) -> dict:
    """A RedisStorage under `prefix` on the session's Redis, written by real slimta."""
    env = {"SLIMTA_REDIS_PASSWORD": redis["password"]}
    result = run_slimta(WRITER, "redis", redis["host"], str(redis["port"]), prefix, env=env)
    return json.loads(result.stdout)


def write_envelope_pickles(out: Path) -> dict:
    """Envelope pickles as slimta's cloud storage uploads them."""
    out.mkdir(parents=True, exist_ok=True)
    return json.loads(run_slimta(WRITER, "pickles", out).stdout)


def disk_expected(truth: dict) -> set[tuple[str, str, str]]:
    """(check, severity, subject) of every finding the written DiskStorage must give, with the
    audit's defaults (retry maximum 0, retention 7d, stale tmp 1h)."""
    env, meta, tmp = (truth["dirs"][k] for k in ("env", "meta", "tmp"))
    roles = truth["roles"]

    def env_path(role: str) -> str:
        return os.path.join(env, roles[role] + ".env")

    return {
        ("retention_exceeded", "warning", env_path("old")),
        ("retry_exhausted", "warning", env_path("retried")),
        # Queue's partial delivery: one transient failure counted; its indexes never reach the
        # .meta (slimta's list + set TypeError), so no delivered_indexes finding on disk.
        ("retry_exhausted", "warning", env_path("partial")),
        ("torn_write", "error", env_path("torn_env")),
        ("torn_write", "warning", os.path.join(meta, roles["torn_meta"] + ".meta")),
        ("corrupt_meta", "error", env_path("corrupt_meta")),
        ("unreadable_envelope", "error", env_path("broken_env")),
        ("unsafe_pickle", "critical", env_path("hostile_env")),
        ("unsafe_pickle", "critical", env_path("hostile_meta")),
        ("stale_tmp", "warning", os.path.join(tmp, roles["stale_tmp"])),
    }


def redis_expected(truth: dict, prefix: str) -> set[tuple[str, str, str]]:
    """(check, severity, subject) of every finding the written RedisStorage must give."""
    roles = truth["roles"]

    def key(role: str) -> str:
        return prefix + roles[role]

    queue = prefix + "queue"
    return {
        ("retention_exceeded", "warning", key("old")),
        ("retry_exhausted", "warning", key("retried")),
        ("retry_exhausted", "warning", key("partial")),
        ("delivered_indexes_unreliable", "warning", key("partial")),
        ("torn_write", "warning", key("torn_env")),
        ("torn_write", "warning", key("torn_meta")),
        ("unsafe_pickle", "critical", key("hostile_env")),
        ("corrupt_meta", "error", key("wrong_type")),
        ("dangling_queue_entry", "warning", queue),
        ("unsafe_pickle", "critical", queue),
        ("queue_list_blocks_load", "error", queue),
    }


def audit(args: list[str], out: Path) -> tuple[int, list[dict]]:
    """Run ``mqforensics audit slimta ARGS --out OUT``: exit status and findings.json rows."""
    status = main(["audit", "slimta", *args, "--out", str(out)])
    findings = out / "findings.json"
    rows = json.loads(findings.read_text()) if findings.exists() else []
    return status, rows


def triples(rows: list[dict]) -> set[tuple[str, str, str]]:
    return {(r["check"], r["severity"], r["subject"]) for r in rows}


def plan_both_ways(stores: list[str], policy: Path, root: Path, as_of: str) -> Path:
    """The plan of `policy` made from an audit's findings (``audit slimta --erasure-policy``,
    then ``plan --findings``), checked to equal the one ``plan slimta STORES`` makes (same
    actions and deferrals, byte for byte), every action citing findings of that audit; its
    directory."""
    audit_dir, plan_dir, direct = root / "audit", root / "plan", root / "plan-direct"
    argv = [*stores, "--as-of", as_of]
    assert main(["audit", "slimta", *argv, "--erasure-policy", str(policy),
                 "--out", str(audit_dir)]) in (0, 1)  # fmt: skip
    assert main(["plan", "--findings", str(audit_dir), "--policy", str(policy),
                 "--out", str(plan_dir)]) == 0  # fmt: skip
    assert main(["plan", "slimta", *argv, "--policy", str(policy), "--out", str(direct)]) == 0
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (plan_dir / name).read_bytes() == (direct / name).read_bytes(), name
    ids = {r["id"] for r in json.loads((audit_dir / "findings.json").read_text())}
    for line in (plan_dir / "actions.jsonl").read_text().splitlines():
        cited = json.loads(line)["findings"]
        assert cited and set(cited) <= ids, line
    for line in (plan_dir / "deferred.jsonl").read_text().splitlines():
        assert set(json.loads(line)["findings"]) <= ids, line
    return plan_dir
