"""The report behind `mqforensics report html`: audits, plans and validations in one
self-contained HTML file.

An auditor archives this file: it holds everything it shows (inline CSS, plots as ``data:``
PNGs, no script, no external reference of any kind), so it reads the same offline in ten years.
Each input is a directory the other commands wrote: an audit's (``findings.json``), a plan
(``plan.json``, with its ``journal.jsonl`` when a purge ran) or a validation (``quality.json``).
Every text shown is pseudonymised unless ``--reveal-addresses``, escaped, and cleared of
credentials by `credentials.mask_secrets` (``scheme://user:secret@`` becomes
``scheme://[hidden]@``).

This module consults no system registry, reads no run history and parses no command line: its
caller (the command-line edge, `mqforensics.cli`) passes the registry's functions down
(`find_check`, `hide_target_of`) and the one that reads the Trends of an audit that appended to a
history (`trends_of`: `api_history.report_trends`).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import mask_secrets
from mqforensics.errors import InputError
from mqforensics.findings import SEVERITIES
from mqforensics.privacy import pseudonymize_text
from mqforensics.version import __version__

if TYPE_CHECKING:  # pandas is imported where a report is rendered: `mqforensics` starts quicker
    import pandas as pd

    from mqforensics.views.plan_report import HideTarget
    from mqforensics.views.trends import TrendsData

ROWS_PER_CHECK = 500

# (system, check name) -> that system's `Check` (with .what, .why, .todo), None when unknown.
FindCheck = Callable[[str, str], Any | None]
# system name -> that system's `hide_target(target, salt)`, None when it has none.
HideTargetOf = Callable[[str], "HideTarget | None"]
# An audit's input -> what its Trends section shows (None: none); the caller reads the history.
TrendsOf = Callable[["ReportInput"], "TrendsData | None"]


@dataclass
class ReportInput:
    """One input directory, what kind it is, and its contents."""

    path: Path
    kind: str  # "findings", "plan" or "validation"
    rows: list[dict[str, Any]] = field(default_factory=list)
    manifest: dict[str, Any] | None = None  # an audit's manifest.json, when it has one
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
        manifest = path / "manifest.json"
        found.append(
            ReportInput(
                path, "findings", rows=_json_file(findings, list),
                manifest=_json_file(manifest, dict) if manifest.is_file() else None,
            )
        )  # fmt: skip
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

    def __init__(
        self,
        reveal: bool,
        *,
        find_check: FindCheck | None = None,
        hide_target_of: HideTargetOf | None = None,
    ) -> None:
        self.reveal = reveal
        self.find_check = find_check
        self.hide_target_of = hide_target_of
        self.parts: list[str] = []
        self.images = 0

    def show(self, value: Any) -> str:
        """`value` as escaped HTML text: credentials masked, addresses pseudonymised unless
        revealed; no value (None, NaN, NaT) is an empty text, never ``None`` or ``nan``."""
        from mqforensics.views.plot_data import is_missing

        text = mask_secrets("" if is_missing(value) else str(value))
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
        self,
        headers: list[str],
        rows: list[list[Any]],
        numeric: tuple[int, ...] = (),
        prose: tuple[int, ...] = (),
    ) -> None:
        """A table: `numeric` columns right-aligned, `prose` ones (sentences) kept wide enough
        to read, instants on one line."""
        head = "".join(f"<th>{self.show(h)}</th>" for h in headers)
        body = []
        for row in rows:
            cells = "".join(
                f'<td class="n">{self.show(_number(v))}</td>'
                if i in numeric
                else f"<td{_classes(v, prose=i in prose)}>{self.show(v)}</td>"
                for i, v in enumerate(row)
            )
            body.append(f"<tr>{cells}</tr>")
        wide = ' class="many"' if len(headers) > _MANY_COLUMNS else ""
        self.add(f"<table{wide}><tr>{head}</tr>{''.join(body)}</table>")

    def record(self, headers: list[str], row: list[Any]) -> None:
        """One row as a table of (heading, value) lines: a single finding reads down the page,
        however many detail keys it has, instead of as a one-row table wider than it."""
        lines = "".join(
            f"<tr><th>{self.show(h)}</th><td{_classes(v)}>{self.show(v)}</td></tr>"
            for h, v in zip(headers, row, strict=True)
        )
        self.add(f'<table class="record">{lines}</table>')


# A table of more columns is printed smaller (``table.many``), to fit a page's width.
_MANY_COLUMNS = 12


# A cell holding a token (no space) this long may break it anywhere on paper (``td.k``):
# shorter words and numbers never break.
_LONG_TOKEN = 20
_TOKENS = re.compile(r"\S+")


def _classes(value: Any, *, prose: bool = False) -> str:
    """The class attribute of a table cell of `value`: ``p`` in a column of sentences (kept
    wide enough to read), ``t`` for an instant (one line on screen), ``k`` when it holds a
    token longer than `_LONG_TOKEN` (an id, a path, a digest: on paper it may break anywhere,
    so that a wide table fits the page's width)."""
    text = value if isinstance(value, str) else ""
    names = ["p"] if prose else []
    if _INSTANT.fullmatch(text):
        names.append("t")
    if any(len(token) > _LONG_TOKEN for token in _TOKENS.findall(text)):
        names.append("k")
    return f' class="{" ".join(names)}"' if names else ""


# An instant as findings write it: kept on one line in a table.
_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?Z?")


def _number(value: Any) -> str:
    from mqforensics.views.plot_data import cell_text

    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return cell_text(value)


def render(
    inputs: list[ReportInput],
    *,
    title: str,
    reveal: bool = False,
    find_check: FindCheck | None = None,
    hide_target_of: HideTargetOf | None = None,
    trends_of: TrendsOf | None = None,
) -> str:
    """The whole report as one HTML document. `find_check(system, check)` gives the `Check` whose
    texts (what, why, what to do) a verdict card shows (None: no description);
    `hide_target_of(system)` the `hide_target` a plan's targets go through (None: only plain
    addresses are pseudonymised); `trends_of(audit)` what the Trends section after an audit's
    findings shows of the run history it appended to (`views.trends.TrendsData`; called only
    for an audit whose manifest names a history; None: no Trends section)."""
    from mqforensics.views.plan_report import CSS

    page = _Page(reveal, find_check=find_check, hide_target_of=hide_target_of)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    page.add(f"<h1>{page.show(title)}</h1>")
    privacy = (
        "Mail addresses are shown as they are (--reveal-addresses)."
        if reveal
        else "Mail addresses are pseudonymised (u-… tokens, stable within this report)."
    )
    page.add(f"<p>Generated {now} by mqforensics {__version__}. {privacy}</p>")
    _verdict_section(page, inputs)
    page.add("<h2>Inputs</h2>")
    page.table(
        ["kind", "directory", "summary"], [[i.kind, str(i.path), summary_of(i)] for i in inputs]
    )
    renderers: dict[str, Callable[[_Page, ReportInput], None]] = {
        "findings": _findings_section,
        "plan": _plan_section,
        "validation": _validation_section,
    }
    for item in inputs:
        renderers[item.kind](page, item)
        if trends_of is not None and item.kind == "findings" and _appended(item):
            trends = trends_of(item)
            if trends is not None:
                _trends_section(page, item, trends)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{page.show(title)}</title>\n<style>{CSS}{_EXTRA_CSS}</style>\n</head>\n"
        "<body>\n" + "\n".join(page.parts) + "\n</body>\n</html>\n"
    )


_EXTRA_CSS = (
    "figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}"
    "h3{font-size:1.05em;margin-top:1.2em}"
    ".verdict{font-size:1.1em}.warn{background:#fff4d6;color:#6b4a00}"
    ".check{border-left:4px solid #ccc;padding:.1em 0 .1em .8em;margin:1em 0}"
    ".check h3{margin:.2em 0}.check p.facts{margin:.2em 0;color:#444}"
    ".check dl{margin:.3em 0}.check dt{font-weight:bold;margin-top:.3em}.check dd{margin-left:0}"
    ".sev-info{border-color:#8fb3d9}.sev-warning{border-color:#f0b429}"
    ".sev-error{border-color:#d64545}.sev-critical{border-color:#7a0d0d}"
    "p.same{color:#444;font-size:.95em}"
    ".wide{overflow-x:auto}.wide table{font-size:.9em}td.t{white-space:nowrap}"
    "td.p{min-width:16em}p.note{color:#444;font-size:.9em;margin:.3em 0}"
    "table.record th{text-align:left;font-weight:normal;color:#444;white-space:nowrap}"
    "table.record td{max-width:60em}"
    # On paper nothing scrolls: a wide table wraps its cells (long tokens anywhere) to the
    # page's width, on a landscape page, instead of being cut at the margin.
    "@page{size:landscape;margin:12mm}"
    "@media print{body{margin:0;max-width:none;font-size:9pt}"
    ".wide{overflow:visible}.wide table{font-size:7pt}.wide th,.wide td{padding:.1em .3em}"
    ".wide table.many{font-size:6pt}.wide table.record{font-size:8pt}"
    "td.t{white-space:normal}td.k{overflow-wrap:anywhere}td.p{min-width:9em}"
    "tr,figure,.check{break-inside:avoid}h2,h3{break-after:avoid}}"
)


def summary_of(item: ReportInput) -> str:
    """One line on what `item` holds: its findings, its plan or its validation."""
    if item.kind == "findings":
        from mqforensics.views.plots import plural

        names = sorted({str(r.get("system")) for r in item.rows if r.get("system")}) or ["-"]
        if not item.rows:
            return "no findings"
        return (
            f"{plural(len(item.rows), 'finding')} ({', '.join(names)}), worst {_worst(item.rows)}"
        )
    if item.kind == "plan":
        from mqforensics.views.plan_report import summary_line

        return summary_line(item.plan)
    failed = _failed_expectations(item)
    suites = len((item.quality or {}).get("suites", []))
    system = (item.quality or {}).get("system") or "unknown system"
    return f"{system}: {_plural(suites, 'suite')}, {_plural(failed, 'failed expectation')}"


def _plural(count: int, word: str) -> str:
    from mqforensics.units import plural

    return plural(count, word)


def _worst(rows: list[dict[str, Any]]) -> str:
    known = [str(r["severity"]) for r in rows if r.get("severity") in SEVERITIES]
    return max(known, key=SEVERITIES.index, default="unknown")


def _failed_expectations(item: ReportInput) -> int:
    suites = (item.quality or {}).get("suites", [])
    return sum(1 for s in suites for e in s.get("expectations", []) if not e.get("success"))


# --- the first section: what is wrong, how much it matters, what to do ---------------------------


@dataclass
class CheckSummary:
    """What one check of one system found in one audit, for the verdict."""

    system: str
    check: str
    severity: str  # the worst of its findings
    findings: int
    bytes: int | None  # what its findings hold, each stored object once; None: no size recorded
    addresses: int | None  # mail addresses its findings hold, when their details say
    subjects: int | None  # distinct data subjects, when their details say


def check_summaries(rows: list[dict[str, Any]]) -> list[CheckSummary]:
    """One summary per (system, check) that found something, worst severity first, then most
    findings first; its bytes count each stored object once (`findings.held_objects`)."""
    from mqforensics.findings import held_objects
    from mqforensics.views.plot_data import personal_data

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((str(row.get("system") or ""), str(row.get("check"))), []).append(row)
    summaries = []
    for (system, check), found in groups.items():
        addresses, subjects = personal_data(r.get("detail") for r in found)
        held = held_objects(found)
        summaries.append(
            CheckSummary(
                system=system,
                check=check,
                severity=_worst(found),
                findings=len(found),
                bytes=sum(held.values()) if held else None,
                addresses=addresses,
                subjects=subjects,
            )
        )
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    summaries.sort(key=lambda c: (-rank.get(c.severity, -1), -c.findings, c.check))
    return summaries


def _exposed(summary: CheckSummary) -> str:
    from mqforensics.views.plots import plural

    parts = []
    if summary.addresses is not None:
        parts.append(plural(summary.addresses, "mail address", "mail addresses"))
    if summary.subjects is not None:
        parts.append(plural(summary.subjects, "data subject"))
    return ", ".join(parts)


def _verdict_section(page: _Page, inputs: list[ReportInput]) -> None:
    page.add("<h2>Verdict</h2>")
    audits = [item for item in inputs if item.kind == "findings"]
    if not audits:
        page.add("<p>This report holds no audit (no findings.json among its inputs).</p>")
    for item in audits:
        _audit_verdict(page, item, named=len(audits) > 1)
    for item in inputs:
        if item.kind == "plan":
            page.add(f"<p>Plan {page.show(item.path)}: {page.show(summary_of(item))}.</p>")
        elif item.kind == "validation":
            failed = _failed_expectations(item)
            status = "bad" if failed else "ok"
            text = (f"{_plural(failed, 'expectation')} failed" if failed
                    else "every expectation passed")  # fmt: skip
            page.add(f'<p class="status {status}">Validation {page.show(item.path)}: '
                     f"{page.show(text)}.</p>")  # fmt: skip


def _audit_verdict(page: _Page, item: ReportInput, *, named: bool) -> None:
    from mqforensics.findings import checks_found, held_objects, held_text, severity_counts
    from mqforensics.findings import size_text as _size
    from mqforensics.views.plot_data import MISSING

    where = f"{item.path}: " if named else ""
    manifest = item.manifest or {}
    not_run = manifest.get("not_run", {})
    ran = len(manifest["checks"]) - len(not_run) if manifest.get("checks") else None
    if not item.rows:
        run = f" in the {_plural(ran, 'check')} run" if ran is not None else ""
        clean = f"{where}Clean: the audit found nothing{run}."
        page.add(f'<p class="status ok verdict">{page.show(clean)}</p>')
        _not_checked(page, not_run)
        return
    summaries = check_summaries(item.rows)
    found = checks_found(len(summaries), ran)
    held = held_text(item.rows)
    text = (
        f"{where}{_plural(len(item.rows), 'finding')} ({severity_counts(item.rows)}) from "
        f"{found}; worst severity {_worst(item.rows)}; {held}"
        f"{' (each counted once)' if held_objects(item.rows) else ''}."
    )
    status = {"critical": "bad", "error": "bad", "warning": "warn"}.get(_worst(item.rows), "ok")
    page.add(f'<p class="status {status} verdict">{page.show(text)}</p>')
    if held_objects(item.rows):
        page.add(
            '<p class="note">Bytes held: each stored object (system, scope, object) a finding '
            "names, counted once whichever checks found it; an object inside another that is a "
            "finding too (e.g. a James mail row in its partition) is part of that one; findings "
            "that record no size count for nothing. A check's row below counts its own findings "
            "only, so the rows may add up to more.</p>"
        )
    page.table(
        ["check", "worst severity", "findings", "bytes held", "personal data held"],
        [
            [
                c.check,
                c.severity,
                c.findings,
                _size(c.bytes) if c.bytes is not None else MISSING,
                _exposed(c) or MISSING,
            ]
            for c in summaries
        ],
        numeric=(2, 3),
    )
    _not_checked(page, not_run)
    for summary in summaries:
        page.add(_check_card(page, summary))


def _not_checked(page: _Page, not_run: dict[str, str]) -> None:
    """The checks the audit did not run (its manifest's ``not_run``), each with why and what
    would have run it; nothing when it ran them all."""
    if not not_run:
        return
    page.add("<h3>Not checked</h3>")
    page.add(
        f"<p>{page.show(_plural(len(not_run), 'check'))} did not run, for want of an input: "
        "nothing is known of what they look for.</p>"
    )
    page.table(["check", "why it did not run"], [[c, why] for c, why in sorted(not_run.items())])


def _check_card(page: _Page, summary: CheckSummary) -> str:
    """One check's verdict: its name and counts, what it detects, why it matters, what to do
    (the texts of the system's `Check`, as the page's `find_check` gives it)."""
    from mqforensics.findings import size_text as _size

    find = page.find_check
    check = find(summary.system, summary.check) if summary.system and find else None
    facts = [
        _plural(summary.findings, "finding"),
        f"worst severity {summary.severity}",
        f"{_size(summary.bytes)} held" if summary.bytes is not None else "no size recorded",
    ]
    if _exposed(summary):
        facts.append(f"personal data: {_exposed(summary)}")
    if check is None:
        texts = [("What", f"{summary.check} is not a check of this version's "
                  f"{summary.system or 'unknown'} system; no description.")]  # fmt: skip
    else:
        texts = [("What it detects", check.what), ("Why it matters", check.why),
                 ("What to do", check.todo)]  # fmt: skip
    terms = "".join(f"<dt>{label}</dt><dd>{page.show(text)}</dd>" for label, text in texts)
    title = f"{summary.check} ({summary.system})" if summary.system else summary.check
    return (
        f'<div class="check sev-{page.show(summary.severity)}">'
        f"<h3>{page.show(title)}</h3>"
        f'<p class="facts">{page.show(" · ".join(facts))}</p><dl>{terms}</dl></div>'
    )


# --- the findings in detail ----------------------------------------------------------------------

# Columns every finding has, shown before its detail's; `system` and `check` are the section's.
# A finding's `subject` (the key of the stored thing it is about) is shown as "object": "subject"
# would read as a data subject (`personal_data`).
_BASE_COLUMNS = ("severity", "queue", "scope", "object", "bytes", "observed at")
# Detail keys holding a duration, by their suffix, and its unit in seconds: shown as a person
# reads it (``8d 3h``, `units.human_duration`) under the key without the unit (``age``).
_DURATION_SUFFIXES = {"_seconds": 1, "_days": 86400}


def findings_rows(rows: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Findings of one check as named columns: severity, queue, scope, object (the finding's
    `subject`), bytes, observed at, then one column per key of their details
    (`plot_data.detail_columns`; a duration, ``*_seconds`` or ``*_days``, as ``8d 3h``); every
    cell is text, a missing value an en dash (bytes too, for a finding that records no size:
    a ``sized`` column of `rows` that is false)."""
    from mqforensics.views.plot_data import MISSING, cell_text, detail_columns

    keys, details = detail_columns(rows["detail"])
    durations = _duration_columns(keys, rows["detail"])
    table = []
    sized = rows["sized"] if "sized" in rows else [True] * len(rows)
    for row, detail, has_size in zip(rows.itertuples(index=False), details, sized, strict=True):
        size = int(row.bytes) if has_size else MISSING
        base = [row.severity, row.queue, row.scope, row.subject, size, row.observed_at]
        for index, cells in durations.items():
            detail[index] = cells.pop(0)
        table.append([f"{v:,}" if isinstance(v, int) else cell_text(v) for v in base] + detail)
    return [*_BASE_COLUMNS, *_detail_titles(keys)], table


def _detail_titles(keys: list[str]) -> list[str]:
    """Detail keys as column headings; a duration's without its unit (``age_seconds``: ``age``),
    or ``lifetime duration`` when another key is already ``lifetime``."""
    from mqforensics.views.plot_data import column_title

    titles = []
    for key in keys:
        base = _duration_key(key)
        if base is None:
            titles.append(column_title(key))
        else:
            titles.append(column_title(base if base not in keys else f"{base}_duration"))
    return titles


def _duration_key(key: str) -> str | None:
    """`key` without its duration suffix (``age_seconds`` -> ``age``), None when it has none."""
    for suffix in _DURATION_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return None


def _duration_columns(keys: list[str], details: Any) -> dict[int, list[str]]:
    """Per detail column holding a duration (by its key's suffix), its cells as human
    durations (a value that is no number as `cell_text` writes it)."""
    from mqforensics.units import human_duration
    from mqforensics.views.plot_data import cell_text, detail_of

    found: dict[int, list[str]] = {}
    decoded = [detail_of(d) for d in details]
    for index, key in enumerate(keys):
        if _duration_key(key) is None:
            continue
        unit = next(size for suffix, size in _DURATION_SUFFIXES.items() if key.endswith(suffix))
        cells = []
        for detail in decoded:
            value = detail.get(key)
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and abs(value) < 1e15  # finite (NaN and infinity are no duration)
            ):
                cells.append(human_duration(value * unit))
            else:
                cells.append(cell_text(value))
        found[index] = cells
    return found


def split_constant_columns(
    headers: list[str], rows: list[list[str]], keep: tuple[str, ...] = ("severity", "object")
) -> tuple[list[tuple[str, str]], list[str], list[list[str]]]:
    """Columns with one value in every row (of two rows or more) taken out of the table, as
    (heading, value) pairs said once above it; a detail column empty in every row is dropped
    without a word. `keep` columns always stay."""
    from mqforensics.views.plot_data import MISSING

    if len(rows) < 2:
        return [], headers, rows
    constant = [
        i for i, name in enumerate(headers)
        if name not in keep and len({row[i] for row in rows}) == 1
    ]  # fmt: skip
    same = [
        (headers[i], rows[0][i])
        for i in constant
        if headers[i] in _BASE_COLUMNS or rows[0][i] != MISSING
    ]
    kept = [i for i in range(len(headers)) if i not in constant]
    return same, [headers[i] for i in kept], [[row[i] for i in kept] for row in rows]


def _findings_section(page: _Page, item: ReportInput) -> None:
    from mqforensics.views.plot_data import findings_table
    from mqforensics.views.plots import findings_overview

    page.add(f"<h2>Findings: {page.show(item.path)}</h2>")
    table = findings_table(item.rows, reveal=True)  # the page filter pseudonymises
    if table.empty:
        page.add("<p>No findings.</p>")
        return
    figure = findings_overview(table, title=item.path.name or "findings")
    if len(figure.axes) > 1:  # its total would count an object found twice twice: the verdict's
        figure.axes[1].set_title("bytes held per check")
    page.figure(figure, "findings per check")
    table["sized"] = _sized(table)
    for check, rows in table.groupby("check", sort=True):
        shown = rows.head(ROWS_PER_CHECK)
        page.add(f"<h3>{page.show(check)} ({len(rows):,})</h3>")
        headers, cells = findings_rows(shown)
        same, headers, cells = split_constant_columns(headers, cells)
        if same:
            said = "; ".join(f"{name}: {value}" for name, value in same)
            page.add(f'<p class="same">Same in every finding below: {page.show(said)}</p>')
        numeric = (headers.index("bytes"),) if "bytes" in headers else ()
        page.add('<div class="wide">')
        if len(cells) == 1:
            page.record(headers, cells[0])
        else:
            page.table(headers, cells, numeric=numeric, prose=_prose_columns(cells))
        page.add("</div>")
        if len(rows) > len(shown):
            page.add(f"<p>{len(rows) - len(shown):,} more not shown.</p>")


def _sized(table: pd.DataFrame) -> list[bool]:
    """Per row of `table` (`plot_data.findings_table`), whether its finding records a size
    (``bytes`` is null, not 0, for one that does not)."""
    return [bool(v) for v in table["bytes"].notna()]


_PROSE_WORDS = 5  # a cell of this many words or more is a sentence: its column is kept wide


def _prose_columns(cells: list[list[str]]) -> tuple[int, ...]:
    """The columns some cell of which is a sentence (a Postfix queue file's damage, a problem):
    given a minimum width, so that a table of long tokens never squeezes them to a word per
    line."""
    width = max((len(row) for row in cells), default=0)
    return tuple(
        i for i in range(width) if any(_is_prose(row[i]) for row in cells if i < len(row))
    )  # fmt: skip


def _is_prose(text: str) -> bool:
    """Whether `text` reads as a sentence: `_PROSE_WORDS` words or more, most of them words
    of letters (not a list of numbers or ids)."""
    words = text.split()
    letters = sum(1 for word in words if word.strip(".,;:()'\"").isalpha())
    return len(words) >= _PROSE_WORDS and letters * 2 > len(words)


def _appended(item: ReportInput) -> bool:
    """Whether the audit of `item` appended its figures to a run history (its manifest says)."""
    return bool((item.manifest or {}).get("history"))


def _trends_section(page: _Page, item: ReportInput, trends: TrendsData) -> None:
    """The store's series in the history the audit appended to, the alerts marked, and the
    alerts firing at its latest run; or the one line saying the history could not be read."""
    from mqforensics.views.trends import STORE_ALERT_HEADERS, alert_rows

    page.add(f"<h2>Trends: {page.show(item.path)}</h2>")
    if trends.error is not None:  # one line, and the report is written all the same
        said = f"The history this audit appended to (store {trends.scope}) could not be read: "
        page.add(f'<p class="warn">{page.show(said + trends.error.rstrip("."))}.</p>')
        return
    page.add(f"<p>{page.show(trends.about())}</p>")
    if trends.alerts:
        firing = _plural(len(trends.alerts), "alert")
        page.add(f"<h3>Alerts at the store's latest audit ({page.show(firing)})</h3>")
        page.add('<div class="wide">')
        rows = alert_rows(trends.alerts, in_store=True)
        page.table(STORE_ALERT_HEADERS, rows, prose=(len(STORE_ALERT_HEADERS) - 1,))
        page.add("</div>")
    else:
        rules = _plural(trends.rules, "rule")
        page.add(f"<p>No alert of the {page.show(rules)} fires at the store's latest audit.</p>")
    text = None if page.reveal else pseudonymize_text
    for metric, figure in trends.figures(text):
        page.figure(figure, f"trend of {metric}")
    if trends.quiet:
        page.add(f'<p class="note">At 0 in every audit, not drawn: '
                 f"{page.show(', '.join(trends.quiet))}.</p>")  # fmt: skip


def _plan_section(page: _Page, item: ReportInput) -> None:
    import pandas as pd

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
    hide_target = page.hide_target_of(item.plan.system) if page.hide_target_of else None
    _, body = render_html_body(
        item.plan, item.journal, reveal=page.reveal, level=3, hide_target=hide_target
    )
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
    inputs: list[Path],
    out: Path,
    *,
    title: str = "mqforensics report",
    reveal: bool = False,
    find_check: FindCheck | None = None,
    hide_target_of: HideTargetOf | None = None,
    trends_of: TrendsOf | None = None,
) -> list[ReportInput]:
    """Render `inputs` into `out` atomically (a temporary file renamed over it); `out`'s
    directory must exist (`check_out_file`). `find_check`, `hide_target_of` and `trends_of` as
    for `render`."""
    check_out_file(out)
    loaded = [item for path in inputs for item in load_input(path)]
    document = render(
        loaded, title=title, reveal=reveal, find_check=find_check, hide_target_of=hide_target_of,
        trends_of=trends_of,
    )  # fmt: skip
    from mqforensics.retention.manifest import write_atomically

    write_atomically(out, document.encode("utf-8"))
    return loaded


def check_out_file(out: Path) -> None:
    """A ConfigError, before anything is read or written, when `out` cannot be the file a report
    command writes: its directory does not exist (never created silently: a typo would put an
    archive where nobody looks) or is not a directory, or `out` is a directory."""
    from mqforensics.errors import ConfigError

    directory = out.parent
    if not directory.exists():
        raise ConfigError(f"--out {out}: directory {directory} does not exist (create it first)")
    if not directory.is_dir():
        raise ConfigError(f"--out {out}: {directory} is not a directory")
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give the file to write")
