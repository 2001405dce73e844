"""A real headless Chromium (Debian's ``chromium``) that opens a page and says what it saw.

Used by the tests of the HTML report and notebook exports, and for the README's screenshots.
The browser is driven over the DevTools protocol (a websocket, `websocket-client`): it loads a
local file, and `inspect_page` returns a screenshot, the page's console errors and uncaught
exceptions, every request that left the machine (anything not ``file:`` or ``data:``), and the
images in the DOM with their decoded sizes. The browser binds its debugging port to 127.0.0.1,
runs with a throw-away profile, and is always killed afterwards.

    python -m mqforensics.cli.screenshot screenshot report.html report.png [--width 1280]
"""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

from mqforensics.errors import ServiceStartError

BINARY = Path("/usr/bin/chromium")
START_TIMEOUT = 60.0
LOAD_TIMEOUT = 60.0


@dataclass
class PageReport:
    """What the browser saw on one page."""

    url: str
    screenshot: bytes
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    # (alt text, naturalWidth, naturalHeight, complete) of every <img>
    images: list[tuple[str, int, int, bool]] = field(default_factory=list)
    title: str = ""


def ensure_chromium() -> Path:
    """Debian's chromium, installed with apt when missing (root only)."""
    if BINARY.exists():
        return BINARY
    from mqforensics.services.apt import ensure_packages

    ensure_packages(
        ["chromium"], what="Chromium", probe=BINARY, installed=BINARY.exists, system_service=None
    )
    return BINARY


def is_blank(png: bytes, *, min_colours: int = 8) -> bool:
    """True when an image is one colour or nearly (a page that rendered nothing)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=min_colours)
    return colours is not None  # None: more than min_colours colours


class DevTools:
    """One websocket to a page target: numbered commands (`call`), events collected on the way
    (`events`), and `wait_for` an event; each waits at most `timeout` seconds."""

    def __init__(self, ws_url: str, timeout: float = LOAD_TIMEOUT) -> None:
        self.timeout = timeout
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        self.ws.send(json.dumps({"id": number, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise ServiceStartError(f"chromium {method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)
        raise ServiceStartError(f"chromium did not answer {method} in {self.timeout:.0f}s")

    def wait_for(self, method: str) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            self.events.append(message)
            if message.get("method") == method:
                return
        raise ServiceStartError(f"chromium: no {method} within {self.timeout:.0f}s")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


@contextlib.contextmanager
def browser(width: int, height: int) -> Iterator[str]:
    """A headless Chromium with a throw-away profile, killed on exit; yields its first page's
    DevTools websocket URL (for `DevTools`)."""
    binary = ensure_chromium()
    profile = Path(tempfile.mkdtemp(prefix="mqf-chromium-"))
    command = [
        str(binary), "--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--disable-sync",
        "--disable-background-networking", "--mute-audio",
        "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
        f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank",
    ]  # fmt: skip
    log = profile / "stderr.log"
    with log.open("wb") as stderr:
        # Its own process group: the renderer and GPU helpers go down with it.
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ServiceStartError(
                    f"chromium did not start (exit {process.poll()}):\n{_tail(log)}"
                )
            time.sleep(0.1)
        port = port_file.read_text().splitlines()[0].strip()
        try:
            yield _page_target(port)
        except ServiceStartError as exc:
            raise ServiceStartError(f"{exc.message}\nchromium's stderr:\n{_tail(log)}") from exc
        except (OSError, websocket.WebSocketException) as exc:  # a timeout, a crashed browser
            raise ServiceStartError(
                f"chromium's DevTools connection failed ({type(exc).__name__}: {exc})\n"
                f"chromium's stderr:\n{_tail(log)}"
            ) from exc
    finally:
        if process.returncode is None:  # not reaped yet, so its pid is still its group's
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


def _tail(log: Path, lines: int = 20) -> str:
    """The end of chromium's stderr without its D-Bus complaints (no session bus in a container
    or CI runner; harmless, and they would push the telling lines out)."""
    from mqforensics.services.apt import tail

    text = log.read_text(errors="replace") if log.exists() else ""
    kept = [line for line in text.splitlines() if ":ERROR:dbus/" not in line]
    return tail("\n".join(kept), lines) if kept else "    (nothing)"


def _page_target(port: str) -> str:
    from urllib.request import urlopen

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
                targets = json.loads(answer.read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        time.sleep(0.2)
    raise ServiceStartError(f"chromium on port {port} listed no page")


_IMAGES_JS = """
Promise.all(Array.from(document.images).map(img => img.complete ? null :
  new Promise(done => { img.onload = img.onerror = done; })))
.then(() => JSON.stringify(Array.from(document.images).map(img =>
  [img.alt || "", img.naturalWidth, img.naturalHeight, img.complete])))
"""


def inspect_page(
    path: Path, *, width: int = 1280, height: int = 1600, timeout: float = LOAD_TIMEOUT
) -> PageReport:
    """Open a local HTML file in headless Chromium and report what happened (see module doc);
    a page that has not loaded, with its images, within `timeout` seconds is a ServiceStartError
    carrying the tail of chromium's stderr."""
    url = Path(path).resolve().as_uri()
    with browser(width, height) as target:
        tools = DevTools(target, timeout)
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                tools.call(f"{domain}.enable")
            tools.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                       deviceScaleFactor=1, mobile=False)  # fmt: skip
            tools.call("Page.navigate", url=url)
            tools.wait_for("Page.loadEventFired")
            images = tools.call("Runtime.evaluate", expression=_IMAGES_JS, awaitPromise=True,
                                returnByValue=True)  # fmt: skip
            title = tools.call("Runtime.evaluate", expression="document.title", returnByValue=True)
            shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
            report = PageReport(
                url=url,
                screenshot=base64.b64decode(shot["data"]),
                images=[tuple(i) for i in json.loads(images["result"]["value"])],  # type: ignore[misc]
                title=str(title["result"].get("value", "")),
            )
            _collect(report, tools.events)
            return report
        finally:
            tools.close()


def _collect(report: PageReport, events: list[dict[str, Any]]) -> None:
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            report.exceptions.append(str(text))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            report.console_errors.append(" ".join(args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            report.console_errors.append(f"{entry.get('source')}: {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            request_url = params.get("request", {}).get("url", "")
            if not request_url.startswith(("file:", "data:", "about:")):
                report.external_requests.append(request_url)
        elif method == "Network.loadingFailed":
            report.failed_requests.append(str(params.get("errorText", "")))
