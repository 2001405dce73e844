"""No secret is ever echoed: the one masking function, and credentials planted in every option,
URL, notebook source variable and credential variable of every command never reach an output.

Refusals run in process and must not start Spark. The credential variables are planted in a
subprocess (`tests/credential_runs.py`) whose one Spark session writes uncompressed event logs,
which are searched too. `tests/integration/test_credentials_live.py` does the same with logins
the real servers accept.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mqforensics import api, credentials
from mqforensics.cli import main
from mqforensics.credentials import is_secret_name, mask_secrets
from mqforensics.errors import ConfigError, InputError, explain
from tests.credential_runs import assert_nowhere, files_under, run_in_one_spark

SECRET = "S3cr3tPlant3d"
REPO = Path(__file__).resolve().parents[2]
JAMES = REPO / "datasets" / "james" / "sample"
CYRUS = REPO / "datasets" / "cyrus" / "sample"
SLIMTA = REPO / "datasets" / "slimta" / "sample"
LOGQUEUE = REPO / "datasets" / "logqueue" / "sample"
HIDDEN = "[hidden]"

# --- the masking function -----------------------------------------------------------------------

MASKED = [
    ("http://KEY:S3cr3tPlant3d@127.0.0.1:1", "http://[hidden]@127.0.0.1:1"),
    ("s3://AKIA:S3cr3tPlant3d@127.0.0.1:1/james", "s3://[hidden]@127.0.0.1:1/james"),
    ("s3://AKIA:wJal/S3cr3tPlant3d+x@host/b", "s3://[hidden]@host/b"),  # '/' in an AWS secret
    ("redis://:S3cr3tPlant3d@h:6379/0", "redis://[hidden]@h:6379/0"),
    ("https://S3cr3tPlant3d@github.com/x", "https://[hidden]@github.com/x"),
    (
        "ServerUnavailable: at http://k:S3cr3tPlant3d@h:1 (x)",
        "ServerUnavailable: at http://[hidden]@h:1 (x)",
    ),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F1"
        "&X-Amz-Signature=S3cr3tPlant3d&X-Amz-Security-Token=S3cr3tPlant3d",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[hidden]"
        "&X-Amz-Signature=[hidden]&X-Amz-Security-Token=[hidden]",
    ),
    ("https://x/?access_token=S3cr3tPlant3d", "https://x/?access_token=[hidden]"),
    ("https://x/cb?code=1&token=S3cr3tPlant3d&y=2", "https://x/cb?code=1&token=[hidden]&y=2"),
    ("https://x/?password=S3cr3tPlant3d", "https://x/?password=[hidden]"),
    ("https://x/?api_key=S3cr3tPlant3d", "https://x/?api_key=[hidden]"),
    (
        "https://acct.blob.core.windows.net/c?sv=1&sig=S3cr3tPlant3d",
        "https://acct.blob.core.windows.net/c?sv=1&sig=[hidden]",
    ),
    (
        "sc://host:15002/;user_id=bob;token=S3cr3tPlant3d",
        "sc://host:15002/;user_id=bob;token=[hidden]",
    ),
    ("password=S3cr3tPlant3d next", "password=[hidden] next"),
    ("MQF_CASSANDRA_PASSWORD=S3cr3tPlant3d", "MQF_CASSANDRA_PASSWORD=[hidden]"),
    ("{'password': 'S3cr3tPlant3d', 'user': 'u'}", "{'password': '[hidden]', 'user': 'u'}"),
    ('{"redis_password": "S3\\"cr3tPlant3d", "db": 0}', '{"redis_password": "[hidden]", "db": 0}'),
    (
        "S3Endpoint(secret_key='S3cr3tPlant3d', region='eu', access_key='AKIA')",
        "S3Endpoint(secret_key='[hidden]', region='eu', access_key='[hidden]')",
    ),
    (
        "aws_secret_access_key=S3cr3tPlant3d aws_access_key_id=AKIA",
        "aws_secret_access_key=[hidden] aws_access_key_id=AKIA",
    ),
    ("Map(password -> S3cr3tPlant3d, hosts -> h)", "Map(password -> [hidden], hosts -> h)"),
    ("token: S3cr3tPlant3d", "token: [hidden]"),
    ("apiKey: S3cr3tPlant3d", "apiKey: [hidden]"),
    ("client_secret=S3cr3tPlant3d", "client_secret=[hidden]"),
    (
        "cqlsh h 9042 -u cassandra --password S3cr3tPlant3d -e x",
        "cqlsh h 9042 -u cassandra --password [hidden] -e x",
    ),
    ("--access-token=S3cr3tPlant3d", "--access-token=[hidden]"),
    ("Authorization: S3cr3tPlant3d", "Authorization: [hidden]"),
]

UNCHANGED = [
    "",
    "mqforensics: error: InputError: dataset directory /tmp/missing does not exist",
    "AuthenticationFailed: Cassandra at 10.0.0.5:9042 refused the credentials of user 'audit'",
    "ConfigError: --redis: a password in the URL is refused; set MQF_REDIS_PASSWORD instead",
    "the Cyrus admin login comes from MQF_IMAP_USERNAME and MQF_IMAP_PASSWORD (unset)",
    "http://127.0.0.1:8333/bucket/key",
    "S3 endpoint http://127.0.0.1:8333 is unreachable",
    "s3://james-default/user@example.org/blob",
    "http://host:9000/bob@example.org",
    "sc://spark-connect.example:15002",
    "spark://master:7077",
    "redis://10.0.0.5:6379/0",
    "keyspace=apache_james table=enqueuedmailsv4 token_range: (-9223372036854775808, 0]",
    "bucket=james-default key=0b6e8a3c-9d1e-4f5a-8b7c-2d3e4f5a6b7c",
    "message_key=slimta:abc aws_access_key_id=AKIAEXAMPLE username=audit",
    "bob@example.org <bob@example.org> u-3f2a: 12 findings",
    "census racl racl_keys: before 3, after 4",
    "/var/spool/token: not readable",
    "slimta: redis 127.0.0.1:6379/0 prefix slimta:; judged at 2026-11-03T12:00:00Z",
    "check                 severity    findings           bytes",
]


@pytest.mark.parametrize(("text", "masked"), MASKED)
def test_each_kind_of_secret_is_masked(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked
    assert SECRET not in mask_secrets(text)
    assert mask_secrets(masked) == masked  # masking twice changes nothing more


@pytest.mark.parametrize("text", UNCHANGED)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert mask_secrets(text) == text


def test_secret_names() -> None:
    secret = ["password", "redis_password", "MQF_CASSANDRA_PASSWORD", "aws_secret_access_key",
              "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "access_token",
              "accessToken", "api_key", "apiKey", "secret_key", "client_secret", "sig", "pwd",
              "SPARK_CONNECT_AUTHENTICATE_TOKEN", "Authorization", "passphrase"]  # fmt: skip
    plain = ["username", "aws_access_key_id", "AWSAccessKeyId", "key", "message_key", "keyspace",
             "token_range", "sort_key", "endpoint_url", "hosts", "AuthenticationFailed",
             "MQF_REDIS_URL", "location"]  # fmt: skip
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


def test_every_message_path_uses_it() -> None:
    """Typed errors, `explain` of a Spark-wrapped error, the purger's `one_line`, reports."""
    from mqforensics.purge.retry import one_line
    from mqforensics.views.report import _Page

    url = f"http://k:{SECRET}@h:1/b?token={SECRET}"
    error = InputError(f"cannot read {url}")
    assert SECRET not in str(error) and SECRET not in error.message
    wrapped = RuntimeError(f"Py4JJavaError: ...\n[mqforensics:ServerUnavailable] at {url}\n...")
    assert explain(wrapped) == "ServerUnavailable: at http://[hidden]@h:1/b?token=[hidden]"
    assert one_line(OSError(f"no route to {url}")) == (
        "OSError: no route to http://[hidden]@h:1/b?token=[hidden]"
    )
    assert SECRET not in _Page(reveal=True).show(url)
    assert SECRET not in _Page(reveal=False).show(url)


def test_journal_reasons_are_masked(tmp_path: Path) -> None:
    from mqforensics.purge.journal import Journal, read_journal

    with Journal.open(tmp_path / "journal.jsonl", "0" * 64) as journal:
        journal.record("skipped", seq=0, id="a", reason=f"at http://k:{SECRET}@h:1 it changed")
    assert SECRET not in (tmp_path / "journal.jsonl").read_text()
    assert read_journal(tmp_path / "journal.jsonl")[-1]["reason"] == (
        "at http://[hidden]@h:1 it changed"
    )


def test_the_masked_streams_mask_lines_and_progress_bars(capsys) -> None:
    with credentials.masked_streams():
        print(f"Connected to redis://u:{SECRET}@h:1/0")
        sys.stdout.write(f"s3://k:{SECRET}")  # a line written in pieces
        sys.stdout.write("@h/b\n")
        sys.stderr.write(f"\rbar password={SECRET}")  # a progress bar: no newline, flushed
        sys.stderr.flush()
        assert sys.stderr.isatty() is False  # attributes pass through
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert captured.out == "Connected to redis://[hidden]@h:1/0\ns3://[hidden]@h/b\n"
    assert captured.err == "\rbar password=[hidden]"


def test_spark_option_redaction_pattern_hides_secret_options() -> None:
    """The session setting Spark Connect redacts operation plans with (same syntax in Java)."""
    import re

    plan = (
        'read {\n  data_source {\n    format: "mqf_blobs"\n    options {\n'
        f'      key: "aws_secret_access_key"\n      value: "{SECRET}"\n    }}\n    options {{\n'
        f'      key: "redis_password"\n      value: "a\\"{SECRET}"\n    }}\n    options {{\n'
        '      key: "location"\n      value: "s3://james"\n    }\n'
    )
    pattern = re.compile(credentials.redaction_pattern(None))
    redacted = pattern.sub("*********(redacted)", plan)
    assert SECRET not in redacted and "s3://james" in redacted
    combined = credentials.redaction_pattern("(?i)url")
    assert (
        combined.startswith("(?:(?i)url)|") and credentials.redaction_pattern(combined) == combined
    )


def test_the_session_sets_the_redaction(spark) -> None:
    from mqforensics.spark import session

    assert credentials.OPTION_REDACTION in session().conf.get(credentials.SPARK_STRING_REDACTION)


# --- credentials on command lines are refused before anything runs -------------------------------

CASSANDRA_VARS = ("MQF_CASSANDRA_USERNAME", "MQF_CASSANDRA_PASSWORD")
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
REDIS_VARS = ("MQF_REDIS_USERNAME", "MQF_REDIS_PASSWORD")
IMAP_VARS = ("MQF_IMAP_USERNAME", "MQF_IMAP_PASSWORD")

HOSTS = [f"user:{SECRET}@127.0.0.1:1", f"{SECRET}@127.0.0.1"]
S3_URLS = [f"s3://AKIA:{SECRET}@127.0.0.1:1/james", f"s3://{SECRET}@bucket/p",
           f"s3://bucket/manifest.json?X-Amz-Signature={SECRET}"]  # fmt: skip
HTTP_URLS = [f"http://AKIA:{SECRET}@127.0.0.1:1", f"https://s3/?X-Amz-Security-Token={SECRET}"]
REDIS_URLS = [f"redis://user:{SECRET}@127.0.0.1:1/0", f"redis://:{SECRET}@127.0.0.1:1/0",
              f"rediss://{SECRET}@127.0.0.1:1/0", f"user:{SECRET}@127.0.0.1:1/0"]  # fmt: skip
ANY_URLS = [f"s3://user:{SECRET}@127.0.0.1:1/x", f"file:///q?token={SECRET}"]

POLICY = str(JAMES / "policy.toml")
OUT = "{out}"  # replaced by the test's output directory
# (command argv with {value} for the planted value, option as the error names it, variables
# the error must name, values planted)
COMMANDS: list[tuple[list[str], str, tuple[str, ...], list[str]]] = []
for _cmd in (["audit", "james"], ["validate", "james"], ["plan", "james", "--policy", POLICY]):
    COMMANDS += [
        ([*_cmd, "--cassandra", "{value}", "--out", OUT], "--cassandra", CASSANDRA_VARS, HOSTS),
        ([*_cmd, "--snapshot", str(JAMES), "--blobs", "{value}", "--out", OUT], "--blobs",
         AWS_VARS, S3_URLS),
        ([*_cmd, "--snapshot", str(JAMES), "--blob-inventory", "{value}", "--out", OUT],
         "--blob-inventory", AWS_VARS, S3_URLS),
    ]  # fmt: skip
for _cmd in (["audit", "slimta"], ["plan", "slimta", "--policy", str(SLIMTA / "policy.toml")]):
    COMMANDS += [
        ([*_cmd, "--redis", "{value}", "--out", OUT], "--redis", REDIS_VARS, REDIS_URLS),
        ([*_cmd, "--s3", "{value}", "--out", OUT], "--s3", AWS_VARS, S3_URLS),
        ([*_cmd, "--s3", "s3://q/p", "--s3-endpoint", "{value}", "--out", OUT], "--s3-endpoint",
         AWS_VARS, HTTP_URLS),
    ]  # fmt: skip
COMMANDS += [
    (["purge", str(JAMES), "--cassandra", "{value}"], "--cassandra", CASSANDRA_VARS, HOSTS),
    (["purge", str(JAMES), "--s3-endpoint", "{value}"], "--s3-endpoint", AWS_VARS, HTTP_URLS),
    (["purge", str(JAMES), "--imap", "{value}"], "--imap", IMAP_VARS, HOSTS),
    (["purge", str(JAMES), "--redis", "{value}"], "--redis", REDIS_VARS, REDIS_URLS),
    (["purge", "--s3-endpoint={value}", str(JAMES)], "--s3-endpoint", AWS_VARS, HTTP_URLS[:1]),
    (["audit", "cyrus", "{value}", "--out", OUT], "argument", (), ANY_URLS),
    (["plan", "cyrus", "--policy", POLICY, "{value}", "--out", OUT], "argument", (), ANY_URLS),
    (["audit", "logqueue", "{value}", "--out", OUT], "argument", (), ANY_URLS),
    (["plan", "logqueue", "--policy", POLICY, "{value}", "--out", OUT], "argument", (), ANY_URLS),
    (["report", "html", "{value}", "--out", OUT + "/r.html"], "argument", (), ANY_URLS),
    (["report", "html", str(JAMES), "--title", "{value}", "--out", OUT + "/r.html"], "--title",
     (), [f"password={SECRET}"]),
    (["report", "plan", "{value}"], "argument", (), ANY_URLS),
    (["report", "notebook", "{value}", "--out", OUT + "/n.html"], "argument", (), ANY_URLS),
    (["approve", str(JAMES), "--by", "{value}"], "--by", (), [f"token: {SECRET}"]),
    (["approve", str(JAMES), "--by", "x", "--note", "{value}"], "--note", (),
     [f"password={SECRET}", f"see https://t/?access_token={SECRET}"]),
    (["demo", "--dataset", "{value}", "--out", OUT], "--dataset", (), ANY_URLS),
    (["services", "status", "--root", "{value}"], "--root", (), ANY_URLS),
    (["audit", "james", "--snapshot", str(JAMES), "--out", OUT, "{value}"], "argument", (),
     ANY_URLS),  # an argument argparse does not know is not echoed either
]  # fmt: skip
CASES = [
    pytest.param(argv, option, variables, value, id=f"{' '.join(argv[:2])} {option} {i}")
    for argv, option, variables, values in COMMANDS
    for i, value in enumerate(values)
]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails any command that starts Spark (every command gets its session from here)."""
    import mqforensics.spark

    started: list[str] = []

    def refuse(*args, **kwargs):
        started.append(str(args))
        raise AssertionError("Spark was started")

    monkeypatch.setattr(mqforensics.spark, "session", refuse)
    for name in credentials.ADDRESS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return started


@pytest.mark.parametrize(("argv", "option", "variables", "value"), CASES)
def test_a_credential_on_the_command_line_is_refused_before_anything_runs(
    argv, option, variables, value, tmp_path, capsys, no_spark
) -> None:
    out = tmp_path / "out"
    argv = [a.replace("{value}", value).replace(OUT, str(out)) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"mqforensics: error: ConfigError: {option}"), err
    assert "credentials on the command line are refused" in err
    for name in variables or ("environment variables",):
        assert name in err
    assert_nowhere(SECRET, [captured.out, captured.err], tmp_path)
    assert not out.exists() and no_spark == []


ADDRESS_VARIABLES = [
    ("MQF_S3_ENDPOINT", f"http://AKIA:{SECRET}@127.0.0.1:1", AWS_VARS),
    ("MQF_S3_ENDPOINT", f"http://127.0.0.1:1/?X-Amz-Signature={SECRET}", AWS_VARS),
    ("MQF_CASSANDRA", f"audit:{SECRET}@127.0.0.1:1", CASSANDRA_VARS),
    ("SPARK_REMOTE", f"sc://127.0.0.1:1/;token={SECRET}", ("SPARK_CONNECT_AUTHENTICATE_TOKEN",)),
    ("SPARK_REMOTE", f"sc://u:{SECRET}@127.0.0.1:1", ("SPARK_CONNECT_AUTHENTICATE_TOKEN",)),
    ("MQF_SPARK_MASTER", f"spark://u:{SECRET}@127.0.0.1:7077", ("environment variables",)),
]


@pytest.mark.parametrize(("name", "value", "variables"), ADDRESS_VARIABLES)
def test_a_credential_in_an_address_variable_is_refused(
    name, value, variables, tmp_path, capsys, monkeypatch, no_spark
) -> None:
    monkeypatch.setenv(name, value)
    out = tmp_path / "out"
    assert main(["audit", "james", "--snapshot", str(JAMES), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"mqforensics: error: ConfigError: {name} ") and len(err.splitlines()) == 1
    )
    assert all(v in err for v in variables) and SECRET not in err
    assert not out.exists() and no_spark == []


def test_the_python_api_refuses_address_variables_too(monkeypatch) -> None:
    from mqforensics.sources.blobstore import S3Endpoint
    from mqforensics.sources.cassandra_connection import CassandraEndpoint
    from mqforensics.spark import session

    monkeypatch.setenv("MQF_S3_ENDPOINT", f"http://AKIA:{SECRET}@127.0.0.1:1")
    with pytest.raises(ConfigError, match="MQF_S3_ENDPOINT") as caught:
        S3Endpoint.from_env()
    assert SECRET not in str(caught.value)
    monkeypatch.setenv("MQF_CASSANDRA", f"audit:{SECRET}@127.0.0.1")
    with pytest.raises(ConfigError, match="MQF_CASSANDRA_PASSWORD") as caught:
        CassandraEndpoint.from_env()
    assert SECRET not in str(caught.value)
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:1/;token={SECRET}")
    with pytest.raises(ConfigError, match="SPARK_CONNECT_AUTHENTICATE_TOKEN") as caught:
        session()  # refused before any session is made or reused
    assert SECRET not in str(caught.value)


NOTEBOOK_SOURCES = [
    ("james", f"--cassandra audit:{SECRET}@cass1:9042", "--cassandra"),
    ("james", f"--snapshot {JAMES} --blobs s3://k:{SECRET}@h/james", "--blobs"),
    ("slimta", f"--redis redis://:{SECRET}@10.0.0.5:6379/0", "--redis"),
    ("slimta", f"--s3 s3://q/p --s3-endpoint 'http://k:{SECRET}@127.0.0.1:1'", "--s3-endpoint"),
    ("cyrus", f"s3://u:{SECRET}@h/mailboxes.db", "argument"),
    ("logqueue", f"'file:///q?token={SECRET}'", "argument"),
]


def _notebook_audit(system: str, out: Path, source: dict | None = None) -> None:
    """What a notebook's audit cell runs, with its parameters cell's `SOURCE`."""
    api.audit(system, **api.notebook_keywords(system, source, out=out))


@pytest.mark.parametrize(("system", "arguments", "option"), NOTEBOOK_SOURCES)
def test_a_credential_in_a_notebook_source_variable_is_refused(
    system, arguments, option, tmp_path, capsys, monkeypatch, no_spark
) -> None:
    variable = f"MQF_{system.upper()}_ARGS"
    monkeypatch.setenv(variable, arguments)
    with pytest.raises(ConfigError) as caught:
        _notebook_audit(system, tmp_path / "out")
    captured = capsys.readouterr()
    assert_nowhere(SECRET, [str(caught.value), captured.out, captured.err], tmp_path)
    assert not (tmp_path / "out").exists() and no_spark == []
    assert "credentials in an option are refused" in caught.value.message
    assert caught.value.message.startswith(f"{variable}: {option}")


@pytest.mark.parametrize(
    ("system", "source", "keyword"),
    [
        ("james", {"cassandra": f"u:{SECRET}@h"}, "cassandra"),
        ("slimta", {"redis": f"redis://:{SECRET}@10.0.0.5:6379/0"}, "redis"),
        ("cyrus", {"inputs": [f"s3://u:{SECRET}@h/mailboxes.db"]}, "inputs"),
    ],
)
def test_a_credential_in_a_notebook_source_parameter_is_refused_unprinted(
    system, source, keyword, tmp_path, capsys, monkeypatch, no_spark
) -> None:
    monkeypatch.delenv(f"MQF_{system.upper()}_ARGS", raising=False)
    with pytest.raises(ConfigError) as caught:
        _notebook_audit(system, tmp_path / "out", source)
    assert caught.value.message.startswith(keyword)
    assert "credentials in an option are refused" in caught.value.message
    captured = capsys.readouterr()
    assert_nowhere(SECRET, [str(caught.value), captured.out, captured.err], tmp_path)
    assert not (tmp_path / "out").exists() and no_spark == []


def test_errors_and_output_of_any_command_are_masked(tmp_path, capsys, monkeypatch) -> None:
    """Whatever a command prints, and an error that is not ours, with or without --debug."""
    from mqforensics.cli import demo

    url = f"http://k:{SECRET}@127.0.0.1:1/b?X-Amz-Signature={SECRET}"

    def leaky(args) -> int:
        print(f"reading {url}")
        print(f"retrying {url}", file=sys.stderr)
        raise RuntimeError(f"cannot reach {url}")

    monkeypatch.setattr(demo, "run", leaky)
    for debug in ([], ["--debug"]):
        assert main([*debug, "demo", "--out", str(tmp_path)]) == 2
        captured = capsys.readouterr()
        assert_nowhere(SECRET, [captured.out, captured.err])
        assert "reading http://[hidden]@127.0.0.1:1/b?X-Amz-Signature=[hidden]" in captured.out
        last = captured.err.strip().splitlines()[-1]
        assert last.startswith("mqforensics: error: RuntimeError: cannot reach http://[hidden]@")
        assert ("Traceback" in captured.err) == bool(debug)


def test_services_env_prints_no_login(tmp_path, capsys, monkeypatch) -> None:
    from mqforensics.services.harness import Harness

    env = {"MQF_S3_ENDPOINT": "http://127.0.0.1:8333", "AWS_SECRET_ACCESS_KEY": SECRET,
           "MQF_CASSANDRA_PASSWORD": SECRET, "AWS_ACCESS_KEY_ID": "mqforensics-test"}  # fmt: skip
    monkeypatch.setattr(Harness, "environment", lambda self: env)
    assert main(["services", "env", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "export MQF_S3_ENDPOINT=http://127.0.0.1:8333" in out and SECRET not in out
    assert "PASSWORD" not in out and "services.env" in out


# --- credentials in the environment, with unreachable servers, in one Spark session --------------

UNREACHABLE = "127.0.0.1:1"
PLANTED_ENV = {
    "MQF_CASSANDRA_USERNAME": "planted-user",
    "MQF_CASSANDRA_PASSWORD": SECRET,
    "AWS_ACCESS_KEY_ID": "AKIAPLANTED",
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_SESSION_TOKEN": SECRET,
    "MQF_S3_ENDPOINT": f"http://{UNREACHABLE}",
    "MQF_REDIS_USERNAME": "planted-user",
    "MQF_REDIS_PASSWORD": SECRET,
    "MQF_IMAP_USERNAME": "planted-user",
    "MQF_IMAP_PASSWORD": SECRET,
    "MQF_PROGRESS": "1",  # progress lines too
}


def environment_steps(out: Path) -> list[dict]:
    """Every command that reads a store, and the notebooks' audits, against unreachable ones;
    ``expect``: the exit status (None: not checked)."""
    live = ["--cassandra", UNREACHABLE]
    snapshot = ["--snapshot", str(JAMES)]
    slimta_policy = ["--policy", str(SLIMTA / "policy.toml")]
    redis = ["--redis", f"redis://{UNREACHABLE}/0"]
    s3 = ["--s3", "s3://queue/q-", "--s3-endpoint", f"http://{UNREACHABLE}"]
    plan, cyrus_plan = str(out / "plan-james"), str(out / "plan-cyrus")
    argvs = [
        (2, ["audit", "james", *live, "--out", str(out / "audit-live")]),
        (2, ["validate", "james", *live, "--out", str(out / "validate-live")]),
        (2, ["plan", "james", "--policy", POLICY, *live, "--out", str(out / "plan-live")]),
        (2, ["audit", "james", *snapshot, "--blobs", "s3://james-default", "--out",
             str(out / "audit-s3")]),
        # The suites read no blob listing: their own verdict (exit 1 on the sample).
        (None, ["validate", "james", *snapshot, "--blobs", "s3://james-default", "--out",
                str(out / "validate-s3")]),
        (2, ["plan", "james", "--policy", POLICY, *snapshot, "--blob-inventory",
             "s3://inventory/james/manifest.json", "--out", str(out / "plan-inventory")]),
        (2, ["audit", "slimta", *redis, "--out", str(out / "slimta-redis")]),
        (2, ["audit", "slimta", *s3, "--out", str(out / "slimta-s3")]),
        (2, ["plan", "slimta", *slimta_policy, *redis, "--out", str(out / "plan-slimta-redis")]),
        (2, ["plan", "slimta", *slimta_policy, *s3, "--out", str(out / "plan-slimta-s3")]),
        (0, ["plan", "james", "--policy", POLICY, *snapshot, "--blob-listing",
             str(JAMES / "blob_inventory.parquet"), "--out", plan]),
        (0, ["report", "plan", plan]),
        (0, ["approve", plan, "--by", "DPO"]),
        (2, ["purge", plan, *live]),
        (2, ["purge", plan, "--apply", *live, "--s3-endpoint", f"http://{UNREACHABLE}"]),
        (0, ["report", "html", plan, "--out", str(out / "report.html")]),
        (0, ["plan", "cyrus", "--policy", str(CYRUS / "policy.toml"),
             str(CYRUS / "backend1" / "mailboxes.db"), "--default-domain", "example.org",
             "--out", cyrus_plan]),
        # One retry: its progress line is searched too; more would only wait longer.
        (2, ["purge", cyrus_plan, "--imap", UNREACHABLE, "--retries", "1"]),
    ]  # fmt: skip
    steps: list[dict] = [{"argv": argv, "expect": expect} for expect, argv in argvs]
    steps += [
        {"notebook": "james", "out": str(out / "nb-james"),
         "env": {"MQF_JAMES_ARGS": f"--cassandra {UNREACHABLE}"}},
        {"notebook": "james", "out": str(out / "nb-james-s3"),
         "env": {"MQF_JAMES_ARGS": f"--snapshot {JAMES} --blobs s3://james-default"}},
        {"notebook": "slimta", "out": str(out / "nb-slimta"),
         "env": {"MQF_SLIMTA_ARGS": f"--redis redis://{UNREACHABLE}/0"}},
    ]  # fmt: skip
    return steps


def test_credential_variables_never_reach_outputs_journals_or_spark_event_logs(tmp_path) -> None:
    out = tmp_path / "out"
    steps = environment_steps(out)
    results, printed = run_in_one_spark(steps, tmp_path, PLANTED_ENV)
    shown = [printed] + [r["out"] + r["err"] + (r["error"] or "") for r in results]
    assert_nowhere(SECRET, shown, tmp_path)  # outputs, plans, journals, reports, event logs
    for step, result in zip(steps, results, strict=True):
        if step.get("expect") is not None:
            assert result["rc"] == step["expect"], (step["argv"], result)
        if result["rc"] == 2:  # an unreachable store: one line naming it, never the login
            assert result["err"].strip().splitlines()[-1].startswith("mqforensics: error: ")
    failures = [r["err"] for r in results if r["rc"] == 2]
    assert any("ServerUnavailable: Cassandra at 127.0.0.1:1" in e for e in failures)
    assert any("Redis at 127.0.0.1:1" in e for e in failures)
    # The plan made from the snapshot was written, reviewed, approved and reported.
    assert (out / "plan-james" / "plan.json").is_file() and (out / "report.html").is_file()
    assert all(r["error"] for r in results[-3:])  # the notebook audits failed as the CLI's did
    # Spark logged what it ran.
    logs = files_under(tmp_path / "eventlog")
    assert logs and any(b"SparkListenerJobStart" in p.read_bytes() for p in logs)
