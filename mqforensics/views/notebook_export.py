"""`mqforensics report notebook`'s export: an executed notebook as one self-contained, offline
HTML file.

nbconvert's lab template loads require.js, MathJax, mermaid and the widget manager from CDNs, so
an export opened offline (or archived) fails to render widgets and logs network errors. This
export uses the lab template without those scripts (``templates/mqf_offline``), embeds every
image, and keeps of each widget output only what renders without JavaScript: an explorer writes
its static fallback (picture and table) as the output after its widget (`views.widgets`; an
older notebook has them in the widget's own output), so a widget output with nothing static (an
explorer's, a progress bar) is dropped. Lines Spark and the JVM write to stderr (log4j warnings,
stage progress) are dropped too: they say nothing about the store and would read as errors.
Outputs are otherwise kept as they are: pseudonymisation happened when the notebook ran.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC = ("text/html", "image/png", "image/svg+xml", "image/jpeg")
# What Spark, log4j and the JVM write on stderr: a log line (``25/11/25 12:00:01 WARN ...``),
# its continuation lines, the startup banner, stage progress.
_JVM_NOISE = re.compile(
    r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "
    r"|WARNING: |Setting default log level|To adjust logging level|Using Spark's default log4j"
    r"|\[Stage \d+|\s+at [\w$.<>]+\(|\s*\.\.\. \d+ more|SLF4J: )"
)


def static_outputs(notebook: Any) -> Any:
    """The notebook with widget state removed and widget outputs reduced to their static parts."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                output["text"] = without_jvm_noise(str(output.get("text", "")))
                if output["text"].strip():
                    kept.append(output)
                continue
            data = output.get("data")
            if data is not None and WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)
                if not any(kind in data for kind in STATIC):
                    continue
            kept.append(output)
        cell["outputs"] = kept
    return notebook


def without_jvm_noise(text: str) -> str:
    """Stderr text without the lines Spark, log4j and the JVM wrote (`_JVM_NOISE`); progress
    redrawn with carriage returns counts as its last state."""
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(line for line in lines if not _JVM_NOISE.match(line))


def export_html(notebook: Path, out: Path) -> Path:
    """Write `notebook` (already executed) as self-contained HTML to `out`, atomically; `out`'s
    directory must exist."""
    import nbformat
    from nbconvert import HTMLExporter

    from mqforensics.views.report import check_out_file

    check_out_file(out)
    try:
        node = nbformat.read(str(notebook), as_version=4)
    except (OSError, ValueError) as exc:
        raise InputError(f"{notebook}: not a readable notebook ({exc})") from None
    exporter = HTMLExporter(
        template_name="mqf_offline",
        extra_template_basedirs=[str(TEMPLATES)],
        embed_images=True,
        exclude_anchor_links=True,
    )
    body, _ = exporter.from_notebook_node(static_outputs(node))
    from mqforensics.retention.manifest import write_atomically

    write_atomically(out, body.encode("utf-8"))
    return out
