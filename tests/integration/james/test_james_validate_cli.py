"""`mqforensics validate james` end to end on snapshots: a clean one passes, a broken one fails
naming the expectation, with exit codes 0 and 1."""

import json

from mqforensics.cli import main
from mqforensics.demo import BUNDLED
from tests.integration.james.james_snapshot_support import snapshot_with_a_duplicated_marker


def test_the_bundled_sample_passes_and_a_duplicated_marker_fails(spark, tmp_path, capsys):
    listing = str(BUNDLED / "blob_inventory.parquet")
    assert main(["validate", "james", "--snapshot", str(BUNDLED), "--blob-listing", listing]) == 0
    assert ", 0 failed" in capsys.readouterr().out

    broken = snapshot_with_a_duplicated_marker(tmp_path / "snapshot")
    out = tmp_path / "out"
    status = main(["validate", "james", "--snapshot", str(broken), "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 1
    assert "1 failed" in printed
    report = json.loads((out / "quality.json").read_text())
    failed = [
        (suite["frame"], e["expectation"], e["unexpected_count"])
        for suite in report["suites"]
        for e in suite["expectations"]
        if not e["success"]
    ]
    assert failed == [("deleted", "expect_compound_columns_to_be_unique", 2)]
