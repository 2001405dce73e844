"""What the plots draw, counted in Spark, checked against counts made here from the raw files."""

from __future__ import annotations

import datetime as dt

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
    assert table["bytes"].tolist() == [10, 0]
    shown = plot_data.findings_table(rows, reveal=True)
    assert shown["subject"][0] == "mail from alice@example.org"
