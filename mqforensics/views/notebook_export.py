"""`mqforensics report notebook`: an executed notebook as one self-contained, offline HTML file.

nbconvert's lab template loads require.js, MathJax, mermaid and the widget manager from CDNs, so
an export opened offline (or archived) fails to render widgets and logs network errors. This
export uses the lab template without those scripts (``templates/mqf_offline``), embeds every
image, and replaces each widget output by what our explorers also put in it (a static picture
and an HTML caption, see `mqforensics.views.widgets`); widget outputs with nothing static to show (a
progress bar) are dropped. Outputs are otherwise kept as they are: pseudonymisation happened when
the notebook ran.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC = ("text/html", "image/png", "image/svg+xml", "image/jpeg")


def static_outputs(notebook: Any) -> Any:
    """The notebook with widget state removed and widget outputs reduced to their static parts."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data is not None and WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)
                if not any(kind in data for kind in STATIC):
                    continue
            kept.append(output)
        cell["outputs"] = kept
    return notebook


def export_html(notebook: Path, out: Path) -> Path:
    """Write `notebook` (already executed) as self-contained HTML to `out`, atomically."""
    import nbformat
    from nbconvert import HTMLExporter

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

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, body.encode("utf-8"))
    return out


def add_parser(kinds: argparse._SubParsersAction) -> None:
    parser = kinds.add_parser(
        "notebook", help="an executed notebook as one self-contained, offline HTML file"
    )
    parser.add_argument("notebook", type=Path, metavar="NOTEBOOK", help="an executed .ipynb")
    parser.add_argument("--out", type=Path, required=True, metavar="FILE", help="the HTML file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    export_html(args.notebook, args.out)
    print(f"wrote {args.out}")
    return 0
