"""``mqforensics audit <system>`` and ``validate <system>``: one subcommand per registered
system, its options made from the system's options class, then the API's functions."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mqforensics import api, systems
from mqforensics.cli.arguments import add_options, options_from
from mqforensics.findings import FINDINGS_JSON
from mqforensics.history.record import appended_line
from mqforensics.runner import MANIFEST, partial_by_reason
from mqforensics.spec import CommonOptions
from mqforensics.units import utc_text


def add_system_parsers(
    command: argparse.ArgumentParser, run: Any, *, out_help: str
) -> dict[str, argparse.ArgumentParser]:
    """One subcommand per registered system under `command`, each with the system's options
    and the common ones."""
    subparsers = command.add_subparsers(dest="system", required=True, metavar="SYSTEM")
    made = {}
    for spec in systems.all_systems():
        parser = subparsers.add_parser(spec.name, help=spec.title, description=spec.title)
        add_options(parser, spec.options)
        add_options(parser, CommonOptions, help_of={"out": out_help})
        parser.set_defaults(run=run)
        made[spec.name] = parser
    return made


def add_audit_parser(commands: argparse._SubParsersAction) -> None:
    audit_parser = commands.add_parser(
        "audit", help="read a mail queue store and report what is wrong",
        description="Read a store into canonical frames, run every check, write findings.json, "
        "findings.parquet and manifest.json. Exit 0: no finding of severity error or worse; "
        "1: some; 2: the input cannot be read (or holds nothing to audit).",
    )  # fmt: skip
    add_system_parsers(
        audit_parser, run_audit,
        out_help="directory for findings.json, findings.parquet and manifest.json",
    )  # fmt: skip


def run_audit(args: argparse.Namespace) -> int:
    """`mqforensics audit <system>`: `api.run_audit` of the parsed options, then its summary."""
    spec = systems.get(args.system)
    common = options_from(CommonOptions, args)
    audit = api.run_audit(spec, options_from(spec.options, args), common)
    audit.close()
    print(f"{spec.title}: {audit.source}, judged at {utc_text(audit.as_of)}:")
    from mqforensics.findings import summarise, verdict_line

    print(summarise(audit.rows))
    not_run = audit.manifest.get("not_run", {})
    ran = len(spec.checks) - len(not_run)
    print(verdict_line(audit.rows, checks_run=ran, not_run=len(not_run)))
    for note in audit.notes:
        print(f"note: {note}")
    for why, checks in partial_by_reason(audit.partial).items():
        print(f"warning: partial results of {', '.join(checks)}: {why}", file=sys.stderr)
    for why, checks in partial_by_reason(not_run).items():
        print(f"warning: not run: {', '.join(checks)}: {why}", file=sys.stderr)
    written = [FINDINGS_JSON, "findings.parquet", *audit.outputs, MANIFEST]
    print(f"Wrote {', '.join(str(common.out / name) for name in written)}")
    if audit.manifest.get("history"):
        print(appended_line(audit.manifest["history"]))
    return audit.status


def add_validate_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "validate", help="run the expectation suites on a store's canonical frames",
        description="Check the canonical frames with the Great Expectations suites of "
        "expectations/. Exit 0: every suite passes; 1: an expectation failed; 2: the input "
        "cannot be read (never reported as a failed expectation).",
    )  # fmt: skip
    add_system_parsers(parser, run_validate, out_help="directory for quality.json")


def run_validate(args: argparse.Namespace) -> int:
    from mqforensics.quality import render_text

    spec = systems.get(args.system)
    report = api.run_validate(
        spec, options_from(spec.options, args), out=args.out, as_of=args.as_of,
        reveal_addresses=args.reveal_addresses, erasure_policy=args.erasure_policy,
        history=args.history, history_scope=args.history_scope,
    )  # fmt: skip
    print(render_text(report))
    print(f"Wrote {args.out / 'quality.json'}")
    if report.history is not None:
        print(appended_line(report.history))
    return 0 if report.success else 1
