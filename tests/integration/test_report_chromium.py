"""The archive report and an exported notebook in a real headless Chromium (Debian's package):
the page renders (the screenshot is not blank), every plot is decoded, no JavaScript error, and
nothing is fetched from outside the file."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from mqforensics.cli import main
from mqforensics.errors import ServiceStartError
from mqforensics.services.chromium import PageReport, ensure_chromium, inspect_page, is_blank

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_james_queue.ipynb"


@pytest.fixture(scope="module")
def chromium() -> Path:
    from mqforensics.errors import MqfError, explain

    try:
        return ensure_chromium()
    except MqfError as exc:
        pytest.fail(f"Chromium is needed and could not be installed: {explain(exc)}", pytrace=False)


def _check_page(report: PageReport, shot: Path, *, plots: int) -> None:
    shot.write_bytes(report.screenshot)
    where = f"(screenshot {shot})"
    assert not is_blank(report.screenshot), where
    assert report.exceptions == [], where
    assert report.console_errors == [], where
    assert report.external_requests == [], where
    assert len(report.images) == plots, (report.images, where)
    for alt, width, height, complete in report.images:
        assert complete and width > 200 and height > 100, (alt, width, height, where)


def test_the_archive_report_renders_with_its_plots(chromium, spark, tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    assert main(["demo", "--out", str(demo)]) == 0
    page = tmp_path / "report.html"
    assert main(["report", "html", str(demo), str(demo / "plan"), "--out", str(page)]) == 0
    report = inspect_page(page)
    _check_page(report, tmp_path / "report.png", plots=2)
    assert report.title == "mqforensics report"
    assert {alt for alt, *_ in report.images} == {"findings per check", "plan actions per kind"}


def test_an_exported_notebook_renders_its_explorers(chromium, tmp_path: Path) -> None:
    executed = tmp_path / NOTEBOOK.name
    shutil.copyfile(NOTEBOOK, executed)
    notebook = nbformat.read(str(executed), as_version=4)
    os.environ["MQF_NOTEBOOK_OUT"] = str(tmp_path / "out")
    try:
        NotebookClient(
            notebook, timeout=600, resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        del os.environ["MQF_NOTEBOOK_OUT"]
    nbformat.write(notebook, str(executed))
    page = tmp_path / "01_james_queue.html"
    assert main(["report", "notebook", str(executed), "--out", str(page)]) == 0
    report = inspect_page(page, height=4000)
    # The findings explorer and the slice x bucket heatmap, as the static pictures of their views.
    _check_page(report, tmp_path / "notebook.png", plots=2)
    assert [alt for alt, *_ in report.images] == [
        "James findings",
        "Slices x buckets: live vs consumed rows",
    ]


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            status = (proc / "status").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in command and "State:\tZ" not in status:  # a zombie holds nothing
            found.append(f"{proc.name}: {command[:200]}")
    return found


def test_a_page_that_never_loads_is_a_typed_error_and_leaves_nothing_behind(
    chromium, tmp_path: Path, monkeypatch
) -> None:
    page = tmp_path / "busy.html"
    page.write_text("<!DOCTYPE html><title>busy</title><script>for (;;) {}</script>")
    scratch = tmp_path / "scratch"  # where the browser's throw-away profile goes
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(ServiceStartError) as caught:
        inspect_page(page, timeout=3)
    message = caught.value.message
    assert message.startswith("chromium's DevTools connection failed (WebSocketTimeoutException")
    assert "\nchromium's stderr:\n" in message
    assert "DevTools listening on ws://127.0.0.1:" in message
    assert list(scratch.iterdir()) == []
    assert _processes_mentioning(str(scratch)) == []
