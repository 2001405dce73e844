"""Data subjects in message content: where in a stored message an erasure request's subjects are.

An ``erase_subject`` rule searches at one of two depths (`retention.policy.Rule.search`):

- ``headers`` (the default): the envelope the store keeps and every header field of the
  message, RFC 2047 encoded words and RFC 2231 parameters decoded, folded lines unfolded; the
  identifier fields (``Message-ID``, ``In-Reply-To``, ``References``, ``Content-ID``,
  ``Resent-Message-ID``) name messages, not people, and are not searched;
- ``full``: that, and every MIME part's decoded content (base64 and quoted-printable undone,
  text in its charset), inline text as ``body``, attachments and attached messages (their
  header fields too) as ``attachment``.

Parsing is Python's own `email` package (folded headers, RFC 2047/2231, MIME walking, transfer
decoding, nested ``message/rfc822``), on the bytes as stored (`decode_stored` undoes a blob
store's compression first). An address matches when it is a subject's whole address, compared
as the policy hashes it (`addresses.address_forms`: lower-cased, either IDNA form of its domain,
a plus tag significant), never as a substring of a longer address. What cannot be searched is
said, never taken as clean: an encrypted part (S/MIME enveloped data, PGP/MIME, inline PGP),
a part whose transfer encoding is damaged or unknown, a compressed container attachment
(ZIP, PDF, office documents) are `Unreadable` with the reason. Signature parts
(``application/pkcs7-signature``, ``application/pgp-signature``) hold certificates, not
message text, and are not searched.

Subjects are keyed hashes (`subjects.keyed`) from the first step to the last: a search result
holds no address. Everything here is plain Python, run in Spark's executors by each system.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from email import header as email_header
from email import message_from_bytes
from email import policy as email_policy
from email import utils as email_utils
from email.errors import (
    InvalidBase64CharactersDefect,
    InvalidBase64LengthDefect,
    InvalidBase64PaddingDefect,
)
from email.message import Message
from typing import Any, NamedTuple

from mqforensics.addresses import address_forms, find_addresses
from mqforensics.subjects import keyed

__all__ = [
    "ATTACHMENT",
    "BODY",
    "ENVELOPE",
    "FOUND_SCHEMA",
    "FULL",
    "HEADERS",
    "Found",
    "Hit",
    "Searched",
    "Undecodable",
    "Unreadable",
    "decode_stored",
    "search_envelope",
    "search_message",
]

HEADERS, FULL = "headers", "full"
ENVELOPE, BODY, ATTACHMENT = "envelope", "body", "attachment"
# The whole message, when it could not be parsed at all.
MESSAGE = "message"
HEADER_PREFIX = "header:"
# Spark columns of a `Found` (`Found.as_row`), for the systems' frames.
FOUND_SCHEMA = (
    "subjects array<string>, found array<struct<subject:string,where:string>>, "
    "unreadable array<struct<where:string,reason:string>>"
)

# Fields that identify messages: an id is a token, not someone's mailbox.
_IDENTIFIERS = frozenset(
    ("message-id", "in-reply-to", "references", "content-id", "resent-message-id")
)
_ENCRYPTED_TYPES = frozenset(("application/pkcs7-mime", "application/x-pkcs7-mime"))
_SIGNATURE_TYPES = frozenset(
    ("application/pkcs7-signature", "application/x-pkcs7-signature", "application/pgp-signature")
)
_CONTAINERS = frozenset(
    (
        "application/zip",
        "application/x-zip-compressed",
        "application/pdf",
        "application/x-7z-compressed",
        "application/x-rar-compressed",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.oasis.opendocument.spreadsheet",
    )
)
_GZIP_TYPES = frozenset(("application/gzip", "application/x-gzip"))
_ENCODINGS = frozenset(("7bit", "8bit", "binary", "base64", "quoted-printable", ""))
_UUENCODE = frozenset(("x-uuencode", "uuencode", "x-uue", "uue"))
_BASE64_DEFECTS = (
    InvalidBase64CharactersDefect,
    InvalidBase64LengthDefect,
    InvalidBase64PaddingDefect,
)
_INLINE_PGP = "-----BEGIN PGP MESSAGE-----"
_FOLD = re.compile(r"\r?\n(?=[ \t])")
# Attached messages and multiparts nested deeper than this are not walked (a loop of parts in
# a hostile message would otherwise recurse without end): reported as unreadable.
MAX_NESTING = 32
# A compressed blob or attachment is decompressed to at most this many bytes; past it, the part
# is unreadable (a decompression bomb never fills the executor's memory).
MAX_DECOMPRESSED = 256 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class Hit(NamedTuple):
    """One subject (keyed hash) found at one place: ``envelope``, ``header:<field>`` (lower-case
    name), ``body`` or ``attachment``."""

    subject: str
    where: str


class Unreadable(NamedTuple):
    """A place that could not be searched, and why."""

    where: str
    reason: str


@dataclass(frozen=True)
class Searched:
    """What one audit looks for: keyed subject hashes (`subjects.keyed`) and their key.
    `headers` holds every subject searched (envelopes and header fields); `full` those of rules
    with ``search = "full"``, also searched in bodies and attachments. Small and picklable:
    shipped to Spark's executors with the function that searches."""

    key: bytes = b""
    headers: frozenset[str] = frozenset()
    full: frozenset[str] = frozenset()
    _cache: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.headers)

    def __repr__(self) -> str:  # never the key
        return f"Searched({len(self.headers)} subjects, {len(self.full)} in full)"

    @property
    def depth(self) -> str:
        """The deepest search of any subject: ``full`` or ``headers``."""
        return FULL if self.full else HEADERS

    def matches(self, address: str) -> tuple[str, ...]:
        """The keyed subject `address` (whole, as written) is, in the first of its forms that
        is searched (as written before the other IDNA form: a policy that gave the address
        holds both), as a tuple of at most one."""
        cached = self._cache.get(address)
        if cached is None:
            cached = ()
            for form in address_forms(address):
                plain = hashlib.sha256(form.encode("utf-8", "replace")).hexdigest()
                digest = keyed(plain, self.key)
                if digest in self.headers:
                    cached = (digest,)
                    break
            if len(self._cache) < 100_000:
                self._cache[address] = cached
        return cached


@dataclass
class Found:
    """Where the subjects are in one stored object, and what of it could not be searched."""

    hits: set[Hit] = field(default_factory=set)
    unreadable: list[Unreadable] = field(default_factory=list)

    @property
    def subjects(self) -> list[str]:
        return sorted({hit.subject for hit in self.hits})

    def add_text(self, text: str, where: str, wanted: frozenset[str], searched: Searched) -> None:
        if "@" not in text:
            return
        for address in find_addresses(text):
            for subject in searched.matches(address):
                if subject in wanted:
                    self.hits.add(Hit(subject, where))

    def cannot(self, where: str, reason: str) -> None:
        item = Unreadable(where, reason)
        if item not in self.unreadable:
            self.unreadable.append(item)

    def merge(self, other: Found) -> Found:
        self.hits |= other.hits
        for item in other.unreadable:
            self.cannot(*item)
        return self

    def as_row(self) -> dict[str, Any]:
        """The `FOUND_SCHEMA` columns: sorted subjects, sorted (subject, where) pairs, and the
        unreadable places in the order met."""
        return {
            "subjects": self.subjects,
            "found": [{"subject": h.subject, "where": h.where} for h in sorted(self.hits)],
            "unreadable": [{"where": u.where, "reason": u.reason} for u in self.unreadable],
        }


class Undecodable(Exception):
    """Stored bytes whose encoding (compression) could not be undone; the text says why."""


def decode_stored(data: bytes, content_encoding: str | None = None) -> bytes:
    """A stored object's bytes as the mail system wrote the message: James's zstd blobs
    (``content-encoding: zstd`` in the blob's metadata, or the zstd frame's magic number) and
    gzip ones decompressed; anything else as it is."""
    encoding = (content_encoding or "").strip().lower()
    if encoding == "zstd" or (not encoding and data[:4] == _ZSTD_MAGIC):
        return _zstd(data)
    if encoding in ("gzip", "x-gzip") or (not encoding and data[:2] == _GZIP_MAGIC):
        return _gunzip(data)
    if encoding not in ("", "identity"):
        raise Undecodable(f"unknown content encoding {encoding!r}")
    return data


def _zstd(data: bytes) -> bytes:
    import pyarrow as pa

    try:
        stream = pa.CompressedInputStream(pa.BufferReader(data), "zstd")
        out = stream.read(MAX_DECOMPRESSED + 1)
    except (OSError, pa.ArrowException) as exc:
        raise Undecodable(f"zstd data damaged ({type(exc).__name__})") from None
    if len(out) > MAX_DECOMPRESSED:
        raise Undecodable(f"zstd data larger than {MAX_DECOMPRESSED} bytes decompressed")
    return bytes(out)


def _gunzip(data: bytes) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            out = stream.read(MAX_DECOMPRESSED + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise Undecodable(f"gzip data damaged ({type(exc).__name__})") from None
    if len(out) > MAX_DECOMPRESSED:
        raise Undecodable(f"gzip data larger than {MAX_DECOMPRESSED} bytes decompressed")
    return out


def search_envelope(addresses: Iterable[str | None], searched: Searched) -> set[Hit]:
    """The subjects among a store's envelope addresses (sender, recipients), at ``envelope``."""
    hits: set[Hit] = set()
    for address in addresses:
        if address:
            hits.update(Hit(s, ENVELOPE) for s in searched.matches(address.strip()))
    return hits


def search_message(raw: bytes, searched: Searched) -> Found:
    """Where the `searched` subjects are in the RFC 5322 message `raw` (bytes as stored,
    CRLF or LF): every subject in its header fields, and those searched in ``full`` in its
    decoded parts. A message with no body (a header blob alone) is its header fields."""
    found = Found()
    if not searched:
        return found
    try:
        message = message_from_bytes(raw, policy=email_policy.compat32)
        _search_fields(message, HEADER_PREFIX, searched.headers, searched, found)
        if searched.full:
            _search_part(message, False, 0, searched, found)
    except Exception as exc:
        found.cannot(MESSAGE, f"could not be parsed ({type(exc).__name__})")
    return found


def _search_fields(
    message: Message, prefix: str | None, wanted: frozenset[str], searched: Searched, found: Found
) -> None:
    """Every header field of `message`, at ``header:<name>`` (`prefix`) or, for an attached
    message's fields, at ``attachment`` (prefix None)."""
    for name, value in message.items():
        lowered = str(name).strip().lower()
        if lowered in _IDENTIFIERS:
            continue
        where = f"{prefix}{lowered}" if prefix is not None else ATTACHMENT
        found.add_text(header_text(value), where, wanted, searched)
    for param in _decoded_params(message):
        where = f"{prefix}content-disposition" if prefix is not None else ATTACHMENT
        found.add_text(param, where, wanted, searched)


def header_text(value: Any) -> str:
    """A header field's value as a person reads it: unfolded, RFC 2047 encoded words decoded,
    raw 8-bit (SMTPUTF8) bytes read as UTF-8."""
    if isinstance(value, email_header.Header):
        # What the parser makes of a field holding raw 8-bit bytes (charset unknown-8bit).
        try:
            value = "".join(
                _decode_bytes(chunk, charset) if isinstance(chunk, bytes) else chunk
                for chunk, charset in email_header.decode_header(value)
            )
        except (ValueError, LookupError, UnicodeError):
            value = str(value)
    text = _unescape(str(value))
    text = _FOLD.sub("", text)
    if "=?" not in text:
        return text
    try:
        parts = email_header.decode_header(text)
    except (ValueError, LookupError, UnicodeError, AssertionError):
        return text
    decoded = []
    for chunk, charset in parts:
        if isinstance(chunk, bytes):
            decoded.append(_decode_bytes(chunk, charset))
        else:
            decoded.append(chunk)
    return "".join(decoded)


def _decoded_params(message: Message) -> list[str]:
    """The RFC 2231 (and plain) ``name`` and ``filename`` parameters, decoded."""
    values = []
    for header, param in (("content-type", "name"), ("content-disposition", "filename")):
        try:
            value = message.get_param(param, header=header)
        except (ValueError, LookupError, UnicodeError):
            continue
        if value is None:
            continue
        try:
            text = email_utils.collapse_rfc2231_value(value)
        except (ValueError, LookupError, UnicodeError):
            text = str(value)
        values.append(header_text(text))
    return values


def _unescape(text: str) -> str:
    """Raw 8-bit header bytes (kept by the parser as surrogate escapes) read as UTF-8."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeError:
        return text


def _decode_bytes(data: bytes, charset: str | None) -> str:
    if charset and charset.lower() not in ("unknown-8bit", "x-unknown"):
        try:
            return data.decode(charset, "replace")
        except LookupError:
            pass
    return data.decode("utf-8", "replace")


def _search_part(
    part: Message, attached: bool, depth: int, searched: Searched, found: Found
) -> None:
    where = ATTACHMENT if attached or _is_attachment(part) else BODY
    if depth > MAX_NESTING:
        found.cannot(where, f"parts nested deeper than {MAX_NESTING} levels")
        return
    ctype = part.get_content_type()
    if ctype == "multipart/encrypted":
        found.cannot(where, f"encrypted (PGP/MIME, {part.get_param('protocol') or 'no protocol'})")
        return
    if ctype in _ENCRYPTED_TYPES:
        kind = part.get_param("smime-type") or "enveloped-data"
        found.cannot(where, f"encrypted (S/MIME {kind})")
        return
    if ctype in _SIGNATURE_TYPES:
        return
    payload = part.get_payload()
    if part.is_multipart() and isinstance(payload, list):
        if part.get_content_maintype() == "message":
            for inner in payload:
                if isinstance(inner, Message):
                    _search_fields(inner, None, searched.full, searched, found)
                    _search_part(inner, True, depth + 1, searched, found)
            return
        for inner in payload:
            if isinstance(inner, Message):
                _search_part(inner, attached, depth + 1, searched, found)
        return
    data = _decoded_payload(part, where, found)
    if data is None:
        return
    if ctype in _GZIP_TYPES or (data[:2] == _GZIP_MAGIC and where == ATTACHMENT):
        try:
            data = _gunzip(data)
        except Undecodable as exc:
            found.cannot(where, f"{ctype}: {exc}")
            return
    elif ctype in _CONTAINERS:
        found.cannot(where, f"{ctype}: a compressed container, not opened (its raw bytes searched)")
    charset = part.get_content_charset() if part.get_content_maintype() == "text" else None
    text = _decode_bytes(data, charset)
    if _INLINE_PGP in text:
        found.cannot(where, "encrypted (inline PGP)")
    found.add_text(text, where, searched.full, searched)


def _is_attachment(part: Message) -> bool:
    """Whether a part is an attachment: its Content-Disposition says so or names a file (a
    ``name`` of the Content-Type alone, as S/MIME's ``smime.p7m``, is the part itself)."""
    disposition = (part.get("content-disposition") or "").split(";", 1)[0].strip().lower()
    if disposition == "attachment":
        return True
    return part.get_param("filename", header="content-disposition") is not None


def _decoded_payload(part: Message, where: str, found: Found) -> bytes | None:
    """The part's content with its transfer encoding undone; damage or an unknown encoding is
    recorded as unreadable (what could be decoded is still searched)."""
    cte = str(part.get("content-transfer-encoding", "")).strip().lower()
    if cte not in _ENCODINGS and cte not in _UUENCODE:
        found.cannot(where, f"unknown transfer encoding {cte[:40]!r} (searched as it is)")
    before = len(part.defects)
    try:
        data = part.get_payload(decode=True)
    except (ValueError, LookupError, UnicodeError, AssertionError) as exc:
        reason = f"transfer encoding {cte or '7bit'} cannot be decoded ({type(exc).__name__})"
        found.cannot(where, reason)
        return None
    if any(isinstance(d, _BASE64_DEFECTS) for d in part.defects[before:]):
        found.cannot(where, "base64 damaged (the bytes that decode are searched)")
    if data is None:
        return None
    return data if isinstance(data, bytes) else str(data).encode("utf-8", "surrogateescape")
