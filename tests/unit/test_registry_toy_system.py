"""A system defined in tests/ goes through audit -> plan -> approve -> purge -> report through
the registry alone: no shared module names it."""

import json

import pytest

from mqforensics import systems
from mqforensics.cli import main
from mqforensics.retention.manifest import read_plan
from tests import toy_system

AS_OF = "2026-11-20T00:00:00Z"
MESSAGES = {
    "old.msg": ("alice@example.org", ["bob@example.org"], "2026-11-01T00:00:00Z"),
    "erased.msg": ("carol@example.org", ["victor@example.com"], "2026-11-19T00:00:00Z"),
    "kept.msg": ("dave@example.org", ["erin@example.org"], "2026-11-19T00:00:00Z"),
}
POLICY = """version = 1
[[rules]]
id = "old-mail"
kind = "toy_retention"
legal_basis = "retention schedule"
older_than = "7d"
[[rules]]
id = "erasure-1"
kind = "erase_subject"
legal_basis = "GDPR art. 17"
addresses = ["Victor@example.com "]
"""


@pytest.fixture
def toy(tmp_path):
    systems.register(toy_system.SPEC)
    queue = tmp_path / "queue"
    queue.mkdir()
    for name, (sender, recipients, arrived) in MESSAGES.items():
        document = {"from": sender, "to": recipients, "arrived": arrived}
        (queue / name).write_text(json.dumps(document))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    yield queue, policy
    systems.unregister("toy")


def test_a_system_from_tests_goes_through_every_command(spark, tmp_path, toy, capsys):
    queue, policy = toy
    audit = tmp_path / "audit"
    argv = ["audit", "toy", str(queue), "--out", str(audit), "--as-of", AS_OF]
    assert main([*argv, "--erasure-policy", str(policy)]) == 0
    findings = json.loads((audit / "findings.json").read_text())
    assert sorted((f["check"], f["subject"].rsplit("/", 1)[1]) for f in findings) == [
        ("old_message", "old.msg"),
        ("personal_data", "erased.msg"),
    ]
    text = (audit / "findings.json").read_text()
    assert "victor" not in text.lower() and "carol@" not in text  # keyed, pseudonymised
    manifest = json.loads((audit / "manifest.json").read_text())
    assert manifest["system"] == "toy" and manifest["as_of"] == AS_OF
    assert manifest["checks"] == ["old_message", "personal_data"]

    plan_dir = tmp_path / "plan"
    assert main(["plan", "--findings", str(audit), "--policy", str(policy),
                 "--out", str(plan_dir)]) == 0  # fmt: skip
    plan = read_plan(plan_dir)
    ids = {f["id"]: f["check"] for f in findings}
    actions = list(plan.actions())
    assert sorted(a.target["path"].rsplit("/", 1)[1] for a in actions) == ["erased.msg", "old.msg"]
    for action in actions:
        assert action.findings and all(ident in ids for ident in action.findings)

    # The same plan from `plan toy SOURCE`, which audits first through the same code.
    again = tmp_path / "again"
    assert main(["plan", "toy", str(queue), "--as-of", AS_OF, "--policy", str(policy),
                 "--out", str(again)]) == 0  # fmt: skip
    assert (again / "actions.jsonl").read_bytes() == (plan_dir / "actions.jsonl").read_bytes()

    assert main(["approve", str(plan_dir), "--by", "tester"]) == 0
    assert main(["purge", str(plan_dir), "--apply"]) == 0
    assert sorted(p.name for p in queue.iterdir()) == ["kept.msg"]
    assert main(["report", "plan", str(plan_dir)]) == 0
    report = (plan_dir / "report.html").read_text()
    assert "toy.delete_message" in report and "victor" not in report.lower()


def test_nothing_to_audit_is_an_input_error(spark, tmp_path, toy, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["audit", "toy", str(empty), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mqforensics: error: InputError: nothing to audit: toy queue {empty} "
                   "holds nothing toy keeps"]  # fmt: skip
    assert not (tmp_path / "a" / "findings.json").exists()


def test_a_missing_input_fails_before_spark_starts(tmp_path, toy, capsys, monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))
    assert main(["audit", "toy", str(tmp_path / "missing"), "--out", str(tmp_path / "a")]) == 2
    assert "no such directory" in capsys.readouterr().err
    out_file = tmp_path / "file"
    out_file.write_text("x")
    assert main(["audit", "toy", str(tmp_path), "--out", str(out_file)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_an_old_audit_is_refused(spark, tmp_path, toy, capsys):
    queue, policy = toy
    audit = tmp_path / "audit"
    assert main(["audit", "toy", str(queue), "--out", str(audit), "--as-of", AS_OF]) == 0
    manifest_path = audit / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["created_at"] = "2026-01-01T00:00:00Z"
    manifest_path.write_text(json.dumps(manifest))
    argv = ["plan", "--findings", str(audit), "--policy", str(policy), "--out", str(tmp_path / "p")]
    assert main(argv) == 2
    assert "more than --max-audit-age 1d ago" in capsys.readouterr().err
    # And an erasure the audit did not look for is refused rather than silently missed.
    manifest["created_at"] = json.loads(manifest_path.read_text())["created_at"]
    assert main([*argv, "--max-audit-age", "9999d"]) == 2
    assert "did not look for the data subjects of rule 'erasure-1'" in capsys.readouterr().err


def test_the_manifest_says_what_was_read_and_how(spark, tmp_path, toy):
    queue, _policy = toy
    audit = tmp_path / "audit"
    argv = ["audit", "toy", str(queue), "--out", str(audit), "--as-of", AS_OF, "--max-age", "2d"]
    assert main(argv) == 0
    manifest = json.loads((audit / "manifest.json").read_text())
    assert manifest["format"] == "mqforensics-audit/1"
    assert manifest["tool"]["name"] == "mqforensics" and manifest["tool"]["version"]
    assert manifest["options"]["max_age"] == "2d"
    assert manifest["options"]["directory"] == str(queue)
    assert manifest["objects"] == 3 and manifest["findings"]["count"] == 1
    assert manifest["inputs"] == [{"kind": "directory", "location": str(queue)}]
    assert manifest["subjects_searched"] == []
    assert (audit / "subject.key").stat().st_mode & 0o077 == 0


def test_plan_names_what_it_needs(tmp_path, toy, capsys):
    _queue, policy = toy
    out = str(tmp_path / "p")
    assert main(["plan", "--policy", str(policy), "--out", out]) == 2
    assert "name an audit (--findings AUDIT_DIR) or a system" in capsys.readouterr().err
    assert main(["plan", "--findings", str(tmp_path), "--out", out]) == 2
    assert "--policy FILE is required" in capsys.readouterr().err
    assert main(["plan", "--findings", str(tmp_path), "--policy", str(policy), "--out", out]) == 2
    assert "manifest.json does not exist: not an audit directory" in capsys.readouterr().err


def test_purge_refuses_an_option_of_another_system(spark, tmp_path, toy, capsys):
    queue, policy = toy
    audit, plan_dir = tmp_path / "audit", tmp_path / "plan"
    assert main(["audit", "toy", str(queue), "--out", str(audit), "--as-of", AS_OF]) == 0
    policy.write_text(POLICY.split('[[rules]]\nid = "erasure-1"')[0])
    assert (
        main(["plan", "--findings", str(audit), "--policy", str(policy), "--out", str(plan_dir)])
        == 0
    )
    capsys.readouterr()
    assert main(["purge", str(plan_dir), "--imap", "127.0.0.1:143"]) == 2
    err = capsys.readouterr().err
    assert "--imap is for cyrus plans; this plan is a toy plan" in err
    assert sorted(p.name for p in queue.iterdir()) == sorted(MESSAGES)


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "toy", "{queue}", "--mirror", "auditor@127.0.0.1:9", "--out", "{out}"],
        ["audit", "toy", "{queue}", "--mirror=auditor:pw@127.0.0.1", "--out", "{out}"],
        ["purge", "{out}", "--toy-server", "auditor@127.0.0.1:9"],
    ],
)
def test_a_login_on_a_system_option_names_the_systems_variables(tmp_path, toy, capsys, argv):
    # The system declares where its options' logins come from; the shared parser refuses a
    # login written in them (a bare user@ too: they are host specs) and names those variables.
    queue, _ = toy
    out = tmp_path / "out"
    argv = [a.replace("{queue}", str(queue)).replace("{out}", str(out)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "credentials on the command line are refused" in err, err
    assert "set MQF_TOY_USERNAME and MQF_TOY_PASSWORD instead" in err, err
    assert "auditor" not in err and ":pw@" not in err
    assert not out.exists()


def test_progress_names_each_step_on_stderr_only_and_quiet_silences_it(
    spark, tmp_path, toy, capsys, monkeypatch
):
    queue, _ = toy
    monkeypatch.setenv("MQF_PROGRESS", "1")  # as on a terminal
    assert main(["audit", "toy", str(queue), "--out", str(tmp_path / "a"), "--as-of", AS_OF]) == 0
    shown = capsys.readouterr()
    for step in (
        "starting Spark", "reading the store", "preparing the checks",
        "running check 1 of 2: old_message",
    ):  # fmt: skip
        assert f"audit toy: {step}\n" in shown.err, shown.err
    assert "audit toy:" not in shown.out
    argv = ["--quiet", "audit", "toy", str(queue), "--out", str(tmp_path / "b"), "--as-of", AS_OF]
    assert main(argv) == 0
    quiet = capsys.readouterr()
    assert "audit toy:" not in quiet.err and quiet.err.strip() == ""
