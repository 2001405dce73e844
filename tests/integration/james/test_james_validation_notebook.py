"""The scheduled-validation notebook under ``pytest --nbmake``: it passes on the bundled sample
(``make test`` runs it so) and, on a broken snapshot whose store's run history holds four
earlier validations with every browseStart as now, fails in one error naming both the failing
expectation and each alert's rule and metric (neither hides the other), the history one
validation longer."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd

from mqforensics.metrics import Metric
from tests.history_runs import history_runs, seeded
from tests.integration.james.james_snapshot_support import (
    BUNDLED,
    snapshot_with_a_duplicated_marker,
)
from tests.notebook_runs import ROOT, run_notebook_copy

NOTEBOOK = ROOT / "notebooks" / "validation" / "james_quality.ipynb"
# What a scheduler's environment may hold that would change what this run validates.
DROPPED = ("MQF_AS_OF", "MQF_REVEAL_ADDRESSES", "MQF_HISTORY", "MQF_HISTORY_SCOPE")


def test_a_failing_suite_and_a_stuck_browse_start_fail_the_notebook_naming_both(
    tmp_path: Path,
) -> None:
    # A consumed marker written twice: deletedMailsV2's (queue, enqueueId) key is no longer unique.
    broken = snapshot_with_a_duplicated_marker(tmp_path / "snapshot")
    # Four earlier validations of the store judged each day before the snapshot, every queue's
    # browseStart as it is now: the notebook's run is the fifth unchanged one.
    taken = dt.datetime.fromisoformat(json.loads((broken / "snapshot.json").read_text())
                                      ["taken_at"].replace("Z", "+00:00"))  # fmt: skip
    starts = pd.read_parquet(BUNDLED / "browsestart.parquet")
    figures = [Metric("browse_start", row.browsestart.timestamp(), "instant", queue=row.queuename)
               for row in starts.itertuples()]  # fmt: skip
    history = tmp_path / "history"
    seeded(history, "james", "lab-james",
           [(taken - dt.timedelta(days=days), figures) for days in (4, 3, 2, 1)])  # fmt: skip
    env = {
        "MQF_JAMES_ARGS": f"--snapshot {broken}",
        "MQF_HISTORY": str(history),
        "MQF_HISTORY_SCOPE": "lab-james",
    }
    status, output = run_notebook_copy(NOTEBOOK, tmp_path, env, drop=DROPPED)
    assert status == 1 and "1 failed" in output, output[-4000:]
    # nbmake shows the failing cell's error: the expectation, its columns and the count, then
    # each alert's rule and metric, of this store.
    wanted = "deleted: expect_compound_columns_to_be_unique on queuename, enqueueid: 2 unexpected"
    assert f"AssertionError: expectations failed:\n{wanted}" in output, output[-4000:]
    assert "\nhistory alerts:\n" in output, output[-4000:]
    stuck = "ALERT james-browse-start-stuck (warning): browse_start of james lab-james"
    for queue in starts["queuename"]:
        wanted = f"{stuck} (validations) queue {queue}: unchanged in each of the last 5 runs"
        assert wanted in output, output[-4000:]
    runs = history_runs(history)
    assert len(runs) == 5 and set(runs["scope"]) == {"lab-james"}
    assert set(runs["kind"]) == {"validate"}
    quality = json.loads((tmp_path / "out" / "validation" / "quality.json").read_text())
    assert not quality["success"] and quality["history"]["scope"] == "lab-james"
    assert quality["history"]["run_id"] in set(runs["run_id"])
