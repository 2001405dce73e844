"""What a notebook audits: a bundled sample, or the real store its environment names.

Each notebook calls `audit(spark, "<system>")`. It turns the environment into the arguments of
``mqforensics audit <system>``, parses them with that command's own parser and runs the one
audit runner, so a notebook and the CLI always read, check and pseudonymise alike. With no
environment, the bundled sample of ``datasets/<system>/sample`` is audited with the options its
``ANOMALIES.md`` is written for (the system spec's `sample`).

- ``MQF_<SYSTEM>_ARGS`` (``MQF_JAMES_ARGS``, ``MQF_LOGQUEUE_ARGS``, ``MQF_CYRUS_ARGS``,
  ``MQF_SLIMTA_ARGS``, ``MQF_POSTFIX_ARGS``): the source arguments of ``mqforensics audit
  <system>``, shell-quoted, e.g.
  ``MQF_JAMES_ARGS="--cassandra cass1:9042 --blobs s3://james-default"``. Credentials stay in
  their own variables (``MQF_CASSANDRA_PASSWORD``, ``MQF_REDIS_PASSWORD``, ``AWS_*``), never here:
  the command's parser refuses them (`credentials.refuse_on_command_line`) as on a command line.
- ``MQF_AS_OF``: the instant judged at (default: the sample's, or now for a real source).
- ``MQF_REVEAL_ADDRESSES=1``: show mail addresses as they are (default: pseudonymised).
- ``MQF_NOTEBOOK_OUT``: where findings and plans are written (default ``out/notebooks`` of the
  checkout, wherever the notebook runs from).
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, MqfError

if TYPE_CHECKING:
    import argparse

    from pyspark.sql import SparkSession

CHECKOUT = Path(__file__).resolve().parents[2]
DATASETS = CHECKOUT / "datasets"


@dataclass
class NotebookAudit:
    """One audit as a notebook sees it: where it read, the findings, and the frames to explore."""

    system: str
    source: str
    bundled: bool
    as_of: dt.datetime | None
    out: Path
    findings: list[dict[str, Any]]
    # What the explorers and drill-downs need: the system's loaded frames (`Loaded.frames`).
    state: Any = None
    # The source arguments the audit ran with (no --out/--as-of): a plan reads the same source.
    source_argv: list[str] = field(default_factory=list)

    def summary(self) -> str:
        from mqforensics.findings import summarise

        judged = f", judged at {self.as_of:%Y-%m-%dT%H:%M:%SZ}" if self.as_of else ""
        origin = "bundled sample" if self.bundled else "configured source"
        text = f"{self.system}: {self.source} ({origin}{judged})\n{summarise(self.findings)}"
        return mask_secrets(text)


def output_dir(system: str) -> Path:
    """``$MQF_NOTEBOOK_OUT/<system>`` (default ``out/notebooks/<system>`` of the checkout)."""
    return Path(os.environ.get("MQF_NOTEBOOK_OUT") or CHECKOUT / "out" / "notebooks") / system


def reveal_addresses() -> bool:
    return os.environ.get("MQF_REVEAL_ADDRESSES", "").strip().lower() in {"1", "true", "yes"}


def configured_args(system: str) -> list[str] | None:
    """The source arguments of ``MQF_<SYSTEM>_ARGS``, or None when it is unset or empty."""
    name = f"MQF_{system.upper()}_ARGS"
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{name} is not shell-quoted arguments: {exc}") from None


def parse_audit_args(system: str, argv: list[str]) -> argparse.Namespace:
    """``mqforensics audit <system> ARGV`` parsed by the CLI's own parser; a usage error, or a
    credential in an argument, is a ConfigError naming the variable rather than a SystemExit in
    the notebook."""
    import contextlib
    import io

    from mqforensics.cli import build_parser

    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return build_parser().parse_args(["audit", system, *argv])
    except SystemExit:
        last = errors.getvalue().strip().splitlines()[-1:] or ["invalid arguments"]
        raise ConfigError(
            f"audit {system} arguments from MQF_{system.upper()}_ARGS: {last[0]}"
        ) from None
    except MqfError as exc:
        raise ConfigError(f"MQF_{system.upper()}_ARGS: {exc.message}") from None


def _common(
    argv: list[str], out: Path, *, sample_as_of: str | None, policy: Path | None
) -> list[str]:
    as_of = os.environ.get("MQF_AS_OF") or sample_as_of
    extra = ["--out", str(out)]
    if policy is not None and policy.is_file():
        # The audit looks for the policy's data subjects, so a plan of its findings can erase.
        extra += ["--erasure-policy", str(policy)]
    if as_of:
        extra += ["--as-of", as_of]
    if reveal_addresses():
        extra.append("--reveal-addresses")
    return [*argv, *extra]


def audit(spark: SparkSession, system: str, out: Path | None = None) -> NotebookAudit:
    """``mqforensics audit <system>`` of ``MQF_<SYSTEM>_ARGS``, or of the bundled sample with
    the options its ``ANOMALIES.md`` is written for (the system's `sample`), through the one
    audit runner."""
    from mqforensics import runner, systems

    spec = systems.get(system)
    out = out or output_dir(system)
    argv = configured_args(system)
    bundled = argv is None
    sample_as_of = None
    if argv is None:
        if spec.sample is None:
            raise ConfigError(f"{system} has no bundled sample: set MQF_{system.upper()}_ARGS")
        sample = spec.sample(out)
        argv, sample_as_of = sample.argv, sample.as_of
    policy = policy_file(system)
    args = parse_audit_args(system, _common(argv, out, sample_as_of=sample_as_of, policy=policy))
    runner.check_before_spark(spec, args)
    result = runner.audit(spark, spec, args)
    return NotebookAudit(
        system, result.loaded.source, bundled, result.as_of, out, result.findings,
        result.frames, argv,
    )  # fmt: skip


def policy_file(system: str) -> Path:
    """``MQF_POLICY`` or the bundled sample's retention policy."""
    configured = os.environ.get("MQF_POLICY")
    return Path(configured) if configured else DATASETS / system / "sample" / "policy.toml"


def plan_argv(audit: NotebookAudit, out: Path, *, policy: Path | None = None) -> list[str]:
    """``mqforensics plan --findings`` of the notebook's audit, with the policy."""
    policy = policy or policy_file(audit.system)
    return ["plan", "--findings", str(audit.out), "--policy", str(policy), "--out", str(out)]


def run_command(argv: list[str], *, replace_plan: bool = False) -> int:
    """Run one ``mqforensics`` command in this process (typed errors propagate to the notebook).
    With `replace_plan`, the ``--out`` plan directory of an earlier run is removed first, and only
    when it holds a plan (plan.json) and nothing is journaled in it."""
    import shutil

    from mqforensics.cli import build_parser
    from mqforensics.retention.manifest import JOURNAL, PLAN_JSON

    args = build_parser().parse_args(argv)
    out = getattr(args, "out", None)
    if replace_plan and out is not None and Path(out).exists():
        previous = Path(out)
        if not (previous / PLAN_JSON).is_file() or (previous / JOURNAL).exists():
            raise ConfigError(
                f"{previous} is not an unused plan: remove it or choose another --out"
            )
        shutil.rmtree(previous)
    print(mask_secrets("$ mqforensics " + shlex.join(argv)))
    return int(args.run(args))
