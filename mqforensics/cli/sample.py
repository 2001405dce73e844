"""``mqforensics sample SYSTEM --out DIR``: a system's bundled sample made ready to audit, and
the one audit command that gives the findings its ``ANOMALIES.md`` lists.

Git keeps neither file modes nor modification times, and some checks read both (a Postfix
queue file is ready at mode 0700; a slimta tmp file is stale by its age): the systems whose
sample needs them write a copy under DIR with what the sample recorded put back. The command
printed names that copy (or the checkout's files, for a sample that needs nothing restored),
the instant the sample is judged at, and its erasure policy, so that every check runs.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from mqforensics import runner, systems
from mqforensics.errors import ConfigError
from mqforensics.options import Options, fields_of
from mqforensics.spec import Sample, System


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "sample", help="make a bundled sample ready to audit and print the command that audits it",
        description="Write what the bundled sample of SYSTEM needs restored (file modes, "
        "modification times) under --out, and print the audit command that gives the findings "
        "its datasets/SYSTEM/sample/ANOMALIES.md lists.",
    )  # fmt: skip
    parser.add_argument("system", choices=systems.names(), metavar="SYSTEM",
                        help=f"one of {', '.join(systems.names())}")  # fmt: skip
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR",
        help="where the ready copy goes (the printed audit writes DIR/audit)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spec = systems.get(args.system)
    print(shlex.join(audit_command(spec, ready(spec, args.out), args.out)))
    return 0


def ready(spec: System, out: Path) -> Sample:
    """The bundled sample of `spec`, made ready under `out` (`System.sample`)."""
    if spec.sample is None:
        raise ConfigError(f"{spec.name} has no bundled sample")
    runner.check_out(out)
    return spec.sample(out)


def audit_command(spec: System, sample: Sample, out: Path) -> list[str]:
    """The argv of the audit of `sample` (made `ready` under `out`) that gives its documented
    findings into ``out/audit``."""
    return ["mqforensics", "audit", spec.name, *tokens(sample.options), *common_tokens(sample, out)]


def common_tokens(sample: Sample, out: Path) -> list[str]:
    argv = ["--out", str(out / "audit")]
    if sample.as_of:
        argv += ["--as-of", sample.as_of]
    if sample.policy is not None:
        argv += ["--erasure-policy", _text(sample.policy)]
    return argv


def tokens(options: Options) -> list[str]:
    """`options` as command-line tokens: what differs from each option's default, positional
    values first (the inverse of the parser `cli.arguments` builds)."""
    positional: list[str] = []
    flagged: list[str] = []
    for item in fields_of(options):
        value = getattr(options, item.name)
        if value == item.default or value is None:
            continue
        if item.given.positional:
            positional += [_text(v) for v in (value if isinstance(value, list) else [value])]
        elif item.switch:
            flagged.append(item.flag)
        elif isinstance(value, list) and item.given.repeat:
            for one in value:
                flagged += [item.flag, _text(one)]
        elif isinstance(value, list):
            flagged += [item.flag, *(_text(one) for one in value)]
        else:
            flagged += [item.flag, _text(value)]
    return positional + flagged


def _text(value: Any) -> str:
    """A path relative to the working directory when under it (commands read better), else
    the value as text."""
    if isinstance(value, Path):
        try:
            return str(value.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(value)
    if isinstance(value, str) and "=" in value and "/" in value:  # NAME=PATH (a fleet's host)
        name, _, path = value.partition("=")
        return f"{name}={_text(Path(path))}"
    return str(value)
