"""The `mqforensics` command: every subcommand calls the same functions as the notebooks.

Whatever a command prints, and every error line, goes through `credentials.mask_secrets`; an
option value holding a credential is refused by the parser itself, before any command runs.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from mqforensics import __version__, credentials, demo, planning, runner
from mqforensics.credentials import mask_secrets
from mqforensics.errors import MqfError, explain
from mqforensics.purge import cli as purge_cli
from mqforensics.retention import cli as retention_cli
from mqforensics.services import cli as services_cli


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
    runner.add_audit_parser(commands)
    runner.add_validate_parser(commands)
    planning.add_plan_parser(commands)
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
