"""`mqforensics report html`: audits, plans and validations in one self-contained HTML file.

An auditor archives this file: it holds everything it shows (inline CSS, plots as ``data:``
PNGs, no script, no external reference of any kind), so it reads the same offline in ten years.
Each input is a directory the other commands wrote: an audit's (``findings.json``), a plan
(``plan.json``, with its ``journal.jsonl`` when a purge ran) or a validation (``quality.json``).
Every text shown is pseudonymised unless ``--reveal-addresses``, escaped, and cleared of
credentials by `credentials.mask_secrets` (``scheme://user:secret@`` becomes
``scheme://[hidden]@``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mqforensics import __version__
from mqforensics.credentials import mask_secrets
from mqforensics.errors import InputError
from mqforensics.findings import SEVERITIES
from mqforensics.privacy import pseudonymize_text

ROWS_PER_CHECK = 500


@dataclass
class ReportInput:
    """One input directory, what kind it is, and its contents."""

    path: Path
    kind: str  # "findings", "plan" or "validation"
    rows: list[dict[str, Any]] = field(default_factory=list)
    plan: Any = None
    journal: list[dict[str, Any]] | None = None
    quality: dict[str, Any] | None = None


def load_input(path: Path) -> list[ReportInput]:
    """What a directory holds: its findings, its plan, its validation (one directory may hold
    findings and a validation); an InputError when it holds none of them."""
    from mqforensics.retention.manifest import JOURNAL, PLAN_JSON, read_plan

    if not path.is_dir():
        raise InputError(f"report input {path} is not a directory")
    found: list[ReportInput] = []
    findings = path / "findings.json"
    if findings.is_file():
        found.append(ReportInput(path, "findings", rows=_json_file(findings, list)))
    if (path / PLAN_JSON).is_file():
        plan = read_plan(path)
        journal = None
        if (path / JOURNAL).exists():
            from mqforensics.purge.journal import read_journal

            journal = read_journal(path / JOURNAL)
        found.append(ReportInput(path, "plan", plan=plan, journal=journal))
    quality = path / "quality.json"
    if quality.is_file():
        found.append(ReportInput(path, "validation", quality=_json_file(quality, dict)))
    if not found:
        raise InputError(
            f"report input {path} holds no findings.json, plan.json or quality.json "
            "(an audit's --out, a plan directory or a validation's --out)"
        )
    return found


def _json_file(path: Path, kind: type) -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(value, kind):
        raise InputError(f"{path}: expected a JSON {kind.__name__}")
    return value


# --- rendering -----------------------------------------------------------------------------------


class _Page:
    """The HTML being written, with the one text filter every shown string goes through."""

    def __init__(self, reveal: bool) -> None:
        self.reveal = reveal
        self.parts: list[str] = []
        self.images = 0

    def show(self, value: Any) -> str:
        text = mask_secrets("" if value is None else str(value))
        if not self.reveal:
            text = pseudonymize_text(text)
        return html.escape(text, quote=True)

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def figure(self, fig: Any, alt: str) -> None:
        from mqforensics.views.plots import data_uri

        self.images += 1
        self.add(f'<figure><img alt="{self.show(alt)}" src="{data_uri(fig)}"/></figure>')

    def table(
        self, headers: list[str], rows: list[list[Any]], numeric: tuple[int, ...] = ()
    ) -> None:
        head = "".join(f"<th>{self.show(h)}</th>" for h in headers)
        body = []
        for row in rows:
            cells = "".join(
                f'<td class="n">{self.show(_number(v))}</td>'
                if i in numeric
                else f"<td>{self.show(v)}</td>"
                for i, v in enumerate(row)
            )
            body.append(f"<tr>{cells}</tr>")
        self.add(f"<table><tr>{head}</tr>{''.join(body)}</table>")


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(inputs: list[ReportInput], *, title: str, reveal: bool = False) -> str:
    """The whole report as one HTML document."""
    from mqforensics.views.plan_report import CSS

    page = _Page(reveal)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    page.add(f"<h1>{page.show(title)}</h1>")
    privacy = (
        "Mail addresses are shown as they are (--reveal-addresses)."
        if reveal
        else "Mail addresses are pseudonymised (u-… tokens, stable within this report)."
    )
    page.add(f"<p>Generated {now} by mqforensics {__version__}. {privacy}</p>")
    page.add("<h2>Inputs</h2>")
    page.table(
        ["kind", "directory", "summary"], [[i.kind, str(i.path), _summary(i)] for i in inputs]
    )
    renderers: dict[str, Callable[[_Page, ReportInput], None]] = {
        "findings": _findings_section,
        "plan": _plan_section,
        "validation": _validation_section,
    }
    for item in inputs:
        renderers[item.kind](page, item)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{page.show(title)}</title>\n<style>{CSS}{_EXTRA_CSS}</style>\n</head>\n"
        "<body>\n" + "\n".join(page.parts) + "\n</body>\n</html>\n"
    )


_EXTRA_CSS = (
    "figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}"
    "h3{font-size:1.05em;margin-top:1.2em}"
)


def _summary(item: ReportInput) -> str:
    if item.kind == "findings":
        systems = sorted({str(r.get("system")) for r in item.rows}) or ["-"]
        worst = max((r["severity"] for r in item.rows), key=SEVERITIES.index, default="none")
        return f"{len(item.rows):,} findings ({', '.join(systems)}), worst {worst}"
    if item.kind == "plan":
        from mqforensics.views.plan_report import summary_line

        return summary_line(item.plan)
    quality = item.quality or {}
    failed = sum(
        1 for s in quality.get("suites", []) for e in s["expectations"] if not e["success"]
    )
    suites = len(quality.get("suites", []))
    return f"{quality.get('system', '?')}: {suites} suites, {failed} failed expectation(s)"


def _findings_section(page: _Page, item: ReportInput) -> None:
    from mqforensics.views.plot_data import findings_table
    from mqforensics.views.plots import findings_overview

    page.add(f"<h2>Findings: {page.show(item.path)}</h2>")
    table = findings_table(item.rows, reveal=True)  # the page filter pseudonymises
    if table.empty:
        page.add("<p>No findings.</p>")
        return
    counts = (
        table.groupby(["check", "severity"])
        .agg(findings=("subject", "size"), bytes=("bytes", "sum"))
        .reset_index()
    )
    page.table(
        ["check", "severity", "findings", "bytes"],
        [[r.check, r.severity, int(r.findings), int(r.bytes)] for r in counts.itertuples()],
        numeric=(2, 3),
    )
    page.figure(findings_overview(table, title=item.path.name or "findings"), "findings per check")
    for check, rows in table.groupby("check", sort=True):
        shown = rows.head(ROWS_PER_CHECK)
        page.add(f"<h3>{page.show(check)} ({len(rows):,})</h3>")
        for system in sorted({str(v) for v in rows["system"].dropna()}):
            page.add(_explanation(page, system, str(check)))
        page.table(
            ["severity", "queue", "scope", "subject", "bytes", "observed at", "detail"],
            [
                [
                    r.severity,
                    r.queue or "",
                    r.scope,
                    r.subject,
                    int(r.bytes),
                    "" if pd.isna(r.observed_at) else f"{r.observed_at:%Y-%m-%dT%H:%M:%SZ}",
                    r.detail,
                ]
                for r in shown.itertuples()
            ],
            numeric=(4,),
        )
        if len(rows) > len(shown):
            page.add(f"<p>{len(rows) - len(shown):,} more not shown.</p>")


def _explanation(page: _Page, system: str, name: str) -> str:
    """What the check detects, why it matters and what to do, from the system's spec."""
    from mqforensics import systems

    check = systems.find_check(system, name)
    if check is None:
        return ""
    items = (("What", check.what), ("Why it matters", check.why), ("What to do", check.todo))
    return (
        "<dl>"
        + "".join(f"<dt>{label}</dt><dd>{page.show(text)}</dd>" for label, text in items)
        + "</dl>"
    )


def _plan_section(page: _Page, item: ReportInput) -> None:
    from mqforensics.views.plan_report import render_html_body
    from mqforensics.views.plots import plan_overview

    actions = pd.DataFrame(
        [
            {
                "kind": a.kind,
                "rule": ", ".join(a.rules),
                "bytes": a.bytes,
                "tombstones": a.tombstones,
            }
            for a in item.plan.actions()
        ],
        columns=["kind", "rule", "bytes", "tombstones"],
    )
    page.add(f"<h2>Plan: {page.show(item.path)}</h2>")
    page.figure(plan_overview(actions, title=item.path.name or "plan"), "plan actions per kind")
    _, body = render_html_body(item.plan, item.journal, reveal=page.reveal, level=3)
    page.add(body)


def _validation_section(page: _Page, item: ReportInput) -> None:
    quality = item.quality or {}
    page.add(f"<h2>Validation: {page.show(item.path)}</h2>")
    rows = []
    failures = []
    for suite in quality.get("suites", []):
        expectations = suite.get("expectations", [])
        failed = [e for e in expectations if not e.get("success")]
        rows.append([suite.get("frame"), suite.get("suite"), len(expectations), len(failed)])
        for e in failed:
            values = json.dumps(e.get("unexpected_values") or [], sort_keys=True, default=str)
            failures.append(
                [suite.get("frame"), e.get("expectation"), e.get("target"),
                 e.get("unexpected_count"), e.get("error") or values]
            )  # fmt: skip
    page.table(["frame", "suite", "expectations", "failed"], rows, numeric=(2, 3))
    if failures:
        page.add("<h3>Failing expectations</h3>")
        page.table(["frame", "expectation", "target", "unexpected", "examples"], failures, (3,))
    else:
        page.add("<p>Every expectation passed.</p>")


def write_report(
    inputs: list[Path], out: Path, *, title: str = "mqforensics report", reveal: bool = False
) -> list[ReportInput]:
    """Render `inputs` into `out` atomically (a temporary file renamed over it)."""
    loaded = [item for path in inputs for item in load_input(path)]
    document = render(loaded, title=title, reveal=reveal)
    from mqforensics.retention.manifest import write_atomically

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, document.encode("utf-8"))
    return loaded


# --- the command ---------------------------------------------------------------------------------


def add_parser(kinds: argparse._SubParsersAction) -> None:
    parser = kinds.add_parser(
        "html", help="audits, plans and validations in one self-contained HTML file"
    )
    parser.add_argument(
        "inputs", nargs="+", type=Path, metavar="DIR",
        help="an audit's --out (findings.json), a plan directory, a validation's --out",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML file")
    parser.add_argument("--title", default="mqforensics report", help="the report's title")
    parser.add_argument(
        "--reveal-addresses", action="store_true",
        help="show mail addresses as they are (default: pseudonymised)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    loaded = write_report(args.inputs, args.out, title=args.title, reveal=args.reveal_addresses)
    for item in loaded:
        print(f"{item.kind:<10} {mask_secrets(str(item.path))}: {_summary(item)}")
    print(f"wrote {args.out}")
    return 0
