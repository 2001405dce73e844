"""The `mqforensics` command: every subcommand calls the same functions as the notebooks.

Whatever a command prints, and every error line, goes through `credentials.mask_secrets`; an
option value holding a credential is refused by the parser itself, before any command runs.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from mqforensics import __version__, credentials, demo
from mqforensics.credentials import mask_secrets
from mqforensics.errors import MqfError, explain
from mqforensics.purge import cli as purge_cli
from mqforensics.retention import cli as retention_cli
from mqforensics.services import cli as services_cli
from mqforensics.systems.cyrus import audit as cyrus_audit
from mqforensics.systems.cyrus import plan_cli as cyrus_plan
from mqforensics.systems.james import audit as james_audit
from mqforensics.systems.james import plan_cli as james_plan
from mqforensics.systems.james import validate as james_validate
from mqforensics.systems.logqueue import audit as logqueue_audit
from mqforensics.systems.logqueue import plan_cli as logqueue_plan
from mqforensics.systems.slimta import audit as slimta_audit
from mqforensics.systems.slimta import plan_cli as slimta_plan


def build_parser() -> argparse.ArgumentParser:
    # Subcommands' parsers are of the same class: each refuses credentials in its options.
    parser = credentials.ArgumentParser(
        prog="mqforensics", description="Forensics and retention for mail queue stores."
    )
    parser.add_argument("--version", action="version", version=f"mqforensics {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback (masked) before the error line"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.add_parser(commands)
    audit = commands.add_parser("audit", help="read a mail queue store and report what is wrong")
    systems = audit.add_subparsers(dest="system", required=True, metavar="SYSTEM")
    james_audit.add_parser(systems)
    cyrus_audit.add_parser(systems)
    logqueue_audit.add_parser(systems)
    slimta_audit.add_parser(systems)
    validate = commands.add_parser("validate", help="run the expectation suites on a store")
    validate_systems = validate.add_subparsers(dest="system", required=True, metavar="SYSTEM")
    james_validate.add_parser(validate_systems)
    plan = commands.add_parser("plan", help="plan a retention cleanup (deletes nothing)")
    plan_systems = plan.add_subparsers(dest="system", required=True, metavar="SYSTEM")
    james_plan.add_parser(plan_systems)
    cyrus_plan.add_parser(plan_systems)
    logqueue_plan.add_parser(plan_systems)
    slimta_plan.add_parser(plan_systems)
    services_cli.add_parser(commands)
    retention_cli.add_report_parser(commands)
    retention_cli.add_approve_parser(commands)
    purge_cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with credentials.masked_streams():
        return _main(argv)


def _error(message: str) -> None:
    print(f"mqforensics: error: {mask_secrets(message)}", file=sys.stderr)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except MqfError as exc:  # from an option's type converter (a bad --as-of), or a credential
        _error(explain(exc) or str(exc))
        return exc.exit_code
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("mqforensics: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            # The traceback is printed here, masked, not by the interpreter after main returns.
            print(mask_secrets("".join(traceback.format_exception(exc))), file=sys.stderr)
        message = explain(exc)
        if message is None:
            # Not one of ours: say what it is in one line; --debug shows the traceback.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            message = f"{type(exc).__name__}: {first[:300]} (run with --debug for details)"
        _error(message)
        return exc.exit_code if isinstance(exc, MqfError) else 2
