"""The scheduled-validation notebook under ``pytest --nbmake``: it passes on the bundled sample
(``make test`` runs it so) and fails, printing the failing expectation, on a broken snapshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.james.james_snapshot_support import snapshot_with_a_duplicated_marker

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "validation" / "james_quality.ipynb"


def test_a_failing_suite_fails_the_notebook_and_names_the_expectation(tmp_path: Path) -> None:
    # A consumed marker written twice: deletedMailsV2's (queue, enqueueId) key is no longer unique.
    broken = snapshot_with_a_duplicated_marker(tmp_path / "snapshot")
    env = {
        **os.environ,
        "MQF_JAMES_ARGS": f"--snapshot {broken}",
        "MQF_NOTEBOOK_OUT": str(tmp_path / "out"),
    }
    # Run the notebook from a copy so nbmake cannot write anything beside the real one.
    copy = tmp_path / "validation" / NOTEBOOK.name
    copy.parent.mkdir()
    shutil.copyfile(NOTEBOOK, copy)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", str(copy), "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    assert result.returncode == 1, output[-3000:]
    assert "1 failed" in output
    # nbmake shows the failing cell's error: the expectation, its columns and the count.
    wanted = "deleted: expect_compound_columns_to_be_unique on queuename, enqueueid: 2 unexpected"
    assert f"expectations failed:\n{wanted}" in output, output[-3000:]
    quality = (tmp_path / "out" / "validation" / "quality.json").read_text()
    assert '"success": false' in quality
