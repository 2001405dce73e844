"""Copies of the bundled James snapshot for the validation tests: one that breaks an
expectation, one that cannot be read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

BUNDLED = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"


def snapshot_with_a_duplicated_marker(dest: Path) -> Path:
    """The bundled snapshot copied to `dest` with one deletedMailsV2 row written twice, so its
    (queuename, enqueueid) key is no longer unique (2 unexpected rows)."""
    shutil.copytree(BUNDLED, dest)
    deleted = dest / "deletedmailsv2.parquet"
    table = pq.read_table(deleted)
    shutil.rmtree(deleted)
    deleted.mkdir()
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), deleted / "part-0.parquet")
    return dest


def snapshot_with_a_malformed_csv_line(dest: Path) -> Path:
    """The bundled snapshot copied to `dest` with deletedMailsV2 exported as cqlsh CSV whose
    7th line has a field too many: the input cannot be read (not a failed expectation)."""
    shutil.copytree(BUNDLED, dest)
    deleted = dest / "deletedmailsv2.parquet"
    rows = pq.read_table(deleted).to_pylist()
    shutil.rmtree(deleted)
    lines = ["queuename,enqueueid"] + [f"{r['queuename']},{r['enqueueid']}" for r in rows]
    lines.insert(6, "spool,not-an-id,extra")
    (dest / "deletedmailsv2.csv").write_text("\n".join(lines) + "\n")
    return dest
