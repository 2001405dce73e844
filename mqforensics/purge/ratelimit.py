"""`--rate N`: at most N destructive operations start per second.

Deletes in Cassandra cost compaction work and tombstones on every replica, and S3 deletes count
against request quotas; an operator throttles a purge so the live system does not notice it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mqforensics.errors import ConfigError


class RateLimiter:
    """Spaces operation starts at least ``1/rate`` seconds apart; ``rate=None`` never waits.

    No burst credit accumulates while the caller is busy elsewhere (verifying, say): the limit
    is on the rate at which deletes reach the server, and a burst after a slow verification is
    exactly what it is meant to prevent.
    """

    def __init__(
        self,
        rate: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate is not None and not rate > 0:
            raise ConfigError(f"rate {rate!r}: must be a positive number of operations per second")
        self.rate = rate
        self.count = 0
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None

    def acquire(self) -> None:
        """Block until the next operation may start, and count it."""
        self.count += 1
        if self.rate is None:
            return
        now = self._clock()
        start = now if self._next is None else max(now, self._next)
        if start > now:
            self._sleep(start - now)
        self._next = start + 1.0 / self.rate
