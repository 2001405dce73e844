"""DataStax Bulk Loader (DSBulk) 1.10 from Maven Central jars, to unload tables the way operators
do (the tests read the James snapshots it writes; see mqforensics/systems/james/dsbulk.py)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services import maven
from mqforensics.services.cassandra import java_binary
from mqforensics.services.process import quick_jit

VERSION = os.environ.get("MQF_DSBULK_VERSION", "1.10.0")
MAIN = "com.datastax.oss.dsbulk.runner.DataStaxBulkLoader"


def fetch_runtime(version: str = VERSION) -> Path:
    """The directory of DSBulk `version`'s jars, downloading them on first use."""
    return maven.fetch_jars(
        f"dsbulk-{version}",
        "dsbulk-runtime.pom.xml",
        {"dsbulk.version": version},
        "dsbulk-runner-*.jar",
        f"DSBulk {version}",
    )


def unload(
    cassandra: dict,
    keyspace: str,
    table: str,
    url: Path,
    *options: str,
    query: str | None = None,
    timeout: float = 300,
) -> None:
    """``dsbulk unload -k keyspace -t table -url url [options]`` against `cassandra` (the
    harness's connection info), or ``-query query`` instead of ``-t table``; a
    ServiceStartError with DSBulk's last lines if it fails.
    DSBulk's own operation logs go to a temporary directory, removed afterwards."""
    lib = fetch_runtime()
    with tempfile.TemporaryDirectory(prefix="dsbulk-logs-") as logs:
        command = [
            # A short run: the quick JIT and the serial collector start it fastest.
            java_binary(), *quick_jit(), "-XX:+UseSerialGC", "-cp", f"{lib}/*",
            MAIN, "unload",
            "-h", str(cassandra["host"]), "-port", str(cassandra["port"]),
            "-u", str(cassandra["username"]), "-p", str(cassandra["password"]),
            "-k", keyspace, *(("-query", query) if query else ("-t", table)),
            "-url", str(url), "-logDir", logs, *options,
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-10:])
        raise ServiceStartError(f"dsbulk unload of {keyspace}.{table} failed:\n{tail}")
