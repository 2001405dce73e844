"""The archive report and every exported notebook in a real headless Chromium (Debian's
package): the page renders (the screenshot is not blank), every plot is decoded, no JavaScript
error (console error or uncaught exception), nothing is fetched from outside the file, and the
text a person reads shows no missing value as ``nan``, ``None..None`` or a ``None`` cell, and no
``Error displaying widget``. Each analysts' notebook is executed once, then read both as
``mqforensics report notebook`` exports it and as a stock ``jupyter nbconvert --to html`` export
(every widget output followed by its static fallback).

The notebooks run one after another in one kernel: before each, the kernel's namespace is
emptied (``%reset -f``: a notebook that uses a name it did not define fails), its directory and
``MQF_NOTEBOOK_OUT`` are the test's, and the Spark session the previous notebook started is the
one ``mqforensics.session`` returns (only the first notebook pays for starting Spark)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from mqforensics.cli import main
from mqforensics.errors import ServiceStartError
from mqforensics.findings import size_text
from mqforensics.services.chromium import (
    DevTools,
    PageReport,
    browser,
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


PDFTOTEXT = Path("/usr/bin/pdftotext")


@pytest.fixture(scope="module")
def pdftotext() -> Path:
    """Debian's pdftotext (poppler-utils), installed with apt when missing, as Chromium is."""
    from mqforensics.errors import MqfError, explain
    from mqforensics.services.apt import ensure_packages

    try:
        ensure_packages(["poppler-utils"], what="pdftotext", probe=PDFTOTEXT,
                        installed=PDFTOTEXT.exists, system_service=None)  # fmt: skip
    except MqfError as exc:
        pytest.fail(f"pdftotext is needed and could not be installed: {explain(exc)}",
                    pytrace=False)  # fmt: skip
    return PDFTOTEXT


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


@contextlib.contextmanager
def opened(page: Path) -> Iterator[DevTools]:
    """Chromium's DevTools on `page`, loaded (1280 x 1600)."""
    with browser(1280, 1600) as target:
        tools = DevTools(target)
        try:
            tools.call("Page.enable")
            tools.call("Page.navigate", url=page.resolve().as_uri())
            tools.wait_for("Page.loadEventFired")
            yield tools
        finally:
            tools.close()


def _evaluated(page: Path, *expressions: str) -> list[Any]:
    """The JSON values of `expressions` (e.g. `_TEXT_JS`, `_TABLES_JS`), evaluated in turn on
    `page` opened once."""
    with opened(page) as tools:
        answers = [
            tools.call("Runtime.evaluate", expression=expression, returnByValue=True)
            for expression in expressions
        ]
    return [json.loads(answer["result"]["value"]) for answer in answers]


def _check_text(page: Path, seen: dict[str, Any] | None = None) -> str:
    """Asserts that the text the browser shows of `page` (``innerText``, `_TEXT_JS`; `seen`
    when already evaluated) and its table cells show no missing value; returns that text."""
    if seen is None:
        [seen] = _evaluated(page, _TEXT_JS)
    text, cells = str(seen["text"]), [str(cell) for cell in seen["cells"]]
    for pattern in _NEVER_IN_TEXT:
        found = pattern.search(text)
        around = text[max(found.start() - 200, 0) : found.end() + 200] if found else ""
        assert found is None, f"{page.name} shows {pattern.pattern!r}: ...{around}..."
    shown = sorted({cell for cell in cells if cell in _NEVER_A_CELL})
    assert shown == [], f"{page.name} has table cells {shown}"
    return text


def test_the_archive_report_renders_with_its_plots(
    chromium, pdftotext, spark, tmp_path: Path
) -> None:
    demo = tmp_path / "demo"
    assert main(["demo", "--out", str(demo)]) == 0
    page = tmp_path / "report.html"
    assert main(["report", "html", str(demo), str(demo / "plan"), "--out", str(page)]) == 0
    report = inspect_page(page)
    _check_page(report, tmp_path / "report.png", plots=2)
    assert report.title == "mqforensics report"
    assert {alt for alt, *_ in report.images} == {"findings per check", "plan actions per kind"}
    # What the page shows, its tables on screen and as printed: one browser start for all.
    pdf, shot = tmp_path / "report.pdf", tmp_path / "report-print-table.png"
    seen, screen, printed = _seen_and_printed(page, pdf, shot)
    text = _check_text(page, seen)
    # The verdict comes first: what was found, how bad, and what to do about each check.
    assert text.index("Verdict") < text.index("Inputs") < text.index("Findings:")
    rows = json.loads((demo / "findings.json").read_text())
    checks = {r["check"] for r in rows}
    assert f"{len(rows)} findings (" in text
    assert f") from {len(checks)} of the 17 checks run; worst severity error;" in text
    assert text.count("What to do") == len(checks)
    # The bytes the verdict quotes count each stored object once (a personal_data mail row in a
    # partition unreclaimed_slice found is part of it) and it says so; the naive sum is nowhere.
    partitions = {r["subject"] for r in rows if r["scope"] == "partition"}
    objects = {
        (r["scope"], r["subject"]): r["bytes"]
        for r in rows
        if r["bytes"] is not None and r["detail"].get("partition") not in partitions
    }
    held = f"{size_text(sum(objects.values()))} held by {len(objects)} stored objects"
    assert f"{held} (each counted once)." in text
    assert "Bytes held: each stored object (system, scope, object)" in text
    assert f"{size_text(sum(r['bytes'] or 0 for r in rows))} held" not in text
    # A check none of whose findings records a size holds an en dash in the verdict, not 0 B.
    verdict = screen[0]["rows"]
    assert verdict[0][:4] == ["check", "worst severity", "findings", "bytes held"]
    sizeless = checks - {r["check"] for r in rows if r["bytes"] is not None}
    assert sizeless and {row[0] for row in verdict[1:] if row[3] == "\u2013"} == sizeless
    _check_printed(pdftotext, screen, printed, pdf, shot)


# CSS pixels between the report's 12 mm margins on a landscape Letter page (A4 is wider).
PRINT_WIDTH = 965
# Every table: the heading above it, its cells' texts, its right edge (and its cells'), the
# page's width, and its top and bottom (with its heading) in page coordinates.
_TABLES_JS = """JSON.stringify(Array.from(document.querySelectorAll("table")).map(t => {
  const box = t.closest(".wide") || t;
  let heading = null;
  for (let e = box.previousElementSibling; e && !heading; e = e.previousElementSibling)
    if (/^H[1-6]$/.test(e.tagName)) heading = e;
  const right = c => Math.round(c.getBoundingClientRect().right);
  return {
    title: heading ? heading.innerText : "",
    rows: Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.innerText.trim())),
    right: Math.max(right(t), ...Array.from(t.querySelectorAll("td, th")).map(right)),
    width: Math.round(t.getBoundingClientRect().width),
    page: document.documentElement.clientWidth,
    top: (heading || t).getBoundingClientRect().top + window.scrollY,
    bottom: t.getBoundingClientRect().bottom + window.scrollY,
  };
}))"""


def _seen_and_printed(page: Path, print_pdf: Path, shot: Path) -> tuple[dict, list, list]:
    """`page` opened once on a 1280 px screen: what it shows (`_TEXT_JS`) and its tables as
    `_TABLES_JS` measures them there; then printed to `print_pdf` (as ``chromium
    --print-to-pdf`` prints, the page's own CSS page size) and its tables measured as laid out
    for print, `PRINT_WIDTH` wide, with a screenshot of the widest findings table so laid out
    in `shot`."""
    with opened(page) as tools:
        seen, screen = (
            json.loads(
                tools.call("Runtime.evaluate", expression=js, returnByValue=True)["result"]["value"]
            )
            for js in (_TEXT_JS, _TABLES_JS)
        )
        printed = tools.call("Page.printToPDF", preferCSSPageSize=True, printBackground=True)
        print_pdf.write_bytes(base64.b64decode(printed["data"]))
        tools.call("Emulation.setEmulatedMedia", media="print")
        tools.call("Emulation.setDeviceMetricsOverride", width=PRINT_WIDTH, height=1600,
                   deviceScaleFactor=1, mobile=False)  # fmt: skip
        answer = tools.call("Runtime.evaluate", expression=_TABLES_JS, returnByValue=True)
        tables = list(json.loads(answer["result"]["value"]))
        widest = max(tables, key=lambda t: len(t["rows"][0]))
        clip = {"x": 0, "y": widest["top"] - 8, "width": PRINT_WIDTH,
                "height": widest["bottom"] - widest["top"] + 16, "scale": 1}  # fmt: skip
        picture = tools.call("Page.captureScreenshot", format="png", clip=clip,
                             captureBeyondViewport=True)  # fmt: skip
        shot.write_bytes(base64.b64decode(picture["data"]))
        return seen, list(screen), tables


def _check_printed(pdftotext: Path, on_screen: list, printed: list, pdf: Path, shot: Path) -> None:
    """On paper the widest findings table (wider than the page on screen) is whole: laid out
    for print (`printed`, `pdf` and `shot` of `_seen_and_printed`), every cell of every table
    ends inside the page, the last column included, and the PDF Chromium prints holds that
    column's heading on the table's page."""
    screen = {t["title"]: t for t in on_screen}
    where = f"(PDF {pdf}, screenshot {shot})"
    wide = max(printed, key=lambda t: len(t["rows"][0]))
    assert len(wide["rows"][0]) >= 12 and screen[wide["title"]]["width"] > PRINT_WIDTH, where
    assert not is_blank(shot.read_bytes()), where
    for table in printed:
        assert table["page"] == PRINT_WIDTH and table["right"] <= PRINT_WIDTH, (table, where)
    # The last column's values are the findings' own, whole (wrapped, never cut).
    assert [row[-1] for row in wide["rows"]] == [row[-1] for row in screen[wide["title"]]["rows"]]
    assert pdf.read_bytes().startswith(b"%PDF-"), where
    text = subprocess.run([str(pdftotext), "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True, timeout=120).stdout  # fmt: skip
    [sheet] = [s for s in text.split("\f") if wide["title"] in s]
    assert wide["rows"][0][-1] in sheet.split(wide["title"], 1)[1], (wide["rows"][0], where)


@pytest.fixture(scope="module")
def kernel() -> Iterator[AsyncKernelManager]:
    """The module's Python kernel, started by the first notebook run on it; shut down after."""
    manager = AsyncKernelManager(kernel_name="python3")
    yield manager
    if manager.has_kernel:
        run_sync(manager.shutdown_kernel)(now=True)


def _run_on(kernel: AsyncKernelManager, node: nbformat.NotebookNode, where: Path) -> None:
    """`node` executed on `kernel` as nbclient (papermill, ``nbconvert --execute``) runs it,
    widget state saved, in `where`."""
    NotebookClient(node, km=kernel, timeout=600,
                   resources={"metadata": {"path": str(where)}}).execute()  # fmt: skip


def _executed(notebook: Path, tmp_path: Path, kernel: AsyncKernelManager) -> Path:
    """`notebook` executed on the module's `kernel` (emptied first, its directory `tmp_path`,
    ``MQF_NOTEBOOK_OUT`` ``tmp_path/out``), widget state saved, into `tmp_path`; and its stock
    ``jupyter nbconvert --to html`` export as a person would share it, in ``tmp_path/stock/``
    (`_check_stock_export`)."""
    fresh = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%reset -f"),
        nbformat.v4.new_code_cell(
            f"import os\nos.chdir({str(tmp_path)!r})\n"
            f"os.environ['MQF_NOTEBOOK_OUT'] = {str(tmp_path / 'out')!r}\ndel os"
        ),
    ])  # fmt: skip
    _run_on(kernel, fresh, tmp_path)
    executed = tmp_path / notebook.name
    shutil.copyfile(notebook, executed)
    node = nbformat.read(str(executed), as_version=4)
    _run_on(kernel, node, tmp_path)
    nbformat.write(node, str(executed))
    # What ``jupyter nbconvert --to html --output-dir stock`` writes: its HTML exporter's page.
    stock = tmp_path / "stock"
    stock.mkdir()
    page, _resources = HTMLExporter().from_filename(str(executed))
    (stock / f"{executed.stem}.html").write_text(page, encoding="utf-8")
    return executed


WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
# In Chromium: whether each explorer's fallback shows and its picture decoded; then once a widget
# view (a VBox, as JupyterLab or the CDN's widget manager draws it) stands before each: drawn from
# saved state with no kernel (ipywidgets marks it disconnected), only the fallback's line saying to
# run the cells again shows; live, nothing of the fallback does.
_FALLBACKS_JS = """(() => {
  const seen = () => Array.from(document.querySelectorAll(".mqf-fallback")).map(f => ({
    shown: f.getBoundingClientRect().height > 0,
    images: Array.from(f.querySelectorAll("img")).map(i => [i.complete, i.naturalWidth])}));
  const before = seen();
  const first = document.querySelector(".mqf-fallback");
  if (first) first.scrollIntoView();
  return JSON.stringify(before);
})()"""
_RENDER_WIDGETS_JS = """(() => {
  const height = (f, part) => f.querySelector(part).getBoundingClientRect().height;
  const views = [];
  for (const tag of document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]')) {
    const view = document.createElement("div");
    view.className = "widget-vbox jupyter-widgets-disconnected";
    view.textContent = "an explorer drawn from its saved state";
    tag.parentElement.insertBefore(view, tag);
    views.push(view);
  }
  const fallbacks = Array.from(document.querySelectorAll(".mqf-fallback"));
  const saved = fallbacks.map(f => [height(f, ".mqf-static") > 0, height(f, ".mqf-rerun") > 0]);
  views.forEach(view => view.classList.remove("jupyter-widgets-disconnected"));
  const live = fallbacks.map(f => f.getBoundingClientRect().height > 0);
  return JSON.stringify({saved, live});
})()"""


def _check_stock_export(executed: Path, shot: Path) -> list[str]:
    """The stock ``jupyter nbconvert --to html`` export of `executed` (whose widget manager
    would load from a CDN, unreachable here): every widget output is followed by its explorer's
    static fallback (a picture, and the table under it when the explorer has one), which
    Chromium shows, and hides once a widget renders (but for the line saying to run the cells
    again, under a widget with no kernel); no widget shows as its raw repr. A screenshot of the
    first fallback goes to `shot`. Returns the fallbacks' picture names."""
    from bs4 import BeautifulSoup

    page = executed.parent / "stock" / f"{executed.stem}.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    outputs = soup.select(".jp-OutputArea-child")
    names = []
    for position, output in enumerate(outputs):
        if output.select_one(WIDGET_VIEW) is None:
            continue
        after = outputs[position + 1] if position + 1 < len(outputs) else None
        fallback = after.select_one(".mqf-fallback") if after is not None else None
        where = f"{page.name}: widget output {position} ({output.get_text(' ', strip=True)!r})"
        assert fallback is not None, f"{where} has no static fallback after it"
        images = fallback.select('img[src^="data:image/png;base64,"]')
        assert len(images) == 1 and len(images[0]["src"]) > 2000, where
        assert "run the notebook's cells again to explore interactively" in fallback.get_text()
        names.append(str(images[0]["alt"]))
    assert len(soup.select(".mqf-fallback")) == len(names), page.name
    text = soup.get_text(" ")
    for raw in ("HBox(children=", "VBox(children=", "IntProgress(", "<Figure size"):
        assert raw not in text, f"{page.name} shows {raw!r}"
    with opened(page) as tools:
        seen = tools.call("Runtime.evaluate", expression=_FALLBACKS_JS, returnByValue=True)
        picture = tools.call("Page.captureScreenshot", format="png")
        hidden = tools.call("Runtime.evaluate", expression=_RENDER_WIDGETS_JS, returnByValue=True)
    shot.write_bytes(base64.b64decode(picture["data"]))
    assert not is_blank(shot.read_bytes()), shot
    for fallback in json.loads(seen["result"]["value"]):
        assert fallback["shown"], (page.name, fallback)
        assert all(done and width > 200 for done, width in fallback["images"]), fallback
    rendered = json.loads(hidden["result"]["value"])
    assert all(shown == [False, True] for shown in rendered["saved"]), (page.name, rendered)
    assert not any(rendered["live"]), f"{page.name}: fallbacks not hidden under a live widget"
    return names


def test_an_exported_notebook_renders_its_explorers(chromium, kernel, tmp_path: Path) -> None:
    executed = _executed(NOTEBOOK, tmp_path, kernel)
    # Shared as the stock export: each explorer's static fallback after its widget.
    assert _check_stock_export(executed, tmp_path / "stock.png") == [
        "James findings",
        "Slices x buckets: live vs consumed rows",
    ]
    page = tmp_path / "01_james_queue.html"
    assert main(["report", "notebook", str(executed), "--out", str(page)]) == 0
    report = inspect_page(page, height=4000)
    # The findings explorer and the slice x bucket heatmap, as the static pictures of their views,
    # then section 5's trends of the sample's bundled run history.
    _check_page(report, tmp_path / "notebook.png", plots=5)
    assert [alt for alt, *_ in report.images] == [
        "James findings",
        "Slices x buckets: live vs consumed rows",
        "browse_start_lag",
        "live_mails",
        "reclaimable_bytes",
    ]
    _check_text(page)


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS if n != NOTEBOOK], ids=lambda n: n.stem)
def test_every_exported_notebook_reads_clean(
    chromium, kernel, tmp_path: Path, notebook: Path
) -> None:
    executed = _executed(notebook, tmp_path, kernel)
    _check_stock_export(executed, tmp_path / f"stock-{notebook.stem}.png")
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
