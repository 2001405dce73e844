"""An erasure receipt as a person reads it: ``RECEIPT.html`` and the short text summary.

Rendering only: everything shown comes from the signed receipt document
(`mqforensics.retention.receipt`), which holds no raw address; every text still goes through
`pseudonymize_text` and `mask_secrets`. A value the receipt leaves empty is shown in words
(``not fingerprinted``, ``none``), never as ``None``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

from mqforensics.credentials import mask_secrets
from mqforensics.privacy import pseudonymize_text
from mqforensics.units import plural
from mqforensics.views.plan_report import CSS

_EXTRA_CSS = (
    "code{font-size:.9em}td{font-family:monospace;overflow-wrap:anywhere;word-break:break-word}"
    "table{max-width:100%}"
    # A table's first column names its row (a kind, a store's kind, an audit): whole words.
    "td:first-child{overflow-wrap:normal;word-break:normal}"
)


def _show(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return pseudonymize_text(mask_secrets(str(value)))


def _esc(value: Any) -> str:
    return html.escape(_show(value), quote=True)


def _fields(pairs: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{_esc(v)}</td></tr>" for k, v in pairs)
    return f'<table class="fields">{rows}</table>'


def _table(headers: tuple[str, ...], rows: list[tuple[Any, ...]], empty: str) -> str:
    if not rows:
        return f"<p>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _where(item: dict[str, Any]) -> str:
    places = sorted({w["where"] for w in item.get("where") or ()})
    return ", ".join(places) if places else "not recorded by this system's audit"


def _object(item: dict[str, Any]) -> str:
    return f"{item['queue']} {item['object']}".strip() if item.get("queue") else item["object"]


def _places(item: dict[str, Any]) -> str:
    return "; ".join(f"{p['where']}: {p['reason']}" for p in item["unreadable"]) or "not said"


def _content(precondition: dict[str, Any]) -> str:
    """The content hashes and sizes a precondition recorded, as ``key=value`` text."""
    found: list[str] = []

    def walk(value: Any, name: str) -> None:
        if isinstance(value, dict):
            for key, inner in sorted(value.items()):
                walk(inner, f"{name}.{key}" if name else str(key))
        elif any(word in name.lower() for word in ("sha256", "etag", "size", "digest")):
            found.append(f"{name}={value}")

    walk(precondition, "")
    return ", ".join(found) if found else json.dumps(precondition, sort_keys=True)


def _request_html(request: dict[str, Any]) -> str:
    counts, after = request["counts"], request["after"]
    parts = [
        f"<h2>Request {_esc(request['rule'])}</h2>",
        _fields(
            [
                ("legal basis", request["legal_basis"]),
                ("search depth", request["search"]),
                ("subjects (keyed hashes of the plan's audit)", ", ".join(request["subjects"])),
                ("counts", ", ".join(f"{k} {v}" for k, v in counts.items())),
            ]
        ),
        "<h3>Stores searched</h3>",
        _table(
            ("kind", "location", "depth", "fingerprint before", "fingerprint after"),
            [
                (
                    s["kind"],
                    s["location"],
                    s["depth"],
                    s["fingerprint_before"] or "not fingerprinted",
                    s["fingerprint_after"] or "not fingerprinted",
                )
                for s in request["stores"]
            ],
            "no store",
        ),
        "<h3>Found before the purge</h3>",
        _table(
            ("finding", "object", "where", "bytes"),
            [(f["finding"], _object(f), _where(f), f["bytes"]) for f in request["found"]],
            "nothing of the subject was found",
        ),
        "<h3>Deleted</h3>",
        _table(
            ("seq", "kind", "target", "content as planned", "outcome", "at"),
            [
                (
                    d["seq"],
                    d["kind"],
                    d["target"],
                    _content(d["precondition"]),
                    d["outcome"],
                    d["at"],
                )
                for d in request["deleted"]
            ],
            "nothing was deleted for this request",
        ),
        "<h3>Deferred (not planned)</h3>",
        _table(
            ("kind", "target", "reason"),
            [(d["kind"], d["target"], d["reason"]) for d in request["deferred"]],
            "nothing was deferred",
        ),
        "<h3>Skipped by the purge</h3>",
        _table(
            ("seq", "kind", "target", "outcome", "reason"),
            [
                (s["seq"], s["kind"], s["target"], s["outcome"], s["reason"])
                for s in request["skipped"]
            ],
            "nothing was skipped",
        ),
        "<h3>Could not be searched</h3>",
        _table(
            ("finding", "object", "depth", "places"),
            [(u["finding"], _object(u), u["depth"], _places(u)) for u in request["unreadable"]],
            "every object could be searched at the depth asked",
        ),
        "<h3>After the purge</h3>",
        f'<p class="status {"ok" if after["clean"] else "bad"}">{_esc(after["result"])}</p>',
    ]
    if after["remaining"]:
        parts.append(_table(
            ("finding", "object", "where"),
            [(f["finding"], _object(f), _where(f)) for f in after["remaining"]], "",
        ))  # fmt: skip
    if after["unreadable"]:
        parts.append(_table(
            ("finding", "object", "depth", "places"),
            [(u["finding"], _object(u), u["depth"], _places(u)) for u in after["unreadable"]], "",
        ))  # fmt: skip
    return "\n".join(parts)


def render_html(document: dict[str, Any]) -> str:
    """The receipt as a self-contained HTML page (no script, no external asset)."""
    plan, approval, purge = document["plan"], document["approval"], document["purge"]
    audits, signature = document["audits"], document["signature"]
    title = f"Erasure receipt: {document['system']} plan {plan['sha256'][:16]}"
    body = [
        f"<h1>{_esc(title)}</h1>",
        f'<p class="status {"ok" if _all_clean(document) else "bad"}">{_esc(verdict(document))}'
        "</p>",
        "<h2>Plan, approval and purge</h2>",
        _fields(
            [
                ("plan", plan["directory"]),
                ("plan sha256", plan["sha256"]),
                ("policy sha256", plan["policy_sha256"]),
                ("actions", plan["action_count"]),
                ("approved by", approval["approved_by"]),
                ("approved at", approval["approved_at"]),
                ("approval note", approval["note"]),
                ("purge started", purge["started_at"]),
                ("purge completed", purge["completed_at"]),
                (
                    "purge verification",
                    "passed"
                    if purge["verified"]
                    else "found problems: " + "; ".join(purge["problems"]),
                ),
                ("journal sha256", purge["journal_sha256"]),
            ]
        ),
        "<h2>Audits</h2>",
        _table(
            ("audit", "directory", "made at", "as of", "findings sha256", "policy sha256"),
            [
                (
                    name,
                    a["directory"],
                    a["created_at"],
                    a["as_of"],
                    a["findings_sha256"],
                    a["policy_sha256"],
                )
                for name, a in (
                    ("before (planned from)", audits["before"]),
                    ("after the purge", audits["after"]),
                )
            ],
            "",
        ),
        *(_request_html(request) for request in document["requests"]),
        "<h2>Signature</h2>",
        _fields(
            [
                ("algorithm", signature["algorithm"]),
                ("key fingerprint", signature["key_fingerprint"]),
                ("public key", signature["public_key"]),
                ("made at", document["made_at"]),
                ("by", f"{document['tool']['name']} {document['tool']['version']}"),
                ("check it", "mqforensics receipt verify RECEIPT.json --public-key KEY.pub"),
            ]
        ),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n<style>{CSS}{_EXTRA_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _all_clean(document: dict[str, Any]) -> bool:
    return all(r["after"]["clean"] for r in document["requests"])


def verdict(document: dict[str, Any]) -> str:
    if _all_clean(document):
        return (
            "After the purge, a fresh audit found the subjects in none of the stores searched, "
            "at the depth searched."
        )
    return "After the purge, a fresh audit still finds subjects in the stores (listed)."


def render_text(document: dict[str, Any]) -> str:
    """The short summary printed on stdout."""
    plan, approval, signature = document["plan"], document["approval"], document["signature"]
    lines = [
        f"receipt of {document['system']} plan {plan['sha256']}, approved by "
        f"{_show(approval['approved_by'])} at {approval['approved_at']}, purge completed "
        f"{document['completed_at']}",
    ]
    for request in document["requests"]:
        c = request["counts"]
        lines.append(
            f"request {request['rule']} ({_show(request['legal_basis'])}; search "
            f"{request['search']}): {plural(len(request['stores']), 'store')} searched, "
            f"{plural(c['found'], 'object')} found, {c['deleted']} deleted, "
            f"{c['deferred']} deferred, {c['skipped']} skipped, {c['unreadable']} unreadable; "
            f"after the purge: {request['after']['result']}"
        )
    lines.append(f"signed with Ed25519 key {signature['key_fingerprint']}")
    return "\n".join(lines) + "\n"
