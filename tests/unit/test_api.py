"""The Python API is the command line's twin: the same finding ids from the same sample, a wrong
keyword refused by name, and what an analyst sees in `help()` and in a notebook cell."""

from __future__ import annotations

import json
import pydoc
from pathlib import Path

import pytest

import mqforensics
from mqforensics import systems
from mqforensics.cli import main
from mqforensics.errors import ConfigError
from mqforensics.options import fields_of


def _argv(options: mqforensics.options.Options) -> list[str]:  # type: ignore[name-defined]
    """The command-line arguments that give `options` (the flags the CLI makes of its fields)."""
    argv: list[str] = []
    for item in fields_of(options):
        value = getattr(options, item.name)
        if value is None or value == item.default:
            continue
        if item.switch:
            argv.append(item.flag)
        elif isinstance(value, list):
            if item.given.positional:
                argv.extend(str(v) for v in value)
            elif item.given.many:
                argv += [item.flag, *map(str, value)]
            else:
                for one in value:
                    argv += [item.flag, str(one)]
        elif item.given.positional:
            argv.append(str(value))
        else:
            text = str(value)
            if hasattr(value, "total_seconds"):
                from mqforensics.units import duration_text

                text = duration_text(value)
            argv += [item.flag, text]
    return argv


def _ids(directory: Path) -> list[str]:
    return sorted(row["id"] for row in json.loads((directory / "findings.json").read_text()))


@pytest.mark.parametrize("system", list(systems.SYSTEMS))
def test_the_api_and_the_command_line_give_the_same_finding_ids(system, spark, tmp_path):
    spec = systems.get(system)
    sample = spec.sample(tmp_path / "sample")
    common = ["--out", str(tmp_path / "cli")]
    if sample.as_of:
        common += ["--as-of", sample.as_of]
    if sample.policy is not None:
        common += ["--erasure-policy", str(sample.policy)]
    status = main(["--quiet", "audit", system, *_argv(sample.options), *common])
    keywords = {item.name: getattr(sample.options, item.name) for item in fields_of(sample.options)}
    audit = mqforensics.audit(
        system, out=tmp_path / "api", as_of=sample.as_of, erasure_policy=sample.policy,
        spark=spark, **keywords,
    )  # fmt: skip
    audit.close()
    assert _ids(tmp_path / "api") == _ids(tmp_path / "cli") != []
    assert audit.status == status
    assert sorted(row["id"] for row in audit.rows) == _ids(tmp_path / "cli")


def test_a_wrong_keyword_is_one_error_naming_it_and_the_nearest(tmp_path):
    with pytest.raises(ConfigError) as caught:
        mqforensics.audit("postfix", queue_dirs=["/var/spool/postfix"], out=tmp_path / "o")
    assert "no option 'queue_dirs'" in caught.value.message
    assert "did you mean 'queue_dir'" in caught.value.message
    assert not (tmp_path / "o").exists()


def test_a_credential_in_a_keyword_is_refused_naming_its_variables(tmp_path):
    with pytest.raises(ConfigError) as caught:
        mqforensics.audit(
            "slimta", redis="redis://user:hunter2@127.0.0.1:6379/0", out=tmp_path / "o"
        )
    assert "hunter2" not in caught.value.message
    assert "MQF_REDIS_PASSWORD" in caught.value.message


def test_a_text_value_is_parsed_as_the_command_line_parses_it(tmp_path):
    with pytest.raises(ConfigError, match="duration 'soon'"):
        mqforensics.audit("postfix", queue_dir=[str(tmp_path)], retention="soon")


def test_help_lists_the_systems_and_where_their_options_are_documented():
    text = pydoc.render_doc(mqforensics.audit, renderer=pydoc.plaintext)
    for name in systems.names():
        assert f"``{name}``" in text
    assert "options_of(system)" in text and "describe_options" in text
    for name in systems.names():
        described = mqforensics.describe_options(name)
        for item in fields_of(systems.get(name).options):
            assert item.name in described


def test_the_package_completes_to_the_api():
    names = dir(mqforensics)
    for name in ("audit", "read", "validate", "plan", "approve", "purge_plan", "review", "demo"):
        assert name in names
        assert callable(getattr(mqforensics, name))
