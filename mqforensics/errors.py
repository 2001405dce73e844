"""Typed errors every reader, check and tool raises, and their one-line rendering.

An error raised inside a Spark Python worker reaches the driver wrapped in a JVM exception whose
text is a Python traceback. Every message therefore carries a marker, ``[mqforensics:Kind]``, so
`explain` can recover the one line a user needs from whatever wrapper the error travelled in.
Every message goes through `masking.mask_secrets` when the error is made, so no error
carries a credential however it is shown (a notebook, a Spark worker's traceback, the CLI).

A file Spark's own readers cannot read (random bytes named ``*.parquet``, a truncated or damaged
part file) fails with Spark's ``[FAILED_READ_FILE...]`` error, whose text names the file inside
a Java stack trace: `explain` turns it into an `InputError` naming that file, with the reason in
a few words and without the stack. `translated` is the one boundary where the audit runner (and
`spark.computed`) turns whatever a Spark job raised into these typed errors (docs/errors.md).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from mqforensics.masking import mask_secrets

_MARKER = re.compile(r"\[mqforensics:(?P<kind>[A-Za-z]+)\] (?P<message>[^\n]*)")
# Spark's error for a file its reader failed on (error-conditions.json: FAILED_READ_FILE, with a
# subclass such as CANNOT_READ_FILE_FOOTER); the path ends at the first period ending a sentence.
_SPARK_READ_FAILURE = re.compile(
    r"\[FAILED_READ_FILE(?:\.(?P<subclass>[A-Z_]+))?\] Encountered error while reading file "
    r"(?P<path>[^\n]+?)\.(?:\s|$)"
)
# What a failure's subclass, else its Java causes, say about the file, in a few words.
_SUBCLASS_REASONS = {
    "CANNOT_READ_FILE_FOOTER": "not a Parquet file, or truncated: its footer cannot be read",
    "FILE_NOT_EXIST": "it disappeared while it was being read",
    "PARQUET_COLUMN_DATA_TYPE_MISMATCH": "a column's type differs from the other files'",
}
_CAUSE_REASONS = (
    ("is not a Parquet file", "not a Parquet file"),
    ("can not read class org.apache.parquet.format.PageHeader", "damaged Parquet data"),
    ("EOFException", "truncated: it ends in the middle of its data"),
    ("Reached the end of stream", "truncated: it ends in the middle of its data"),
    ("ParquetDecodingException", "damaged Parquet data"),
    ("CorruptedPageException", "damaged Parquet data"),
    ("ParquetCorruption", "damaged Parquet data"),
    ("Malformed", "malformed records"),
)


class MqfError(Exception):
    """Base of every error the toolkit reports to a user; the CLI exits with `exit_code`."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        message = mask_secrets(message)
        super().__init__(f"[mqforensics:{type(self).__name__}] {message}")
        self.message = message


class InputError(MqfError):
    """Input that cannot be read as what it claims to be: names the file, offset or key."""


class ConfigError(MqfError):
    """A missing or contradictory option, setting or environment variable."""


class ServerUnavailable(MqfError):
    """A server could not be reached, or went away during the run."""


class AuthenticationFailed(MqfError):
    """A server refused the given credentials (the credentials themselves are never shown)."""


class PlanModified(MqfError):
    """A cleanup plan whose files no longer match their recorded hashes, or its approval."""


class PlanNotApproved(MqfError):
    """`purge --apply` on a plan nobody approved."""


class ServiceStartError(MqfError):
    """The test/dev harness could not start a server; the message names its log file."""


def explain(exc: BaseException) -> str | None:
    """``Kind: message`` of the toolkit error inside `exc`, however deeply it was wrapped
    (credentials masked); for a file Spark's reader could not read, ``InputError: <path>:
    cannot be read (<reason>)`` (`spark_read_failure`); None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MqfError):
            return mask_secrets(f"{type(current).__name__}: {current.message}")
        text = _text_of(current)
        match = _MARKER.search(text)
        if match:
            return mask_secrets(f"{match.group('kind')}: {match.group('message')}")
        failure = spark_read_failure(text)
        if failure is not None:
            return mask_secrets(f"{InputError.__name__}: {failure}")
        current = current.__cause__ or current.__context__
    return None


def _text_of(exc: BaseException) -> str:
    """Everything `exc` says (a Py4J error asks the JVM for its stack: it may be gone)."""
    try:
        return str(exc)
    except Exception:  # a Py4J error whose gateway has shut down
        return type(exc).__name__


def spark_read_failure(text: str) -> str | None:
    """``<path>: cannot be read (<reason>)`` when `text` (a Spark error, a Java stack trace)
    says Spark's reader failed on a file; None otherwise. The path is the local one when the
    file is local (``file:`` dropped); the reason comes from Spark's error subclass, else from
    the Java causes (`_CAUSE_REASONS`); the stack itself is dropped."""
    match = _SPARK_READ_FAILURE.search(text)
    if match is None:
        return None
    path = re.sub(r"^file:(?://)?(?=/)", "", match.group("path").strip())
    reason = _SUBCLASS_REASONS.get(match.group("subclass") or "")
    if reason is None:
        rest = text[match.end() :]
        reason = next((said for clue, said in _CAUSE_REASONS if clue in rest), None)
    return f"{path}: cannot be read ({reason or 'damaged, or not in the format its name says'})"


def typed(exc: BaseException) -> MqfError | None:
    """The toolkit error `exc` carries (however it was wrapped: a Spark worker's traceback, a
    Py4J error), or the `InputError` of a file Spark could not read, as its own type; None for
    anything else."""
    if isinstance(exc, MqfError):
        return exc
    explained = explain(exc)
    if explained is None:
        return None
    kind, _, message = explained.partition(": ")
    error_type = globals().get(kind)
    if isinstance(error_type, type) and issubclass(error_type, MqfError):
        return error_type(message)
    return InputError(message)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Inside: whatever carries a toolkit error, or is Spark failing to read a file, is
    re-raised as that typed error (its wrappers and the Java stack dropped); anything else
    propagates as it is."""
    try:
        yield
    except MqfError:
        raise
    except Exception as exc:
        error = typed(exc)
        if error is None:
            raise
        raise error from None
