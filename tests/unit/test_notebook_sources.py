"""How notebooks name their source: the environment becomes the audit command's own arguments."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError
from mqforensics.views import notebook_sources as sources


def test_configured_arguments_are_shell_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "--disk '/var/spool/my queue/env' --retry-maximum 5")
    assert sources.configured_args("slimta") == [
        "--disk",
        "/var/spool/my queue/env",
        "--retry-maximum",
        "5",
    ]
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "   ")
    assert sources.configured_args("slimta") is None
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "--disk 'unclosed")
    with pytest.raises(ConfigError, match="MQF_SLIMTA_ARGS is not shell-quoted"):
        sources.configured_args("slimta")


def test_arguments_are_parsed_by_the_audit_command_itself(tmp_path: Path) -> None:
    args = sources.parse_audit_args(
        "logqueue", ["/q1", "/q2", "--out", str(tmp_path), "--as-of", "2027-01-21T08:00:00Z"]
    )
    assert [str(d) for d in args.dirs] == ["/q1", "/q2"]
    assert args.as_of == dt.datetime(2027, 1, 21, 8, tzinfo=dt.UTC)
    assert args.reveal_addresses is False
    # A usage error is one ConfigError naming the variable, not a SystemExit in the kernel.
    with pytest.raises(ConfigError, match=r"MQF_JAMES_ARGS: .*--stuck-after"):
        sources.parse_audit_args("james", ["--snapshot", "x", "--out", "o", "--stuck-after"])


def test_the_environment_decides_reveal_as_of_and_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MQF_REVEAL_ADDRESSES", raising=False)
    monkeypatch.delenv("MQF_AS_OF", raising=False)
    monkeypatch.setenv("MQF_NOTEBOOK_OUT", str(tmp_path))
    assert sources.output_dir("cyrus") == tmp_path / "cyrus"
    common = sources._common(["db"], tmp_path, sample_as_of=None, policy=None)
    assert common == ["db", "--out", str(tmp_path)]
    monkeypatch.setenv("MQF_REVEAL_ADDRESSES", "1")
    monkeypatch.setenv("MQF_AS_OF", "2026-01-01T00:00:00Z")
    common = sources._common(["db"], tmp_path, sample_as_of="2027-01-01T00:00:00Z", policy=None)
    assert common[-3:] == ["--as-of", "2026-01-01T00:00:00Z", "--reveal-addresses"]
    # The policy a notebook plans with is the one the audit looks for data subjects of.
    policy = sources.policy_file("james")
    common = sources._common([], tmp_path, sample_as_of=None, policy=policy)
    assert common[2:4] == ["--erasure-policy", str(policy)] and policy.is_file()
    missing = tmp_path / "none.toml"
    assert "--erasure-policy" not in sources._common(
        [], tmp_path, sample_as_of=None, policy=missing
    )


def test_a_previous_plan_is_replaced_but_nothing_else(tmp_path: Path) -> None:
    policy = sources.DATASETS / "logqueue" / "sample" / "policy.toml"
    queue = sources.DATASETS / "logqueue" / "sample" / "inbound"
    out = tmp_path / "plan"
    argv = ["plan", "logqueue", str(queue), "--policy", str(policy), "--out", str(out)]
    assert sources.run_command(argv) == 0
    (out / "report.txt").write_text("an earlier review")
    assert sources.run_command(argv, replace_plan=True) == 0
    assert (out / "plan.json").is_file() and not (out / "report.txt").exists()
    (out / "journal.jsonl").write_text("")  # a purge ran: the plan is evidence now
    with pytest.raises(ConfigError, match="is not an unused plan"):
        sources.run_command(argv, replace_plan=True)
    assert (out / "plan.json").exists()
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    argv[-1] = str(other)
    with pytest.raises(ConfigError, match="is not an unused plan"):
        sources.run_command(argv, replace_plan=True)
    assert (other / "keep.txt").read_text() == "mine"
