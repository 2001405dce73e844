"""The slimta validation notebook under ``pytest --nbmake``: it passes on the bundled sample
(``make test`` runs it so) and fails, printing the failing expectation, on a store holding a
message slimta never wrote."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mqforensics.systems.slimta.sample import materialize

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "notebooks" / "validation" / "slimta_quality.ipynb"


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    # Run the notebook from a copy so nbmake cannot write anything beside the real one.
    copy = tmp_path / "validation" / NOTEBOOK.name
    copy.parent.mkdir(exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if k not in ("MQF_SLIMTA_ARGS", "MQF_AS_OF")}
    shutil.copyfile(NOTEBOOK, copy)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", str(copy), "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**inherited, "MQF_NOTEBOOK_OUT": str(tmp_path / "out"), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return result.returncode, re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)


def test_the_notebook_passes_on_the_sample_and_fails_on_a_planted_defect(tmp_path: Path) -> None:
    status, output = _run(tmp_path, {})
    assert status == 0 and "1 passed" in output, output[-3000:]
    quality = json.loads((tmp_path / "out" / "validation" / "slimta" / "quality.json").read_text())
    assert quality["success"] and len(quality["suites"][0]["expectations"]) == 19

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
