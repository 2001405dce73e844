"""Start, watch and stop one server process that lives in its own directory.

A server directory holds everything about one running server::

    <dir>/pid           process id (the process leads its own process group)
    <dir>/pid.<role>    process id of a companion of that process (e.g. a Spark worker next to
                        its master), in a process group of its own, stopped with the server
    <dir>/server.json   what clients need: ports, endpoints, credentials for the test server
    <dir>/data/         the server's data (throwaway)
    <dir>/logs/         its stdout/stderr and own log files, kept when something fails

A run killed midway leaves a pid file behind; `reap` recognises the orphan by its command line
(which always names the server directory) and kills it, so the next run starts clean and never
kills an unrelated process that reused the pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mqforensics.errors import ServiceStartError

LOOPBACK = "127.0.0.1"
# The JIT of every JVM the harness starts (Cassandra, nodetool, DSBulk, the Spark servers): C1
# alone. They live minutes, serving small test workloads on two cores, where C2's compilations
# cost more CPU than the code they optimise saves: a Cassandra start took 10.9 CPU-seconds
# instead of 18.2, and 36 tables created and filled 9.3 instead of 21.2.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def quick_jit() -> list[str]:
    """The harness's JVM options for the JIT: `QUICK_JIT`, none when ``MQF_QUICK_JIT=0`` (the
    JDK's default JIT, as servers run in production: `make bench` measures with it)."""
    return [] if os.environ.get("MQF_QUICK_JIT") == "0" else [QUICK_JIT]


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that are free on 127.0.0.1 right now."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def pids_of_instance(named: str, environment_entry: str) -> list[int]:
    """The live processes whose command line contains `named` (a server's directory) or whose
    environment holds `environment_entry` (``NAME=value``: children that inherit it, whose
    command lines name nothing), in pid order."""
    marker = environment_entry.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (named in cmdline or marker in environ) and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


@dataclass
class ServerDir:
    """The directory of one server instance, and the process recorded in it."""

    path: Path
    name: str = field(default="")

    def __post_init__(self) -> None:
        self.path = Path(self.path).resolve()
        self.name = self.name or self.path.name

    @property
    def pid_file(self) -> Path:
        return self.path / "pid"

    @property
    def info_file(self) -> Path:
        return self.path / "server.json"

    @property
    def data(self) -> Path:
        return self.path / "data"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def companion_pid_file(self, role: str) -> Path:
        return self.path / f"pid.{role}"

    def pid_files(self) -> list[Path]:
        """The companions' pid files, then the main one: the order processes are stopped in."""
        return [*sorted(self.path.glob("pid.*")), self.pid_file]

    def recorded_pid(self, pid_file: Path | None = None) -> int | None:
        try:
            return int((pid_file or self.pid_file).read_text().strip())
        except (OSError, ValueError):
            return None

    def owned_pid(self, pid_file: Path | None = None) -> int | None:
        """The recorded pid if that process is alive and really is this directory's server
        (or, given a companion's `pid_file`, that companion)."""
        pid = self.recorded_pid(pid_file)
        if pid is None or not pid_alive(pid):
            return None
        return pid if str(self.path) in _cmdline(pid) else None

    def info(self) -> dict[str, object] | None:
        try:
            return json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return None

    def reap(self) -> bool:
        """Kill an orphaned server (and its companions) left by an earlier run; True if the
        server or a companion was still running."""
        found = _stop_recorded(self, grace=0)
        with contextlib.suppress(FileNotFoundError):
            self.info_file.unlink()
        return found

    def reset(self) -> None:
        """Fresh, empty data and log directories (after `reap`)."""
        shutil.rmtree(self.data, ignore_errors=True)
        shutil.rmtree(self.logs, ignore_errors=True)
        self.data.mkdir(parents=True)
        self.logs.mkdir(parents=True)

    def last_log_lines(self, log: Path, lines: int = 15) -> str:
        try:
            text = log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log written)"
        return "\n".join("    " + line for line in text[-lines:])


def _kill_group(pid: int, grace: float, ours: Callable[[], bool] = lambda: True) -> None:
    """SIGTERM the process group led by `pid`, then SIGKILL it after `grace` seconds; nothing if
    `ours()` says, once the leader is held, that `pid` is not the process meant.

    The leader is held by a pidfd. Once it has exited, its parent may reap it at any moment and
    the number may go to an unrelated process (pids wrap at 32768 on a busy test machine), so
    the group is never signalled after that: a stale number must not kill a stranger.
    """
    try:
        leader = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if not ours():
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if grace == 0 and sig == signal.SIGTERM:
                continue
            if _exited(leader, within=0):
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            if _exited(leader, within=wait):
                return
    finally:
        os.close(leader)


def _exited(pidfd: int, within: float) -> bool:
    """True once the process behind `pidfd` has exited (a zombie included), waiting at most
    `within` seconds."""
    readable, _, _ = select.select([pidfd], [], [], within)
    return bool(readable)


def launch(
    server: ServerDir,
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    ready: Callable[[], bool],
    timeout: float,
    log_name: str = "stdout.log",
    companion: str | None = None,
) -> int:
    """Start `argv` as `server`'s process and wait until `ready()`; return its pid.

    The process gets its own session so that stopping it also stops its children. If it exits
    or is not ready within `timeout` seconds it is killed and a ServiceStartError names the log.
    With `companion` (a role such as ``worker``) the process is a second one of the same server:
    its pid goes to ``pid.<role>`` and `stop`/`reap` end it before the main process. Its command
    line must name the server directory too.
    """
    log = server.logs / log_name
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=server.path,
            env=env,
            start_new_session=True,
        )
    pid_file = server.companion_pid_file(companion) if companion else server.pid_file
    pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise ServiceStartError(
                f"{server.name} exited with status {code} while starting; log {log}:\n"
                + server.last_log_lines(log)
            )
        # Popen returns once the child's exec has closed its close-on-exec pipe, which the kernel
        # does before it sets up the new program's arguments: until they are there, the process
        # has an empty command line and `owned_pid` could not recognise it.
        if _cmdline(proc.pid) and ready():
            return proc.pid
        time.sleep(0.25)
    _kill_group(proc.pid, grace=0)
    raise ServiceStartError(
        f"{server.name} was not ready after {timeout:.0f}s; log {log}:\n"
        + server.last_log_lines(log)
    )


def _still_owned(server: ServerDir, pid_file: Path, pid: int) -> bool:
    return server.owned_pid(pid_file) == pid


def stop(server: ServerDir, grace: float = 3.0) -> bool:
    """Stop the server recorded in `server` (SIGTERM, then SIGKILL); True if one was running.

    The harness's servers hold throwaway data, so the grace period is short (SeaweedFS does not
    exit on SIGTERM within 10 s).
    """
    return _stop_recorded(server, grace=grace)


def _stop_recorded(server: ServerDir, grace: float) -> bool:
    """Kill the process group of every process recorded in `server` that is still its own
    (companions first); remove the pid files. True if any was running."""
    found = False
    for pid_file in server.pid_files():
        pid = server.owned_pid(pid_file)
        if pid is not None:
            found = True
            _kill_group(pid, grace, ours=partial(_still_owned, server, pid_file, pid))
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()
    return found
