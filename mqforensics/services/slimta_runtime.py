"""The real python-slimta 5.0.5, in a virtualenv of its own, for tests that write slimta queues.

The product reads slimta's queue formats (DiskStorage files, RedisStorage hashes) by itself and
must not depend on slimta, so slimta never enters the product's virtualenv: tests write their
queue data with the real library in a separate runtime, and a test proves the product's venv
cannot import it. The runtime lives in the user's cache (``~/.cache/mqforensics/slimta-5.0.5``)
and is built once, by `ensure_runtime` (``make test`` runs it up front through
``mqforensics services fetch``); pip keeps its downloads in ``~/.cache/pip``.

What slimta 5.0.5 needs on Python 3.11, beyond its declared dependencies: ``pyaio==0.4`` for
`slimta.diskstorage` (yanked on PyPI, installable when pinned exactly; built with the C
compiler), ``setuptools<81`` because `slimta.core` imports ``pkg_resources``, and
``zope.interface`` without which ``pkg_resources.require('python-slimta')`` fails.

The venv is built in a sibling directory and renamed into place once it imports slimta, under a
lock file, so neither an interrupted build nor a concurrent one leaves a half venv that looks
ready. Console scripts in ``bin/`` keep the build directory in their ``#!`` line; use
``bin/python -m pip``, never ``bin/pip``.

Scripts run with the runtime get an empty temporary working directory: a file named like a
standard module (``inspect.py``, ``dis.py``) in the working directory breaks every import.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mqforensics.errors import MqfError, ServiceStartError
from mqforensics.services.cache import cache_dir

SLIMTA_VERSION = "5.0.5"
REQUIREMENTS = (
    f"python-slimta=={SLIMTA_VERSION}",
    "redis>=5",
    "pyaio==0.4",
    "setuptools>=70,<81",
    "zope.interface",
    "zope.event",
)
MODULES = (
    "slimta.diskstorage",
    "slimta.redisstorage",
    "slimta.queue",
    "slimta.envelope",
    "slimta.bounce",
)
_CHECK = (
    f"import {', '.join(MODULES)}\n"
    "from importlib.metadata import version\n"
    "print(version('python-slimta'))\n"
)


class SlimtaScriptFailed(MqfError):
    """A script run with the slimta runtime exited non-zero or did not finish in time."""


def _tail(text: str | bytes | None, lines: int = 25) -> str:
    """The end of a process's output (a timeout's partial output is bytes), for a message."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join("    " + line for line in (text or "").splitlines()[-lines:])


def runtime_dir() -> Path:
    """Where the runtime's virtualenv lives (it may not exist yet)."""
    return cache_dir() / f"slimta-{SLIMTA_VERSION}"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _environment() -> dict[str, str]:
    """This process's environment without what would point Python at another installation."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
    return {key: value for key, value in os.environ.items() if key not in drop}


def _works(python: Path) -> bool:
    """True if `python` imports slimta's storages and reports python-slimta SLIMTA_VERSION."""
    if not python.exists():
        return False
    with tempfile.TemporaryDirectory(prefix="mqf-slimta-check-") as cwd:
        try:
            result = subprocess.run(
                [str(python), "-c", _CHECK],
                cwd=cwd,
                env=_environment(),
                capture_output=True,
                text=True,
                timeout=180,
            )
        except (OSError, subprocess.SubprocessError):
            return False
    return result.returncode == 0 and result.stdout.split()[-1:] == [SLIMTA_VERSION]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing): one builder at a time."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _step(argv: list[str], what: str, venv: Path, timeout: float) -> None:
    try:
        result = subprocess.run(
            argv, env=_environment(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(
            f"{what} for the python-slimta {SLIMTA_VERSION} runtime ({venv}) took longer than "
            f"{timeout:.0f}s:\n" + _tail(exc.stdout)
        ) from exc
    if result.returncode != 0:
        raise ServiceStartError(
            f"{what} for the python-slimta {SLIMTA_VERSION} runtime ({venv}) failed "
            f"(exit {result.returncode}):\n" + _tail(result.stdout + result.stderr)
        )


def ensure_runtime() -> Path:
    """The runtime's Python interpreter, building its virtualenv first if missing or broken."""
    venv = runtime_dir()
    python = _python(venv)
    if _works(python):
        return python
    with _locked(venv.with_name(venv.name + ".lock")):
        if _works(python):  # another process built it while we waited
            return python
        build = venv.with_name(venv.name + ".building")
        shutil.rmtree(build, ignore_errors=True)  # left by an interrupted build
        try:
            _step([sys.executable, "-m", "venv", str(build)], "creating the virtualenv", venv, 300)
            pip = [str(_python(build)), "-m", "pip", "install", "--disable-pip-version-check"]
            _step([*pip, "--no-input", *REQUIREMENTS], "pip install", venv, 1800)
            if not _works(_python(build)):
                raise ServiceStartError(
                    f"the python-slimta {SLIMTA_VERSION} runtime built in {build} cannot import "
                    f"{', '.join(MODULES)}"
                )
            shutil.rmtree(venv, ignore_errors=True)  # a broken earlier runtime
            build.rename(venv)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    if not _works(python):
        raise ServiceStartError(f"the python-slimta runtime moved to {venv} does not work")
    return python


_ready: Path | None = None


def run_slimta(
    script: Path | str,
    *args: str | Path,
    timeout: float = 300.0,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the Python script at `script` with `args` under the slimta runtime; its result.

    The working directory is an empty temporary one; `env` adds to this process's environment.
    A non-zero exit or a timeout raises SlimtaScriptFailed with the end of the script's stderr.
    """
    global _ready
    if _ready is None:
        _ready = ensure_runtime()
    path = Path(script).resolve()
    argv = [str(_ready), str(path), *map(str, args)]
    shown = " ".join([path.name, *map(str, args)])
    with tempfile.TemporaryDirectory(prefix="mqf-slimta-run-") as cwd:
        try:
            result = subprocess.run(
                argv,
                cwd=cwd,
                env={**_environment(), **(env or {})},
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise SlimtaScriptFailed(
                f"slimta script {shown} did not finish within {timeout:.0f}s; stderr:\n"
                + _tail(exc.stderr)
            ) from exc
    if result.returncode != 0:
        raise SlimtaScriptFailed(
            f"slimta script {shown} exited with status {result.returncode}; stderr:\n"
            + _tail(result.stderr)
        )
    return result
