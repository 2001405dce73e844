"""The `mqforensics` command: every subcommand calls the same functions as the notebooks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mqforensics import __version__, demo
from mqforensics.errors import MqfError, explain
from mqforensics.services import cli as services_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqforensics", description="Forensics and retention for mail queue stores."
    )
    parser.add_argument("--version", action="version", version=f"mqforensics {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of one-line errors"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.add_parser(commands)
    services_cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("mqforensics: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = explain(exc)
        if message is None:
            # Not one of ours: say what it is in one line; --debug shows the traceback.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            message = f"{type(exc).__name__}: {first[:300]} (run with --debug for details)"
        print(f"mqforensics: error: {message}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, MqfError) else 2
