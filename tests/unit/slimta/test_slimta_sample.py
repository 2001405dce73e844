"""The bundled slimta sample, written by the real python-slimta 5.0.5, through the one audit
runner with no server and no slimta: exactly the planted findings, no pickle ever run, inputs
checked before Spark starts, an empty store refused, and an erasure from audit to purge."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.cli import main
from mqforensics.retention.manifest import read_plan
from mqforensics.systems.slimta.options import SlimtaOptions
from mqforensics.systems.slimta.sample import expected_findings, materialize
from mqforensics.units import utc_text
from tests.integration.slimta.slimta_support import MARKER, disk_expected

REPO = Path(__file__).resolve().parents[3]
POLICY = """version = 1
[[rules]]
id = "retention"
kind = "queued_mail"
older_than = "7d"
legal_basis = "queue retention 7 days"
[[rules]]
id = "leftovers"
kind = "queue_leftovers"
older_than = "1h"
legal_basis = "storage hygiene"
[[rules]]
id = "erasure"
kind = "erase_subject"
addresses = ["Rose@example.com ", "pat@example.com"]
legal_basis = "GDPR art. 17"
"""


@pytest.fixture
def sample(tmp_path: Path) -> dict:
    """A copy of the sample; its layout, roles, judging instant and source arguments."""
    MARKER.unlink(missing_ok=True)
    copy = materialize(tmp_path / "sample")
    layout = copy.layout
    truth = dict(copy.truth)
    truth["dirs"] = {"env": layout.env_dir, "meta": layout.meta_dir, "tmp": layout.tmp_dir}
    truth["argv"] = ["--disk", layout.env_dir, "--meta-dir", layout.meta_dir,
                     "--tmp-dir", str(layout.tmp_dir)]  # fmt: skip
    truth["as_of"] = utc_text(copy.as_of)
    truth["copy"] = copy
    return truth


def _files(dirs: dict[str, str]) -> set[str]:
    return {os.path.join(d, n) for d in dirs.values() for n in os.listdir(d)}


def test_the_bundled_sample_gives_exactly_its_planted_findings(
    spark, sample: dict, tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    assert main(["audit", "slimta", *sample["argv"], "--as-of", sample["as_of"],
                 "--out", str(out)]) == 1  # fmt: skip
    rows = json.loads((out / "findings.json").read_text())
    assert {(r["check"], r["severity"], r["subject"]) for r in rows} == disk_expected(sample)
    # The ground truth `demo --system slimta` compares with says the same, store included.
    planted = expected_findings(sample["copy"])
    assert {(f["check"], f["severity"], f["queue"], f["subject"]) for f in planted} == {
        (r["check"], r["severity"], r["queue"], r["subject"]) for r in rows
    }
    assert not MARKER.exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["system"] == "slimta" and manifest["as_of"] == sample["as_of"]
    assert manifest["objects"] == 13  # 11 messages, 2 tmp files
    assert manifest["plan_inputs"]["disk"] == {
        "env_dir": sample["dirs"]["env"], "meta_dir": sample["dirs"]["meta"],
        "tmp_dir": sample["dirs"]["tmp"],
    }  # fmt: skip
    assert manifest["subjects_searched"] == [] and "personal_data" in manifest["checks"]
    # What real slimta did with this store when it was written.
    assert sample["load_error"].startswith("UnpicklingError")
    assert sample["partial_error"].startswith("TypeError")
    # Addresses are pseudonymised by the runner; findings.raw.json keeps them, owner-only.
    old = next(r for r in rows if r["check"] == "retention_exceeded")
    assert old["detail"]["sender"].startswith("u-")
    raw = json.loads((out / "findings.raw.json").read_text())
    assert (
        next(r for r in raw if r["id"] == old["id"])["detail"]["sender"] != old["detail"]["sender"]
    )
    assert (out / "findings.raw.json").stat().st_mode & 0o077 == 0


def test_the_spec_sample_is_what_notebooks_and_the_demo_audit(tmp_path: Path) -> None:
    bundled = systems.get("slimta").sample(tmp_path)
    store = (tmp_path / "store").resolve()
    assert bundled.options == SlimtaOptions(
        disk=store / "env", meta_dir=store / "meta", tmp_dir=store / "tmp"
    )
    assert bundled.policy == REPO / "datasets" / "slimta" / "sample" / "policy.toml"
    assert bundled.ground_truth == tmp_path / "ground_truth.json"
    truth = json.loads(bundled.ground_truth.read_text())["findings"]
    assert len(truth) == 10 and all(f["queue"] == str(store / "env") for f in truth)
    # A second call starts from a fresh copy (a purge of the first may have removed files).
    (store / "env" / "stray.env").write_bytes(b"x")
    systems.get("slimta").sample(tmp_path)
    assert not (store / "env" / "stray.env").exists()


def test_an_erasure_from_audit_to_purge(spark, sample: dict, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    audit = tmp_path / "audit"
    argv = [*sample["argv"], "--as-of", sample["as_of"]]
    assert main(["audit", "slimta", *argv, "--erasure-policy", str(policy),
                 "--out", str(audit)]) == 1  # fmt: skip
    rows = json.loads((audit / "findings.json").read_text())
    roles, dirs = sample["roles"], sample["dirs"]
    held = {r["subject"]: r for r in rows if r["check"] == "personal_data"}
    assert set(held) == {
        os.path.join(dirs["tmp"], roles["stale_tmp"]),
        os.path.join(dirs["tmp"], roles["fresh_tmp"]),
        os.path.join(dirs["env"], roles["hostile_meta"] + ".env"),
    }
    assert all(r["severity"] == "info" and len(r["detail"]["subjects"]) == 1 for r in held.values())
    text = "".join((audit / name).read_text() for name in ("findings.json", "manifest.json"))
    assert "rose@" not in text.lower() and "pat@" not in text
    from mqforensics.retention.policy import subject_hash

    assert subject_hash("rose@example.com") not in text  # keyed, not the policy's hash

    plan_dir = tmp_path / "plan"
    assert main(["plan", "--findings", str(audit), "--policy", str(policy),
                 "--out", str(plan_dir)]) == 0  # fmt: skip
    plan = read_plan(plan_dir)
    by_id = {r["id"]: r for r in rows}

    def env(role: str) -> str:
        return os.path.join(dirs["env"], roles[role] + ".env")

    def meta(role: str) -> str:
        return os.path.join(dirs["meta"], roles[role] + ".meta")

    def tmp(role: str) -> str:
        return os.path.join(dirs["tmp"], roles[role])

    planned = {
        (tuple(a.target["files"]), a.rules, tuple(sorted(by_id[f]["check"] for f in a.findings)))
        for a in plan.actions()
    }
    assert planned == {
        ((env("old"), meta("old")), ("retention",), ("retention_exceeded",)),
        ((env("torn_env"), meta("torn_env")), ("leftovers",), ("torn_write",)),
        ((env("torn_meta"), meta("torn_meta")), ("leftovers",), ("torn_write",)),
        ((tmp("stale_tmp"),), ("leftovers", "erasure"), ("personal_data", "stale_tmp")),
        ((tmp("fresh_tmp"),), ("erasure",), ("personal_data",)),
    }
    for action in plan.actions():
        assert all(ident in by_id and by_id[ident]["subject"] in (action.target["files"])
                   for ident in action.findings)  # fmt: skip
    # The envelopes that do not decode could not be searched: deferred under the erasure,
    # citing their unreadable_content findings (and the unsafe pickle of the hostile one).
    deferred, broken, hostile = plan.deferred()
    assert deferred.target["id"] == roles["hostile_meta"] and deferred.rules == ("erasure",)
    assert sorted(by_id[f]["check"] for f in deferred.findings) == ["personal_data",
                                                                    "unsafe_pickle"]  # fmt: skip
    assert (broken.target["id"], broken.rules, broken.reason) == (
        roles["broken_env"], ("erasure",),
        "content could not be searched: envelope: the envelope does not decode (corrupt_pickle)",
    )  # fmt: skip
    assert [by_id[f]["check"] for f in broken.findings] == ["unreadable_content"]
    assert (hostile.target["id"], hostile.rules) == (roles["hostile_env"], ("erasure",))
    assert sorted(by_id[f]["check"] for f in hostile.findings) == ["unreadable_content",
                                                                   "unsafe_pickle"]  # fmt: skip
    assert "unsafe pickle" in hostile.reason

    # `plan slimta SOURCE` audits (into PLAN.audit) and plans through the same code.
    again = tmp_path / "again"
    assert main(["plan", "slimta", *argv, "--policy", str(policy), "--out", str(again)]) == 0
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (again / name).read_bytes() == (plan_dir / name).read_bytes()

    before = _files(dirs)
    assert main(["approve", str(plan_dir), "--by", "dpo"]) == 0
    assert main(["purge", str(plan_dir), "--apply"]) == 0
    removed = {env("old"), meta("old"), env("torn_env"), meta("torn_meta"), tmp("stale_tmp"),
               tmp("fresh_tmp")}  # fmt: skip
    assert before - _files(dirs) == removed and _files(dirs) <= before
    assert os.path.exists(env("hostile_meta")) and not MARKER.exists()


def test_an_audit_for_another_erasure_is_refused(
    spark, sample: dict, tmp_path: Path, capsys
) -> None:
    """An erase_subject rule the audit did not search for cannot be planned from it."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    audit = tmp_path / "audit"
    assert main(["audit", "slimta", *sample["argv"], "--out", str(audit)]) == 1
    argv = ["plan", "--findings", str(audit), "--policy", str(policy), "--out", str(tmp_path / "p")]
    capsys.readouterr()
    assert main(argv) == 2
    assert "did not look for the data subjects of rule 'erasure'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_an_empty_store_is_nothing_to_audit(spark, tmp_path: Path, capsys) -> None:
    for name in ("env", "meta", "tmp"):
        (tmp_path / name).mkdir()
    argv = ["--disk", str(tmp_path / "env"), "--meta-dir", str(tmp_path / "meta"),
            "--tmp-dir", str(tmp_path / "tmp")]  # fmt: skip
    assert main(["audit", "slimta", *argv, "--out", str(tmp_path / "audit")]) == 2
    err = capsys.readouterr().err
    assert f"nothing to audit: disk {tmp_path / 'env'} holds nothing slimta keeps" in err
    assert not (tmp_path / "audit" / "findings.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--disk", "{missing}"], "no such slimta queue directory"),
        (["--disk", "{file}"], "no such slimta queue directory"),
        (["--disk", "{dir}", "--meta-dir", "{missing}"], "no such slimta queue directory"),
        (["--meta-dir", "{dir}"], "--meta-dir and --tmp-dir describe a --disk store"),
        ([], "name at least one store"),
        (["--s3", "s3://q/p", "--sqs-export", "{missing}"], "no such SQS export file"),
        (["--disk", "{dir}", "--sqs-export", "{file}"], "--sqs-export needs --s3"),
        (["--redis", "http://host"], "--redis must look like redis://HOST[:PORT][/DB]"),
    ],
)
def test_bad_inputs_fail_before_spark_starts(
    tmp_path: Path, capsys, monkeypatch, argv: list[str], message: str
) -> None:
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    paths = {"missing": tmp_path / "missing", "file": tmp_path / "file", "dir": tmp_path / "dir"}
    args = [a.format(**paths) for a in argv]
    for command in ("audit", "validate"):
        assert main([command, "slimta", *args, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert not (tmp_path / "out" / "findings.json").exists()
