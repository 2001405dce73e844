"""`mqforensics validate slimta`: the expectation suite of the items frame passes on the bundled
sample, fails (exit 1) naming the expectation on a planted defect, and a store that cannot be
read is exit 2, never a failed expectation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mqforensics.cli import main
from mqforensics.quality import SUITES_DIR, load_suite
from mqforensics.systems.slimta.sample import materialize


def _argv(root: Path) -> list[str]:
    return ["--disk", str(root / "env"), "--meta-dir", str(root / "meta"),
            "--tmp-dir", str(root / "tmp")]  # fmt: skip


def _report(out: Path) -> dict:
    return json.loads((out / "quality.json").read_text())


def test_the_suite_loads_every_expectation() -> None:
    suite = load_suite(SUITES_DIR / "slimta_items.json")
    assert suite.name == "slimta_items" and len(suite.expectations) == 19


def test_the_bundled_sample_passes(spark, tmp_path: Path, capsys) -> None:
    materialize(tmp_path / "store")
    out = tmp_path / "quality"
    assert main(["validate", "slimta", *_argv(tmp_path / "store"), "--out", str(out)]) == 0
    report = _report(out)
    assert report["success"] and [s["suite"] for s in report["suites"]] == ["slimta_items"]
    assert all(e["success"] for e in report["suites"][0]["expectations"])
    assert "quality slimta: 1 suite, 19 expectations, 0 failed" in capsys.readouterr().out


def test_a_file_slimta_never_wrote_fails_the_suite(spark, tmp_path: Path, capsys) -> None:
    copy = materialize(tmp_path / "store")
    old = copy.truth["roles"]["old"]
    root = tmp_path / "store"
    # A well-formed message under a name slimta never makes (it names messages by uuid4().hex).
    shutil.copyfile(root / "env" / f"{old}.env", root / "env" / "restored-by-hand.env")
    shutil.copyfile(root / "meta" / f"{old}.meta", root / "meta" / "restored-by-hand.meta")
    out = tmp_path / "quality"
    assert main(["validate", "slimta", *_argv(root), "--out", str(out)]) == 1
    report = _report(out)
    failed = [e for s in report["suites"] for e in s["expectations"] if not e["success"]]
    assert len(failed) == 1, failed
    assert failed[0]["expectation"] == "unexpected_rows_expectation"
    assert "uuid4" in failed[0]["description"] and failed[0]["unexpected_count"] == 1
    assert failed[0]["unexpected_values"] == [
        {"backend": "disk", "store": str((root / "env").resolve()), "id": "restored-by-hand"}
    ]
    assert "1 failed" in capsys.readouterr().out


def test_a_store_that_cannot_be_read_is_exit_2_not_a_failed_expectation(
    spark, tmp_path: Path, capsys
) -> None:
    empty = tmp_path / "empty"
    for name in ("env", "meta", "tmp"):
        (empty / name).mkdir(parents=True)
    out = tmp_path / "quality"
    assert main(["validate", "slimta", *_argv(empty), "--out", str(out)]) == 2
    assert "nothing to audit" in capsys.readouterr().err
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert main(["validate", "slimta", "--disk", str(not_a_dir), "--out", str(out)]) == 2
    assert "no such slimta queue directory" in capsys.readouterr().err
    assert not (out / "quality.json").exists()
