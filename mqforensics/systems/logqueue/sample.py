"""The bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

from mqforensics.spec import CHECKOUT_SAMPLES, Sample
from mqforensics.systems.logqueue.options import LogQueueOptions

SAMPLE = CHECKOUT_SAMPLES / "logqueue" / "sample"


def bundled(workdir: Path) -> Sample:
    """The two bundled queue directories, judged at the instant ``sample.json`` names."""
    meta = json.loads((SAMPLE / "sample.json").read_text())
    policy = SAMPLE / "policy.toml"
    return Sample(
        options=LogQueueOptions(dirs=[SAMPLE / name for name in meta["queues"]]),
        as_of=meta["as_of"],
        policy=policy if policy.exists() else None,
    )
