"""The bundled slimta sample (``datasets/slimta/sample``, made by ``datasets/slimta/make_sample.py``
with the real python-slimta 5.0.5): a DiskStorage with normal traffic and planted anomalies.

Git keeps no modification times, and the checks read them (stale tmp files, the torn-write
grace), so the sample is used through `materialize`: a copy with every file's recorded mtime
put back, audited as of a minute after it was written (`SampleCopy.as_of`). Its planted
anomalies (``expected_findings.json``, per role of ``truth.json``) become the copy's ground
truth with `write_ground_truth`.
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
from mqforensics.spec import CHECKOUT_SAMPLES, Sample
from mqforensics.systems.slimta.disk import ENV_SUFFIX, META_SUFFIX, DiskLayout
from mqforensics.systems.slimta.options import SlimtaOptions
from mqforensics.units import utc_text

BUNDLED = CHECKOUT_SAMPLES / "slimta" / "sample"
EXPECTED = "expected_findings.json"


@dataclass(frozen=True)
class SampleCopy:
    """A materialized copy: its DiskStorage layout, what wrote it, and when."""

    layout: DiskLayout
    truth: dict[str, Any]

    @property
    def as_of(self) -> dt.datetime:
        """A minute after the writer started: when the sample is judged."""
        return dt.datetime.fromtimestamp(int(self.truth["now"]) + 60, dt.UTC)


def materialize(dest: Path | str, source: Path = BUNDLED) -> SampleCopy:
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
    return SampleCopy(DiskLayout.checked(dest / "env", dest / "meta", dest / "tmp"), truth)


def expected_findings(copy: SampleCopy, source: Path = BUNDLED) -> list[dict[str, str]]:
    """The planted findings of `copy` (check, severity, queue, subject), from the roles."""
    layout = copy.layout
    roles: dict[str, str] = copy.truth["roles"]
    assert layout.tmp_dir is not None
    paths = {
        "env": lambda i: os.path.join(layout.env_dir, i + ENV_SUFFIX),
        "meta": lambda i: os.path.join(layout.meta_dir, i + META_SUFFIX),
        "tmp": lambda i: os.path.join(str(layout.tmp_dir), i),
    }
    planted = json.loads((source / EXPECTED).read_text())["findings"]
    return [
        {
            "check": f["check"],
            "severity": f["severity"],
            "queue": layout.store,
            "subject": paths[f["part"]](roles[f["role"]]),
        }
        for f in planted
    ]


def write_ground_truth(copy: SampleCopy, path: Path) -> Path:
    """`expected_findings` of `copy` as ``{"findings": [...]}`` (what `demo` compares with)."""
    path.write_text(json.dumps({"findings": expected_findings(copy)}, indent=1) + "\n")
    return path


def bundled(workdir: Path) -> Sample:
    """The bundled DiskStorage copied under ``workdir/store`` with its recorded mtimes (git keeps
    none), judged a minute after it was written; its ground truth written beside it."""
    store = Path(workdir) / "store"
    shutil.rmtree(store, ignore_errors=True)
    copy = materialize(store)
    layout = copy.layout
    assert layout.tmp_dir is not None
    truth = write_ground_truth(copy, Path(workdir) / "ground_truth.json")
    return Sample(
        options=SlimtaOptions(
            disk=Path(layout.env_dir), meta_dir=Path(layout.meta_dir), tmp_dir=Path(layout.tmp_dir)
        ),
        as_of=utc_text(copy.as_of),
        ground_truth=truth,
        policy=BUNDLED / "policy.toml",
    )
