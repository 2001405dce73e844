"""Retries with exponential backoff for the purger's calls to live servers.

A purge runs for a long time against servers that time out and lose replicas now and then; one
slow read must not stop it. But a server that stays away, or refuses the login, must stop it
with a typed error, since the journal makes the run resumable and a rerun is the remedy. What
counts as transient is decided by the executor (`classify`), which knows its driver's
exceptions; this module only decides how often and how long to wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from mqforensics.credentials import mask_secrets
from mqforensics.errors import AuthenticationFailed, ServerUnavailable, explain
from mqforensics.units import plural

T = TypeVar("T")

# Retries of a transient error per call (`mqforensics purge --retries`): with the delays doubling
# from 0.5 s, a server away for about 15 s is waited out before the run stops.
DEFAULT_RETRIES = 5


def one_line(exc: BaseException) -> str:
    """The cause in one line, ``Kind: message``, with credentials masked (`mask_secrets`)."""
    text = explain(exc)
    if text is None:
        lines = str(exc).strip().splitlines()
        first = lines[0].strip() if lines else ""
        text = f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__
    return mask_secrets(text)


def call_with_retries(
    fn: Callable[[], T],
    *,
    classify: Callable[[BaseException], str | None],
    what: str,
    attempts: int = DEFAULT_RETRIES + 1,
    base_delay: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[str], None] | None = None,
) -> T:
    """`fn()`, retried on transient errors with delays of 0.5, 1, 2, 4, 8 s (by default).

    `classify(exc)` says what an exception is: ``"retry"`` (transient: a timeout, an unavailable
    replica), ``"auth"`` (a refused login: raises `AuthenticationFailed` at once, since retrying
    cannot help and may lock the account), or None (not ours to handle: re-raised as it is). When
    the last attempt fails transiently, raises `ServerUnavailable` naming `what` and the cause.
    `on_retry` receives one line per retry (for progress output).

    The auth message names only the exception type: a driver's refusal text may quote the user
    name or the connection string, and credentials are never echoed.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except AuthenticationFailed:
            raise  # already typed, e.g. by a connection helper: never worth retrying
        except Exception as exc:
            kind = classify(exc)
            if kind == "auth":
                raise AuthenticationFailed(
                    f"{what}: the server refused the credentials ({type(exc).__name__})"
                ) from exc
            if kind != "retry":
                raise
            if attempt >= attempts:
                raise ServerUnavailable(
                    f"{what}: gave up after {plural(attempts, 'attempt')}: {one_line(exc)}"
                ) from exc
            delay = base_delay * 2 ** (attempt - 1)
            if on_retry is not None:
                on_retry(f"{what}: {one_line(exc)}; retry {attempt}/{attempts - 1} in {delay:g}s")
            sleep(delay)
