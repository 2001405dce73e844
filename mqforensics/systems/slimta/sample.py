"""The bundled slimta sample (``datasets/slimta/sample``, made by ``datasets/slimta/make_sample.py``
with the real python-slimta 5.0.5): a DiskStorage with normal traffic and planted anomalies.

Git keeps no modification times, and the checks read them (stale tmp files, the torn-write
grace), so the sample is used through `materialize`: a copy with every file's recorded mtime
put back, audited as of a minute after it was written (`Sample.as_of`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError
from mqforensics.systems.slimta.disk import DiskLayout

BUNDLED = Path(__file__).resolve().parents[3] / "datasets" / "slimta" / "sample"


@dataclass(frozen=True)
class Sample:
    """A materialized copy: its DiskStorage layout, what wrote it, and when."""

    layout: DiskLayout
    truth: dict[str, Any]

    @property
    def as_of(self) -> dt.datetime:
        """A minute after the writer started: when the sample is judged."""
        return dt.datetime.fromtimestamp(int(self.truth["now"]) + 60, dt.UTC)


def materialize(dest: Path | str, source: Path = BUNDLED) -> Sample:
    """Copy the sample's ``env/``, ``meta/`` and ``tmp/`` into `dest` with their mtimes."""
    try:
        mtimes: dict[str, float] = json.loads((source / "mtimes.json").read_text())
        truth = json.loads((source / "truth.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{source}: not a slimta sample ({exc})") from None
    dest = Path(dest)
    for name in ("env", "meta", "tmp"):
        (dest / name).mkdir(parents=True, exist_ok=True)
    for relative, mtime in mtimes.items():
        target = dest / relative
        shutil.copyfile(source / relative, target)
        os.utime(target, (mtime, mtime))
    return Sample(DiskLayout.checked(dest / "env", dest / "meta", dest / "tmp"), truth)
