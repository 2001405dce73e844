"""A private Redis 7 (Debian 12's ``redis-server``) on 127.0.0.1, password required.

slimta's RedisStorage keeps queued messages in Redis; the product reads them with redis-py, and
the tests need a real server to write into. `ensure_installed` installs the Debian package when
``/usr/bin/redis-server`` is missing (root only) without letting the package's system service
(port 6379, ``/etc/redis``) start or stay enabled.

`start` writes ``redis.conf`` into the server directory and runs ``redis-server`` on it in the
foreground: loopback only, a free port, a fixed test password, no persistence (no RDB snapshots,
no AOF: the data is throwaway), logging to stdout (the launch log). The password lives in the
file, not on the command line; ``set-proc-title no`` keeps the command line (which names the
server directory) as it was, so `ServerDir.owned_pid` still recognises the process.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from mqforensics.services import apt
from mqforensics.services.process import LOOPBACK, ServerDir, free_ports, launch, port_open

SERVER = Path("/usr/bin/redis-server")
PACKAGES = ("redis-server",)
SYSTEM_SERVICE = "redis-server"
PASSWORD = "mqforensics-redis-test"


def _installed() -> bool:
    return SERVER.exists()


def ensure_installed() -> float:
    """Install Redis from Debian if it is missing; the seconds that took (0 if present)."""
    return apt.ensure_packages(
        PACKAGES,
        what="Redis",
        probe=SERVER,
        installed=_installed,
        system_service=SYSTEM_SERVICE,
    )


def version() -> str:
    """The installed server's version, e.g. ``7.0.15`` (from ``redis-server --version``)."""
    result = subprocess.run([str(SERVER), "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"\bv=(\S+)", result.stdout)
    return match.group(1) if match else "unknown"


def client(port: int, password: str | None = PASSWORD, db: int = 0, host: str = LOOPBACK):
    """A redis-py client for the server on `host`:`port` (short timeouts, no retries)."""
    import redis

    return redis.Redis(
        host=host,
        port=port,
        db=db,
        password=password,
        socket_timeout=5,
        socket_connect_timeout=3,
    )


def ping_works(port: int, password: str = PASSWORD) -> bool:
    """True once an authenticated PING answers on 127.0.0.1:`port`."""
    if not port_open(port):
        return False
    import redis

    try:
        with client(port, password) as conn:
            return bool(conn.ping())
    except redis.RedisError:
        return False


def _quoted(text: str) -> str:
    """`text` as one redis.conf argument (a double-quoted string), whatever it contains."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _conf(server: ServerDir, port: int) -> str:
    return f"""\
# mqforensics private Redis instance: throwaway data under {server.data}
bind {LOOPBACK}
port {port}
protected-mode yes
requirepass {_quoted(PASSWORD)}
dir {_quoted(str(server.data))}
save ""
appendonly no
daemonize no
supervised no
logfile ""
set-proc-title no
"""


def start(server: ServerDir, *, timeout: float = 30.0) -> dict:
    """Start a private redis-server in `server` (after `reap`/`reset`); its connection info."""
    install_seconds = ensure_installed()
    (port,) = free_ports(1)
    conf = server.path / "redis.conf"
    conf.write_text(_conf(server, port))
    conf.chmod(0o600)
    started = time.monotonic()
    pid = launch(
        server,
        [str(SERVER), str(conf)],
        ready=lambda: ping_works(port),
        timeout=timeout,
        log_name="redis.log",
    )
    return {
        "service": "redis",
        "version": version(),
        "pid": pid,
        "host": LOOPBACK,
        "port": port,
        "password": PASSWORD,
        "url": f"redis://{LOOPBACK}:{port}/0",
        "config": str(conf),
        "startup_seconds": round(time.monotonic() - started, 1),
        "install_seconds": install_seconds,
        "log": str(server.logs / "redis.log"),
    }
