"""Stop the Cassandra driver's libev reactor thread once no connection is left.

The driver runs every connection of the process on one native event-loop thread. After
``Cluster.shutdown()`` that thread lives on (a cancelled request timer keeps the loop armed for
up to the request timeout) and the driver stops it only from an ``atexit`` hook, which stops the
watchers of connections the loop has not yet released *from the main thread* while the loop
thread may still be running: libev is not thread-safe, and a command that exits right after
closing its cluster on a busy machine can abort at exit with glibc heap corruption
(``tcache_thread_shutdown(): unaligned tcache chunk detected``), losing its exit code.

`quiesce` removes both windows: it waits until the loop thread itself has released every
closed connection, then stops the idle loop while the interpreter is fully alive and drops it,
so that the next connection starts a fresh one and the exit hook has nothing left to do.
Other reactors (asyncio, gevent...) are left alone.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

DRAIN_TIMEOUT = 5.0
_lock = threading.Lock()


def quiesce(timeout: float = DRAIN_TIMEOUT) -> bool:
    """Stop the process's libev loop if it holds no live connection; True when none is left.

    False (and the loop is kept) when a connection is still open, or when the loop thread did
    not release the closed ones within `timeout` seconds; the driver's exit hook then applies.
    """
    module: Any = sys.modules.get("cassandra.io.libevreactor")
    if module is None:
        return True
    with _lock:
        loop = getattr(module, "_global_loop", None)
        if loop is None:
            return True
        if not wait_released(loop, timeout):
            return False
        with loop._conn_set_lock:
            if loop._live_conns or loop._new_conns or loop._closed_conns:
                return False
            module._global_loop = None  # a new connection builds a new loop
        loop._cleanup()
        return True


def wait_released(loop: Any, timeout: float) -> bool:
    """Wait until `loop` has no new or closed connection waiting for its own thread.

    Those sets are drained by the loop thread (its prepare callback starts and stops the
    watchers); a loop whose thread is not running has nobody to drain them.
    """
    deadline = time.monotonic() + timeout
    while loop._new_conns or loop._closed_conns:
        thread = loop._thread
        if thread is None or not thread.is_alive() or time.monotonic() >= deadline:
            return False
        loop.notify()
        time.sleep(0.002)
    return True
