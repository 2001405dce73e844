"""Cyrus through the registry: `audit cyrus`, `validate cyrus`, `plan --findings` and `plan
cyrus` on the bundled sample (datasets/cyrus/sample/ANOMALIES.md), inputs refused before Spark,
and the spec's hooks."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.cli import main
from mqforensics.options import fields_of
from mqforensics.privacy import pseudonymize_address as token
from mqforensics.spec import AuditArgs
from mqforensics.systems.cyrus import database, personal
from mqforensics.systems.cyrus.options import CyrusOptions, PurgeOptions, Settings, cyrus_version
from mqforensics.systems.cyrus.plan import DELETE_ACL, RACL_ADD, RACL_REMOVE
from tests.unit.cyrus.cyrus_findings import KEY, keyed_subject, personal_rows

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "datasets" / "cyrus" / "sample"
B1 = SAMPLE / "backend1" / "mailboxes.db"
B2 = SAMPLE / "backend2" / "mailboxes.show"
POLICY = SAMPLE / "policy.toml"
DATA = REPO / "tests" / "data" / "cyrus"
AS_OF = "2026-11-20T00:00:00Z"
SOURCE = [str(B1), str(B2), "--default-domain", "example.org", "--as-of", AS_OF]


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


def _error(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_the_spec_is_registered_with_its_hooks() -> None:
    spec = systems.get("cyrus")
    assert [c.name for c in spec.checks] == [
        "integrity", "undecodable_record", "unreclaimed_history", "racl_marker", "racl_missing",
        "racl_stale", "racl_forbidden", "dangling_acl_identifier", "noncanonical_acl_identifier",
        "cross_domain_share", "anyone_share", "personal_data",
    ]  # fmt: skip
    assert [k.name for k in spec.rule_kinds] == ["racl_repair"]
    assert spec.options is CyrusOptions and spec.purge_options is PurgeOptions
    assert [o.name for o in fields_of(spec.purge_options)] == [
        "imap", "imap_ssl", "cyrus_config", "cyrus_tools", "cyrus_user",
    ]  # fmt: skip
    sample = spec.sample(Path("/nowhere"))
    assert isinstance(sample.options, CyrusOptions)
    assert sample.policy == POLICY and sample.options.inputs == [B1, B2]
    assert sample.options.default_domain == "example.org"
    assert all(Path(p).exists() for p in sample.options.inputs)
    assert spec.views.SharingExplorer.__name__ == "SharingExplorer"


def test_audit_of_the_sample(spark, tmp_path) -> None:
    out = tmp_path / "audit"
    argv = ["audit", "cyrus", *SOURCE, "--erasure-policy", str(POLICY), "--out", str(out)]
    assert main(argv) == 1  # racl_missing is an error
    rows = json.loads((out / "findings.json").read_text())
    per_file = Counter(
        (r["check"], r["severity"], Path(r["detail"]["file"]).parent.name) for r in rows
    )
    assert per_file == {
        ("racl_missing", "error", "backend2"): 1,
        ("racl_stale", "warning", "backend2"): 1,
        ("anyone_share", "info", "backend1"): 2,
        ("anyone_share", "info", "backend2"): 2,
        ("cross_domain_share", "info", "backend1"): 1,
        ("cross_domain_share", "info", "backend2"): 1,
        ("dangling_acl_identifier", "warning", "backend1"): 3,
        ("dangling_acl_identifier", "warning", "backend2"): 3,
        ("unreclaimed_history", "info", "backend1"): 1,
        # frank@example.com, the erasure request's subject, holds a grant on eve's mailbox.
        ("personal_data", "info", "backend1"): 1,
        ("personal_data", "info", "backend2"): 1,
    }
    # Pseudonymised identifiers and mailbox names, RACL keys rebuilt from them, no exact key.
    bob, alice, zoe = token("bob"), token("alice"), token("zoe")
    racl = sorted((r["check"], r["subject"]) for r in rows if r["check"].startswith("racl"))
    assert racl == [
        ("racl_missing", f"AU\\x1e{bob}\\x1euser\\x1f{alice}"),
        ("racl_stale", f"AU\\x1e{zoe}\\x1eshared\\x1fteam"),
    ]
    frank, eve = token("frank@example.com"), token("eve@example.com").partition("@")[0]
    held = [r for r in rows if r["check"] == "personal_data"]
    assert {r["subject"] for r in held} == {f"example.com!user.{eve} {frank}"}
    assert held[0]["detail"]["subjects"] == [keyed_of(out, "frank@example.com")]
    text = (out / "findings.json").read_text()
    assert "key_hex" not in text and "frank" not in text and "x1falice" not in text
    # The raw findings keep the exact keys a plan acts on, readable by the owner only.
    raw = json.loads((out / "findings.raw.json").read_text())
    assert [r["id"] for r in raw] == [r["id"] for r in rows]
    missing = next(r for r in raw if r["check"] == "racl_missing")
    assert missing["subject"] == "AU\\x1ebob\\x1euser\\x1falice"
    assert bytes.fromhex(missing["detail"]["key_hex"]) == b"AU\x1ebob\x1euser\x1falice"
    assert (out / "findings.raw.json").stat().st_mode & 0o077 == 0
    # sharing.json, pseudonymised the same way.
    sharing = json.loads((out / "sharing.json").read_text())
    assert {r["file"] for r in sharing} == {str(B1), str(B2)}
    assert "alice" not in json.dumps(sharing)
    assert any(r["owner"] == alice for r in sharing)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["objects"] == 50 and manifest["as_of"] == AS_OF
    assert [(i["location"], i["format"], i["records"]) for i in manifest["inputs"]] == [
        (str(B1), "twoskip", 25), (str(B2), "show", 25),
    ]  # fmt: skip
    assert manifest["inputs"][0]["fingerprint"].startswith("sha256:")
    assert manifest["plan_inputs"] == {
        "sources": [str(B1), str(B2)],
        "version": "3.6",
        "admins": ["cyrus"],
        "default_domain": "example.org",
    }


def keyed_of(audit_dir: Path, address: str) -> str:
    from mqforensics import subjects

    return keyed_subject(address, subjects.read_key(audit_dir))


def test_revealed_findings_are_exact(spark, tmp_path) -> None:
    out = tmp_path / "audit"
    assert main(["audit", "cyrus", *SOURCE, "--reveal-addresses", "--out", str(out)]) == 1
    rows = json.loads((out / "findings.json").read_text())
    assert json.loads((out / "findings.raw.json").read_text()) == rows
    assert ("racl_missing", "AU\\x1ebob\\x1euser\\x1falice") in {
        (r["check"], r["subject"]) for r in rows
    }
    assert not any(r["check"] == "personal_data" for r in rows)  # no subject searched


def test_plan_from_findings_equals_plan_of_the_source(spark, tmp_path) -> None:
    audit_dir, from_findings, direct = tmp_path / "audit", tmp_path / "p1", tmp_path / "p2"
    argv = ["audit", "cyrus", *SOURCE, "--erasure-policy", str(POLICY), "--out", str(audit_dir)]
    assert main(argv) == 1
    plan = ["--policy", str(POLICY), "--out"]
    assert main(["plan", "--findings", str(audit_dir), *plan, str(from_findings)]) == 0
    assert main(["plan", "cyrus", *SOURCE, *plan, str(direct)]) == 0
    for name in ("actions.jsonl", "deferred.jsonl"):
        assert (from_findings / name).read_bytes() == (direct / name).read_bytes()
    findings = {r["id"]: r for r in json.loads((audit_dir / "findings.json").read_text())}
    actions = [
        json.loads(line) for line in (from_findings / "actions.jsonl").read_text().splitlines()
    ]
    assert [(a["kind"], [findings[i]["check"] for i in a["findings"]]) for a in actions] == [
        (RACL_REMOVE, ["racl_stale"]),
        (RACL_ADD, ["racl_missing"]),
        (DELETE_ACL, ["personal_data", "personal_data"]),  # one entry, found in both backends
    ]
    assert [a["target"] for a in actions] == [
        {"file": str(B2), "key_hex": b"AU\x1ezoe\x1eshared\x1fteam".hex()},
        {"file": str(B2), "key_hex": b"AU\x1ebob\x1euser\x1falice".hex()},
        {"mailbox": "example.com!user.eve", "identifier": "frank@example.com"},
    ]
    assert actions[2]["precondition"] == {"rights": "lrs"}
    header = json.loads((from_findings / "plan.json").read_text())
    assert header["inputs"]["version"] == "3.6" and header["inputs"]["admins"] == ["cyrus"]
    assert header["inputs"]["sources"] == [str(B1), str(B2)]


def test_personal_data_in_spark_equals_the_acl_entries_holding_the_subject(spark) -> None:
    from mqforensics.systems.cyrus import fleet

    frames = fleet.read_fleet(spark, [B1], admins=["cyrus"], default_domain="example.org")
    wanted = frozenset({keyed_subject("bob@example.org"), keyed_subject("nobody@example.org")})
    common = AuditArgs(Path("."), None, False, subjects=wanted, subject_key=KEY)
    settings = Settings(None, "3.6", ("cyrus",), "example.org", common)  # type: ignore[arg-type]
    found = [
        (r.subject, json.loads(r.detail))
        for r in personal.personal_data(frames, settings).collect()
    ]
    expected = personal_rows(
        database.read_database(B1),
        ["bob@example.org", "nobody@example.org"],
        ["cyrus"],
        "example.org",
    )
    assert sorted(found, key=str) == sorted(
        ((r["subject"], r["detail"]) for r in expected), key=str
    )
    assert len(found) == 9  # bob's 4 grants (1 in a tombstone), 5 entries of his mailboxes
    nothing = AuditArgs(Path("."), None, False)
    settings = Settings(None, "3.6", ("cyrus",), "example.org", nothing)  # type: ignore[arg-type]
    assert personal.personal_data(frames, settings).count() == 0


def test_an_unknown_version_is_refused_in_one_line(tmp_path, capsys, no_spark) -> None:
    for command in (
        ["audit", "cyrus"],
        ["validate", "cyrus"],
        ["plan", "cyrus", "--policy", str(POLICY)],
    ):
        argv = [*command, str(B1), "--version", "9.9", "--out", str(tmp_path / "o")]
        assert main(argv) == 2
        assert _error(capsys) == [
            "mqforensics: error: ConfigError: --version '9.9': not a Cyrus version whose RACL "
            "rule the checks know (known: 3.0, 3.1, 3.2, 3.3, 3.4, 3.5, 3.6, 3.7, 3.8, 3.9, "
            "3.10, 3.11, 3.12, with an optional patch level such as 3.4.2)"
        ]
    assert cyrus_version("3.4.2") == "3.4.2"


def test_bad_inputs_are_refused_before_spark(tmp_path, capsys, no_spark) -> None:
    out = str(tmp_path / "o")
    assert main(["audit", "cyrus", str(B1), str(tmp_path), "--out", out]) == 2
    assert _error(capsys) == [
        f"mqforensics: error: InputError: {tmp_path}: is a directory, not a mailboxes.db or a dump"
    ]
    assert main(["validate", "cyrus", str(tmp_path / "gone.db"), "--out", out]) == 2
    assert _error(capsys) == [
        f"mqforensics: error: InputError: {tmp_path / 'gone.db'}: no such file"
    ]
    assert main(["plan", "cyrus", str(B1), str(B1), "--policy", str(POLICY), "--out", out]) == 2
    assert _error(capsys) == [f"mqforensics: error: ConfigError: {B1} is given twice"]
    # Text that is no dump the reader knows: its whole content read for a tab, still no Spark.
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"no tabs here\n" * 1000)
    assert main(["validate", "cyrus", str(B1), str(junk), "--out", out]) == 2
    assert _error(capsys) == [
        f"mqforensics: error: InputError: {junk}: neither a twoskip/skiplist file nor a show, "
        "flat or ctl_mboxlist dump"
    ]
    assert not (tmp_path / "o").exists()


def test_a_database_without_records_is_nothing_to_audit(spark, tmp_path, capsys) -> None:
    empty = tmp_path / "empty.show"
    empty.write_bytes(b"")
    assert main(["audit", "cyrus", str(empty), "--out", str(tmp_path / "a")]) == 2
    assert _error(capsys)[-1] == (
        f"mqforensics: error: InputError: nothing to audit: {empty} holds nothing cyrus keeps"
    )
    assert not (tmp_path / "a" / "findings.json").exists()


def _validate(tmp_path: Path, *inputs: Path) -> tuple[int, dict]:
    out = tmp_path / "quality"
    shutil.rmtree(out, ignore_errors=True)
    code = main(["validate", "cyrus", *map(str, inputs), "--out", str(out)])
    path = out / "quality.json"
    return code, json.loads(path.read_text()) if path.exists() else {}


def _failed(report: dict) -> set[tuple[str, str, str]]:
    return {
        (s["suite"], e["expectation"], e["target"])
        for s in report["suites"]
        for e in s["expectations"]
        if not e["success"]
    }


def test_validate_passes_on_the_sample_and_fails_on_planted_defects(spark, tmp_path) -> None:
    code, report = _validate(tmp_path, B1, B2)
    assert code == 0 and report["success"]
    assert sorted(s["suite"] for s in report["suites"]) == [
        "cyrus_acl",
        "cyrus_files",
        "cyrus_records",
    ]

    # A truncated copy (read with an integrity problem), a dump listing a key twice, and an
    # ACL entry with a right Cyrus does not have.
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(B1.read_bytes()[:3000])
    show = B2.read_bytes()
    assert b"AS\x1e\t\n" in show and b"anyone lrs" in show
    doubled = tmp_path / "doubled.show"
    doubled.write_bytes(show + b"AS\x1e\t\n")
    bad_rights = tmp_path / "rights.show"
    bad_rights.write_bytes(show.replace(b"anyone lrs", b"anyone lrZ"))
    code, report = _validate(tmp_path, truncated, doubled, bad_rights)
    assert code == 1 and not report["success"]
    assert _failed(report) == {
        ("cyrus_files", "expect_column_values_to_be_in_set", "complete"),
        ("cyrus_records", "expect_compound_columns_to_be_unique", "file, key"),
        ("cyrus_acl", "expect_column_values_to_match_regex", "rights"),
    }


def test_validate_of_an_unreadable_input_is_exit_2_not_a_failed_expectation(
    spark, tmp_path, capsys
) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"no tabs here\n")
    code, report = _validate(tmp_path, B1, junk)
    assert code == 2 and report == {}
    assert _error(capsys)[-1] == (
        f"mqforensics: error: InputError: {junk}: neither a twoskip/skiplist file nor a show, "
        "flat or ctl_mboxlist dump"
    )
