"""Run histories for the validation notebooks' tests: earlier validations seeded, the runs read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from mqforensics.history.collect import Run
from mqforensics.history.store import Location, append
from mqforensics.metrics import Metric


def seeded(root: Path, system: str, scope: str, runs: list[tuple[dt.datetime, list[Metric]]]):
    """A history at `root` holding earlier validations of one store: (as_of, figures) each."""
    where = Location(str(root), root)
    for as_of, metrics in runs:
        append(Run(system, "validate", scope, as_of, tuple(metrics)), where)
    return where


def history_runs(root: Path) -> pd.DataFrame:
    frame = pd.read_parquet(root)
    return frame.drop_duplicates("run_id")[["scope", "kind", "run_id", "as_of"]]
