"""The message a Postfix queue file holds, and where an erasure request's data subjects are in
it and in its envelope (`content_search`).

A queue file keeps the message as it was queued between its ``M`` record (REC_TYPE_MESG) and
its ``X`` record (REC_TYPE_XTRA): one ``N`` record (REC_TYPE_NORM) per line, without its line
end; a line longer than Postfix's record limit is split into ``L`` records (REC_TYPE_CONT: the
line goes on in the next record) ended by an ``N`` (src/global/rec_type.h, cleanup_out.c).
Header edits made after the file was written sit in a heap after the end record, reached by
pointer records: `records.read_records` follows them as Postfix's readers do, so the message
rebuilt here is the one Postfix delivers. `message_content` joins those records back into the
message's bytes (``N`` ends a line with ``\\n``, ``L`` does not), and `search_queue_file`
searches them (`content_search.search_message`) with the envelope sender and recipients,
current and original (`content_search.search_envelope`).

A damaged file is searched as far as it reads; what lies after the damage is `Unreadable`:
``envelope`` (records after the damage, which can hold recipients), ``headers`` (the header
section did not read to its end) and, when bodies are searched, ``body``. A file that cannot be
read at all is unreadable as ``file``.

`search_files` runs this in Spark's executors: a ``mapInArrow`` over the queue files of the
files frame (`files.FILES`), each re-read from its path (the executors see the queue
directories the driver listed; the content records of a ready queue file never change, only
its recipients' type bytes). Its rows are `CONTENT`: the file's ``path`` and the
`content_search.FOUND_SCHEMA` columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqforensics.content_search import (
    FOUND_SCHEMA,
    FULL,
    Found,
    Searched,
    Unreadable,
    search_envelope,
    search_message,
)
from mqforensics.filenames import unescaped
from mqforensics.systems.postfix.records import QueueFileRecords, read_records

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import DataFrame

CONTENT_START, CONTENT_END = "M", "X"
NORMAL, CONTINUED = "N", "L"
# Where a search could not look (`content_search.Unreadable.where`), beyond the parts of the
# message `search_message` names.
ENVELOPE, HEADERS, BODY, FILE = "envelope", "headers", "body", "file"
CONTENT = "path string, " + FOUND_SCHEMA


@dataclass(frozen=True)
class Content:
    """A queue file's message as far as it reads: its bytes, whether its header section and
    the whole content (to ``X``) were read, and records in it that are not text."""

    message: bytes
    headers_complete: bool
    complete: bool
    strays: tuple[tuple[int, str, bool], ...] = ()  # (offset, type, in the headers)


def message_content(read: QueueFileRecords) -> Content | None:
    """The message of a queue file's records (`records.read_records`: pointers followed), or
    None when no ``M`` record was read."""
    lines: list[bytes] = []
    strays: list[tuple[int, str, bool]] = []
    started = headers_done = False
    line_open = False  # an L record left the last line unfinished
    for record in read.records:
        if not started:
            started = record.type == CONTENT_START
            continue
        if record.type == CONTENT_END:
            return Content(b"".join(lines), True, True, tuple(strays))
        if record.type == NORMAL:
            if not line_open and not record.data:
                headers_done = True
            lines.append(record.data + b"\n")
            line_open = False
        elif record.type == CONTINUED:
            lines.append(record.data)
            line_open = True
        else:
            strays.append((record.offset, record.type, not headers_done))
    if not started:
        return None
    return Content(b"".join(lines), headers_done, False, tuple(strays))


def _envelope_address(address: str | None) -> str | None:
    """An envelope address as written, without the address type a DSN original recipient
    carries (``rfc822;bob@example.net``)."""
    if address and ";" in address:
        kind, _, rest = address.partition(";")
        if kind.strip().lower() in ("rfc822", "utf-8"):
            return rest
    return address


def search_queue_file(
    data: bytes | None,
    envelope: Iterable[str | None],
    searched: Searched,
    cannot: str | None = None,
) -> Found:
    """Where the `searched` subjects are in a queue file: its `envelope` addresses (as the
    audit read them) and the message of its bytes `data`; `cannot`: why `data` could not be
    read (then nothing of the file but its envelope is searched)."""
    found = Found()
    if not searched:
        return found
    found.hits |= search_envelope((_envelope_address(a) for a in envelope), searched)
    if data is None:
        found.cannot(FILE, cannot or "not read")
        return found
    read = read_records(data)
    content = message_content(read)
    if content is not None:
        found.merge(search_message(content.message, searched))
    for place in _unread(read, content, searched):
        found.cannot(*place)
    return found


def _unread(
    read: QueueFileRecords, content: Content | None, searched: Searched
) -> list[Unreadable]:
    """The places of the file that could not be searched at the depth of `searched`."""
    full = searched.depth == FULL
    places: list[Unreadable] = []
    damage = read.damage
    if content is not None:
        for offset, kind, in_headers in content.strays:
            if in_headers or full:
                where = HEADERS if in_headers else BODY
                places.append(Unreadable(where, f"record {kind!r} at byte {offset} in the "
                                         "message content is not text: skipped"))  # fmt: skip
    if damage is None:
        if content is None and read.complete:
            places.append(Unreadable(HEADERS, "the queue file has no message content record"))
        return places
    at = f"the queue file is damaged at byte {damage.offset} ({damage.reason})"
    places.append(Unreadable(ENVELOPE, f"{at}: its records after that could not be read"))
    if content is None:
        places.append(Unreadable(HEADERS, f"{at}, before its message content"))
        if full:
            places.append(Unreadable(BODY, f"{at}, before its message content"))
    elif not content.headers_complete:
        places.append(Unreadable(HEADERS, f"{at}: the header lines before it searched"))
        if full:
            places.append(Unreadable(BODY, f"{at}, inside the header section"))
    elif not content.complete and full:
        places.append(Unreadable(BODY, f"{at}: the content before it searched"))
    return places


def _file_bytes(path: str) -> tuple[bytes | None, str | None]:
    """The bytes of the file at the escaped `path` (`filenames.shown`), or why not."""
    try:
        with open(os.fsdecode(unescaped(path)), "rb") as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, "the file is gone since the audit listed it (delivered or deleted)"
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


def search_row(row: dict[str, Any], searched: Searched) -> Found:
    """`search_queue_file` of one files-frame row (``path``, ``read_error``, ``sender``,
    ``recipients``), its file re-read."""
    recipients: Sequence[dict[str, Any]] = row.get("recipients") or ()
    envelope = [row.get("sender")]
    envelope += [r.get("address") for r in recipients] + [r.get("original") for r in recipients]
    if row.get("read_error"):
        return search_queue_file(None, envelope, searched, str(row["read_error"]))
    data, why = _file_bytes(str(row["path"]))
    return search_queue_file(data, envelope, searched, why)


def search_files(files: DataFrame, searched: Searched) -> DataFrame:
    """The queue files of `files` (`files.FILES`) searched for `searched` in Spark's executors
    (one row per queue file, `CONTENT`), lazily. `searched` (with its key) travels inside the
    function, never as a data source option."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = StructType.fromDDL(CONTENT)
    assert isinstance(struct, StructType)
    arrow_schema = to_arrow_schema(struct)
    messages = files.where(F.col("kind") == "message").select(
        "path", "read_error", "sender", "recipients"
    )

    def search_batches(batches: Iterable[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            rows = [
                {"path": row["path"], **search_row(row, searched).as_row()}
                for row in batch.to_pylist()
            ]
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    return messages.mapInArrow(search_batches, CONTENT)
