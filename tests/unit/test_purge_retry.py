"""Retries of transient server errors, typed errors when retrying cannot help; the rate limit."""

from __future__ import annotations

import pytest

from mqforensics.errors import AuthenticationFailed, ConfigError, ServerUnavailable
from mqforensics.purge.ratelimit import RateLimiter
from mqforensics.purge.retry import call_with_retries, one_line


def classify(exc: BaseException) -> str | None:
    if isinstance(exc, TimeoutError):
        return "retry"
    if isinstance(exc, PermissionError):
        return "auth"
    return None


class Flaky:
    """Fails with the given exceptions in turn, then returns "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def test_transient_errors_are_retried_with_doubling_delays():
    delays: list[float] = []
    fn = Flaky(TimeoutError("read timeout"), TimeoutError("read timeout"))
    assert call_with_retries(fn, classify=classify, what="x", sleep=delays.append) == "ok"
    assert delays == [0.5, 1.0] and fn.calls == 3


def test_a_refused_login_stops_at_once_without_echoing_the_credentials():
    delays: list[float] = []
    fn = Flaky(PermissionError("user bob password hunter2 refused"))
    with pytest.raises(AuthenticationFailed) as caught:
        call_with_retries(fn, classify=classify, what="action 3 fake", sleep=delays.append)
    assert caught.value.message.startswith("action 3 fake: ")
    assert "hunter2" not in str(caught.value) and "bob" not in str(caught.value)
    assert delays == [] and fn.calls == 1


def test_our_authentication_error_passes_through_unretried():
    fn = Flaky(AuthenticationFailed("Cassandra at h:9042 refused the credentials"))
    with pytest.raises(AuthenticationFailed, match="h:9042"):
        call_with_retries(fn, classify=lambda exc: "retry", what="x", sleep=lambda s: None)
    assert fn.calls == 1


def test_unclassified_errors_are_raised_as_they_are():
    fn = Flaky(KeyError("k"))
    with pytest.raises(KeyError):
        call_with_retries(fn, classify=classify, what="x", sleep=lambda s: None)
    assert fn.calls == 1


def test_interrupts_are_never_retried():
    seen: list[BaseException] = []

    def classify_all(exc: BaseException) -> str:
        seen.append(exc)
        return "retry"

    fn = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        call_with_retries(fn, classify=classify_all, what="x", sleep=lambda s: None)
    assert seen == [] and fn.calls == 1


def test_exhausted_retries_raise_server_unavailable_with_the_cause():
    delays: list[float] = []
    fn = Flaky(*[TimeoutError("no replica\nsecond line")] * 6)
    messages: list[str] = []
    with pytest.raises(ServerUnavailable) as caught:
        call_with_retries(
            fn, classify=classify, what="action 1 k", sleep=delays.append, on_retry=messages.append
        )
    assert caught.value.message == (
        "action 1 k: gave up after 6 attempts: TimeoutError: no replica"
    )
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0] and fn.calls == 6
    assert messages[0] == "action 1 k: TimeoutError: no replica; retry 1/5 in 0.5s"


def test_one_line_blanks_credentials_in_urls():
    exc = OSError("cannot reach http://key:secret@s3.local:8333/bucket\ntrace")
    assert one_line(exc) == "OSError: cannot reach http://[hidden]@s3.local:8333/bucket"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_rate_limit_spaces_operation_starts():
    clock = Clock()
    limiter = RateLimiter(4, clock=clock, sleep=clock.sleep)
    for _ in range(5):
        limiter.acquire()
    assert clock.sleeps == [0.25, 0.25, 0.25, 0.25] and limiter.count == 5
    clock.now += 10  # idle time earns no burst
    limiter.acquire()
    limiter.acquire()
    assert clock.sleeps[-1] == 0.25 and len(clock.sleeps) == 5


def test_no_rate_never_waits_but_counts():
    clock = Clock()
    limiter = RateLimiter(None, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        limiter.acquire()
    assert clock.sleeps == [] and limiter.count == 3


@pytest.mark.parametrize("rate", [0, -1.0])
def test_a_rate_must_be_positive(rate):
    with pytest.raises(ConfigError):
        RateLimiter(rate)
