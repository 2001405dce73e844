"""The purger executor of a reclamation plan (`plan`): segment files deleted, each re-checked live.

At apply time the executor re-reads ``restart.lq`` and the file: the segment must still be
below the live saved suffix and have the planned size and SHA-256, else the action is skipped.
Its census is whether every segment from the live saved suffix to the newest is present: a
running queue appends, rotates and deletes its own garbage meanwhile, but a gap there would be
a segment its restart needs. A plan names each queue directory as escaped text (`filenames.shown`,
docs/filenames.md): the files checked and deleted are those of exactly the bytes it stands for.

A spool file (`SpoolExecutor`) is deleted only when it still has the planned size and SHA-256
and, right before the delete, no unfinished message of the live queue names it: the queue's
segments are read and replayed from the live saved suffix, as the queue's restart does.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError
from mqforensics.filenames import fs_path, shown
from mqforensics.purge.contract import Operations, Verdict
from mqforensics.purge.held_unlink import PlannedFile, live_copy, mismatch, unlink_checked
from mqforensics.retention.manifest import Action, Plan
from mqforensics.spec import NoPurgeOptions
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue import layout
from mqforensics.systems.logqueue.plan import DELETE_SEGMENT, DELETE_SPOOL
from mqforensics.systems.logqueue.replay import replay
from mqforensics.systems.logqueue.segment import read_segment


class _QueueFiles:
    """What the executors of a queue directory's files share: the queues a plan acts on, each
    one its audit read (else the plan is refused), and no error they classify as transient."""

    kinds: tuple[str, ...] = ()
    step = "delete file"  # what the journal calls the destructive call
    # Whether `verify` asks the live queue (`_in_use`) before hashing the file: the cheaper
    # check first.
    in_use_first = True

    def __init__(self, plan: Plan) -> None:
        planned = {a.target["queue"] for a in plan.actions() if a.kind in self.kinds}
        audited = set(plan.header.get("inputs", {}).get("queues") or ())
        outside = sorted(planned - audited)
        if outside:
            raise ConfigError(
                f"plan {plan.directory}: actions on {outside[0]}, which its audit did not read"
            )
        self._queues = sorted(planned)

    def classify(self, exc: BaseException) -> str | None:
        return None

    def close(self) -> None:
        return None

    def _path(self, action: Action) -> Path:
        raise NotImplementedError

    def _planned(self, action: Action) -> PlannedFile:
        raise NotImplementedError

    def _in_use(self, action: Action, path: Path) -> tuple[str | None, dict[str, Any]]:
        """Why the live queue needs the file now (None if it does not), and what the verdict
        records of what was read."""
        raise NotImplementedError

    def verify(self, action: Action) -> Verdict:
        """The live queue does not need the file, and it has the planned size and SHA-256."""
        path = self._path(action)
        current = live_copy(path)
        if current is None:
            return Verdict(True, already_done=True)
        needed, detail = self._in_use(action, path) if self.in_use_first else (None, {})
        if needed:
            return Verdict(False, needed)
        try:
            why = mismatch(current, self._planned(action))
        except FileNotFoundError:
            return Verdict(True, already_done=True)
        if why:
            return Verdict(False, f"changed since the plan ({why})")
        if not self.in_use_first:
            needed, detail = self._in_use(action, path)
            if needed:
                return Verdict(False, needed)
        return Verdict(True, detail=detail)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        """The file deleted right after `verify` passes again (held, checked, unlinked)."""
        if not ops.destructive(self.step, partial(self.verify, action)):
            return {"bytes": 0}
        _, removed = unlink_checked([self._planned(action)])
        ops.completed(self.step)
        return {"bytes": removed}

    def verify_done(self, action: Action) -> str | None:
        return "file still present" if live_copy(self._path(action)) else None


class SegmentExecutor(_QueueFiles):
    """Deletes planned segment files that are still below their queue's live saved suffix."""

    kinds = (DELETE_SEGMENT,)
    step = "delete segment"
    in_use_first = True  # restart.lq is one small read, cheaper than hashing the segment

    def _path(self, action: Action) -> Path:
        return Path(fs_path(action.target["queue"])) / fs_path(action.target["file"])

    def _planned(self, action: Action) -> PlannedFile:
        pre = action.precondition
        if not isinstance(pre.get("sha256"), str):
            raise ConfigError(
                f"action {action.seq}: the plan records no SHA-256 of {action.target['file']} "
                "(made by an older version): plan again"
            )
        return PlannedFile(self._path(action), int(pre["size"]), pre["sha256"])

    def _in_use(self, action: Action, path: Path) -> tuple[str | None, dict[str, Any]]:
        """Needed unless still below the live saved suffix."""
        saved = layout.saved_positions(path.parent)
        if saved is None or action.target["segment"] >= saved.suffix[0]:
            live = "none" if saved is None else saved.suffix[0]
            return f"the saved working suffix (segment {live}) now covers it", {}
        return None, {"saved_suffix_segment": saved.suffix[0]}

    def census(self) -> dict[str, Any]:
        """Per queue: segments missing between the live saved suffix and the newest segment."""
        out: dict[str, Any] = {}
        for queue in self._queues:
            directory = Path(fs_path(queue))
            files = layout.segments(directory)
            saved = layout.saved_positions(directory)
            low = saved.suffix[0] if saved else min(files, default=1)
            gaps = [n for n in range(low, max(files, default=low - 1) + 1) if n not in files]
            out[queue] = {"needed_segments_missing": len(gaps)}
        return out


def unfinished_spool_names(directory: Path) -> set[str]:
    """The spool names (escaped, as plans name them) of every message of the live queue at
    `directory` that is not finished: its segments read and replayed from the live saved
    suffix (the lowest segment's start when there is no ``restart.lq``)."""
    files = layout.segments(directory)
    if not files:
        return set()
    saved = layout.saved_positions(directory)
    suffix = saved.suffix if saved else (min(files), fmt.SEGMENT_HEADER_SIZE)
    records = [r for path in files.values() for r in read_segment(path).records]
    result = replay(records, suffix)
    return {
        shown(m.envelope.values["spool"])
        for m in result.messages.values()
        if m.state != "finished" and m.envelope is not None
    }


class SpoolExecutor(_QueueFiles):
    """Deletes planned spool files that no unfinished message of the live queue names."""

    kinds = (DELETE_SPOOL,)
    step = "delete spool file"
    in_use_first = False  # replaying the live queue costs more than hashing one file

    def _path(self, action: Action) -> Path:
        queue = Path(fs_path(action.target["queue"]))
        return queue / layout.SPOOL_DIR / fs_path(action.target["spool"])

    def _planned(self, action: Action) -> PlannedFile:
        pre = action.precondition
        return PlannedFile(self._path(action), int(pre["size"]), str(pre["sha256"]))

    def _in_use(self, action: Action, path: Path) -> tuple[str | None, dict[str, Any]]:
        """Needed while an unfinished message of the live queue names the file."""
        if action.target["spool"] in unfinished_spool_names(path.parent.parent):
            return "an unfinished message of the live queue names it now", {}
        return None, {}

    def census(self) -> dict[str, Any]:
        return {}


def build_executors(
    plan: Plan, options: NoPurgeOptions | None = None
) -> list[SegmentExecutor | SpoolExecutor]:
    """The executors of a plan's segment and spool file deletions (they need nothing beyond
    the plan)."""
    return [SegmentExecutor(plan), SpoolExecutor(plan)]
