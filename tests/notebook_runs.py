"""A notebook run under ``pytest --nbmake`` from a copy, as a scheduler would run it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_notebook_copy(
    notebook: Path, tmp_path: Path, env: dict[str, str], *, drop: tuple[str, ...] = ()
) -> tuple[int, str]:
    """(exit status, output without colours) of nbmake on a copy of `notebook` (so nothing is
    written beside the real one), with `env` over this process's environment (less `drop` and
    ``PYTEST_ADDOPTS``) and ``MQF_NOTEBOOK_OUT`` set to ``tmp_path/out``."""
    copy = tmp_path / "validation" / notebook.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, copy)
    # The options of the pytest running this test (``PYTEST_ADDOPTS``) are not a scheduler's.
    skipped = {*drop, "PYTEST_ADDOPTS"}
    inherited = {k: v for k, v in os.environ.items() if k not in skipped}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", str(copy), "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**inherited, "MQF_NOTEBOOK_OUT": str(tmp_path / "out"), **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    return result.returncode, re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
