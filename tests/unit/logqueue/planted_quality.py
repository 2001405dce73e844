"""A queue directory the audit reads without complaint but whose records break two of the
logqueue expectation suites' rules (`expectations/logqueue_records.json`): a RESTART record
inside a segment (RESTART records belong in restart.lq: the restart procedure skips one found
elsewhere, and it carries the nil message id) and an ENVELOPE without any recipient."""

from __future__ import annotations

import uuid
from pathlib import Path

from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout

T0 = 1_800_000_000_000_000
# The expectations it breaks, each with its number of unexpected rows: (frame, expectation,
# target) -> count.
BROKEN = {
    ("records", "expect_column_values_to_be_in_set", "type_name"): 1,
    ("records", "unexpected_rows_expectation", "nil message id"): 1,
    ("records", "unexpected_rows_expectation", "no recipient"): 1,
}


def _envelope(recipients: list[str], spool: str) -> dict:
    return {"sender": "s@example.org", "recipients": recipients, "spool": spool, "attempt": 0,
            "not_before_us": T0}  # fmt: skip


def defective_queue(directory: Path) -> Path:
    """Write the queue: one segment, a whole restart.lq, spool files for both messages."""
    directory.mkdir(parents=True)
    (directory / layout.SPOOL_DIR).mkdir()
    data = bytearray(fmt.encode_segment_header(1, T0))
    for n, recipients in ((1, ["r@example.net"]), (2, [])):
        mid = uuid.UUID(int=n)
        spool = f"{n}.eml"
        (directory / layout.SPOOL_DIR / spool).write_bytes(b"Subject: x\r\n\r\n")
        data += fmt.encode_record(fmt.ENVELOPE, mid, T0, (0, 0), _envelope(recipients, spool))
    restart = layout.encode_restart((1, fmt.SEGMENT_HEADER_SIZE), (), T0)
    data += restart[fmt.SEGMENT_HEADER_SIZE :]  # a RESTART record in a segment
    (directory / fmt.segment_name(1)).write_bytes(bytes(data))
    (directory / layout.RESTART_FILE).write_bytes(restart)
    return directory


def kind_of(target: str) -> str:
    """The `BROKEN` key part of an expectation's target (a column, or a query)."""
    if "00000000-0000-0000-0000-000000000000" in target:
        return "nil message id"
    if "recipients" in target:
        return "no recipient"
    return target
