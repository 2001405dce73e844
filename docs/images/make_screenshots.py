"""Make the README's screenshots with the real tools: the archive report, and an explorer in
JupyterLab.

    .venv/bin/python docs/images/make_screenshots.py [report] [explorer]

1. ``report.png``: ``mqforensics demo`` into a scratch directory, ``mqforensics report html`` of
   its findings and plan, opened in headless Chromium (`mqforensics.services.chromium`).
2. ``notebook-explorer.png``: JupyterLab on 127.0.0.1 with ``notebooks/01_james_queue.ipynb``;
   Chromium runs every cell through JupyterLab's own command (the app is exposed to the page with
   ``--LabApp.expose_app_in_browser``), waits for the kernel, and photographs the slice x bucket
   explorer: its pickers and the live widget view.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mqforensics.services.chromium import DevTools, browser, inspect_page  # noqa: E402

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


def report_png(scratch: Path) -> None:
    env = {**os.environ, "MQF_PROGRESS": "0"}
    subprocess.run([PYTHON, "-m", "mqforensics", "demo", "--out", str(scratch / "demo")],
                   cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    page = scratch / "report.html"
    subprocess.run([PYTHON, "-m", "mqforensics", "report", "html", str(scratch / "demo"),
                    str(scratch / "demo" / "plan"), "--out", str(page),
                    "--title", "Retention audit: James mail queue (sample)"],
                   cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    report = inspect_page(page, width=1100, height=1300)
    (HERE / "report.png").write_bytes(report.screenshot)
    print(f"report.png: {len(report.images)} plots, {len(report.console_errors)} console errors")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _evaluate(tools: DevTools, expression: str) -> object:
    answer = tools.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)  # fmt: skip
    return answer.get("result", {}).get("value")


def _wait(tools: DevTools, expression: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _evaluate(tools, expression):
            return
        time.sleep(1)
    seen = _evaluate(tools, "document.body.innerText.slice(0, 1500)")
    raise SystemExit(f"timed out waiting for {what}; the page shows:\n{seen}")


def explorer_png(scratch: Path) -> None:
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "MQF_NOTEBOOK_OUT": str(scratch / "out"), "MQF_PROGRESS": "0",
           "JUPYTER_CONFIG_DIR": str(scratch / "jupyter"), "JUPYTERLAB_WORKSPACES_DIR":
           str(scratch / "workspaces")}  # fmt: skip
    lab = subprocess.Popen(
        [PYTHON, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", "--LabApp.expose_app_in_browser=True",
         f"--ServerApp.root_dir={ROOT / 'notebooks'}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if lab.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("JupyterLab did not start")
            time.sleep(0.5)
        with browser(1400, 1000) as target:
            tools = DevTools(target)
            tools.call("Page.enable")
            url = f"http://127.0.0.1:{port}/lab/tree/01_james_queue.ipynb?token={token}"
            tools.call("Page.navigate", url=url)
            _wait(tools, "!!(window.jupyterapp && document.querySelector('.jp-Notebook'))",
                  120, "JupyterLab and the notebook")  # fmt: skip
            # A headless page has no focus, so the shell's current widget stays unset: the
            # notebook is found among the main area's widgets and activated explicitly.
            tools.call("Emulation.setFocusEmulationEnabled", enabled=True)
            panel = ("Array.from(window.jupyterapp.shell.widgets('main'))"
                     ".find(w => w.sessionContext)")  # fmt: skip
            _evaluate(tools, f"window.jupyterapp.shell.activateById(({panel}).id)")
            kernel = f"({panel}).sessionContext.session?.kernel"
            _wait(tools, f"{kernel}?.status === 'idle'", 180, "the notebook's kernel")
            # Started, not awaited: the command's promise settles only when every cell ran,
            # which takes longer than one DevTools call may wait.
            _evaluate(tools, "void window.jupyterapp.commands.execute('notebook:run-all-cells')")
            heatmap = (
                "Array.from(document.querySelectorAll('.widget-vbox')).find(b =>"
                " b.textContent.includes('Slices x buckets') && b.querySelector('img') &&"
                " b.querySelector('img').naturalWidth > 0)"
            )
            _wait(tools, f"!!({heatmap})", 600, "the slice x bucket explorer")
            time.sleep(3)
            _evaluate(tools, f"({heatmap}).scrollIntoView({{block: 'center'}})")
            time.sleep(2)
            rect = json.loads(str(_evaluate(tools, f"JSON.stringify(({heatmap})"
                                            ".getBoundingClientRect())")))  # fmt: skip
            clip = {"x": max(rect["x"] - 90, 0), "y": max(rect["y"] - 40, 0),
                    "width": min(rect["width"] + 110, 1400), "height": rect["height"] + 60,
                    "scale": 1}  # fmt: skip
            shot = tools.call("Page.captureScreenshot", format="png", clip=clip)
            import base64

            (HERE / "notebook-explorer.png").write_bytes(base64.b64decode(shot["data"]))
            print("notebook-explorer.png: the live explorer in JupyterLab")
            tools.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)


def main(argv: list[str]) -> None:
    wanted = set(argv) or {"report", "explorer"}
    with tempfile.TemporaryDirectory(prefix="mqf-screenshots-") as scratch:
        if "report" in wanted:
            report_png(Path(scratch))
        if "explorer" in wanted:
            explorer_png(Path(scratch))


if __name__ == "__main__":
    main(sys.argv[1:])
