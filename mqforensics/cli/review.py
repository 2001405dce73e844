"""``mqforensics approve`` and ``mqforensics report plan | html | notebook``: the review half of
a cleanup and the readable reports. None needs a server; only ``report html`` of an audit that
appended to a run history starts Spark, to read that history (its Trends section)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mqforensics import api, systems
from mqforensics.credentials import mask_secrets


def add_approve_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "approve", help="approve a reviewed cleanup plan (records its hash in approval.json)"
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="plan directory")
    parser.add_argument("--by", required=True, metavar="NAME", help="who approves")
    parser.add_argument("--note", default="", metavar="TEXT", help="e.g. a ticket reference")
    parser.set_defaults(run=run_approve)


def run_approve(args: argparse.Namespace) -> int:
    from mqforensics.retention.manifest import read_plan
    from mqforensics.views.plan_report import summary_line

    record = api.approve(args.plan, by=args.by, note=args.note)
    plan = read_plan(args.plan)
    print(f"approved plan {plan.directory} by {record['approved_by']} at {record['approved_at']}")
    print(f"plan sha256 {record['plan_sha256']}")
    print(summary_line(plan))
    return 0


def add_report_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="readable reports for review")
    kinds = report.add_subparsers(dest="report", required=True, metavar="WHAT")
    parser = kinds.add_parser("plan", help="summarise a cleanup plan and its purge journal")
    parser.add_argument("plan", type=Path, metavar="PLAN", help="plan directory")
    parser.add_argument(
        "--out", "--html", dest="out", type=Path, metavar="FILE",
        help="the HTML report (default: PLAN/report.html; report.txt goes next to the plan)",
    )  # fmt: skip
    parser.add_argument(
        "--reveal-addresses",
        action="store_true",
        help="show mail addresses as they are (default: pseudonymised)",
    )
    parser.add_argument(
        "--journal", type=Path, metavar="FILE", help="default: PLAN/journal.jsonl if it exists"
    )
    parser.set_defaults(run=run_report_plan)

    html = kinds.add_parser(
        "html", help="audits, plans and validations in one self-contained HTML file"
    )
    html.add_argument(
        "inputs", nargs="+", type=Path, metavar="DIR",
        help="an audit's --out (findings.json), a plan directory, a validation's --out",
    )  # fmt: skip
    html.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML file")
    html.add_argument("--title", default="mqforensics report", help="the report's title")
    html.add_argument(
        "--reveal-addresses", action="store_true",
        help="show mail addresses as they are (default: pseudonymised)",
    )  # fmt: skip
    html.set_defaults(run=run_report_html)

    notebook = kinds.add_parser(
        "notebook", help="an executed notebook as one self-contained, offline HTML file"
    )
    notebook.add_argument("notebook", type=Path, metavar="NOTEBOOK", help="an executed .ipynb")
    notebook.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML file")
    notebook.set_defaults(run=run_report_notebook)


def run_report_plan(args: argparse.Namespace) -> int:
    text = api.review(
        args.plan, reveal_addresses=args.reveal_addresses, journal=args.journal, html_out=args.out
    )
    sys.stdout.write(text)
    html_path = args.out or Path(args.plan) / "report.html"
    print(f"wrote {Path(args.plan) / 'report.txt'} and {html_path}", file=sys.stderr)
    return 0


def run_report_html(args: argparse.Namespace) -> int:
    from mqforensics.views.report import ReportInput, summary_of, write_report

    trends: dict[int, Any] = {}

    def trends_of(item: ReportInput) -> Any:
        # An audit that appended to a run history: its store's trends (Spark reads the history).
        from mqforensics.api_history import report_trends

        found = report_trends(item.manifest or {})
        trends[id(item)] = found
        return found

    loaded = write_report(
        args.inputs, args.out, title=args.title, reveal=args.reveal_addresses,
        find_check=systems.find_check, hide_target_of=api.target_hider, trends_of=trends_of,
    )  # fmt: skip
    for item in loaded:
        print(f"{item.kind:<10} {mask_secrets(str(item.path))}: {summary_of(item)}")
        if trends.get(id(item)) is not None:
            print(f"{'trends':<10} {mask_secrets(str(item.path))}: {trends[id(item)].summary()}")
    print(f"wrote {args.out}")
    return 0


def run_report_notebook(args: argparse.Namespace) -> int:
    from mqforensics.views.notebook_export import export_html

    export_html(args.notebook, args.out)
    print(f"wrote {args.out}")
    return 0
