"""The Postfix validation notebook under ``pytest --nbmake`` fails, printing the failing
expectation, on a queue directory holding a file Postfix never names so. (``make test`` runs it on
the bundled sample, where it passes: `tests/unit/postfix/test_postfix_validate.py` checks the
suites' 44 expectations without a notebook.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mqforensics.systems.postfix.sample import BUNDLED, materialize
from tests.notebook_runs import ROOT, run_notebook_copy

NOTEBOOK = ROOT / "notebooks" / "validation" / "postfix_quality.ipynb"


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    return run_notebook_copy(NOTEBOOK, tmp_path, env, drop=("MQF_POSTFIX_ARGS", "MQF_AS_OF"))


def test_the_notebook_fails_on_a_planted_defect_naming_the_expectation(tmp_path: Path) -> None:
    copy = materialize(tmp_path / "queue", tmp_path / "ground_truth.json")
    # A queue file copied by hand beside itself: a name that is no queue id.
    kept = next(p for p in sorted((copy.queue_dir / "deferred").rglob("*")) if p.is_file())
    shutil.copyfile(kept, kept.with_name(kept.name + ".orig"))
    args = f"--queue-dir {copy.queue_dir} --main-cf {BUNDLED / 'postconf.txt'}"
    status, output = _run(tmp_path, {"MQF_POSTFIX_ARGS": args})
    assert status == 1 and "1 failed" in output, output[-3000:]
    # nbmake shows the failing cell's error: the frame, the expectation and the count.
    wanted = "expectations failed:\nmessages: expect_column_values_to_be_in_set on id_kind"
    assert wanted in output, output[-3000:]
    assert "1 unexpected" in output and "not_an_id" in output
    quality = json.loads((tmp_path / "out" / "validation" / "postfix" / "quality.json").read_text())
    assert not quality["success"]
    assert sum(len(s["expectations"]) for s in quality["suites"]) == 44
