"""The Cyrus validation notebook under ``pytest --nbmake`` (``make test`` runs it on the bundled
sample, where it passes): a planted defect fails it naming the expectation; an input that cannot
be read fails it with the input's error, never as a failed expectation."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "notebooks" / "validation" / "cyrus_quality.ipynb"
B1 = ROOT / "datasets" / "cyrus" / "sample" / "backend1" / "mailboxes.db"


def _run(tmp_path: Path, argv: str) -> str:
    env = {**os.environ, "MQF_CYRUS_ARGS": argv, "MQF_NOTEBOOK_OUT": str(tmp_path / "out")}
    # Run the notebook from a copy so nbmake cannot write anything beside the real one.
    copy = tmp_path / "validation" / NOTEBOOK.name
    copy.parent.mkdir(exist_ok=True)
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
    return output


def test_a_truncated_copy_fails_the_notebook_naming_the_expectation(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(B1.read_bytes()[:3000])
    output = _run(tmp_path, f"{truncated} --default-domain example.org")
    wanted = "files: expect_column_values_to_be_in_set on complete: 1 unexpected"
    assert f"expectations failed:\n{wanted}" in output, output[-3000:]
    quality = (tmp_path / "out" / "validation" / "cyrus" / "quality.json").read_text()
    assert '"success": false' in quality


def test_an_unreadable_input_is_its_error_not_a_failed_expectation(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"no tabs here\n")
    output = _run(tmp_path, str(junk))
    assert (
        f"{junk}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist dump" in output
    )
    assert "expectations failed" not in output
    assert not (tmp_path / "out" / "validation" / "cyrus" / "quality.json").exists()
