"""The contract between the purge engine and the executors: what an executor implements
(`Executor`), what it returns (`Verdict`), raises (`TargetChanged`) and is handed (`Operations`,
the only way it may start a destructive call).

Systems' executors and the shared helpers (`held_unlink`, `s3_delete`) import this module, never
`engine`: the engine (which reaches the systems through their registry) sits above them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mqforensics.purge import faults
from mqforensics.purge.ratelimit import RateLimiter

if TYPE_CHECKING:
    from mqforensics.retention.manifest import Action


@dataclass
class Verdict:
    """What live re-verification found for one action.

    `already_done`: the target is already in the planned final state (an earlier interrupted
    run, or the server itself, removed it). The engine still runs `apply` then, because apply
    is idempotent and finishes whatever steps remain (e.g. a partition's markers). Neither `ok`
    nor `already_done`: the precondition no longer holds, and the action is skipped with
    `reason`.
    """

    ok: bool
    reason: str = ""
    already_done: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


class TargetChanged(Exception):
    """The live target no longer matches the plan at its last check (or the system's conditional
    delete refused it): the engine journals the action as ``skipped`` with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Operations:
    """Handed to `Executor.apply`; the only way an executor may start a destructive call.

    ``if ops.destructive(label, check): <the destructive call>; ops.completed(label)``:
    `destructive` takes the rate slot (waiting if needed), then runs `check`, the live
    precondition of exactly this call, and marks a crash point. It returns False when the check
    finds the target already gone (skip the call), raises `TargetChanged` when the precondition
    no longer holds, and True when the call may go ahead, at once: nothing that waits may come
    between it and the call. Labels name the step (``"delete partition"``) in fault traces.
    """

    def __init__(self, limiter: RateLimiter | None = None) -> None:
        self._limiter = limiter or RateLimiter(None)
        self.count = 0

    def destructive(self, label: str, check: Callable[[], Verdict]) -> bool:
        faults.point(f"rate slot {label}")
        self._limiter.acquire()
        verdict = check()
        if verdict.already_done:
            return False
        if not verdict.ok:
            raise TargetChanged(verdict.reason or "changed since it was verified")
        faults.point(f"before {label}")
        return True

    def completed(self, label: str) -> None:
        self.count += 1
        faults.point(f"after {label}")


class Executor(Protocol):
    """Carries out the actions of some kinds against one live system.

    An executor gets the plan when it is built, so `census` can leave out what the plan names.
    Every method may raise driver exceptions; `classify` tells the engine which are transient.
    """

    @property
    def kinds(self) -> tuple[str, ...]:
        """The action kinds this executor handles."""
        ...

    def classify(self, exc: BaseException) -> str | None:
        """``"retry"`` (transient), ``"auth"`` (refused credentials) or None (not retried)."""
        ...

    def verify(self, action: Action) -> Verdict:
        """Re-check the action's precondition against live state; changes nothing."""
        ...

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        """Perform the action, idempotently (it may be half done); say what was removed.

        Every destructive call is preceded by ``ops.destructive(label, check)`` with the live
        check of that call, and followed by ``ops.completed(label)``; a conditional delete that
        the system refuses raises `TargetChanged`.
        """
        ...

    def census(self) -> dict[str, Any]:
        """Counts and digests (JSON values) of everything of its kinds the plan does not name."""
        ...

    def verify_done(self, action: Action) -> str | None:
        """None when the target is in its final state, else what remains."""
        ...

    def close(self) -> None: ...

    # Optional, looked up with getattr (a Protocol cannot make a method optional):
    #
    # def measure(self) -> dict[str, Any]:
    #     """What the live system itself reports about the cost of the plan's deletes; read-only.
    #     JSON values: ``predicted`` ({where: {figure: number}}, what the plan's actions of its
    #     kinds are expected to write, e.g. tombstones per table), ``observed`` ({where: {figure:
    #     number}}, what the system reports now), ``notes`` (lines: what was measured, bounds),
    #     and any ``detail``. The report renders ``predicted`` and ``observed`` generically."""


MEASURE = "measure"
