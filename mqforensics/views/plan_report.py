"""The human-readable summary of a plan (and of its journal) that an approver signs off on.

The report is built once as a list of sections and rendered twice, as plain text and as a
self-contained HTML page (no script, no external asset: it is read on whatever machine holds the
plan, possibly offline, and may be archived with the approval). Every string shown goes through
`pseudonymize_text`: plans hold no address by design, but journal reasons, notes and an
approver's name may, and a report is the kind of file that gets mailed around. It goes through
`credentials.mask_secrets` first, whatever the reveal setting.
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqforensics.credentials import mask_secrets
from mqforensics.errors import InputError, PlanModified, PlanNotApproved
from mqforensics.privacy import pseudonymize_text
from mqforensics.retention.manifest import Plan, require_approval
from mqforensics.units import plural

FIRST_ACTIONS = 50
SKIP_EXAMPLES = 3
FAILURE_LINES = 5
_SUMMARY_LIMIT = 160
_TARGET_ORDER = (
    "keyspace",
    "bucket",
    "table",
    "queue",
    "timerangestart",
    "bucketid",
    "enqueueid",
    "key",
    "to",
)


@dataclass
class _Fields:
    pairs: list[tuple[str, str]]


@dataclass
class _Table:
    headers: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    numeric: tuple[int, ...] = ()


@dataclass
class _Status:
    text: str
    ok: bool


_Block = str | _Fields | _Table | _Status


@dataclass
class _Section:
    title: str
    blocks: list[_Block] = field(default_factory=list)


# A system's `hide_target(target, salt)` (`mqforensics.spec`): a plan action's target with what
# it holds beyond plain addresses (e.g. Cyrus userids and mailbox names) pseudonymised.
HideTarget = Callable[[dict[str, Any], str], dict[str, Any]]


def render_text(
    plan: Plan,
    journal: list[dict[str, Any]] | None = None,
    *,
    reveal: bool = False,
    salt: str = "",
    hide_target: HideTarget | None = None,
) -> str:
    """The report as plain text. `hide_target` is the plan's system's (None: only plain
    addresses are pseudonymised)."""
    show = _shower(reveal, salt)
    title, sections = _build(plan, journal, _target_hider(hide_target, reveal, salt))
    out = [show(title), "=" * len(show(title))]
    for section in sections:
        out += ["", section.title, "-" * len(section.title)]
        for block in section.blocks:
            out += _text_block(block, show)
    return "\n".join(out) + "\n"


def render_html(
    plan: Plan,
    journal: list[dict[str, Any]] | None = None,
    *,
    reveal: bool = False,
    salt: str = "",
    hide_target: HideTarget | None = None,
) -> str:
    """The report as a self-contained HTML page; `hide_target` as for `render_text`."""
    title, body = render_html_body(plan, journal, reveal=reveal, salt=salt, hide_target=hide_target)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + body
        + "\n</body>\n</html>\n"
    )


def render_html_body(
    plan: Plan,
    journal: list[dict[str, Any]] | None = None,
    *,
    reveal: bool = False,
    salt: str = "",
    level: int = 1,
    hide_target: HideTarget | None = None,
) -> tuple[str, str]:
    """(the escaped title, the HTML of the report's headings and sections): the page of
    `render_html`, or a part of a larger report (`mqforensics.views.report`) at heading `level`;
    `hide_target` as for `render_text`."""
    show = _shower(reveal, salt)

    def esc(text: str) -> str:
        return html.escape(show(text), quote=True)

    title, sections = _build(plan, journal, _target_hider(hide_target, reveal, salt))
    body = [f"<h{level}>{esc(title)}</h{level}>"]
    for section in sections:
        body.append(f"<h{level + 1}>{html.escape(section.title)}</h{level + 1}>")
        body += [_html_block(block, esc) for block in section.blocks]
    return esc(title), "\n".join(body)


CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "table.fields th{background:none;border:none;padding-right:1em}"
    "table.fields td{border:none;font-family:monospace}"
    ".status{font-weight:bold;padding:.4em .6em;display:inline-block}"
    ".ok{background:#e6f4e6;color:#14541a}.bad{background:#fbe9e7;color:#8a1c0c}"
)


def _shower(reveal: bool, salt: str) -> Callable[[str], str]:
    if reveal:
        return mask_secrets
    return lambda text: pseudonymize_text(mask_secrets(text), salt)


def _text_block(block: _Block, show: Callable[[str], str]) -> list[str]:
    if isinstance(block, str):
        return [show(block)]
    if isinstance(block, _Status):
        return [show(block.text) if block.ok else f"*** {show(block.text)} ***"]
    if isinstance(block, _Fields):
        width = max((len(key) for key, _ in block.pairs), default=0)
        return [f"  {key + ':':<{width + 1}} {show(value)}" for key, value in block.pairs]
    rows = [block.headers, *(tuple(show(cell) for cell in row) for row in block.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(block.headers))]
    lines = []
    for number, row in enumerate(rows):
        cells = [
            cell.rjust(widths[i]) if i in block.numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append(("  " + "  ".join(cells)).rstrip())
        if number == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return lines


def _html_block(block: _Block, esc: Callable[[str], str]) -> str:
    if isinstance(block, str):
        return f"<p>{esc(block)}</p>"
    if isinstance(block, _Status):
        return f'<p class="status {"ok" if block.ok else "bad"}">{esc(block.text)}</p>'
    if isinstance(block, _Fields):
        rows = "".join(
            f"<tr><th>{html.escape(key)}</th><td>{esc(value)}</td></tr>"
            for key, value in block.pairs
        )
        return f'<table class="fields">{rows}</table>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{esc(c)}</td>' if i in block.numeric else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in block.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_Hider = Callable[[dict[str, Any]], dict[str, Any]]


def _target_hider(hide_target: HideTarget | None, reveal: bool, salt: str) -> _Hider:
    """What pseudonymises the plan's targets beyond plain addresses (e.g. Cyrus userids and
    mailbox names): the system's `hide_target` its caller passed, with the salt."""
    if reveal or hide_target is None:
        return lambda target: target
    return lambda target: hide_target(target, salt)


def _build(
    plan: Plan, journal: list[dict[str, Any]] | None, hide: _Hider
) -> tuple[str, list[_Section]]:
    sections = [
        _plan_section(plan),
        _policy_section(plan.header.get("policy") or {}),
        _inputs_section(plan.header.get("inputs") or {}),
        _totals_section(plan.header.get("totals") or {}),
        _deferred_section(plan.header.get("deferred") or {}),
        *_calls_section(plan, hide),
        _Section("Notes", list(plan.header.get("notes") or []) or ["none"]),
        _actions_section(plan, hide),
    ]
    if journal is not None:
        sections += _journal_sections(plan, journal, hide)
    return f"mqforensics cleanup plan {plan.directory}", sections


def _inputs_section(inputs: dict[str, Any]) -> _Section:
    """What the plan was made from, one readable field per value: a nested record (the audit:
    directory, created at, findings sha256, source) as one field per key of it, named
    ``audit directory``...; lists and records inside as plain text, never JSON."""
    if not inputs:
        return _Section("Inputs", ["none recorded"])
    pairs = []
    for key, value in sorted(inputs.items()):
        if isinstance(value, dict) and value:
            pairs += [(f"{_label(key)} {_label(k)}", _plain(v)) for k, v in value.items()]
        else:
            pairs.append((_label(key), _plain(value)))
    return _Section("Inputs", [_Fields(pairs)])


def _label(key: Any) -> str:
    """A JSON key as a field name: ``findings_sha256`` -> ``findings sha256``."""
    return str(key).replace("_", " ")


def _plain(value: Any) -> str:
    """A JSON value as text a person reads: ``-`` for none, ``yes``/``no``, a list's items
    joined with ``; ``, a record as ``key value`` pairs joined with ``, ``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "; ".join(_plain(item) for item in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{_label(k)} {_plain(v)}" for k, v in value.items()) or "-"
    return str(value)


def _approval_status(plan: Plan) -> _Status:
    """Approved (by whom, when), or why not; never raises, since it is only being shown."""
    try:
        record = require_approval(plan)
    except PlanNotApproved:
        return _Status("NOT APPROVED", ok=False)
    except (PlanModified, InputError) as exc:
        return _Status(f"APPROVAL INVALID: {exc.message}", ok=False)
    note = f" ({record['note']})" if record.get("note") else ""
    return _Status(
        f"approved by {_value(record.get('approved_by'))} at {_value(record.get('approved_at'))}"
        f"{note}",
        ok=True,
    )


def _plan_section(plan: Plan) -> _Section:
    header = plan.header
    deferred = sum((header.get("deferred") or {}).values())
    return _Section(
        "Plan",
        [
            _approval_status(plan),
            _Fields(
                [
                    ("system", plan.system),
                    ("as of", _value(header.get("as_of"))),
                    ("created at", _value(header.get("created_at"))),
                    ("plan hash", plan.sha256),
                    ("actions", str(plan.action_count)),
                    ("deferred", str(deferred)),
                ]
            ),
        ],
    )


def _policy_section(policy: dict[str, Any]) -> _Section:
    rows = []
    for rule in policy.get("rules") or []:
        scope = (
            ", ".join(
                f"{name} {'/'.join(rule.get(name) or [])}"
                for name in ("systems", "queues")
                if rule.get(name)
            )
            or "all"
        )
        extra = []
        if rule.get("subject_count"):
            extra.append(plural(rule["subject_count"], "subject"))
        if rule.get("references_complete"):
            extra.append("references complete (operator)")
        rows.append(
            (
                str(rule.get("id")),
                str(rule.get("kind")),
                str(rule.get("older_than") or "-"),
                scope,
                ", ".join(extra) or "-",
                _value(rule.get("legal_basis")),
            )
        )
    return _Section(
        "Policy",
        [
            _Fields(
                [
                    ("file", _value(policy.get("path"))),
                    ("sha256", _value(policy.get("sha256"))),
                    (
                        "tombstone budget",
                        f"{_value(policy.get('tombstone_budget_per_partition'))} per partition",
                    ),
                ]
            ),
            _Table(("rule", "kind", "older than", "scope", "selects", "legal basis"), rows),
        ],
    )


def _totals_section(totals: dict[str, Any]) -> _Section:
    rows = []
    sums: Counter[str] = Counter()
    for kind, counts in sorted(totals.items()):
        for key in ("actions", "bytes", "tombstones"):
            sums[key] += int(counts.get(key, 0))
        rows.append(_totals_row(kind, counts))
    if len(rows) > 1:
        rows.append(_totals_row("total", sums))
    return _Section(
        "Actions by kind",
        [
            _Table(("kind", "actions", "bytes", "size", "tombstones"), rows, numeric=(1, 2, 3, 4))
            if rows
            else "no action"
        ],
    )


def _totals_row(kind: str, counts: Any) -> tuple[str, ...]:
    size = int(counts.get("bytes", 0))
    return (
        kind,
        str(counts.get("actions", 0)),
        str(size),
        _size(size),
        str(counts.get("tombstones", 0)),
    )


def _deferred_section(deferred: dict[str, int]) -> _Section:
    if not deferred:
        return _Section("Deferred (wanted by a rule, not planned)", ["none"])
    rows = [
        (reason, str(count))
        for reason, count in sorted(deferred.items(), key=lambda item: (-item[1], item[0]))
    ]
    return _Section(
        "Deferred (wanted by a rule, not planned)",
        [_Table(("reason", "count"), rows, numeric=(1,))],
    )


def _calls_section(plan: Plan, hide: _Hider) -> list[_Section]:
    """The calls deferred items name for a person to run (a target's ``call``: the system's
    own API, e.g. James's WebAdmin), in plan order; none, no section."""
    calls = [(d.kind, str(hide(d.target)["call"])) for d in plan.deferred() if "call" in d.target]
    if not calls:
        return []
    shown = calls[:FIRST_ACTIONS]
    blocks: list[_Block] = [_Table(("kind", "call"), shown)]
    if len(calls) > len(shown):
        blocks.append(f"... {len(calls) - len(shown)} more in deferred.jsonl")
    return [_Section(f"Calls to run, not made by the purger ({len(calls)})", blocks)]


def _actions_section(plan: Plan, hide: _Hider) -> _Section:
    rows = [
        (str(a.seq), a.kind, target_summary(hide(a.target)), ", ".join(a.rules), str(a.bytes))
        for a in itertools.islice(plan.actions(), FIRST_ACTIONS)
    ]
    if not rows:
        return _Section("Actions", ["no action"])
    shown = f"first {len(rows)} of {plan.action_count}, in execution order"
    return _Section(
        f"Actions ({shown})",
        [
            _Table(("seq", "kind", "target", "rules", "bytes"), rows, numeric=(0, 4)),
        ],
    )


def target_summary(target: dict[str, Any]) -> str:
    """One line naming an action's target, most significant keys first."""
    keys = [k for k in _TARGET_ORDER if k in target]
    keys += sorted(k for k in target if k not in _TARGET_ORDER)
    text = " ".join(f"{k}={_value(target[k])}" for k in keys)
    return text if len(text) <= _SUMMARY_LIMIT else text[: _SUMMARY_LIMIT - 1] + "…"


def _journal_sections(plan: Plan, journal: list[dict[str, Any]], hide: _Hider) -> list[_Section]:
    last: dict[Any, dict[str, Any]] = {}
    for record in journal:
        if record.get("event") in ("started", "done", "skipped", "failed"):
            last[record.get("id", record.get("seq"))] = record
    states = Counter(r["event"] for r in last.values())
    begins = [r for r in journal if r.get("event") == "begin"]
    bound = {r.get("plan_sha256") for r in begins}
    binding = (
        "this plan"
        if bound == {plan.sha256}
        else f"ANOTHER PLAN ({', '.join(sorted(map(str, bound)))})"
        if bound
        else "no begin record"
    )
    sections = [
        _Section(
            "Journal",
            [
                _Fields(
                    [
                        ("bound to", binding),
                        ("runs", str(len(begins))),
                        ("done", str(states["done"])),
                        ("skipped", str(states["skipped"])),
                        (
                            "skipped at their last check",
                            str(sum(1 for r in last.values() if r.get("at_last_check"))),
                        ),
                        ("failed", str(states["failed"])),
                        ("started without outcome", str(states["started"])),
                        ("not reached", str(max(plan.action_count - len(last), 0))),
                    ]
                )
            ],
        )
    ]
    skips = [r for r in last.values() if r["event"] == "skipped"]
    if skips:
        sections.append(_skips_section(plan, skips, hide))
    failures = [r for r in last.values() if r["event"] == "failed"]
    if failures:
        lines: list[_Block] = [
            f"seq {r.get('seq')} {r.get('kind', '')}: {r.get('reason') or r.get('error') or '?'}"
            for r in failures[:FAILURE_LINES]
        ]
        sections.append(_Section("Failures", lines))
    verified = [r for r in journal if r.get("event") == "verified"]
    if verified:
        sections.append(_verified_section(verified[-1]))
    measured = [r for r in journal if r.get("event") == "measured"]
    if measured:
        sections.append(_measured_section(measured))
    return sections


_RECORD_KEYS = ("event", "at", "phase")
PHASES = ("before", "after")


def _measured_section(records: list[dict[str, Any]]) -> _Section:
    """The executors' ``measured`` records: per executor, what the plan predicts and what the
    live system reported before the first action and after the verification (the last record
    of each phase), one row per place and figure."""
    last: dict[str, dict[str, Any]] = {}
    for record in records:
        last[str(record.get("phase"))] = record
    blocks: list[_Block] = [
        _Fields(
            [
                (f"{phase} at", _value(last[phase].get("at")) if phase in last else "not measured")
                for phase in PHASES
            ]
        )
    ]
    names = sorted({k for r in last.values() for k in r if k not in _RECORD_KEYS})
    for name in names:
        by_phase = {
            phase: record[name]
            for phase, record in last.items()
            if isinstance(record.get(name), dict)
        }
        rows: dict[tuple[str, str], dict[str, str]] = {}
        for phase, figures in by_phase.items():
            if "error" in figures:
                blocks.append(f"{name} {phase}: measurement failed: {_value(figures['error'])}")
            for column, kind in (("predicted", "predicted"), (phase, "observed")):
                places = figures.get(kind)
                if not isinstance(places, dict):
                    continue
                for where, values in places.items():
                    if not isinstance(values, dict):
                        continue
                    for figure, value in values.items():
                        rows.setdefault((str(where), str(figure)), {})[column] = _figure(value)
        if rows:
            blocks.append(
                _Table(
                    ("executor", "where", "figure", "predicted", *PHASES),
                    [
                        (name, where, figure, *(cells.get(c, "-") for c in ("predicted", *PHASES)))
                        for (where, figure), cells in sorted(rows.items())
                    ],
                    numeric=(3, 4, 5),
                )
            )
        for phase, figures in by_phase.items():
            blocks += [f"{name} {phase}: {_value(note)}" for note in figures.get("notes") or []]
    return _Section("Measured (what the live system reported)", blocks)


def _skips_section(plan: Plan, skips: list[dict[str, Any]], hide: _Hider) -> _Section:
    reasons = Counter(str(r.get("reason")) for r in skips)
    examples: dict[str, list[int]] = {}
    for record in skips:
        seqs = examples.setdefault(str(record.get("reason")), [])
        if len(seqs) < SKIP_EXAMPLES and isinstance(record.get("seq"), int):
            seqs.append(record["seq"])
    targets = _targets_of({seq for seqs in examples.values() for seq in seqs}, plan, hide)
    rows = [
        (
            reason,
            str(count),
            "; ".join(f"seq {seq} {targets.get(seq, '(not in plan)')}" for seq in examples[reason]),
        )
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    ]
    return _Section(
        "Skipped (precondition no longer held)",
        [_Table(("reason", "count", "first targets"), rows, numeric=(1,))],
    )


def _targets_of(seqs: set[int], plan: Plan, hide: _Hider) -> dict[int, str]:
    """Target summaries of a few actions, reading the actions file only as far as needed."""
    found: dict[int, str] = {}
    if not seqs:
        return found
    for action in plan.actions():
        if action.seq in seqs:
            found[action.seq] = f"{action.kind} {target_summary(hide(action.target))}"
            if len(found) == len(seqs):
                break
    return found


def _verified_section(record: dict[str, Any]) -> _Section:
    problems = record.get("problems")
    pairs = [(k, _value(v)) for k, v in sorted(record.items()) if k not in ("event", "problems")]
    blocks: list[_Block] = [
        _Status(
            "verified" if record.get("ok") else "VERIFICATION FAILED", ok=bool(record.get("ok"))
        ),
        _Fields(pairs),
    ]
    if isinstance(problems, list):
        blocks += [_value(problem) for problem in problems[:FAILURE_LINES]]
    return _Section("Last verification", blocks)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "-"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _figure(value: Any) -> str:
    """A measured number; "-" for none (null, NaN or infinite)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return _value(value)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    units = ["KiB", "MiB", "GiB", "TiB"]
    while size >= 1024 and len(units) > 1:
        size /= 1024
        units.pop(0)
    return f"{size:.1f} {units[0]}"


def summary_line(plan: Plan) -> str:
    """One line to confirm what was approved or reported, from the header alone."""
    totals = plan.header.get("totals") or {}
    kinds = ", ".join(
        f"{kind} {counts.get('actions', 0)}" for kind, counts in sorted(totals.items())
    )
    size = sum(int(counts.get("bytes", 0)) for counts in totals.values())
    tombstones = sum(int(counts.get("tombstones", 0)) for counts in totals.values())
    deferred = sum((plan.header.get("deferred") or {}).values())
    return (
        f"{plan.system} plan as of {plan.header.get('as_of')}: "
        f"{plural(plan.action_count, 'action')}{f' ({kinds})' if kinds else ''}, {_size(size)}, "
        f"{plural(tombstones, 'tombstone')}, {deferred:,} deferred"
    )
