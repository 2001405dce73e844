"""The `mqforensics` command: the command-line edge, the only place argparse lives. Every
subcommand (one module each in this folder) builds typed options from its arguments and calls
the same functions as the notebooks (`mqforensics.api`).

Whatever a command prints, and every error line, goes through `credentials.mask_secrets`; an
option value holding a credential is refused by the parser itself, before any command runs.

A failing command prints one line on stderr, ``mqforensics: error: Kind: message`` (a usage
error too, as a ConfigError), with mail addresses pseudonymised unless ``--reveal-addresses``
(docs/errors.md); Spark's own output goes to its log file (`spark.log_file`), which ``--debug``
names and keeps (without it, the log is removed when the command ends, failed or not, unless
``MQF_SPARK_LOG`` chose it).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from mqforensics import credentials
from mqforensics.cli import (
    arguments,
    audit,
    demo,
    history,
    plan,
    prepare_spark,
    purge,
    receipt,
    review,
    sample,
    services,
)
from mqforensics.credentials import HIDDEN, mask_secrets
from mqforensics.environment import variables_set
from mqforensics.errors import ConfigError, MqfError, explain
from mqforensics.filenames import printable_line
from mqforensics.privacy import pseudonymize_text
from mqforensics.version import __version__


class ArgumentParser(arguments.ArgumentParser):
    """The CLI's parser: credentials refused as by `arguments.ArgumentParser`, and a usage
    error is one line, ``mqforensics: error: ConfigError: ...`` (exit 2), not the usage text."""

    def error(self, message: str) -> NoReturn:
        hidden = re.sub(r"\S*@", HIDDEN + "@", mask_secrets(message))
        _error(f"{ConfigError.__name__}: {self.prog}: {hidden} (see {self.prog} --help)")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    # Subcommands' parsers are of the same class: each refuses credentials in its options.
    parser = ArgumentParser(
        prog="mqforensics", description="Forensics and retention for mail queue stores."
    )
    parser.add_argument("--version", action="version", version=f"mqforensics {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback (masked) before the error line"
    )
    parser.add_argument(
        "--quiet", action="store_true",
        help="no progress on stderr (shown on a terminal otherwise: what is read and written, "
        "then each step as it begins)",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.add_parser(commands)
    sample.add_parser(commands)
    audit.add_audit_parser(commands)
    audit.add_validate_parser(commands)
    history.add_parser(commands)
    plan.add_plan_parser(commands)
    services.add_parser(commands)
    prepare_spark.add_parser(commands)
    review.add_report_parser(commands)
    review.add_approve_parser(commands)
    purge.add_parser(commands)
    receipt.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with credentials.masked_streams():
        return _main(argv)


def _error(message: str, *, reveal_addresses: bool = False) -> None:
    """The one error line on stderr: credentials masked, then addresses pseudonymised unless
    `reveal_addresses` (a bad value quoted from a row is shown as its pseudonym)."""
    text = mask_secrets(message)
    if not reveal_addresses:
        text = pseudonymized(text)
    print(f"mqforensics: error: {printable_line(text)}", file=sys.stderr)


# A value an error message quotes: ``cannot parse 'victor@example.com' as int``.
_QUOTED = re.compile(r"'([^'\n]*)'")


def pseudonymized(text: str) -> str:
    """`text` with every address pseudonymised (`privacy.pseudonymize_text`), a quoted one
    inside its quotes: the quote is atext, so ``'victor@example.com'`` would otherwise be
    taken whole as the address ``'victor@example.com``."""
    parts, end = [], 0
    for quoted in _QUOTED.finditer(text):
        parts.append(pseudonymize_text(text[end : quoted.start()]))
        parts.append(f"'{pseudonymize_text(quoted.group(1))}'")
        end = quoted.end()
    parts.append(pseudonymize_text(text[end:]))
    return "".join(parts)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except MqfError as exc:  # from an option's type converter (a bad --as-of), or a credential
        _error(explain(exc) or str(exc))
        return exc.exit_code
    failure: Exception | None = None
    try:
        with progress_off() if args.quiet else contextlib.nullcontext():
            status = int(args.run(args))
    except KeyboardInterrupt:
        print("mqforensics: interrupted", file=sys.stderr)
        status = 130
    except Exception as exc:
        failure, status = exc, exc.exit_code if isinstance(exc, MqfError) else 2
        if args.debug:
            # The traceback is printed here, masked, not by the interpreter after main returns.
            print(mask_secrets("".join(traceback.format_exception(exc))), file=sys.stderr)
    # Spark's log is kept (and named) with --debug only: whether the command failed or not,
    # nothing of it is left in the temp directory otherwise (docs/errors.md).
    if args.debug:
        _name_spark_log()
    else:
        _discard_spark_log()
    if failure is not None:
        _error(one_line(failure), reveal_addresses=bool(getattr(args, "reveal_addresses", False)))
    return status


def progress_off() -> contextlib.AbstractContextManager[None]:
    """``--quiet``: no progress display inside (``MQF_PROGRESS=0``), as before after."""
    return variables_set({"MQF_PROGRESS": "0"})


def one_line(exc: BaseException) -> str:
    """``Kind: message`` of a failure (`errors.explain`); for an error that is not one of ours,
    its type and first line, pointing at ``--debug``."""
    message = explain(exc)
    if message is not None:
        return message
    if isinstance(exc, OSError) and exc.filename is not None:
        # Writing an output (a full disk, a read-only file system): the path and the reason.
        where = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
        return f"{type(exc).__name__}: {where}: {exc.strerror or exc}"
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]} (run with --debug for details)"


def _discard_spark_log() -> None:
    """Without ``--debug``: the command's Spark log (if it started Spark) is not kept."""
    spark = sys.modules.get("mqforensics.spark")
    if spark is not None:
        spark.discard_log()


def _name_spark_log() -> None:
    """With ``--debug``: where Spark's log went, when the command started Spark."""
    spark = sys.modules.get("mqforensics.spark")
    path = spark.log_file() if spark is not None else None
    if path is not None:
        print(f"mqforensics: Spark log: {path}", file=sys.stderr)
