"""A set of real servers under one root directory: started on demand, reused, stopped together.

Two kinds of roots:

* a **test session** root under ``$TMPDIR/mqforensics-<uid>/``, owned by one pytest process and
  removed when it ends (logs kept when something failed); roots of sessions whose owner died are
  reaped by the next session, so a killed run never breaks the next one;
* a **long-lived** root (``.services/`` for ``make services``) that later commands reuse.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services import (
    cassandra,
    cyrus,
    postfix,
    rabbitmq,
    redis,
    seaweedfs,
    spark_connect,
    spark_standalone,
)
from mqforensics.services.process import ServerDir, pid_alive, port_open, stop

Starter = Callable[[ServerDir], dict]

STARTERS: dict[str, Starter] = {
    "cassandra": cassandra.start,
    "seaweedfs": seaweedfs.start,
    "spark-connect": spark_connect.start,
    "spark-standalone": spark_standalone.start,
    "cyrus": cyrus.start,
    "redis": redis.start,
    "postfix": postfix.start,
    "rabbitmq": rabbitmq.start,
}

# What `mqforensics services up` starts when no service is named.
DEFAULT_SERVICES = ("cassandra", "seaweedfs")

# Whether a recorded server still answers, for reuse by a later command.
PROBES: dict[str, Callable[[dict], bool]] = {
    "cassandra": lambda info: cassandra.cql_ready(int(info["port"])),
    "seaweedfs": lambda info: seaweedfs.s3_ready(str(info["endpoint"])),
    "spark-connect": lambda info: port_open(int(str(info["remote"]).rsplit(":", 1)[1])),
    "spark-standalone": lambda info: spark_standalone.worker_registered(
        int(info["webui_port"]), int(info["worker_port"])
    ),
    "cyrus": lambda info: cyrus.imap_login_works(
        int(info["port"]), str(info["username"]), str(info["password"])
    ),
    "redis": lambda info: redis.ping_works(int(info["port"]), str(info["password"])),
    "postfix": postfix.running,
    "rabbitmq": lambda info: rabbitmq.management_ready(
        str(info["management_url"]), str(info["username"]), str(info["password"])
    ),
}

SESSIONS_BASE = Path(tempfile.gettempdir()) / f"mqforensics-{os.getuid()}"
KEEP_FAILED_LOGS_DAYS = 3


class Harness:
    """The servers under `root`, one subdirectory each."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def server_dir(self, name: str) -> ServerDir:
        return ServerDir(self.root / name, name)

    def running(self, name: str) -> dict | None:
        """Connection info of `name` if it is running here and answers; else None."""
        server = self.server_dir(name)
        info = server.info()
        if server.owned_pid() is None or info is None:
            return None
        return info if PROBES[name](info) else None

    def ensure(self, name: str) -> dict:
        """Connection info of `name`, starting it (after reaping any orphan) if needed.

        Processes sharing this root (pytest's xdist workers) ask in turn: the first starts the
        server, the others wait for it and reuse it."""
        if name not in STARTERS:
            raise ServiceStartError(f"unknown service {name!r}; known: {', '.join(STARTERS)}")
        with self._turn(name):
            info = self.running(name)
            if info is not None:
                return info
            server = self.server_dir(name)
            server.reap()
            server.reset()
            info = STARTERS[name](server)
            server.info_file.write_text(json.dumps(info, indent=2) + "\n")
            return info

    @contextlib.contextmanager
    def _turn(self, name: str) -> Iterator[None]:
        """Hold `name`'s lock file under the root (beside, not in, its server directory, which
        a start resets) until the block ends."""
        with open(self.root / f".{name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def stop(self, name: str) -> bool:
        """Stop `name`, keeping its data (as a crashed or stopped server would); True if it ran."""
        server = self.server_dir(name)
        stopped = server.path.exists() and stop(server)
        if server.info_file.exists():
            server.info_file.unlink()
        return stopped

    def start_again(self, name: str) -> dict:
        """Start a stopped `name` on its existing data (new ports): a server coming back."""
        server = self.server_dir(name)
        server.reap()
        server.data.mkdir(parents=True, exist_ok=True)
        server.logs.mkdir(parents=True, exist_ok=True)
        info = STARTERS[name](server)
        server.info_file.write_text(json.dumps(info, indent=2) + "\n")
        return info

    def stop_all(self, names: list[str] | None = None) -> list[str]:
        """Stop the named servers (default: all); the names of those that were running."""
        stopped = []
        for name in names or list(STARTERS):
            server = self.server_dir(name)
            if server.path.exists() and stop(server):
                stopped.append(name)
            if server.info_file.exists():
                server.info_file.unlink()
        return stopped

    def environment(self) -> dict[str, str]:
        """Environment variables that point clients at the running servers."""
        env: dict[str, str] = {}
        cass = self.running("cassandra")
        if cass:
            env["MQF_CASSANDRA"] = f"{cass['host']}:{cass['port']}"
            env["MQF_CASSANDRA_USERNAME"] = str(cass["username"])
            env["MQF_CASSANDRA_PASSWORD"] = str(cass["password"])
        s3 = self.running("seaweedfs")
        if s3:
            env["MQF_S3_ENDPOINT"] = str(s3["endpoint"])
            env["AWS_ACCESS_KEY_ID"] = str(s3["access_key"])
            env["AWS_SECRET_ACCESS_KEY"] = str(s3["secret_key"])
            env["AWS_DEFAULT_REGION"] = str(s3["region"])
        connect = self.running("spark-connect")
        if connect:
            env["SPARK_REMOTE"] = str(connect["remote"])
        standalone = self.running("spark-standalone")
        if standalone:
            env["MQF_SPARK_MASTER"] = str(standalone["master"])
        redis_info = self.running("redis")
        if redis_info:
            env["MQF_REDIS_URL"] = str(redis_info["url"])
            env["MQF_REDIS_PASSWORD"] = str(redis_info["password"])
        rabbit = self.running("rabbitmq")
        if rabbit:
            env["MQF_RABBITMQ_URL"] = str(rabbit["management_url"])
            env["MQF_RABBITMQ_USERNAME"] = str(rabbit["username"])
            env["MQF_RABBITMQ_PASSWORD"] = str(rabbit["password"])
        return env


class TestSession(Harness):
    """A harness owned by the current process, in a fresh temporary root."""

    def __init__(self) -> None:
        reap_dead_sessions()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        super().__init__(SESSIONS_BASE / f"session-{os.getpid()}-{stamp}")
        (self.root / "owner").write_text(f"{os.getpid()}\n")

    def close(self, *, keep_logs: bool) -> Path | None:
        """Stop every server; delete the root, or keep only the logs and return where they are."""
        self.stop_all()
        if not keep_logs:
            shutil.rmtree(self.root, ignore_errors=True)
            return None
        _drop_data(self.root)
        return self.root


def _drop_data(root: Path) -> None:
    for data in root.glob("*/data"):
        shutil.rmtree(data, ignore_errors=True)


def reap_dead_sessions(base: Path = SESSIONS_BASE) -> list[Path]:
    """Kill servers of test sessions whose owner process is gone; drop their data.

    Logs of such sessions are kept for KEEP_FAILED_LOGS_DAYS days, then removed.
    """
    reaped: list[Path] = []
    if not base.exists():
        return reaped
    for root in sorted(base.glob("session-*")):
        try:
            owner = int((root / "owner").read_text().strip())
        except (OSError, ValueError):
            owner = None
        if owner is not None and owner != os.getpid() and pid_alive(owner):
            continue
        for child in root.iterdir():
            if child.is_dir():
                ServerDir(child).reap()
        _drop_data(root)
        age_days = (time.time() - root.stat().st_mtime) / 86400
        if age_days > KEEP_FAILED_LOGS_DAYS:
            shutil.rmtree(root, ignore_errors=True)
        reaped.append(root)
    return reaped
