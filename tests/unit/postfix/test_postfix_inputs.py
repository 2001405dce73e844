"""Bad Postfix inputs are refused before Spark starts: exit 2, one line on stderr naming the
file (and line), nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqforensics.cli import main
from tests.unit.postfix import planted_queue


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    return planted_queue.build(tmp_path / "queue")


def refused(capsys, tmp_path: Path, *argv: str) -> str:
    out = tmp_path / "out"
    assert main(["audit", "postfix", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert not out.exists()
    return err


def test_a_missing_or_wrong_queue_directory(capsys, tmp_path: Path) -> None:
    err = refused(capsys, tmp_path, "--queue-dir", str(tmp_path / "nope"))
    assert err.endswith(f"{tmp_path / 'nope'}: no such Postfix queue directory")
    (tmp_path / "etc").mkdir()
    err = refused(capsys, tmp_path, "--queue-dir", f"mx1={tmp_path / 'etc'}")
    assert f"{tmp_path / 'etc'}: not a Postfix queue directory" in err


def test_a_directory_named_twice(capsys, tmp_path: Path, queue: Path) -> None:
    err = refused(capsys, tmp_path, "--queue-dir", f"a={queue}", "--queue-dir", f"b={queue}")
    assert f"--queue-dir names the path {queue} twice" in err


def test_a_bad_main_cf(capsys, tmp_path: Path, queue: Path) -> None:
    main_cf = tmp_path / "main.cf"
    main_cf.write_text("maximal_queue_lifetime = 5d\n<html>\n")
    err = refused(capsys, tmp_path, "--queue-dir", str(queue), "--main-cf", str(main_cf))
    assert f"{main_cf}, line 2: not a 'name = value' Postfix parameter" in err
    err = refused(capsys, tmp_path, "--queue-dir", str(queue), "--config-dir", str(tmp_path))
    assert f"{tmp_path / 'main.cf'}, line 2" in err
    err = refused(capsys, tmp_path, "--queue-dir", str(queue), "--main-cf", str(tmp_path / "x"))
    assert f"{tmp_path / 'x'}: no such main.cf" in err
