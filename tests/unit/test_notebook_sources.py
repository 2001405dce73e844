"""How notebooks name their source: the parameters cell's values, or the environment, become the
keywords of `mqforensics.audit` (`api.notebook_keywords`); ``MQF_<SYSTEM>_ARGS`` is parsed into the
system's typed options without argparse (`api.configured_options`)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from mqforensics import api
from mqforensics.errors import ConfigError

SECRET = "S3cr3tPlant3d"
VARIABLES = ("MQF_AS_OF", "MQF_REVEAL_ADDRESSES", "MQF_NOTEBOOK_OUT", "MQF_POLICY")


@pytest.fixture(autouse=True)
def _no_notebook_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*VARIABLES, *(f"MQF_{s.upper()}_ARGS" for s in api.names())):
        monkeypatch.delenv(name, raising=False)


def test_configured_options_are_shell_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "--disk '/var/spool/my queue/env' --retry-maximum 5")
    options = api.configured_options("slimta")
    assert options is not None
    assert options.disk == Path("/var/spool/my queue/env") and options.retry_maximum == 5
    monkeypatch.setenv("MQF_LOGQUEUE_ARGS", "/q1 '/q 2' --retry-horizon 2d")
    options = api.configured_options("logqueue")
    assert options is not None
    assert options.dirs == [Path("/q1"), Path("/q 2")]
    assert options.retry_horizon == dt.timedelta(days=2)


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "   ")
    assert api.configured_options("slimta") is None
    assert api.notebook_keywords("slimta")["sample"] is True
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "")
    assert api.configured_options("slimta") is None


def test_bad_quoting_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQF_SLIMTA_ARGS", "--disk 'unclosed")
    with pytest.raises(ConfigError, match="MQF_SLIMTA_ARGS is not shell-quoted"):
        api.configured_options("slimta")
    with pytest.raises(ConfigError, match="MQF_SLIMTA_ARGS is not shell-quoted"):
        api.notebook_keywords("slimta")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("--snapshot x --stuck-after", r"^MQF_JAMES_ARGS: --stuck-after needs a value"),
        ("--snapshot x --stuck-afterr 1d", r"^MQF_JAMES_ARGS: unknown option --stuck-afterr"),
        ("--snapshot x --scan=yes", r"^MQF_JAMES_ARGS: --scan takes no value"),
    ],
)
def test_a_wrong_flag_is_an_error_naming_the_variable_and_the_flag(
    arguments: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One ConfigError naming both, not a SystemExit in the kernel.
    monkeypatch.setenv("MQF_JAMES_ARGS", arguments)
    with pytest.raises(ConfigError) as caught:
        api.notebook_keywords("james")
    assert re.match(message, caught.value.message), caught.value.message


@pytest.mark.parametrize(
    ("system", "arguments", "flag"),
    [
        ("james", f"--cassandra audit:{SECRET}@cass1:9042", "--cassandra"),
        ("slimta", f"--redis redis://:{SECRET}@10.0.0.5:6379/0", "--redis"),
    ],
)
def test_a_credential_in_the_variable_is_refused(
    system: str, arguments: str, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = f"MQF_{system.upper()}_ARGS"
    monkeypatch.setenv(variable, arguments)
    with pytest.raises(ConfigError) as caught:
        api.notebook_keywords(system)
    assert caught.value.message.startswith(f"{variable}: {flag}")
    assert "credentials in an option are refused" in caught.value.message
    assert SECRET not in str(caught.value)


def test_the_parameters_become_the_audit_keywords(tmp_path: Path) -> None:
    source = {"queue_dir": ["mx1=/var/spool/postfix"], "config_dir": "/etc/postfix"}
    keywords = api.notebook_keywords(
        "postfix", source, as_of="2027-01-21T08:00:00Z", reveal_addresses=True, out=tmp_path
    )
    assert keywords == {
        **source,
        "as_of": "2027-01-21T08:00:00Z",
        "reveal_addresses": True,
        "out": tmp_path,
        # The policy a notebook plans with is the one the audit looks for data subjects of.
        "erasure_policy": api.DATASETS / "postfix" / "sample" / "policy.toml",
    }
    # No source: the bundled sample, at its own instant, written under out/notebooks/<system>.
    keywords = api.notebook_keywords("postfix")
    assert keywords["sample"] is True and "as_of" not in keywords
    assert keywords["reveal_addresses"] is False
    assert keywords["out"] == api.CHECKOUT / "out" / "notebooks" / "postfix"


def test_the_environment_overrides_the_parameters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MQF_POSTFIX_ARGS", "--queue-dir /spool/a --hold-age 2d")
    monkeypatch.setenv("MQF_AS_OF", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("MQF_REVEAL_ADDRESSES", "1")
    monkeypatch.setenv("MQF_NOTEBOOK_OUT", str(tmp_path))
    keywords = api.notebook_keywords("postfix", {"queue_dir": ["/spool/b"]}, as_of="2027-01-01")
    options = keywords.pop("options")
    assert options.queue_dir == ["/spool/a"] and options.hold_age == dt.timedelta(days=2)
    assert "queue_dir" not in keywords and "sample" not in keywords
    assert keywords["as_of"] == "2026-01-01T00:00:00Z" and keywords["reveal_addresses"] is True
    # MQF_NOTEBOOK_OUT and MQF_POLICY are the defaults of OUT and POLICY, not overrides.
    assert keywords["out"] == tmp_path / "postfix"
    assert api.notebook_keywords("postfix", out=tmp_path / "mine")["out"] == tmp_path / "mine"
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    monkeypatch.setenv("MQF_POLICY", str(policy))
    assert api.notebook_keywords("postfix")["erasure_policy"] == policy
    assert api.notebook_policy("postfix", "other.toml") == Path("other.toml")
    # A policy file that is not there is not looked for (a plan names it, and fails then).
    monkeypatch.setenv("MQF_POLICY", str(tmp_path / "none.toml"))
    assert "erasure_policy" not in api.notebook_keywords("postfix")


def test_a_previous_plan_is_replaced_but_nothing_else(tmp_path: Path) -> None:
    import shutil

    queue = tmp_path / "inbound"
    shutil.copytree(api.DATASETS / "logqueue" / "sample" / "inbound", queue)
    policy = api.DATASETS / "logqueue" / "sample" / "policy.toml"
    audit = api.audit("logqueue", dirs=[queue], out=tmp_path / "audit")
    out = tmp_path / "plan"
    audit.plan(policy=policy, out=out)
    (out / "report.txt").write_text("an earlier review")
    audit.plan(policy=policy, out=out, replace=True)
    assert (out / "plan.json").is_file() and not (out / "report.txt").exists()
    (out / "journal.jsonl").write_text("")  # a purge ran: the plan is evidence now
    with pytest.raises(ConfigError, match="is not an unused plan"):
        audit.plan(policy=policy, out=out, replace=True)
    assert (out / "plan.json").exists()
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not an unused plan"):
        audit.plan(policy=policy, out=other, replace=True)
    assert (other / "keep.txt").read_text() == "mine"


NOTEBOOKS = sorted((api.CHECKOUT / "notebooks").glob("**/*.ipynb"))
ANALYSTS = [n for n in NOTEBOOKS if n.parent.name == "notebooks"]


def test_the_notebooks_are_there() -> None:
    assert len(ANALYSTS) == 7 and len(NOTEBOOKS) == 12, NOTEBOOKS
    assert not any(".ipynb_checkpoints" in n.parts for n in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_a_stable_id_and_no_output(path: Path) -> None:
    """nbformat 4.5 cell ids, written in the file (so no reader makes up random ones and warns
    ``MissingIDFieldWarning``), unique, and kept by a save: nbformat writes the file back byte
    for byte. Outputs are cleared: an executed copy is what people share, not the source."""
    import io
    import json
    import warnings

    import nbformat

    text = path.read_text(encoding="utf-8")
    raw = json.loads(text)
    assert (raw["nbformat"], raw["nbformat_minor"]) >= (4, 5)
    ids = [cell.get("id") for cell in raw["cells"]]
    assert all(isinstance(i, str) and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MissingIDFieldWarning, DuplicateCellId, ...
        node = nbformat.reads(text, as_version=4)
        nbformat.validate(node)
    saved = io.StringIO()
    nbformat.write(node, saved)
    assert saved.getvalue() == text
    for cell in raw["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, cell["id"]


# A cell ending with one of these shows a bare number (``0``, a count, the characters written).
_NUMBER_CALLS = {"count", "write", "write_text", "write_bytes", "system", "call", "len", "sum"}


@pytest.mark.parametrize("path", ANALYSTS, ids=lambda p: p.stem)
def test_a_cell_shows_what_it_means_to(path: Path) -> None:
    """No cell ends with an expression that shows a stray number, and tables are shown as frames
    (`widgets.readable_tables`, turned on in the setup cell), not pandas Stylers, which would
    skip it; the findings tables call a finding's key column ``object``."""
    import ast

    import nbformat

    node = nbformat.read(path, as_version=4)
    code = [cell for cell in node.cells if cell.cell_type == "code"]
    assert any("readable_tables()" in cell.source for cell in code[:2]), path.name
    for cell in code:
        tree = ast.parse(cell.source)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
            called = last.value.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            assert name not in _NUMBER_CALLS, (path.name, cell.id, ast.unparse(last))
        assert ".style" not in cell.source, (path.name, cell.id)
        shown = {c.value for c in ast.walk(last) if isinstance(c, ast.Constant)} if last else set()
        if isinstance(last, ast.Expr) and "subject" in shown:
            assert 'rename(columns={"subject": "object"})' in cell.source, (path.name, cell.id)


def test_jupyter_checkpoints_are_never_committed() -> None:
    ignored = (api.CHECKOUT / ".gitignore").read_text().splitlines()
    assert ".ipynb_checkpoints/" in ignored
