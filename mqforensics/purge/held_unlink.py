"""Deleting planned files with the last check on the very inode that is unlinked.

A file cannot be deleted on a condition: between a check of its content and ``unlink(path)`` the
writer may replace or append to it, and the unlink would take the new content. So a planned file
is first *held*: renamed (atomically, in its own directory) to ``.<name>.mqf-purge``, out of the
writer's namespace. The held file's size and SHA-256 are then checked against the plan, and only
then unlinked. A writer that recreates or appends to the file by its name after the hold writes a
new file, which is kept; a change that landed before the hold is seen by the check on the held
file, which is then put back under its name (never over a file the writer created meanwhile) and
the action skipped. The remaining window is a writer that already holds the file open and writes
into it between the check of the held file and the unlink (microseconds, no wait in between).

A purge interrupted between the hold and the unlink leaves the held file; `live_copy` finds it,
so the rerun checks it again and finishes (or puts it back). Crash points (`faults`) follow every
hold and every unlink.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mqforensics.file_digest import file_digest
from mqforensics.filenames import shown
from mqforensics.purge import faults
from mqforensics.purge.contract import TargetChanged
from mqforensics.retention.manifest import fsync_directory

HELD_SUFFIX = ".mqf-purge"
NOT_REGULAR = "no longer a regular file"


@dataclass(frozen=True)
class PlannedFile:
    """A file a plan deletes, with the size and SHA-256 it had when the plan was made."""

    path: Path
    size: int
    sha256: str


def held_path(path: Path) -> Path:
    """Where `path` is held between its last check and its unlink."""
    return path.with_name(f".{path.name}{HELD_SUFFIX}")


def live_copy(path: Path) -> Path | None:
    """The file standing for `path` now: itself, its held copy (an interrupted purge), or None."""
    for candidate in (path, held_path(path)):
        if os.path.lexists(candidate):
            return candidate
    return None


def mismatch(path: Path, planned: PlannedFile) -> str | None:
    """Why the file at `path` is not the planned one (not a regular file, size, digest), or None.

    FileNotFoundError propagates: the caller decides what a vanished file means.
    """
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return NOT_REGULAR
    if info.st_size != planned.size:
        return f"size {planned.size} -> {info.st_size}"
    size, sha256 = file_digest(path)
    if size != planned.size or sha256 != planned.sha256:
        return "content differs (SHA-256)"
    return None


def unlink_checked(files: Sequence[PlannedFile]) -> tuple[int, int]:
    """Hold every file, check each held file against the plan, then unlink them all.

    Call it right after `Operations.destructive` allowed the deletion. Files already gone are
    passed over. Returns (files removed, bytes removed). When a held file is not the planned one,
    every file held by this call is put back and `TargetChanged` says which and why: all or
    nothing, so a message is never left half deleted by a change.
    """
    held: list[tuple[PlannedFile, Path]] = []
    try:
        for planned in files:
            hold = held_path(planned.path)
            if os.path.lexists(planned.path):
                if os.path.lexists(hold) and os.path.samefile(hold, planned.path):
                    os.unlink(hold)  # an interrupted put-back left two names of one file
                os.rename(planned.path, hold)
                faults.point(f"held {shown(planned.path.name)}")
            elif not os.path.lexists(hold):
                continue
            held.append((planned, hold))
            try:
                why = mismatch(hold, planned)
            except FileNotFoundError:
                held.pop()
                continue
            if why:
                raise TargetChanged(
                    f"{shown(planned.path.name)} changed between the check and the delete "
                    f"({why}): kept"
                )
    except BaseException as exc:
        kept = _put_back(held)
        if kept and isinstance(exc, TargetChanged):
            raise TargetChanged(f"{exc.reason}; {kept}") from None
        raise
    count = removed = 0
    for planned, hold in held:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(hold)
            faults.point(f"unlinked {shown(planned.path.name)}")
            count += 1
            removed += planned.size
    for directory in sorted({hold.parent for _, hold in held}):
        fsync_directory(directory)
    return count, removed


def _put_back(held: list[tuple[PlannedFile, Path]]) -> str:
    """Give every held file its name back (never over a file created since); what was not."""
    not_back: list[str] = []
    for planned, hold in reversed(held):
        try:
            os.link(hold, planned.path)  # fails rather than replace a file the writer created
        except FileExistsError:
            not_back.append(
                f"{shown(planned.path.name)} was recreated meanwhile: ours is kept as {shown(hold)}"
            )
            continue
        except FileNotFoundError:
            continue
        os.unlink(hold)
    for directory in sorted({planned.path.parent for planned, _ in held}):
        fsync_directory(directory)
    return "; ".join(not_back)
