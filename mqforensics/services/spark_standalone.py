"""A standalone Spark cluster from the installed pyspark, for testing `MQF_SPARK_MASTER` end to end.

Runs ``org.apache.spark.deploy.master.Master`` and one ``org.apache.spark.deploy.worker.Worker``
(2 cores, 2 GiB) through pyspark's ``bin/spark-class`` (pip's pyspark has no ``start-master.sh``),
every port bound to 127.0.0.1. The master is the server's process (``pid``), the worker its
companion (``pid.worker``): stopping the server stops both, and the executors the worker started.
Executors start their Python workers with this interpreter, so the project's Python data sources
run there.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services.process import (
    LOOPBACK,
    ServerDir,
    free_ports,
    launch,
    quick_jit,
    stop,
)

WORKER_CORES = 2
WORKER_MEMORY = "2g"


def spark_class() -> Path:
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not script.exists():
        raise ServiceStartError(f"spark-class not found in the pyspark installation ({script})")
    return script


def master_json(webui_port: int) -> dict | None:
    """The master's state (workers, applications) from its web UI, or None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{webui_port}/json/", timeout=2) as reply:
            return json.loads(reply.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None


def master_alive(webui_port: int) -> bool:
    state = master_json(webui_port)
    return state is not None and state.get("status") == "ALIVE"


def worker_registered(webui_port: int, worker_port: int | None = None) -> bool:
    """True once the master lists an ALIVE worker (the one on `worker_port`, if given)."""
    state = master_json(webui_port) or {}
    return any(
        worker.get("state") == "ALIVE"
        and (worker_port is None or worker.get("port") == worker_port)
        for worker in state.get("workers", [])
    )


def start(server: ServerDir, *, timeout: float = 120.0) -> dict:
    port, webui, worker_port, worker_webui = free_ports(4)
    work_dir = server.data / "work"
    work_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(server.logs),
        "SPARK_WORKER_DIR": str(work_dir),
        "SPARK_DAEMON_MEMORY": "512m",
        "SPARK_DAEMON_JAVA_OPTS": " ".join(quick_jit()),
    }
    # Names the server directory on both command lines (see ServerDir.owned_pid).
    properties = server.path / "spark-standalone.conf"
    properties.write_text(
        f"spark.mqforensics.server {server.path}\n"
        f"spark.local.dir {server.data}\n"
        "spark.master.rest.enabled false\n"
        "spark.shuffle.service.enabled false\n"
    )
    script = str(spark_class())
    master_argv = [
        script, "org.apache.spark.deploy.master.Master",
        "--host", LOOPBACK, "--port", str(port), "--webui-port", str(webui),
        "--properties-file", str(properties),
    ]  # fmt: skip
    master = f"spark://{LOOPBACK}:{port}"
    worker_argv = [
        script, "org.apache.spark.deploy.worker.Worker", master,
        "--host", LOOPBACK, "--port", str(worker_port), "--webui-port", str(worker_webui),
        "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
        "--work-dir", str(work_dir), "--properties-file", str(properties),
    ]  # fmt: skip
    started = time.monotonic()
    pid = launch(
        server,
        master_argv,
        env=env,
        ready=lambda: master_alive(webui),
        timeout=timeout,
        log_name="master.log",
    )
    try:
        worker_pid = launch(
            server,
            worker_argv,
            env=env,
            ready=lambda: worker_registered(webui, worker_port),
            timeout=max(timeout - (time.monotonic() - started), 10.0),
            log_name="worker.log",
            companion="worker",
        )
    except ServiceStartError:
        stop(server, grace=0)  # no master without its worker
        raise
    return {
        "service": "spark-standalone",
        "pid": pid,
        "worker_pid": worker_pid,
        "master": master,
        "host": LOOPBACK,
        "port": port,
        "webui_port": webui,
        "worker_port": worker_port,
        "webui": f"http://{LOOPBACK}:{webui}",
        "worker_webui": f"http://{LOOPBACK}:{worker_webui}",
        "worker_cores": WORKER_CORES,
        "worker_memory": WORKER_MEMORY,
        "work_dir": str(work_dir),
        "startup_seconds": round(time.monotonic() - started, 1),
        "log": str(server.logs / "master.log"),
        "worker_log": str(server.logs / "worker.log"),
    }
