"""The Python API is the command line's twin: the same finding ids from the same sample, a wrong
keyword refused by name, and what an analyst sees in `help()` and in a notebook cell."""

from __future__ import annotations

import json
import pydoc
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

import mqforensics
from mqforensics import systems
from mqforensics.cli import main
from mqforensics.cli.sample import audit_command, ready
from mqforensics.errors import ConfigError
from mqforensics.options import fields_of

CHECKOUT = Path(__file__).resolve().parents[2]


def _commands(text: str, heading: str) -> list[list[str]]:
    """The commands of the first ``sh`` block after `heading` in `text`, each line continued
    with a backslash joined, comments left out."""
    block = text.split(heading, 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [
        shlex.split(line, comments=True)
        for line in lines
        if line.strip() and not line.startswith("#")
    ]


def readme_sample_commands() -> dict[str, list[list[str]]]:
    """README's "Auditing the bundled samples": each system's sample and audit commands."""
    by_system: dict[str, list[list[str]]] = {}
    for argv in _commands((CHECKOUT / "README.md").read_text(), "## Auditing the bundled samples"):
        by_system.setdefault(argv[2], []).append(argv)
    return by_system


def documented_findings(system: str) -> tuple[list[list[str]], Counter]:
    """The commands and the findings (check, severity) -> count that the sample's
    ``ANOMALIES.md`` documents in "The findings its audit gives"."""
    text = (CHECKOUT / "datasets" / system / "sample" / "ANOMALIES.md").read_text()
    heading = "## The findings its audit gives"
    table = text.split(heading, 1)[1]
    counts: Counter = Counter()
    for check, severity, count in re.findall(r"^\| `(\w+)` \| (\w+) \| (\d+) \|$", table, re.M):
        counts[(check, severity)] = int(count)
    total = int(re.search(r"^\| total \| \| (\d+) \|$", table, re.M).group(1))
    assert sum(counts.values()) == total
    return _commands(text, heading), counts


def _ids(directory: Path) -> list[str]:
    return sorted(row["id"] for row in json.loads((directory / "findings.json").read_text()))


@pytest.mark.parametrize("system", list(systems.SYSTEMS))
def test_the_readme_commands_on_each_sample_give_its_documented_findings(system, spark, tmp_path):
    """README's two commands per sample (the same as its ANOMALIES.md's): `sample` prints the
    README's audit command, which gives exactly the documented findings; the API, given the same
    options as keywords, gives the same finding ids and exit status."""
    spec = systems.get(system)
    readme = readme_sample_commands()[system]
    documented, counts = documented_findings(system)
    assert readme == documented
    assert readme[0] == ["mqforensics", "sample", system, "--out", f"samples/{system}"]
    where = tmp_path / "samples" / system
    sample = ready(spec, where)
    argv = audit_command(spec, sample, where)
    assert [arg.replace(str(where), f"samples/{system}") for arg in argv] == readme[1]
    status = main(["--quiet", *argv[1:]])
    rows = json.loads((where / "audit" / "findings.json").read_text())
    assert Counter((row["check"], row["severity"]) for row in rows) == counts
    keywords = {item.name: getattr(sample.options, item.name) for item in fields_of(sample.options)}
    audit = mqforensics.audit(
        system, out=tmp_path / "api", as_of=sample.as_of, erasure_policy=sample.policy,
        spark=spark, **keywords,
    )  # fmt: skip
    audit.close()
    assert _ids(tmp_path / "api") == _ids(where / "audit") != []
    assert audit.status == status
    assert audit.not_run == json.loads((where / "audit" / "manifest.json").read_text())["not_run"]


def test_the_checks_an_audit_cannot_run_are_named_with_the_input_each_needs():
    """Decided before Spark: the James sample's view alone runs 8 of its 17 checks; every other
    one is named with what was missing and the flags that would give it."""
    from mqforensics.runner import unmet_needs
    from mqforensics.spec import CommonOptions
    from mqforensics.systems.james.options import JamesOptions

    spec = systems.get("james")
    options = JamesOptions(snapshot=CHECKOUT / "datasets" / "james" / "sample")
    unmet = unmet_needs(spec, options, CommonOptions(out=Path("unused")))
    blobs = (
        "no listing of the blob bucket; give one of --blobs, --blob-inventory, --blob-dir, "
        "--blob-listing"
    )
    assert unmet == {
        "orphaned_blob": blobs, "consumed_blob": blobs, "dangling_blob_ref": blobs,
        "broker_missing_mail": "no export of RabbitMQ's messages; give --broker-export",
        "broker_orphan_message": "no export of RabbitMQ's messages; give --broker-export",
        "dead_lettered_mail": "no RabbitMQ; give one of --rabbitmq, --broker-export",
        "queue_without_consumer": "no RabbitMQ; give one of --rabbitmq, --broker-export",
        "broker_count_mismatch": "no RabbitMQ; give one of --rabbitmq, --broker-export",
        "personal_data": "no erasure policy names the data subjects to look for; give "
        "--erasure-policy",
        "unreadable_content": "no erasure policy names the data subjects to look for; give "
        "--erasure-policy",
    }  # fmt: skip
    assert len(spec.checks) - len(unmet) == 8
    with_all = JamesOptions(
        snapshot=options.snapshot, blob_listing=Path("x.parquet"), broker_export=Path("broker")
    )
    assert unmet_needs(spec, with_all, CommonOptions(out=Path("u"), erasure_policy=Path("p"))) == {}


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
