"""A copy of the bundled James snapshot that breaks one expectation, for the validation tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mqforensics.demo import BUNDLED


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
