"""Output directories, checked before anything is read or Spark starts: one that exists must be
a directory this process can write in; one that does not must be makeable."""

from __future__ import annotations

import os
from pathlib import Path

from mqforensics.errors import ConfigError

__all__ = ["check_out", "check_writable"]


def check_out(out: Path, what: str = "--out") -> None:
    """An output directory: may exist (as a directory) or be created; a file there is refused,
    and so is a directory this process cannot write in (or create): a read-only file system, a
    directory without write permission (`check_writable`), all before Spark starts."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{what} {out} exists and is not a directory")
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {out}: {parent} is not a directory")
    check_writable(out if out.exists() else parent, out, what)


def check_writable(directory: Path, out: Path, what: str) -> None:
    """A ConfigError naming `what` and `out` when `directory` (`out`, or the nearest directory
    that exists above it, where it would be made) cannot be written in."""
    if os.access(directory, os.W_OK | os.X_OK):
        return
    try:
        read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "on a read-only file system" if read_only else "not writable (permission denied)"
    where = "" if directory == out else f": {directory} is"
    raise ConfigError(f"{what} {out}{where or ' is'} {why}")
