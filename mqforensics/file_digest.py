"""The digest a plan records for a file and the purger checks again: its size and SHA-256.

One definition for every system whose targets are files (slimta's ``.env``/``.meta``, logqueue
segments), so the planner's digest and the purger's last check can never disagree.
"""

from __future__ import annotations

import hashlib
import os

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
