"""`mqforensics demo`: the bundled sample summarised through Spark, checked against a plain walk."""

import json
from pathlib import Path

from mqforensics.cli import main
from mqforensics.demo import BUNDLED


def walk_sizes(root: Path) -> list[int]:
    return sorted(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_demo_summarises_the_bundled_sample(spark, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    sizes = walk_sizes(BUNDLED)
    assert len(sizes) == 40
    assert summary["objects"] == len(sizes)
    assert summary["bytes"] == sum(sizes)
    assert summary["largest_object_bytes"] == max(sizes)
    # percentile_approx returns actual values of the column, in order.
    q1, median, q3 = summary["size_quartiles"]
    assert q1 <= median <= q3 and {q1, median, q3} <= set(sizes)
    printed = capsys.readouterr().out
    assert f"{sum(sizes):,}" in printed
    assert "Wrote" in printed


def test_demo_on_another_dataset(spark, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name, size in [("x", 5), ("y", 7)]:
        (data / name).write_bytes(b"\0" * size)
    assert main(["demo", "--dataset", str(data), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["objects"], summary["bytes"], summary["largest_object_bytes"]) == (2, 12, 7)


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["demo", "--dataset", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    missing = tmp_path / "missing"
    assert err == f"mqforensics: error: InputError: dataset directory {missing} does not exist"
    assert not (tmp_path / "summary.json").exists()
