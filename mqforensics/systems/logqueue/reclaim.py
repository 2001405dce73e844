"""Reclamation plans for queue directories, and the purger executor that carries them out.

A segment may go only when the queue's own restart procedure would never read it again: its
number is below the working suffix of the *saved* restart positions (``restart.lq``). Segments
that replay shows to be garbage but that the saved positions still cover are deferred (the
queue must save newer positions first: `restart_lag`). At apply time the executor re-reads
``restart.lq`` and the file: the segment must still be below the live saved suffix and have
the planned size, else the action is skipped. Its census is whether every segment from the
live saved suffix to the newest is present: a running queue appends, rotates and deletes its
own garbage meanwhile, but a gap there would be a segment its restart needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError
from mqforensics.file_digest import file_digest
from mqforensics.purge.engine import Operations, Verdict
from mqforensics.purge.held_unlink import PlannedFile, live_copy, mismatch, unlink_checked
from mqforensics.retention.manifest import Action, Deferred, Plan
from mqforensics.retention.policy import Policy
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.replay import replay
from mqforensics.systems.logqueue.segment import read_segment

SYSTEM = "logqueue"
DELETE_SEGMENT = "logqueue.delete_segment"
SAVED_POSITIONS_BEHIND = (
    "garbage, but the saved restart positions still cover it: the queue must save newer "
    "positions first (restart_lag)"
)


def plan_reclamation(
    directories: Sequence[Path], policy: Policy
) -> tuple[list[Action], list[Deferred], list[str]]:
    """Actions deleting every segment below each queue's saved suffix; deferrals; notes."""
    rules = tuple(r.id for r in policy.rules_of("garbage_segments", SYSTEM))
    actions: list[Action] = []
    deferred: list[Deferred] = []
    notes: list[str] = []
    if not rules:
        return actions, deferred, notes
    for directory in directories:
        directory = directory.resolve()
        files = layout.segments(directory)
        saved = layout.saved_positions(directory)
        if saved is None:
            notes.append(f"{directory}: no {layout.RESTART_FILE}: nothing is below a suffix")
            continue
        suffix_segment = saved.suffix[0]
        needed = [read_segment(path) for n, path in files.items() if n >= suffix_segment]
        end = (max(files), files[max(files)].stat().st_size) if files else saved.suffix
        garbage_end = replay((r for s in needed for r in s.records), saved.suffix).garbage_end(end)
        for number, path in files.items():
            target = {"queue": str(directory), "segment": number, "file": path.name}
            if number < suffix_segment:
                size, sha256 = file_digest(path)
                precondition = {
                    "size": size, "sha256": sha256, "saved_suffix_segment": suffix_segment
                }  # fmt: skip
                reason = "entirely before the saved working suffix"
                actions.append(Action(DELETE_SEGMENT, target, precondition, rules, size, 0, reason))
            elif number < garbage_end[0]:
                size = path.stat().st_size
                deferred.append(Deferred(DELETE_SEGMENT, target, rules, SAVED_POSITIONS_BEHIND))
    return actions, deferred, notes


class SegmentExecutor:
    """Deletes planned segment files that are still below their queue's live saved suffix."""

    kinds = (DELETE_SEGMENT,)

    def __init__(self, plan: Plan) -> None:
        self._queues = sorted({a.target["queue"] for a in plan.actions() if a.kind in self.kinds})

    def classify(self, exc: BaseException) -> str | None:
        return None

    @staticmethod
    def _path(action: Action) -> Path:
        return Path(action.target["queue"]) / action.target["file"]

    @staticmethod
    def _planned(action: Action) -> PlannedFile:
        pre = action.precondition
        if not isinstance(pre.get("sha256"), str):
            raise ConfigError(
                f"action {action.seq}: the plan records no SHA-256 of {action.target['file']} "
                "(made by an older version): plan again"
            )
        return PlannedFile(SegmentExecutor._path(action), int(pre["size"]), pre["sha256"])

    def verify(self, action: Action) -> Verdict:
        """Still below the live saved suffix, with the planned size and SHA-256."""
        path = self._path(action)
        current = live_copy(path)
        if current is None:
            return Verdict(True, already_done=True)
        saved = layout.saved_positions(path.parent)
        if saved is None or action.target["segment"] >= saved.suffix[0]:
            live = "none" if saved is None else saved.suffix[0]
            return Verdict(False, f"the saved working suffix (segment {live}) now covers it")
        try:
            why = mismatch(current, self._planned(action))
        except FileNotFoundError:
            return Verdict(True, already_done=True)
        if why:
            return Verdict(False, f"changed since the plan ({why})")
        return Verdict(True, detail={"saved_suffix_segment": saved.suffix[0]})

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        if not ops.destructive("delete segment", partial(self.verify, action)):
            return {"bytes": 0}
        _, removed = unlink_checked([self._planned(action)])
        ops.completed("delete segment")
        return {"bytes": removed}

    def verify_done(self, action: Action) -> str | None:
        return "file still present" if live_copy(self._path(action)) else None

    def census(self) -> dict[str, Any]:
        """Per queue: segments missing between the live saved suffix and the newest segment."""
        out: dict[str, Any] = {}
        for queue in self._queues:
            directory = Path(queue)
            files = layout.segments(directory)
            saved = layout.saved_positions(directory)
            low = saved.suffix[0] if saved else min(files, default=1)
            gaps = [n for n in range(low, max(files, default=low - 1) + 1) if n not in files]
            out[queue] = {"needed_segments_missing": len(gaps)}
        return out

    def close(self) -> None:
        return None


def build_executors(plan: Plan, args: argparse.Namespace) -> list[SegmentExecutor]:
    return [SegmentExecutor(plan)]
