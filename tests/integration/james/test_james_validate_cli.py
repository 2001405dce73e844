"""`mqforensics validate james` end to end on snapshots: a clean one passes, a broken one fails
naming the expectation, one that cannot be read is an input error: exit codes 0, 1 and 2."""

import json

from mqforensics.cli import main
from tests.integration.james.james_snapshot_support import (
    BUNDLED,
    snapshot_with_a_duplicated_marker,
    snapshot_with_a_malformed_csv_line,
)


def test_the_bundled_sample_passes_and_a_duplicated_marker_fails(spark, tmp_path, capsys):
    listing = str(BUNDLED / "blob_inventory.parquet")
    clean = tmp_path / "clean"
    argv = ["validate", "james", "--snapshot", str(BUNDLED), "--blob-listing", listing]
    assert main([*argv, "--out", str(clean)]) == 0
    assert ", 0 failed" in capsys.readouterr().out
    assert json.loads((clean / "quality.json").read_text())["success"] is True

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


def test_an_unreadable_input_is_exit_2_and_never_failed_expectations(spark, tmp_path, capsys):
    unreadable = snapshot_with_a_malformed_csv_line(tmp_path / "snapshot")
    out = tmp_path / "out"
    assert main(["validate", "james", "--snapshot", str(unreadable), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "mqforensics: error: InputError: deletedmailsv2.csv line 7: 3 field(s), the header has 2"
    )
    assert not (out / "quality.json").exists()
