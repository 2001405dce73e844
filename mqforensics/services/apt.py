"""Install Debian packages for a test server, without letting their system services run.

Servers the harness needs from Debian (Cyrus, Redis, Postfix) are installed with ``apt-get`` on
first use (root only). A package's maintainer scripts would start its system-wide service (fixed
ports, ``/etc`` configuration); a ``policy-rc.d`` that exits 101 stops invoke-rc.d and
deb-systemd-invoke from doing so, and afterwards the service is stopped and disabled (best
effort), so only the harness's private instances ever run. A package that asks questions gets
its answers preseeded (``debconf-set-selections``), e.g. Postfix's "No configuration".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mqforensics.errors import ServiceStartError

_APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "APT_LISTCHANGES_FRONTEND": "none"}
_POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
_MISSING_LISTS = ("Unable to locate package", "has no installation candidate", "Failed to fetch")


def tail(text: str, lines: int = 20) -> str:
    """The last `lines` lines of `text`, indented for an error message."""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def _apt_install(packages: Sequence[str]) -> subprocess.CompletedProcess[str]:
    command = [
        "apt-get",
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        # Another process (a colleague's install, unattended-upgrades) may hold the dpkg lock.
        "-o",
        "DPkg::Lock::Timeout=300",
        *packages,
    ]
    env = {**os.environ, **_APT_ENV}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)


def _preseed(lines: Sequence[str], what: str) -> None:
    """Feed `lines` to ``debconf-set-selections``, so that the install asks nothing."""
    selections = "".join(f"{line}\n" for line in lines)
    try:
        result = subprocess.run(
            ["debconf-set-selections"],
            input=selections,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServiceStartError(f"could not preseed debconf for {what}: {exc}") from exc
    if result.returncode != 0:
        raise ServiceStartError(
            f"debconf-set-selections failed for {what} (exit {result.returncode}):\n"
            + tail(result.stdout + result.stderr)
        )


def disable_system_service(service: str) -> None:
    """Stop the package's own `service` and keep it from starting at boot (best effort)."""
    commands = [["service", service, "stop"], ["update-rc.d", service, "disable"]]
    if Path("/run/systemd/system").exists():
        commands = [["systemctl", "disable", "--now", service]]
    for command in commands:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(command, capture_output=True, check=False, timeout=120)


def ensure_packages(
    packages: Sequence[str],
    *,
    what: str,
    probe: Path,
    installed: Callable[[], bool],
    system_service: str | None,
    debconf: Sequence[str] = (),
) -> float:
    """Install `packages` unless `installed()`; the seconds that took (0 if already present).

    `what` names the software and `probe` the file whose absence means "not installed" in error
    messages; `system_service` is the package's own service (if it has one), stopped and
    disabled afterwards. `debconf` holds ``debconf-set-selections`` lines (``package
    question type value``) preseeded before the install, answering the package's questions.
    """
    if installed():
        return 0.0
    names = " ".join(packages)
    if os.geteuid() != 0:
        raise ServiceStartError(
            f"{what} is not installed ({probe} missing) and this is not root: run "
            f"`apt-get install --no-install-recommends {names}` as root"
        )
    if not shutil.which("apt-get"):
        raise ServiceStartError(f"{what} is not installed ({probe} missing) and no apt-get")
    started = time.monotonic()
    if debconf:
        _preseed(debconf, what)
    own_policy = not _POLICY_RC_D.exists()
    if own_policy:
        _POLICY_RC_D.write_text(
            f"#!/bin/sh\n# mqforensics: installing {what}, no services\nexit 101\n"
        )
        _POLICY_RC_D.chmod(0o755)
    output = ""
    try:
        result = _apt_install(packages)
        output = result.stdout + result.stderr
        if result.returncode != 0 and any(sign in output for sign in _MISSING_LISTS):
            update = subprocess.run(
                ["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"],
                env={**os.environ, **_APT_ENV},
                capture_output=True,
                text=True,
                timeout=900,
            )
            output += update.stdout + update.stderr
            result = _apt_install(packages)
            output += result.stdout + result.stderr
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(
            f"installing {names} timed out ({exc.timeout:.0f}s):\n" + tail(output)
        ) from exc
    finally:
        if own_policy:
            with contextlib.suppress(FileNotFoundError):
                _POLICY_RC_D.unlink()
    if result.returncode != 0 or not installed():
        raise ServiceStartError(
            f"could not install {names} (apt-get exit {result.returncode}):\n" + tail(output)
        )
    if system_service:
        disable_system_service(system_service)
    return round(time.monotonic() - started, 1)


def installed_version(package: str) -> str:
    """The installed Debian version of `package`, e.g. ``3.7.11-0+deb12u1``; "unknown"."""
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
    )
    return result.stdout.strip() or "unknown"
