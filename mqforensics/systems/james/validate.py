"""`mqforensics validate james`: the Great Expectations suites of expectations/ on a James state.

Prints one line per failing expectation (addresses pseudonymised), writes ``quality.json`` when
``--out`` is given, and exits 0 when every suite passes, 1 otherwise (2 on bad input).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics.systems.james.audit import add_state_arguments, load_state


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("james", help="Apache James distributed mail queue")
    add_state_arguments(parser)
    parser.add_argument("--out", type=Path, help="directory for quality.json")
    parser.add_argument("--no-pseudonymize", action="store_true",
                        help="show mail addresses in failing values as they are")  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mqforensics.quality import render_text, report_to_json, validate
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spark = session("mqforensics-validate-james")
    with spark_progress(spark, "validate james"):
        state = load_state(spark, args)
        report = validate(state.frames(), pseudonymize=not args.no_pseudonymize)
    print(render_text(report))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        staging = args.out / ".quality.json.tmp"
        staging.write_text(report_to_json(report) + "\n")
        staging.replace(args.out / "quality.json")
        print(f"Wrote {args.out / 'quality.json'}")
    return 0 if report.success else 1
