"""Applying a plan while a test plays the live system at the purger's fault points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mqforensics.purge import faults
from mqforensics.purge.contract import Executor
from mqforensics.purge.engine import PurgeResult, run_purge
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Plan


def apply_with_hook(
    plan: Plan, executors: Sequence[Executor], hook: Callable[[str], None] | None, **kwargs: Any
) -> PurgeResult:
    """`run_purge(apply=True)`, `hook(label)` called at every fault point; closes the executors."""
    faults.set_hook(hook)
    try:
        return run_purge(plan, executors, apply=True, out=lambda _: None, **kwargs)
    finally:
        faults.set_hook(None)
        for executor in executors:
            executor.close()


def skipped_records(journal: Path | None) -> list[tuple[int, str, bool, int]]:
    """(seq, reason, at_last_check, completed_operations) of every ``skipped`` record."""
    assert journal is not None
    return [
        (r["seq"], r["reason"], r.get("at_last_check", False), r.get("completed_operations", 0))
        for r in read_journal(journal)
        if r["event"] == "skipped"
    ]
