"""``mqforensics sample``: the bundled samples made ready and the command that audits each; a
sample audited where git keeps it, without the modes and times its checks read, is refused in
one line before Spark starts."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from mqforensics.cli import main

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_spark(monkeypatch):
    """Starting Spark fails the test: what is checked here needs none."""

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr("mqforensics.spark.session", refuse)


@pytest.mark.parametrize(
    ("argv", "lost"),
    [
        (["postfix", "--queue-dir", "datasets/postfix/sample/queue"], "its file modes and times"),
        (["postfix", "--queue-dir", "mx1=datasets/postfix/sample/queue"],
         "its file modes and times"),
        (["slimta", "--disk", "datasets/slimta/sample/env"], "its files' modification times"),
        (["slimta", "--disk", "elsewhere", "--tmp-dir", "datasets/slimta/sample/tmp"],
         "its files' modification times"),
    ],
)  # fmt: skip
def test_a_checkout_sample_without_what_git_lost_is_refused_naming_the_sample_command(
    argv, lost, no_spark, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(CHECKOUT)
    (tmp_path / "elsewhere").mkdir()
    argv = [str(tmp_path / a) if a == "elsewhere" else a for a in argv]
    out = tmp_path / "audit"
    assert main(["--quiet", "audit", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    system = argv[0]
    assert len(err) == 1
    assert f"the bundled {system} sample as git keeps it, without {lost}" in err[0]
    assert f"`mqforensics sample {system} --out DIR` writes a copy to audit" in err[0]
    assert not out.exists()


def test_the_sample_command_prints_the_audit_of_a_sample_that_needs_nothing_put_back(
    no_spark, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(CHECKOUT)
    assert main(["sample", "cyrus", "--out", str(tmp_path / "c")]) == 0
    printed = shlex.split(capsys.readouterr().out)
    assert printed == [
        "mqforensics", "audit", "cyrus", "datasets/cyrus/sample/backend1/mailboxes.db",
        "datasets/cyrus/sample/backend2/mailboxes.show", "--default-domain", "example.org",
        "--out", str(tmp_path / "c" / "audit"),
        "--erasure-policy", "datasets/cyrus/sample/policy.toml",
    ]  # fmt: skip


def test_the_sample_command_puts_back_what_git_does_not_keep(no_spark, tmp_path, capsys):
    """The Postfix copy has its ready files at 0700 and its dead writer's file at 0600, with
    the recorded modification times, as the sample's files.json says."""
    import json

    assert main(["sample", "postfix", "--out", str(tmp_path)]) == 0
    recorded = json.loads((CHECKOUT / "datasets/postfix/sample/files.json").read_text())
    for relative, facts in recorded.items():
        stat = (tmp_path / "queue" / relative).stat()
        assert (oct(stat.st_mode & 0o777), int(stat.st_mtime)) == (
            oct(int(facts["mode"], 8)),
            int(facts["mtime"]),
        )
    assert "--queue-dir" in capsys.readouterr().out
