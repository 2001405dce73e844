"""The scheduled-validation notebook under ``pytest --nbmake``: it passes on the bundled sample
(``make test`` runs it so) and fails, printing the failing expectation, on a broken snapshot."""

from __future__ import annotations

from pathlib import Path

from tests.integration.james.james_snapshot_support import snapshot_with_a_duplicated_marker
from tests.notebook_runs import ROOT, run_notebook_copy

NOTEBOOK = ROOT / "notebooks" / "validation" / "james_quality.ipynb"


def test_a_failing_suite_fails_the_notebook_and_names_the_expectation(tmp_path: Path) -> None:
    # A consumed marker written twice: deletedMailsV2's (queue, enqueueId) key is no longer unique.
    broken = snapshot_with_a_duplicated_marker(tmp_path / "snapshot")
    env = {"MQF_JAMES_ARGS": f"--snapshot {broken}"}
    status, output = run_notebook_copy(NOTEBOOK, tmp_path, env)
    assert status == 1 and "1 failed" in output, output[-3000:]
    # nbmake shows the failing cell's error: the expectation, its columns and the count.
    wanted = "deleted: expect_compound_columns_to_be_unique on queuename, enqueueid: 2 unexpected"
    assert f"expectations failed:\n{wanted}" in output, output[-3000:]
    quality = (tmp_path / "out" / "validation" / "quality.json").read_text()
    assert '"success": false' in quality
