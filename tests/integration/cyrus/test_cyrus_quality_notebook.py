"""The Cyrus validation notebook under ``pytest --nbmake`` (``make test`` runs it on the bundled
sample, where it passes): a planted defect fails it naming the expectation; an input that cannot
be read fails it with the input's error, never as a failed expectation."""

from __future__ import annotations

from pathlib import Path

from tests.notebook_runs import ROOT, run_notebook_copy

NOTEBOOK = ROOT / "notebooks" / "validation" / "cyrus_quality.ipynb"
B1 = ROOT / "datasets" / "cyrus" / "sample" / "backend1" / "mailboxes.db"


def _run(tmp_path: Path, argv: str) -> str:
    """The notebook's output when it fails (nbmake exit 1)."""
    status, output = run_notebook_copy(NOTEBOOK, tmp_path, {"MQF_CYRUS_ARGS": argv})
    assert status == 1 and "1 failed" in output, output[-3000:]
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
