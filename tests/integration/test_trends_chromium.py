"""The report's Trends section and a trend figure as a notebook shows it, in a real headless
Chromium (Debian's package, as `test_report_chromium` opens the archive report): the page
renders (its screenshot and one of the Trends section alone are not blank), every trend PNG is
decoded at its size, no JavaScript error, nothing fetched from outside the file, and no missing
value reads ``nan`` or ``None``. The screenshots and the trend PNG are kept in the test's
temporary directory (pytest's ``--basetemp`` to keep them elsewhere), named in each assertion."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from mqforensics.cli import main
from mqforensics.services.chromium import inspect_page, is_blank
from mqforensics.views.plots import png_bytes
from mqforensics.views.trends import trend_figure
from tests.integration.test_report_chromium import _check_page, _check_text, opened
from tests.unit.history.test_report_trends import PNG, james_run, planted_audit

# The Trends section's box in page coordinates, and its images' natural and shown sizes.
_SECTION_JS = """JSON.stringify((() => {
  const heading = Array.from(document.querySelectorAll("h2"))
      .find(h => h.innerText.startsWith("Trends"));
  let bottom = heading.getBoundingClientRect().bottom;
  const images = [];
  for (let e = heading.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) {
    bottom = Math.max(bottom, e.getBoundingClientRect().bottom);
    for (const i of e.querySelectorAll("img"))
      images.push([i.alt, i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().width]);
  }
  return {top: heading.getBoundingClientRect().top + window.scrollY,
          bottom: bottom + window.scrollY, images};
})())"""


def _section_shot(page: Path, shot: Path) -> dict:
    """A screenshot of the Trends section alone into `shot`; its box and images."""
    with opened(page) as tools:
        answer = tools.call("Runtime.evaluate", expression=_SECTION_JS, returnByValue=True)
        section = json.loads(answer["result"]["value"])
        clip = {"x": 0, "y": section["top"] - 8, "width": 1280,
                "height": section["bottom"] - section["top"] + 16, "scale": 1}  # fmt: skip
        picture = tools.call("Page.captureScreenshot", format="png", clip=clip,
                             captureBeyondViewport=True)  # fmt: skip
    shot.write_bytes(base64.b64decode(picture["data"]))
    return dict(section)


def test_the_trends_section_renders_with_its_figures(chromium, spark, tmp_path: Path) -> None:
    audit, _history = planted_audit(tmp_path)
    page = tmp_path / "report.html"
    assert main(["report", "html", str(audit), "--out", str(page)]) == 0
    trends = PNG.findall(page.read_text())
    assert len(trends) == 6
    report = inspect_page(page, height=4200)
    # A clean audit (no findings plot): one picture per trended metric.
    _check_page(report, tmp_path / "report-trends.png", plots=len(trends))
    assert [alt for alt, *_ in report.images] == [f"trend of {m}" for m in trends]
    _check_text(page)
    shot = tmp_path / "trends-section.png"
    section = _section_shot(page, shot)
    where = f"(screenshot {shot})"
    assert not is_blank(shot.read_bytes()), where
    assert section["bottom"] - section["top"] > 400 * len(trends), (section, where)
    for alt, width, height, shown in section["images"]:
        # Drawn at 100 dpi, 9.5 x 4.8 in, and shown whole (its 1 px border around it) or scaled
        # down to the page's width, never up.
        assert width >= 900 and height >= 450 and 600 < shown <= width + 2, (alt, where)


def test_a_trend_figure_shows_in_a_notebook_export(chromium, tmp_path: Path) -> None:
    """The figure `History.plot` returns, as a notebook's HTML output holds it."""
    runs = [james_run(number) for number in range(1, 8)]
    rows = [{**row, "system": "james"} for run in runs for row in run.rows()
            if row["metric"] == "browse_start"]  # fmt: skip
    points = pd.DataFrame(rows)
    stuck = SimpleNamespace(rule="james-browse-start-stuck", severity="warning", system="james",
                            scope=runs[-1].scope, queue="spool", check="", item="",
                            as_of=runs[-1].as_of, value=points["value"].iloc[-1])  # fmt: skip
    fig = trend_figure(points, [stuck], title="browse_start")
    picture = tmp_path / "trend-browse_start.png"
    picture.write_bytes(png_bytes(fig))
    assert not is_blank(picture.read_bytes()), picture
    bundle = fig._repr_mimebundle_()
    html = tmp_path / "notebook-output.html"
    head = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>trend</title>'
    html.write_text(f"{head}</head><body>{bundle['text/html']}</body></html>\n")
    report = inspect_page(html, height=800)
    _check_page(report, tmp_path / "notebook-trend.png", plots=1)
    assert report.images[0][0] == "browse_start"
    _check_text(html)
