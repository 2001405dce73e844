"""The content of James's queued mails searched for data subjects: each view row's header and
body blobs read from the blob store and searched in Spark's executors (`search_rows`).

James stores a queued mail as two blobs of its default bucket (docs/james.md, "Content
search"): ``headerblobid`` (the header section, each line ending in CRLF, then an empty line)
and ``bodyblobid`` (the rest of the MIME stream); the message is the two concatenated. A blob
James compressed carries ``content-encoding: zstd`` in its metadata (on S3, object user
metadata), undone by `content_search.decode_stored` (which also recognises zstd and gzip by
their magic numbers, as in a local copy that keeps no metadata). An AES-encrypted blob cannot
be read: a header blob that is no header section is reported unreadable.

At depth ``headers`` (no subject is searched in full) only the header blob is read; at
``full`` both. A blob that is missing or cannot be decoded is said (`Unreadable`), never taken
as clean. The blob store (`BlobContent`) is a local copy of the bucket (``--blob-dir``) or the
bucket itself (``--blobs s3://BUCKET``); its endpoint and keys travel to the executors inside
the pickled search function, never as a data source option, and are never shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqforensics.content_search import (
    FOUND_SCHEMA,
    Found,
    Searched,
    Undecodable,
    decode_stored,
    search_envelope,
    search_message,
)
from mqforensics.errors import AuthenticationFailed, InputError, ServerUnavailable
from mqforensics.filenames import shown

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import DataFrame

    from mqforensics.sources.s3_endpoint import S3Endpoint

HEADERS_BLOB, BODY_BLOB = "headers", "body"
MISSING = "blob missing"
NO_BLOB_ID = "no blob id in the view row"
NOT_HEADERS = "not a header section (an AES-encrypted blob, or damaged)"
# The key columns of a searched row, then what was found (`content_search.FOUND_SCHEMA`).
KEY_COLUMNS = "queuename string, timerangestart timestamp, bucketid int, enqueueid string"
SEARCHED_SCHEMA = f"{KEY_COLUMNS}, bytes bigint, {FOUND_SCHEMA}"
# The view row's columns the search reads (`search_rows`).
INPUT_COLUMNS = (
    "queuename", "timerangestart", "bucketid", "enqueueid", "headerblobid", "bodyblobid",
    "sender", "recipients", "perrecipientspecificheaders",
)  # fmt: skip
# A header section starts with a field name (printable ASCII but the colon) and a colon.
_FIELD_START = re.compile(rb"^[\x21-\x39\x3b-\x7e]+[ \t]*:")


class BlobMissing(Exception):
    """The blob store has no object of this key."""


@dataclass(frozen=True)
class BlobContent:
    """Where queued mails' blobs are read: a local copy of the bucket (`root`, key = file path
    under it) or an S3 bucket (`bucket`, keys under `prefix`, at `endpoint`). Picklable; its
    repr names the location only, never a key."""

    root: str | None = None
    bucket: str | None = None
    prefix: str = ""
    endpoint: S3Endpoint | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"BlobContent({self.where})"

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.bucket else shown(self.root or "")

    @classmethod
    def directory(cls, root: str | os.PathLike[str]) -> BlobContent:
        return cls(root=os.fspath(root))

    @classmethod
    def s3(cls, location: str, endpoint: S3Endpoint) -> BlobContent:
        from mqforensics.sources.blobstore import Location

        parsed = Location.parse(location)
        return cls(bucket=parsed.bucket, prefix=parsed.prefix, endpoint=endpoint)

    def reader(self) -> BlobReader:
        """A reader of this store's blobs, made in the executor (one S3 client per task)."""
        if self.bucket is not None:
            assert self.endpoint is not None
            return _S3Reader(self, self.endpoint.client())
        return _DirReader(self)


class BlobReader:
    def read(self, key: str) -> tuple[bytes, str | None]:
        """The blob's bytes as stored and its ``content-encoding`` metadata (None when it has
        none); `BlobMissing` when there is no such blob."""
        raise NotImplementedError


class _DirReader(BlobReader):
    def __init__(self, store: BlobContent) -> None:
        assert store.root is not None
        self.root = os.fsencode(store.root)

    def read(self, key: str) -> tuple[bytes, str | None]:
        name = os.fsencode(key)
        if name.startswith(b"/") or b".." in name.split(b"/") or b"\0" in name:
            raise BlobMissing(key)  # never a file outside the copy of the bucket
        try:
            with open(os.path.join(self.root, name), "rb") as handle:
                return handle.read(), None
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise BlobMissing(key) from None
        except OSError as exc:
            raise InputError(
                f"blob {key} of {shown(os.fsdecode(self.root))}: cannot be read ({exc.strerror})"
            ) from None


class _S3Reader(BlobReader):
    def __init__(self, store: BlobContent, client: Any) -> None:
        self.store = store
        self.client = client

    def read(self, key: str) -> tuple[bytes, str | None]:
        from botocore.exceptions import ClientError

        store = self.store
        try:
            reply = self.client.get_object(Bucket=store.bucket, Key=store.prefix + key)
            data = reply["Body"].read()
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404"):
                raise BlobMissing(key) from None
            raise _s3_failure(exc, store, key) from None
        except Exception as exc:
            raise _s3_failure(exc, store, key) from None
        metadata = {str(k).lower(): v for k, v in (reply.get("Metadata") or {}).items()}
        encoding = metadata.get("content-encoding") or reply.get("ContentEncoding") or None
        return data, encoding


def _s3_failure(exc: BaseException, store: BlobContent, key: str) -> Exception:
    from mqforensics.sources.s3_endpoint import classify_s3_error

    assert store.endpoint is not None
    where = f"blob {key} of {store.where} at {store.endpoint.where}"
    kind = classify_s3_error(exc)
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "") or type(exc).__name__
    if kind == "auth":
        return AuthenticationFailed(f"{where}: the credentials were refused ({code})")
    if code == "NoSuchBucket":
        return InputError(f"{where}: bucket {store.bucket!r} does not exist")
    return ServerUnavailable(f"{where}: cannot be read ({code})")


def _blob(reader: BlobReader, key: str | None, which: str, found: Found) -> bytes | None:
    """The blob `key` decoded as the mail system wrote it, or None with why in `found`."""
    if not key:
        found.cannot(which, NO_BLOB_ID)
        return None
    try:
        data, encoding = reader.read(key)
    except BlobMissing:
        found.cannot(which, MISSING)
        return None
    try:
        return decode_stored(data, encoding)
    except Undecodable as exc:
        found.cannot(which, f"blob cannot be decoded: {exc}")
        return None


def _looks_like_headers(data: bytes) -> bool:
    """Whether `data` starts as a header section does (or is empty): an AES-encrypted header
    blob does not."""
    head = data.lstrip(b"\r\n")[:1000]
    return not head or _FIELD_START.match(head) is not None


def search_content(
    reader: BlobReader, header_id: str | None, body_id: str | None, searched: Searched
) -> Found:
    """Where the `searched` subjects are in one queued mail's content: its header blob alone
    at depth ``headers``, header and body blobs at ``full``."""
    found = Found()
    full = bool(searched.full)
    headers = _blob(reader, header_id, HEADERS_BLOB, found)
    if headers is not None and not _looks_like_headers(headers):
        found.cannot(HEADERS_BLOB, NOT_HEADERS)
        headers = None
    body = _blob(reader, body_id, BODY_BLOB, found) if full else None
    if headers is None:
        if body is not None:
            # Without the header section the MIME structure is unknown: the raw bytes are
            # searched as text, and the body is said not to be searched whole.
            found.cannot(BODY_BLOB, "header blob unreadable: MIME structure unknown")
            found.add_text(body.decode("utf-8", "replace"), BODY_BLOB, searched.full, searched)
        return found
    if body is None:
        return found.merge(search_message(headers, Searched(searched.key, searched.headers)))
    if not headers.endswith(b"\n\n") and not headers.endswith(b"\r\n\r\n"):
        headers += b"\r\n"  # the empty line James's header blob ends with, when it lacks it
    return found.merge(search_message(headers + body, searched))


def _envelope(row: dict[str, Any]) -> list[str | None]:
    per_recipient = [t.get("_1") for t in row.get("perrecipientspecificheaders") or () if t]
    return [row.get("sender"), *(row.get("recipients") or ()), *per_recipient]


def search_rows(frame: DataFrame, content: BlobContent | None, searched: Searched) -> DataFrame:
    """The rows of `frame` (view rows with `INPUT_COLUMNS`, ``bytes`` and, with `content`,
    ``live``) holding a searched subject in their envelope or content, or content that could
    not be searched, as `SEARCHED_SCHEMA`; searched in the executors. Without `content` only
    the envelopes are. A blob missing is unreadable for a live row only: James deletes a
    consumed mail's blobs when it is dequeued (passthrough) or collects them (deduplicated),
    and a blob that is gone holds nothing left to erase."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = StructType.fromDDL(SEARCHED_SCHEMA)
    assert isinstance(struct, StructType)
    arrow_schema = to_arrow_schema(struct)

    def search(batches: Iterable[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow as pa

        reader = content.reader() if content is not None else None
        for batch in batches:
            rows = []
            for row in batch.to_pylist():
                if reader is not None:
                    found = search_content(reader, row["headerblobid"], row["bodyblobid"], searched)
                    if not row["live"]:
                        found.unreadable = [u for u in found.unreadable if u.reason != MISSING]
                else:
                    found = Found()
                found.hits |= search_envelope(_envelope(row), searched)
                if not found.hits and not found.unreadable:
                    continue
                rows.append({
                    "queuename": row["queuename"], "timerangestart": row["timerangestart"],
                    "bucketid": row["bucketid"], "enqueueid": row["enqueueid"],
                    "bytes": row["bytes"], **found.as_row(),
                })  # fmt: skip
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    columns = [*INPUT_COLUMNS, "bytes", *(["live"] if content is not None else [])]
    return frame.select(*columns).mapInArrow(search, SEARCHED_SCHEMA)
