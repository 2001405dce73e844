"""The archive report and every exported notebook in a real headless Chromium (Debian's
package): the page renders (the screenshot is not blank), every plot is decoded, no JavaScript
error (console error or uncaught exception), nothing is fetched from outside the file, and the
text a person reads shows no missing value as ``nan``, ``None..None`` or a ``None`` cell, and no
``Error displaying widget``."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from mqforensics.cli import main
from mqforensics.errors import ServiceStartError
from mqforensics.services.chromium import (
    DevTools,
    PageReport,
    browser,
    ensure_chromium,
    inspect_page,
    is_blank,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_james_queue.ipynb"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# What the page's text and its table cells must never show.
_TEXT_JS = """JSON.stringify({
  text: document.body.innerText,
  cells: Array.from(document.querySelectorAll("td, th")).map(c => c.innerText.trim())
})"""
_NEVER_IN_TEXT = (
    re.compile(r"(?<![\w-])nan(?![\w-])", re.IGNORECASE),
    re.compile(r"None\.\.None"),
    re.compile(r"Error displaying widget"),
    re.compile(r"model not found"),
)
_NEVER_A_CELL = {"None", "nan", "NaN", "NaT", "null", "<NA>"}


@pytest.fixture(scope="module")
def chromium() -> Path:
    from mqforensics.errors import MqfError, explain

    try:
        return ensure_chromium()
    except MqfError as exc:
        pytest.fail(f"Chromium is needed and could not be installed: {explain(exc)}", pytrace=False)


def _check_page(report: PageReport, shot: Path, *, plots: int | None) -> None:
    shot.write_bytes(report.screenshot)
    where = f"(screenshot {shot})"
    assert not is_blank(report.screenshot), where
    assert report.exceptions == [], where
    assert report.console_errors == [], where
    assert report.external_requests == [], where
    if plots is not None:
        assert len(report.images) == plots, (report.images, where)
    for alt, width, height, complete in report.images:
        assert complete and width > 200 and height > 100, (alt, width, height, where)


def _page_text(page: Path) -> tuple[str, list[str]]:
    """The text the browser shows of `page` (``innerText``), and that of each table cell."""
    with browser(1280, 1600) as target:
        tools = DevTools(target)
        try:
            tools.call("Page.enable")
            tools.call("Page.navigate", url=page.resolve().as_uri())
            tools.wait_for("Page.loadEventFired")
            answer = tools.call("Runtime.evaluate", expression=_TEXT_JS, returnByValue=True)
        finally:
            tools.close()
    seen = json.loads(answer["result"]["value"])
    return str(seen["text"]), [str(cell) for cell in seen["cells"]]


def _check_text(page: Path) -> None:
    text, cells = _page_text(page)
    for pattern in _NEVER_IN_TEXT:
        found = pattern.search(text)
        around = text[max(found.start() - 200, 0) : found.end() + 200] if found else ""
        assert found is None, f"{page.name} shows {pattern.pattern!r}: ...{around}..."
    shown = sorted({cell for cell in cells if cell in _NEVER_A_CELL})
    assert shown == [], f"{page.name} has table cells {shown}"


def test_the_archive_report_renders_with_its_plots(chromium, spark, tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    assert main(["demo", "--out", str(demo)]) == 0
    page = tmp_path / "report.html"
    assert main(["report", "html", str(demo), str(demo / "plan"), "--out", str(page)]) == 0
    report = inspect_page(page)
    _check_page(report, tmp_path / "report.png", plots=2)
    assert report.title == "mqforensics report"
    assert {alt for alt, *_ in report.images} == {"findings per check", "plan actions per kind"}
    _check_text(page)
    text, _cells = _page_text(page)
    # The verdict comes first: what was found, how bad, and what to do about each check.
    assert text.index("Verdict") < text.index("Inputs") < text.index("Findings:")
    rows = json.loads((demo / "findings.json").read_text())
    checks = {r["check"] for r in rows}
    assert f"{len(rows)} findings from {len(checks)} checks; worst severity error" in text
    assert text.count("What to do") == len(checks)


def _executed(notebook: Path, tmp_path: Path) -> Path:
    executed = tmp_path / notebook.name
    shutil.copyfile(notebook, executed)
    node = nbformat.read(str(executed), as_version=4)
    # The kernel inherits it; restored after, since a worker running the validation notebooks
    # under nbmake has one of its own (notebooks/conftest.py).
    before = os.environ.get("MQF_NOTEBOOK_OUT")
    os.environ["MQF_NOTEBOOK_OUT"] = str(tmp_path / "out")
    try:
        NotebookClient(node, timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if before is None:
            del os.environ["MQF_NOTEBOOK_OUT"]
        else:
            os.environ["MQF_NOTEBOOK_OUT"] = before
    nbformat.write(node, str(executed))
    return executed


def test_an_exported_notebook_renders_its_explorers(chromium, tmp_path: Path) -> None:
    executed = _executed(NOTEBOOK, tmp_path)
    page = tmp_path / "01_james_queue.html"
    assert main(["report", "notebook", str(executed), "--out", str(page)]) == 0
    report = inspect_page(page, height=4000)
    # The findings explorer and the slice x bucket heatmap, as the static pictures of their views.
    _check_page(report, tmp_path / "notebook.png", plots=2)
    assert [alt for alt, *_ in report.images] == [
        "James findings",
        "Slices x buckets: live vs consumed rows",
    ]
    _check_text(page)


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS if n != NOTEBOOK], ids=lambda n: n.stem)
def test_every_exported_notebook_reads_clean(chromium, tmp_path: Path, notebook: Path) -> None:
    executed = _executed(notebook, tmp_path)
    page = tmp_path / f"{notebook.stem}.html"
    assert main(["report", "notebook", str(executed), "--out", str(page)]) == 0
    _check_page(inspect_page(page, height=4000), tmp_path / f"{notebook.stem}.png", plots=None)
    _check_text(page)


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
