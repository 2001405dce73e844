"""Fault injection for the purger's crash tests; inert unless its environment variables are set.

Crash safety is a property of *every* point between two durable steps, so the tests kill the
purger at each of them in turn and check that a rerun still reaches the uninterrupted result.
The engine and the executors call `point` at every such boundary (after each journal record,
before and after each destructive call). In normal use neither variable is set and `point` only
increments a counter.

* ``MQF_PURGE_FAULT_TRACE=FILE``: append ``"<n> <label>\\n"`` to FILE for every point, so a test
  can count the points of an uninterrupted run (and see where a killed run stopped).
* ``MQF_PURGE_FAULT_AT=N``: at the N-th point of this process, SIGKILL the process at once:
  nothing is flushed and no handler runs, as in a power cut between two steps.

In-process tests may also `set_hook` a function called with every point's label: it plays the
live system changing a target at that very moment (during a rate wait, between the last check
and the delete).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

FAULT_AT = "MQF_PURGE_FAULT_AT"
FAULT_TRACE = "MQF_PURGE_FAULT_TRACE"

_count = 0
_hook: Callable[[str], None] | None = None


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Call `hook(label)` at every point of this process from now on (None: no hook); tests only."""
    global _hook
    _hook = hook


def point(label: str) -> None:
    """Mark one crash point; kills the process here when ``MQF_PURGE_FAULT_AT`` says so."""
    global _count
    _count += 1
    trace = os.environ.get(FAULT_TRACE)
    if trace:
        # Written (and closed) before a kill, so the trace also shows where a killed run died.
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{_count} {label}\n")
    if _hook is not None:
        _hook(label)
    at = os.environ.get(FAULT_AT)
    if at and at.strip() == str(_count):
        os.kill(os.getpid(), signal.SIGKILL)


def count() -> int:
    """How many points this process has passed (for tests and diagnostics)."""
    return _count
