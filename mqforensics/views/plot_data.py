"""The small tables plots and explorers draw: reductions done in Spark, collected as pandas.

Nothing here decides what is wrong (the checks do); these functions only count and lay out what
the readers and checks produced, bounded in size whatever the store's size: a heatmap keeps at
most `max_slices` slices, a timeline one row per segment file, the sharing graph one row per
(owner, grantee).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from mqforensics.findings import COLUMNS, SEVERITIES
from mqforensics.privacy import pseudonymize_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


# --- findings ------------------------------------------------------------------------------------


def findings_table(
    findings: DataFrame | Iterable[Mapping[str, Any]], *, reveal: bool = False
) -> pd.DataFrame:
    """Findings (a findings frame, or the rows of a ``findings.json``) as pandas, ordered by
    severity (worst first), check and subject; `queue`, `subject` and `detail` text
    pseudonymised unless `reveal` (already pseudonymised text is left as it is)."""
    if hasattr(findings, "toLocalIterator"):
        rows = [row.asDict() for row in findings.toLocalIterator()]  # type: ignore[union-attr]
    else:
        rows = [dict(r) for r in findings]  # type: ignore[union-attr]
    for row in rows:
        detail = row.get("detail")
        if not isinstance(detail, str):
            row["detail"] = json.dumps(detail or {}, sort_keys=True, default=str)
        row["observed_at"] = _utc(row.get("observed_at"))
        if not reveal:
            for column in ("queue", "subject", "detail"):
                if isinstance(row.get(column), str):
                    row[column] = pseudonymize_text(row[column])
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["bytes"] = table["bytes"].astype("Int64")  # unknown stays unknown (shown as a dash)
    table["observed_at"] = pd.to_datetime(table["observed_at"], utc=True)
    table["rank"] = table["severity"].map(lambda s: -SEVERITIES.index(s) if s in SEVERITIES else 1)
    table = table.sort_values(["rank", "check", "subject"], kind="stable")
    return table.drop(columns="rank").reset_index(drop=True)


# --- findings as tables a person reads -----------------------------------------------------------

MISSING = "\u2013"  # an en dash: what a table cell shows for a missing value
LIST_ITEMS = 3  # a list longer than this shows its first items and its length
TEXT_LIMIT = 160  # longer text is cut, with an ellipsis
# What pandas, Python and JSON write for "no value": never shown as such.
_MISSING_TEXTS = frozenset({"None", "nan", "NaN", "NaT", "null", "<NA>"})
# Detail keys that count mail addresses a finding holds (an int, or the addresses themselves).
_ADDRESS_COUNTS = ("addresses", "recipients", "recipients_remaining")


def is_missing(value: Any) -> bool:
    """True for None, NaN, NaT and pandas' NA (not for an empty list or text)."""
    if value is None:
        return True
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def cell_text(value: Any) -> str:
    """`value` as the text of a table cell: `MISSING` for no value (None, NaN, NaT, an empty list
    or mapping, the texts ``None``/``nan``/``null``), ``yes``/``no`` for booleans, instants in UTC
    (``2026-11-03T12:00:00Z``), a list as its items joined (its first `LIST_ITEMS` and its length
    when longer), a mapping as ``key: value`` pairs; long text is cut at `TEXT_LIMIT`."""
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dt.datetime, pd.Timestamp)):
        return f"{_utc(value):%Y-%m-%dT%H:%M:%SZ}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return _list_text(list(value))
    if isinstance(value, dict):
        pairs = [f"{key}: {cell_text(item)}" for key, item in value.items()]
        return _cut("; ".join(pairs)) if pairs else MISSING
    text = str(value)
    if not text.strip() or text.strip() in _MISSING_TEXTS:
        return MISSING
    return _cut(text)


def _list_text(items: list[Any]) -> str:
    if not items:
        return MISSING
    shown = ", ".join(cell_text(item) for item in items[:LIST_ITEMS])
    if len(items) > LIST_ITEMS:
        shown += f", \u2026 ({len(items):,} in all)"
    return _cut(shown)


def _cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text`, or its start and an ellipsis when longer than `limit`: cut after its last whole
    word when that keeps two thirds of `limit` (one long token is cut where the limit falls)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit * 2 // 3:
        head = head[:space].rstrip(" ,;:")
    return head + "\u2026"


def detail_of(value: Any) -> dict[str, Any]:
    """A finding's ``detail`` as a mapping: decoded when it is JSON text; a value that is not a
    JSON object is kept under the key ``detail``; nothing is an empty mapping."""
    if is_missing(value) or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"detail": value}
    if isinstance(value, dict):
        return value
    return {"detail": value}


def detail_lines(value: Any) -> list[str]:
    """A finding's ``detail`` (JSON text or a mapping) as the lines a person reads, one
    ``key: value`` per key in its order (values as `cell_text` writes them); none for no detail."""
    return [f"{key}: {cell_text(item)}" for key, item in detail_of(value).items()]


def detail_columns(details: Iterable[Any]) -> tuple[list[str], list[list[str]]]:
    """The details of some findings as named columns: every key any of them has (in the order
    first seen), and one row of cell texts (`cell_text`) per finding; a key a finding lacks is
    `MISSING` in its row."""
    decoded = [detail_of(d) for d in details]
    keys: dict[str, None] = {}
    for detail in decoded:
        keys.update(dict.fromkeys(detail))
    rows = [[cell_text(detail.get(key)) for key in keys] for detail in decoded]
    return list(keys), rows


def column_title(key: str) -> str:
    """A detail key as a column heading: ``age_seconds`` -> ``age seconds``."""
    return key.replace("_", " ")


def personal_data(details: Iterable[Any]) -> tuple[int | None, int | None]:
    """(mail addresses, distinct data subjects) that some findings hold, as far as their details
    say: addresses counted from the ``addresses``, ``recipients`` and ``recipients_remaining``
    counts (or lists) and a ``sender``; data subjects are the distinct keys of ``subjects``.
    None when no detail says anything about it."""
    addresses: int | None = None
    subjects: set[str] | None = None
    for detail in map(detail_of, details):
        for key in _ADDRESS_COUNTS:
            if key in detail:
                addresses = (addresses or 0) + _count(detail[key])
        if "sender" in detail:
            addresses = (addresses or 0) + (1 if detail["sender"] else 0)
        if "subjects" in detail:
            subjects = (subjects or set()) | {str(s) for s in detail["subjects"] or ()}
    return addresses, None if subjects is None else len(subjects)


def _count(value: Any) -> int:
    if isinstance(value, bool) or is_missing(value):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple, set)):
        return len(value)
    return 0
