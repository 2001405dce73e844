"""What the plots draw, counted in Spark, checked against counts made here from the raw files."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd

from mqforensics.privacy import pseudonymize_address
from mqforensics.views import plot_data

UTC = dt.UTC


def test_findings_table_hides_addresses_unless_revealed() -> None:
    rows = [
        {"check": "stuck_mail", "severity": "error", "system": "james", "queue": "spool",
         "scope": "mail", "subject": "mail from alice@example.org",
         "observed_at": "2026-11-03T12:00:00Z",
         "bytes": 10, "detail": {"recipients": ["bob@example.net"]}},
        {"check": "orphaned_blob", "severity": "info", "system": "james", "queue": None,
         "scope": "blob", "subject": "k1", "observed_at": None, "bytes": None, "detail": {}},
    ]  # fmt: skip
    table = plot_data.findings_table(rows)
    assert table["check"].tolist() == ["stuck_mail", "orphaned_blob"]  # worst severity first
    text = table.to_string()
    assert "alice@example.org" not in text and "bob@example.net" not in text
    assert pseudonymize_address("alice@example.org") in table["subject"][0]
    assert pseudonymize_address("bob@example.net") in table["detail"][0]
    assert table["bytes"].tolist() == [10, pd.NA]  # a size never recorded stays unknown
    shown = plot_data.findings_table(rows, reveal=True)
    assert shown["subject"][0] == "mail from alice@example.org"


def test_details_flatten_into_named_columns_with_exact_cells() -> None:
    details = [
        {"age_seconds": 701970, "visible": True, "pinning": [], "reason": None,
         "windows": [900, 1800, 3600, 7200], "limits": {"max": 4, "min": None}},
        json.dumps({"age_seconds": 5, "visible": False, "ratio": float("nan"),
                    "when": "2026-11-03T12:00:00Z", "note": "None"}),
        None,
    ]  # fmt: skip
    keys, rows = plot_data.detail_columns(details)
    assert keys == ["age_seconds", "visible", "pinning", "reason", "windows", "limits", "ratio",
                    "when", "note"]  # fmt: skip
    dash = plot_data.MISSING
    assert dash == "\u2013"
    assert rows == [
        ["701970", "yes", dash, dash, "900, 1800, 3600, \u2026 (4 in all)", f"max: 4; min: {dash}",
         dash, dash, dash],
        ["5", "no", dash, dash, dash, dash, dash, "2026-11-03T12:00:00Z", dash],
        [dash] * 9,
    ]  # fmt: skip
    assert [plot_data.column_title(k) for k in keys[:2]] == ["age seconds", "visible"]


def test_cell_text_never_shows_a_missing_value_as_text() -> None:
    dash = plot_data.MISSING
    for missing in (None, float("nan"), pd.NaT, pd.NA, "nan", "NaN", "None", "null", "", " ", []):
        assert plot_data.cell_text(missing) == dash, missing
    instant = pd.Timestamp("2026-11-03T13:00:00+01:00")
    assert plot_data.cell_text(instant) == "2026-11-03T12:00:00Z"
    assert plot_data.cell_text(0.25) == "0.25" and plot_data.cell_text(0) == "0"
    assert plot_data.cell_text(["a", None]) == f"a, {dash}"
    long = plot_data.cell_text("x" * 500)
    assert len(long) == plot_data.TEXT_LIMIT and long.endswith("\u2026")


def test_personal_data_counts_what_the_details_say() -> None:
    details = [
        {"addresses": 2, "subjects": ["s1", "s2"]},
        {"addresses": 1, "subjects": ["s2"]},
        {"recipients": ["u-1@example.org", "u-2@example.org"], "sender": "u-3@example.org"},
        {"sender": ""},  # a bounce: no sender address
    ]
    assert plot_data.personal_data(details) == (6, 2)
    assert plot_data.personal_data([{"bucket": "b"}, {}]) == (None, None)
    assert plot_data.personal_data([{"subjects": []}]) == (None, 0)


def test_findings_table_keeps_a_missing_queue_and_time_missing() -> None:
    rows = [
        {"check": "orphaned_blob", "severity": "info", "system": "james", "queue": None,
         "scope": "blob", "subject": "k1", "observed_at": None, "bytes": None, "detail": {}},
    ]  # fmt: skip
    table = plot_data.findings_table(rows)
    row = next(table.itertuples(index=False))
    assert plot_data.cell_text(row.queue) == plot_data.MISSING
    assert plot_data.cell_text(row.observed_at) == plot_data.MISSING
