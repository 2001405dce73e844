"""The spool files of a log queue searched for data subjects, in Spark's executors.

A spool file (``<dir>/spool/<name>``) holds one message's content as the writer was given it
(the RFC 5322 message); its ENVELOPE record in a segment names it. `spool_content` reads each
file in an executor (the queue directories are where the executors run, as for the segments)
and runs `content_search.search_message` on it: header fields for every subject searched, the
decoded parts for those of ``search = "full"`` rules. The `Searched` subjects and their key
travel inside the function Spark ships, never as an option of a data source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from mqforensics.content_search import BODY, Found, Searched, search_message
from mqforensics.filenames import fs_path
from mqforensics.systems.logqueue import layout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SPOOL_CONTENT = (
    "queue string, name string, path string, read_size long, sha256 string, "
    "subjects array<string>, found array<struct<subject:string,where:string>>, "
    "unreadable array<struct<where:string,reason:string>>"
)


def _arrow_schema() -> pa.Schema:
    pair = pa.struct([("subject", pa.string()), ("where", pa.string())])
    place = pa.struct([("where", pa.string()), ("reason", pa.string())])
    return pa.schema(
        [
            ("queue", pa.string()),
            ("name", pa.string()),
            ("path", pa.string()),
            ("read_size", pa.int64()),
            ("sha256", pa.string()),
            ("subjects", pa.list_(pa.string())),
            ("found", pa.list_(pair)),
            ("unreadable", pa.list_(place)),
        ]
    )


def search_spool_file(queue: str, name: str, searched: Searched) -> dict[str, object]:
    """One spool file (`queue` and `name` escaped as the frames name them) searched: its path,
    the size and SHA-256 of the bytes searched, and the `Found` columns. A file that cannot be
    read is unreadable, never clean."""
    path = f"{queue}/{layout.SPOOL_DIR}/{name}"
    try:
        data = Path(fs_path(queue), layout.SPOOL_DIR, fs_path(name)).read_bytes()
    except OSError as exc:
        found = Found()
        found.cannot(BODY, f"spool file cannot be read ({exc.strerror or type(exc).__name__})")
        return {"queue": queue, "name": name, "path": path, "read_size": None, "sha256": None,
                **found.as_row()}  # fmt: skip
    found = search_message(data, searched)
    return {
        "queue": queue, "name": name, "path": path, "read_size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(), **found.as_row(),
    }  # fmt: skip


def spool_content(spool: DataFrame, searched: Searched) -> DataFrame:
    """`SPOOL_CONTENT`: every file of the `spool` frame (``queue, name``) searched, one row
    each, in the executors."""
    schema = _arrow_schema()

    def search(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            queues = batch.column("queue").to_pylist()
            names = batch.column("name").to_pylist()
            rows = [search_spool_file(q, n, searched) for q, n in zip(queues, names, strict=True)]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return spool.select("queue", "name").mapInArrow(search, SPOOL_CONTENT)
