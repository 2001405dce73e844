"""`mqforensics approve` and `mqforensics report plan`: the review half of a cleanup.

Both only read and annotate a plan directory; neither needs Spark or a server, so a reviewer can
run them on any machine the plan was copied to.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mqforensics.retention.manifest import JOURNAL, read_plan, record_approval, write_atomically
from mqforensics.views.plan_report import render_html, render_text, summary_line


def add_approve_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "approve", help="approve a reviewed cleanup plan (records its hash in approval.json)"
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="plan directory")
    parser.add_argument("--by", required=True, metavar="NAME", help="who approves")
    parser.add_argument("--note", default="", metavar="TEXT", help="e.g. a ticket reference")
    parser.set_defaults(run=run_approve)


def run_approve(args: argparse.Namespace) -> int:
    plan = read_plan(args.plan)
    record = record_approval(plan, args.by, args.note)
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
    parser.set_defaults(run=run_report)
    from mqforensics.views import notebook_export
    from mqforensics.views import report as archive_report

    archive_report.add_parser(kinds)
    notebook_export.add_parser(kinds)


def run_report(args: argparse.Namespace) -> int:
    from mqforensics.views.report import check_out_file

    if args.out is not None:
        check_out_file(args.out)  # before anything is read or written
    plan = read_plan(args.plan)
    journal_path = args.journal
    if journal_path is None and (plan.directory / JOURNAL).exists():
        journal_path = plan.directory / JOURNAL
    journal = None
    if journal_path is not None:
        from mqforensics.purge.journal import read_journal

        journal = read_journal(journal_path)
    reveal = args.reveal_addresses
    text = render_text(plan, journal, reveal=reveal)
    html_path = args.out or plan.directory / "report.html"
    write_atomically(plan.directory / "report.txt", text.encode("utf-8"))
    write_atomically(html_path, render_html(plan, journal, reveal=reveal).encode("utf-8"))
    sys.stdout.write(text)
    print(f"wrote {plan.directory / 'report.txt'} and {html_path}", file=sys.stderr)
    return 0
