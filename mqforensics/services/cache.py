"""Where downloaded runtimes live between runs (the user's cache directory, never the repo)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mqforensics"
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
