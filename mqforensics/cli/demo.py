"""``mqforensics demo``: a system's bundled sample audited and planned (`api.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics import api, systems


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo", help="audit and plan a bundled sample with local Spark (no server)"
    )
    parser.add_argument(
        "--system", choices=systems.names(), default=systems.names()[0],
        help="whose bundled sample (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("out/demo"), metavar="DIR",
        help="where findings.json, findings.parquet, manifest.json and the cleanup plan (plan/) "
        "go (default: %(default)s)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return api.demo(args.system, out=args.out)
