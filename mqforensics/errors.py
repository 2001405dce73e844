"""Typed errors every reader, check and tool raises, and their one-line rendering.

An error raised inside a Spark Python worker reaches the driver wrapped in a JVM exception whose
text is a Python traceback. Every message therefore carries a marker, ``[mqforensics:Kind]``, so
`explain` can recover the one line a user needs from whatever wrapper the error travelled in.
Every message goes through `credentials.mask_secrets` when the error is made, so no error
carries a credential however it is shown (a notebook, a Spark worker's traceback, the CLI).
"""

from __future__ import annotations

import re

from mqforensics.credentials import mask_secrets

_MARKER = re.compile(r"\[mqforensics:(?P<kind>[A-Za-z]+)\] (?P<message>[^\n]*)")


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
    (credentials masked)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MqfError):
            return mask_secrets(f"{type(current).__name__}: {current.message}")
        match = _MARKER.search(str(current))
        if match:
            return mask_secrets(f"{match.group('kind')}: {match.group('message')}")
        current = current.__cause__ or current.__context__
    return None
