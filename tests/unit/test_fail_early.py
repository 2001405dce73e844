"""Failing early, naming what is wrong (issue 45): an option's bad value names the option, an
instant or a duration no check can compute with is refused when it is parsed, an output that
cannot be written and an input holding nothing to audit are refused before Spark starts, a plan
whose policy has no rule for the audit's system is refused, and no Spark log is left behind.

Every case here runs the command line in this process with the Spark session factory replaced
by one that fails the test (`no_spark`): a case that started Spark would fail, not just be slow.
Each asserts the exit status, the one error line and that nothing was created.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from mqforensics import api, systems
from mqforensics.cli import main, one_line
from mqforensics.cli.arguments import add_options
from mqforensics.errors import ConfigError
from mqforensics.options import fields_of, from_keywords, from_tokens
from mqforensics.spec import CommonOptions
from mqforensics.units import utc_text

ROOT = Path(__file__).resolve().parents[2]
LOGQUEUE = ROOT / "datasets" / "logqueue" / "sample"
JAMES = ROOT / "datasets" / "james" / "sample"
CYRUS_DB = ROOT / "tests" / "data" / "cyrus" / "mailboxes_twoskip.db"
ERROR = "mqforensics: error: "
RANGE = "an instant from 1970-01-01T00:00:00Z to 9899-12-31T23:59:59Z"
LIKE = "like 30s, 5m, 12h, 1d or 2w"


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


def _refused(capsys, argv: list[str], line: str) -> None:
    """`argv` exits 2 with exactly `line` (after ``mqforensics: error: ``) on stderr."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [ERROR + line], captured.err
    assert captured.out == ""


# --- 1. instants the checks cannot compute with ------------------------------------------------


OUT_OF_RANGE = ["0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9999-12-31T00:00:00Z",
                "0001-01-01T00:00:00+05:00"]  # fmt: skip


@pytest.mark.parametrize("instant", OUT_OF_RANGE)
def test_an_instant_out_of_range_is_refused_naming_the_option(no_spark, tmp_path, capsys, instant):
    out = tmp_path / "out"
    line = f"ConfigError: --as-of: '{instant}' is out of range: {RANGE}"
    for command in ("audit", "validate"):
        argv = [command, "logqueue", str(LOGQUEUE / "outbound"), "--out", str(out), "--as-of"]
        _refused(capsys, [*argv, instant], line)
    assert not out.exists()


def test_the_edges_of_the_range_are_instants(no_spark):
    for text in ("1970-01-01T00:00:00Z", "9899-12-31T23:59:59Z"):
        common = from_keywords(CommonOptions, {"out": "o", "as_of": text})
        assert utc_text(common.as_of) == text


def test_the_api_refuses_the_same_instants_naming_the_keyword(no_spark, tmp_path):
    old = dt.datetime(1969, 1, 1, tzinfo=dt.UTC)
    for given in ("0001-01-01T00:00:00Z", dt.datetime(1, 1, 1), old):
        with pytest.raises(ConfigError, match=r"\] as_of= .* is out of range: an instant from"):
            from_keywords(CommonOptions, {"out": tmp_path, "as_of": given})
    with pytest.raises(ConfigError, match=r"\] as_of= '0001-01-01T00:00:00Z' is out of"):
        api.audit("logqueue", dirs=[LOGQUEUE / "outbound"], out=tmp_path / "a",
                  as_of="0001-01-01T00:00:00Z")  # fmt: skip
    assert not (tmp_path / "a").exists()


# --- 2. every option's parse error names the option ----------------------------------------------


def test_a_negative_duration_names_its_option_everywhere(no_spark, tmp_path, capsys):
    negative = f"duration '-7d' is negative: a duration is 0s or more, {LIKE}"
    env = tmp_path / "env"
    env.mkdir()
    out = tmp_path / "out"
    _refused(capsys, ["audit", "slimta", "--disk", str(env), "--retention=-7d", "--out", str(out)],
             f"ConfigError: --retention: {negative}")  # fmt: skip
    _refused(capsys, ["plan", "--findings", str(tmp_path), "--policy", "p.toml", "--out",
                      str(out), "--max-audit-age=-1d"],
             f"ConfigError: --max-audit-age: {negative.replace('-7d', '-1d')}")  # fmt: skip
    _refused(capsys, ["audit", "logqueue", str(LOGQUEUE / "outbound"), "--retry-horizon", "soon",
                      "--out", str(out)],
             f"ConfigError: --retry-horizon: duration 'soon' is not {LIKE}")  # fmt: skip
    _refused(capsys, ["audit", "james", "--snapshot", str(JAMES), "--since", "yesterday",
                      "--out", str(out)],
             "ConfigError: --since: 'yesterday' is not an ISO-8601 instant (like "
             "2026-11-22T02:30:00Z)")  # fmt: skip
    _refused(capsys, ["audit", "logqueue", str(LOGQUEUE / "outbound"), "--retry-horizon",
                      "99999999w", "--out", str(out)],
             "ConfigError: --retry-horizon: duration '99999999w' is too long: at most 36500d "
             "(100 years)")  # fmt: skip
    assert not out.exists()
    slimta = systems.get("slimta").options
    with pytest.raises(ConfigError, match=rf"\] slimta: retention= {negative}"):
        from_keywords(slimta, {"disk": env, "retention": "-7d"}, what="slimta")
    with pytest.raises(ConfigError, match=r"\] slimta: retention= duration datetime.timedelta\("):
        from_keywords(slimta, {"disk": env, "retention": dt.timedelta(days=-7)}, what="slimta")
    # A count given in Python is held to its minimum as its text is.
    james_purge = systems.get("james").purge_options
    assert from_keywords(james_purge, {"trace_queries": 50}).trace_queries == 50
    with pytest.raises(ConfigError, match=r"trace_queries= --trace-queries '0' is not a positive"):
        from_keywords(james_purge, {"trace_queries": 0}, what="purge of a james plan")
    with pytest.raises(ConfigError, match=r"retry_maximum= --retry-maximum '-1' is not a count"):
        from_keywords(slimta, {"disk": env, "retry_maximum": -1}, what="slimta")
    with pytest.raises(ConfigError, match=rf"\] MQF_SLIMTA_ARGS: --retention {negative}"):
        from_tokens(slimta, ["--disk", str(env), "--retention=-7d"], where="MQF_SLIMTA_ARGS")
    with pytest.raises(ConfigError, match=rf"\] max_audit_age= {negative.replace('-7d', '-1d')}"):
        api.plan(tmp_path, policy="p.toml", out=out, max_audit_age="-1d")
    with pytest.raises(ConfigError, match=r"\] max_audit_age= duration datetime.timedelta\("):
        api.plan(tmp_path, policy="p.toml", out=out, max_audit_age=dt.timedelta(hours=-1))
    assert not out.exists()


def _parsed_options():
    """(system, options class, field) of every option with a parser that can refuse text."""
    for spec in systems.all_systems():
        for cls in (spec.options, spec.purge_options):
            for item in fields_of(cls):
                if item.given.parse not in (None, Path) and not item.given.positional:
                    yield pytest.param(cls, item, id=f"{spec.name}-{item.name}")
    for item in fields_of(CommonOptions):
        if item.given.parse not in (None, Path):
            yield pytest.param(CommonOptions, item, id=f"common-{item.name}")


@pytest.mark.parametrize(("cls", "item"), list(_parsed_options()))
def test_every_options_parse_error_names_it_on_the_command_line_and_in_python(cls, item):
    from mqforensics.cli import ArgumentParser

    parser = ArgumentParser(prog="t")
    add_options(parser, cls, suppress_defaults=True)
    with pytest.raises(ConfigError) as caught:
        parser.parse_args([f"{item.flag}=-1x"])
    assert caught.value.message.startswith(f"{item.flag}"), caught.value.message
    assert "-1x" in caught.value.message
    required = {other.name: "x" for other in fields_of(cls) if other.required}
    with pytest.raises(ConfigError) as caught:
        from_keywords(cls, {**required, item.name: "-1x"}, what="x")
    assert caught.value.message.startswith(f"x: {item.name}= "), caught.value.message


# --- 3. an output that cannot be written ----------------------------------------------------------


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A directory on a read-only file system, as `os.access` and `os.statvfs` say (the tests
    run as root on a writable disk: a mode of 0o555 would not stop root)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    access, statvfs = os.access, os.statvfs

    def denied(path, mode, *args, **kwargs):
        if Path(path) == ro and mode & os.W_OK:
            return False
        return access(path, mode, *args, **kwargs)

    def flags(path, *args, **kwargs):
        if Path(path) == ro:
            return SimpleNamespace(f_flag=os.ST_RDONLY)
        return statvfs(path, *args, **kwargs)

    monkeypatch.setattr(os, "access", denied)
    monkeypatch.setattr(os, "statvfs", flags)
    return ro


def test_an_out_on_a_read_only_file_system_is_refused_before_spark(no_spark, read_only, capsys):
    queue = str(LOGQUEUE / "outbound")
    out = read_only / "out"
    why = f"{read_only} is on a read-only file system"
    for command in ("audit", "validate"):
        _refused(capsys, [command, "logqueue", queue, "--out", str(out)],
                 f"ConfigError: --out {out}: {why}")  # fmt: skip
    policy = str(LOGQUEUE / "policy.toml")
    _refused(capsys, ["plan", "logqueue", queue, "--policy", policy, "--out", str(out)],
             f"ConfigError: --out {out}: {why}")  # fmt: skip
    _refused(capsys, ["plan", "--findings", str(read_only), "--policy", policy, "--out", str(out)],
             f"ConfigError: --out {out}: {why}")  # fmt: skip
    _refused(capsys, ["audit", "logqueue", queue, "--out", str(read_only)],
             f"ConfigError: --out {read_only} is on a read-only file system")  # fmt: skip
    assert list(read_only.iterdir()) == []


def test_an_os_error_while_writing_is_one_line_naming_the_path():
    error = OSError(30, "Read-only file system", "/mnt/ro/out/findings.json")
    assert one_line(error) == "OSError: /mnt/ro/out/findings.json: Read-only file system"
    full = OSError(28, "No space left on device", "/a/.tmp", None, "/a/plan.json")
    assert one_line(full) == "OSError: /a/.tmp -> /a/plan.json: No space left on device"
    assert one_line(PermissionError(13, "Permission denied", "/x")) == (
        "PermissionError: /x: Permission denied"
    )


# --- 4. an input holding nothing to audit -----------------------------------------------------


def test_empty_inputs_are_nothing_to_audit_before_spark(no_spark, tmp_path, capsys):
    out = tmp_path / "out"
    database = tmp_path / "mailboxes.db"
    database.write_bytes(b"")
    _refused(capsys, ["audit", "cyrus", str(database), "--out", str(out)],
             f"InputError: nothing to audit: {database} holds nothing cyrus keeps")  # fmt: skip
    queue = tmp_path / "outbound"
    queue.mkdir()
    for command in ("audit", "validate"):
        _refused(capsys, [command, "logqueue", str(queue), "--out", str(out)],
                 f"InputError: nothing to audit: log queue(s) {queue} holds nothing logqueue "
                 "keeps")  # fmt: skip
    env = tmp_path / "env"
    env.mkdir()
    _refused(capsys, ["audit", "slimta", "--disk", str(env), "--out", str(out)],
             f"InputError: nothing to audit: disk {env} holds nothing slimta keeps (no .env or "
             ".meta file)")  # fmt: skip
    postfix = tmp_path / "spool"
    for name in ("active", "deferred", "hold", "incoming", "maildrop", "defer"):
        (postfix / name / "A").mkdir(parents=True)
    _refused(capsys, ["audit", "postfix", "--queue-dir", str(postfix), "--out", str(out)],
             f"InputError: nothing to audit: postfix {postfix} holds nothing postfix keeps (no "
             "file in any queue)")  # fmt: skip
    assert not out.exists()


def test_an_empty_parquet_snapshot_is_nothing_to_audit_before_spark(no_spark, tmp_path, capsys):
    import pyarrow.parquet as pq

    empty = tmp_path / "empty"
    shutil.copytree(JAMES, empty, ignore=shutil.ignore_patterns("blobs"))
    for table in ("enqueuedmailsv4", "browsestart"):
        path = empty / f"{table}.parquet"
        schema = pq.read_schema(next(path.glob("*.parquet")))
        shutil.rmtree(path)
        path.mkdir()
        pq.write_table(schema.empty_table(), path / "part-0.parquet")
    out = tmp_path / "out"
    _refused(capsys, ["audit", "james", "--snapshot", str(empty), "--out", str(out)],
             f"InputError: nothing to audit: snapshot {empty} (enqueuedmailsv4) holds nothing "
             "james keeps")  # fmt: skip
    assert not out.exists()


def test_an_empty_input_next_to_one_with_something_is_audited(tmp_path):
    empty_db = tmp_path / "empty.db"
    empty_db.write_bytes(b"")
    systems.get("cyrus").options(inputs=[CYRUS_DB, empty_db]).check()
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "seg-00000001.lq").write_bytes(b"")
    systems.get("logqueue").options(dirs=[empty, full]).check()
    env = tmp_path / "env"
    env.mkdir()
    (env / "leftover.meta").write_bytes(b"")
    systems.get("slimta").options(disk=env).check()


# --- 5. a policy with no rule for the audit's system -------------------------------------------


def fake_audit(directory: Path, system: str) -> Path:
    """An audit directory of `system` without a finding, as `read_manifest` checks it."""
    directory.mkdir()
    for name in ("findings.json", "findings.raw.json"):
        (directory / name).write_text("[]\n")
    digest = hashlib.sha256(b"[]\n").hexdigest()
    now = utc_text(dt.datetime.now(dt.UTC))
    findings = {"count": 0, "sha256": digest, "raw_sha256": digest}
    manifest = {"format": "mqforensics-audit/1", "system": system, "created_at": now,
                "as_of": now, "findings": findings}  # fmt: skip
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


NO_CYRUS_RULE = (
    "no rule applies to cyrus (the audit's system): cyrus plans rules of kind racl_repair, "
    "erase_subject; the policy's rules are garbage_segments (logqueue)"
)


def test_a_policy_without_a_rule_for_the_audits_system_is_refused(no_spark, tmp_path, capsys):
    audit = fake_audit(tmp_path / "audit", "cyrus")
    policy = LOGQUEUE / "policy.toml"
    plan = tmp_path / "plan"
    argv = ["plan", "--findings", str(audit), "--policy", str(policy), "--out", str(plan)]
    _refused(capsys, argv, f"ConfigError: policy {policy}: {NO_CYRUS_RULE}")
    # Auditing and planning at once: refused before the audit (Spark is not started).
    _refused(capsys, ["plan", "cyrus", str(CYRUS_DB), "--policy", str(policy), "--out", str(plan)],
             f"ConfigError: policy {policy}: {NO_CYRUS_RULE}")  # fmt: skip
    assert not plan.exists() and not (tmp_path / "plan.audit").exists()
    with pytest.raises(ConfigError, match="no rule applies to cyrus"):
        api.plan(audit, policy=policy, out=plan)
    assert not plan.exists()


# --- 6. the Spark log is not left behind ---------------------------------------------------------


def test_the_spark_log_is_removed_when_a_command_fails_unless_debug(no_spark, tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    import mqforensics.spark

    monkeypatch.delenv("MQF_SPARK_LOG", raising=False)
    log = tmp_path / "mqforensics-spark-test.log"
    log.write_text("Spark's own lines\n")
    monkeypatch.setattr(mqforensics.spark, "_LOG_FILE", log)
    argv = ["audit", "logqueue", str(tmp_path / "absent"), "--out", str(tmp_path / "out")]
    assert main(["--debug", *argv]) == 2
    *_, named, line = capsys.readouterr().err.strip().splitlines()
    assert named == f"mqforensics: Spark log: {log}" and log.is_file()
    assert line == f"{ERROR}InputError: {tmp_path / 'absent'}: no such queue directory"
    _refused(capsys, argv, f"InputError: {tmp_path / 'absent'}: no such queue directory")
    assert not log.exists()
