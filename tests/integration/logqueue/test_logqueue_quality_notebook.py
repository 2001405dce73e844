"""The logqueue validation notebook under ``pytest --nbmake`` (``make test`` runs it on the
bundled sample, where it passes): it fails naming the broken expectations on a planted defect,
and a directory that cannot be read fails it with that error, not as failed expectations."""

from __future__ import annotations

from pathlib import Path

from tests.notebook_runs import ROOT, run_notebook_copy
from tests.unit.logqueue.planted_quality import defective_queue

NOTEBOOK = ROOT / "notebooks" / "validation" / "logqueue_quality.ipynb"


def _run(tmp_path: Path, queue_args: str) -> str:
    """The notebook's output when it fails (nbmake exit 1)."""
    status, output = run_notebook_copy(NOTEBOOK, tmp_path, {"MQF_LOGQUEUE_ARGS": queue_args})
    assert status == 1 and "1 failed" in output, output[-3000:]
    return output


def test_a_planted_defect_fails_the_notebook_naming_the_expectations(tmp_path: Path) -> None:
    queue = defective_queue(tmp_path / "queue")
    output = _run(tmp_path, str(queue))
    assert "expectations failed:\n" in output, output[-3000:]
    wanted = "logqueue_records: expect_column_values_to_be_in_set [type_name]: 1 unexpected"
    assert wanted in output, output[-3000:]
    quality = (tmp_path / "out" / "validation" / "logqueue" / "quality.json").read_text()
    assert '"success": false' in quality


def test_an_unreadable_directory_is_an_error_not_failed_expectations(tmp_path: Path) -> None:
    output = _run(tmp_path, str(tmp_path / "absent"))
    assert f"{tmp_path / 'absent'}: no such queue directory" in output, output[-3000:]
    assert "expectations failed" not in output
    assert not (tmp_path / "out" / "validation" / "logqueue" / "quality.json").exists()
