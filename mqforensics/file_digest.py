"""The digest a plan records for a file and the purger checks again: its size and SHA-256.

One definition for every system whose targets are files (slimta's ``.env``/``.meta``, logqueue
segments), so the planner's digest and the purger's last check can never disagree.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

CHUNK = 1 << 20


def file_digest(path: str | os.PathLike[str]) -> tuple[int, str]:
    """(size, SHA-256) of a file's content, read in 1 MiB chunks; OSError when unreadable."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def listing_fingerprint(roots: Sequence[str | os.PathLike[str]]) -> str:
    """``sha256:<hex>`` of what a directory store held when it was read: every file under
    `roots` (walked by bytes, symlinks not followed), its path relative to its root, size and
    modification time, in name order. Contents are not read: two audits of an unchanged store
    give the same fingerprint, and any file added, removed, resized or rewritten changes it. A
    root that cannot be listed is hashed as missing."""
    digest = hashlib.sha256()
    for root in roots:
        base = os.fsencode(root)
        digest.update(b"root " + base + b"\n")
        entries: list[tuple[bytes, int, int]] = []
        for directory, dirs, files in os.walk(base, onerror=lambda _: None):
            dirs.sort()
            for name in files:
                path = os.path.join(directory, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                entries.append((os.path.relpath(path, base), info.st_size, info.st_mtime_ns))
        for relative, size, mtime in sorted(entries):
            digest.update(relative + b" %d %d\n" % (size, mtime))
    return f"sha256:{digest.hexdigest()}"
