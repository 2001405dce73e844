"""A Spark Connect server from the installed pyspark, for testing `SPARK_REMOTE` end to end.

Runs ``org.apache.spark.sql.connect.service.SparkConnectServer`` (the jar ships in pyspark's
``jars/``) in local mode, gRPC bound to 127.0.0.1. Its Python workers run this interpreter, so
the project's Python data sources work through it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services.process import (
    LOOPBACK,
    ServerDir,
    free_ports,
    launch,
    port_open,
    quick_jit,
)
from mqforensics.spark import daemon


def spark_submit() -> Path:
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not script.exists():
        raise ServiceStartError(f"spark-submit not found in the pyspark installation ({script})")
    return script


def start(server: ServerDir, *, timeout: float = 120.0) -> dict:
    (port,) = free_ports(1)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(server.logs),
        # Its data source planners import the installed PySpark too (mqforensics/spark/daemon.py).
        "PYTHONPATH": daemon.worker_python_path(os.environ.get("PYTHONPATH")),
    }
    confs = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": str(server.data),
        "spark.driver.defaultJavaOptions": " ".join(quick_jit()),
        # Its Python workers import the installed PySpark (mqforensics/spark/daemon.py).
        "spark.python.daemon.module": daemon.__name__,
        # Names the server directory on the command line (see ServerDir.owned_pid).
        "spark.mqforensics.server": str(server.path),
    }
    argv = [
        str(spark_submit()),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        *[item for key, value in confs.items() for item in ("--conf", f"{key}={value}")],
        "spark-internal",
    ]
    started = time.monotonic()
    pid = launch(
        server,
        argv,
        env=env,
        ready=lambda: port_open(port),
        timeout=timeout,
        log_name="connect.log",
    )
    return {
        "service": "spark-connect",
        "pid": pid,
        "remote": f"sc://{LOOPBACK}:{port}",
        "startup_seconds": round(time.monotonic() - started, 1),
        "log": str(server.logs / "connect.log"),
    }
