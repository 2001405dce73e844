"""Whether a server answers at all, asked before Spark starts (docs/errors.md).

A live read whose server does not answer would otherwise start Spark, and the drivers retry for
a while before they give up with a stack of their own; one TCP connection per contact point,
with a short timeout, says "not reachable" in one line instead. It proves nothing about the
login or the protocol: the readers still say what goes wrong after it.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from mqforensics.errors import ServerUnavailable

# Seconds a contact point may take to accept a connection.
CONNECT_SECONDS = 5.0


def check_reachable(
    points: Sequence[tuple[str, int]],
    what: str,
    *,
    where: str | None = None,
    timeout: float = CONNECT_SECONDS,
) -> None:
    """Some contact point ``(host, port)`` accepts a TCP connection within `timeout` seconds;
    otherwise a ServerUnavailable, ``<what> at <where> is unreachable (<why>)``: `what` names
    the kind of server (``Cassandra``, ``Redis``), `where` the server as its readers' errors
    do (default: the points, ``host:port`` each)."""
    failures = []
    for host, port in points:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            failures.append((f"{host}:{port}", reason))
    places = where or ",".join(place for place, _ in failures)
    reasons = "; ".join(dict.fromkeys(reason for _, reason in failures))
    raise ServerUnavailable(f"{what} at {places} is unreachable ({reasons})")
