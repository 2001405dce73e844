"""The integrity problem value every Cyrus file reader returns instead of raising on bad data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One integrity problem: `kind` (e.g. ``crc_head``), the file `offset` it is at, and why."""

    kind: str
    offset: int
    detail: str


def load(source: bytes | str | Path, name: str | None = None) -> tuple[bytes, str]:
    """The bytes of `source` (a path, opened read-only, or bytes) and the name messages use."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), name or "<bytes>"
    path = Path(source)
    with path.open("rb") as handle:
        return handle.read(), name or str(path)
