"""The slimta validation notebook under ``pytest --nbmake`` fails, printing the failing
expectation, on a store holding a message slimta never wrote. (``make test`` runs it on the
bundled sample, where it passes: `tests/unit/slimta/test_slimta_validate.py` checks that run's
19 expectations without a notebook.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mqforensics.systems.slimta.sample import materialize
from tests.notebook_runs import ROOT, run_notebook_copy

NOTEBOOK = ROOT / "notebooks" / "validation" / "slimta_quality.ipynb"


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    return run_notebook_copy(NOTEBOOK, tmp_path, env, drop=("MQF_SLIMTA_ARGS", "MQF_AS_OF"))


def test_the_notebook_fails_on_a_planted_defect_naming_the_expectation(tmp_path: Path) -> None:
    copy = materialize(tmp_path / "store")
    old = copy.truth["roles"]["old"]
    root = tmp_path / "store"
    shutil.copyfile(root / "env" / f"{old}.env", root / "env" / "restored-by-hand.env")
    shutil.copyfile(root / "meta" / f"{old}.meta", root / "meta" / "restored-by-hand.meta")
    args = f"--disk {root / 'env'} --meta-dir {root / 'meta'} --tmp-dir {root / 'tmp'}"
    status, output = _run(tmp_path, {"MQF_SLIMTA_ARGS": args})
    assert status == 1 and "1 failed" in output, output[-3000:]
    # nbmake shows the failing cell's error: the frame, the expectation and the count.
    wanted = "expectations failed:\nitems: unexpected_rows_expectation on SELECT backend, store, id"
    assert wanted in output, output[-3000:]
    assert "1 unexpected" in output and "restored-by-hand" in output
    quality = json.loads((tmp_path / "out" / "validation" / "slimta" / "quality.json").read_text())
    assert not quality["success"] and len(quality["suites"][0]["expectations"]) == 19
