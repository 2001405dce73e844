"""A real single-node Apache Cassandra 5.0 for tests and local work, started from Maven jars.

No tarball and no Docker: `fetch_runtime` resolves ``org.apache.cassandra:cassandra-all`` and its
runtime dependencies from Maven Central into the user's cache once, and `start` runs
``org.apache.cassandra.service.CassandraDaemon`` on 127.0.0.1 with the Java 17 flags of
Cassandra's own ``conf/jvm17-server.options`` and the jamm agent (without them the JVM dies with
IllegalAccessException during start-up).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services import maven
from mqforensics.services.process import (
    LOOPBACK,
    ServerDir,
    free_ports,
    launch,
    port_open,
    quick_jit,
)

VERSION = os.environ.get("MQF_CASSANDRA_VERSION", "5.0.9")
# Cassandra's built-in superuser; PasswordAuthenticator is on so that credential errors are real.
USERNAME = "cassandra"
PASSWORD = "cassandra"

# conf/jvm17-server.options of Cassandra 5.0 (the module flags are required on Java 17).
JAVA17_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:MaxGCPauseMillis=300",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    *[
        item
        for module in (
            "java.base/jdk.internal.misc",
            "java.management.rmi/com.sun.jmx.remote.internal.rmi",
            "java.rmi/sun.rmi.registry",
            "java.rmi/sun.rmi.server",
            "java.sql/java.sql",
            "java.base/java.lang.ref",
            "jdk.unsupported/sun.misc",
            "jdk.compiler/com.sun.tools.javac.file",
            "jdk.attach/sun.tools.attach",
            "java.management/com.sun.jmx.remote.security",
        )
        for item in ("--add-exports", f"{module}=ALL-UNNAMED")
    ],
    *[
        item
        for module in (
            "java.base/java.lang.module",
            "java.base/jdk.internal.loader",
            "java.base/jdk.internal.ref",
            "java.base/jdk.internal.reflect",
            "java.base/jdk.internal.math",
            "java.base/jdk.internal.module",
            "java.base/jdk.internal.util.jar",
            "jdk.management/com.sun.management.internal",
            "java.base/sun.nio.ch",
            "java.base/java.io",
            "java.base/java.lang.reflect",
            "jdk.compiler/com.sun.tools.javac",
            "java.base/java.lang",
            "java.base/java.util",
            "java.base/java.nio",
        )
        for item in ("--add-opens", f"{module}=ALL-UNNAMED")
    ],
]


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise ServiceStartError("Cassandra needs Java 17: no `java` on PATH and no JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    first = out.splitlines()[0] if out else ""
    if '"17.' not in first and '"11.' not in first:
        raise ServiceStartError(f"Cassandra {VERSION} runs on Java 11 or 17, found: {first}")
    return java


def fetch_runtime(version: str = VERSION) -> Path:
    """The directory of Cassandra `version`'s jars, downloading them on first use."""
    return maven.fetch_jars(
        f"cassandra-{version}",
        "cassandra-runtime.pom.xml",
        {"cassandra.version": version},
        "cassandra-all-*.jar",
        f"Cassandra {version}",
    )


def _yaml(server: ServerDir, native_port: int, storage_port: int) -> str:
    data = server.data
    return f"""\
cluster_name: mqforensics-test
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
num_tokens: 4
listen_address: {LOOPBACK}
rpc_address: {LOOPBACK}
storage_port: {storage_port}
native_transport_port: {native_port}
start_native_transport: true
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{LOOPBACK}:{storage_port}"
authenticator: PasswordAuthenticator
authorizer: AllowAllAuthorizer
data_file_directories: [{data}/data]
commitlog_directory: {data}/commitlog
saved_caches_directory: {data}/saved_caches
hints_directory: {data}/hints
cdc_raw_directory: {data}/cdc_raw
cdc_enabled: false
commitlog_sync: periodic
commitlog_sync_period: 10s
commitlog_segment_size: 8MiB
auto_snapshot: false
incremental_backups: false
memtable_allocation_type: heap_buffers
disk_access_mode: standard
"""


_LOGBACK = """\
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def cql_ready(port: int, username: str = USERNAME, password: str = PASSWORD) -> bool:
    """True once an authenticated CQL query answers on 127.0.0.1:`port`."""
    if not port_open(port):
        return False
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    from mqforensics.sources.cassandra_connection import close_cluster

    cluster = Cluster(
        [LOOPBACK],
        port=port,
        auth_provider=PlainTextAuthProvider(username, password),
        connect_timeout=3,
        control_connection_timeout=3,
        protocol_version=5,
    )
    try:
        session = cluster.connect()
        session.execute("SELECT release_version FROM system.local", timeout=5)
        return True
    except Exception:  # not up yet: any driver error means "try again"
        return False
    finally:
        close_cluster(cluster)


def start(
    server: ServerDir,
    *,
    heap: str | None = None,
    timeout: float = 180.0,
    settings: str = "",
    default_jit: bool = False,
) -> dict:
    """Start Cassandra in `server` (after `reap` and `reset`) and return its connection info.
    `settings`: more cassandra.yaml lines (e.g. ``storage_compatibility_mode: NONE``);
    `default_jit`: the JDK's default JIT, not the harness's (`process.quick_jit`)."""
    java = java_binary()
    lib = fetch_runtime()
    native_port, storage_port, jmx_port = free_ports(3)
    config = server.path / "cassandra.yaml"
    config.write_text(_yaml(server, native_port, storage_port) + settings)
    logback = server.path / "logback.xml"
    logback.write_text(_LOGBACK.format(log=server.logs / "system.log"))
    heap = heap or os.environ.get("MQF_CASSANDRA_HEAP", "1G")
    jamm = next(lib.glob("jamm-*.jar"))
    argv = [
        java,
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-Xss512k",
        *JAVA17_FLAGS,
        *([] if default_jit else quick_jit()),
        f"-javaagent:{jamm}",
        f"-Dcassandra.config=file://{config}",
        f"-Dlogback.configurationFile={logback}",
        f"-Dcassandra.logdir={server.logs}",
        f"-Dcassandra.storagedir={server.data}",
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.jmx.local.port={jmx_port}",
        # A single node has no peers to wait for: skip gossip settling and ring delay, and create
        # the default superuser at once instead of after 10 s.
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        "-Dcassandra.ring_delay_ms=0",
        "-Dcassandra.superuser_setup_delay_ms=0",
        f"-Dcassandra.available_processors={os.cpu_count() or 2}",
        f"-Dmqforensics.server={server.path}",
        "-cp",
        f"{server.path}:{lib}/*",
        "org.apache.cassandra.service.CassandraDaemon",
    ]
    started = time.monotonic()
    pid = launch(server, argv, ready=lambda: cql_ready(native_port), timeout=timeout)
    info = {
        "service": "cassandra",
        "version": VERSION,
        "pid": pid,
        "host": LOOPBACK,
        "port": native_port,
        "storage_port": storage_port,
        "jmx_port": jmx_port,
        "username": USERNAME,
        "password": PASSWORD,
        "startup_seconds": round(time.monotonic() - started, 1),
        "log": str(server.logs / "system.log"),
    }
    return info


def nodetool(info: dict, *args: str, timeout: float = 300.0) -> str:
    """Run ``nodetool`` (Cassandra's own, from the cached jars) against the node `info`
    describes (`start`'s result) over its local JMX port; its output, or a ServiceStartError
    with its last lines."""
    result = _tool(
        "org.apache.cassandra.tools.NodeTool",
        ["-h", LOOPBACK, "-p", str(info["jmx_port"]), *args],
        [f"-Dcassandra.logdir={Path(info['log']).parent}"],
        f"nodetool {args[0] if args else ''}",
        timeout,
    )
    return result.stdout + result.stderr


def _tool(
    main_class: str, args: list[str], properties: list[str], what: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """One of Cassandra's own tools (`main_class`, from the cached jars) run with `args`; its
    result, or a ServiceStartError naming `what` with the output's last lines."""
    lib = fetch_runtime()
    command = [java_binary(), *JAVA17_FLAGS, *quick_jit(), *properties, "-cp", f"{lib}/*",
               main_class, *args]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-8:])
        raise ServiceStartError(f"{what} failed:\n{tail}")
    return result


def flush(info: dict, keyspace: str, *tables: str) -> None:
    """``nodetool flush KEYSPACE [TABLE...]``: the memtables of `tables` (default every table of
    `keyspace`) written to SSTables, so that their files hold every write acknowledged so far."""
    nodetool(info, "flush", keyspace, *tables)


# A line of sstablemetadata's "Estimated tombstone drop times" histogram:
# "   1795843380 (11/28/2026 05:23:00) |     2 (100) ###".
_DROP_TIME_LINE = re.compile(r"^\s*\d+.*\|\s*(\d+)\s")


def _server_path(info: dict) -> Path:
    """The server directory of `info` (`start` writes the log into its ``logs``)."""
    return Path(info["log"]).parent.parent


def table_directory(info: dict, keyspace: str, table: str) -> Path:
    """The live data directory ``<data>/<keyspace>/<table>-<id>`` of `table`, from its id in
    system_schema (a dropped and recreated table leaves a directory of the same name)."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    from mqforensics.sources.cassandra_connection import close_cluster

    cluster = Cluster(
        [str(info["host"])], port=int(info["port"]), protocol_version=5,
        auth_provider=PlainTextAuthProvider(str(info["username"]), str(info["password"])),
    )  # fmt: skip
    try:
        row = (
            cluster.connect()
            .execute(
                "SELECT id FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                (keyspace, table),
            )
            .one()
        )
    finally:
        close_cluster(cluster)
    if row is None:
        raise ServiceStartError(f"no table {keyspace}.{table}")
    config = (_server_path(info) / "cassandra.yaml").read_text()
    data = re.search(r"^data_file_directories: \[(.+)\]$", config, re.MULTILINE)
    if data is None:
        raise ServiceStartError(f"no data_file_directories in {_server_path(info)}/cassandra.yaml")
    return Path(data.group(1)) / keyspace / f"{table}-{row.id.hex}"


def sstable_metadata(info: dict, keyspace: str, table: str, *, scan: bool = False) -> list[dict]:
    """Cassandra's own ``sstablemetadata`` (``SSTableMetadataViewer`` of the cached jars) of
    every live SSTable of `table`, one JVM for all: per SSTable, ``file``,
    ``tombstone_drop_times`` (the sum of its "Estimated tombstone drop times" histogram: one
    per partition deletion, row deletion, range tombstone or deleted cell, the statistics
    Cassandra wrote with the SSTable) and, with `scan` (a full read of the SSTable), its
    ``partitions``, ``rows`` and ``tombstones`` lines (the scan counts partition deletions,
    range tombstone markers and deleted cells, not row deletions)."""
    directory = table_directory(info, keyspace, table)
    files = sorted(str(p) for p in directory.glob("*-Data.db"))
    if not files:
        return []
    server = _server_path(info)
    quiet = server / "logback-tools.xml"
    if not quiet.exists():
        quiet.write_text('<configuration><root level="OFF"/></configuration>\n')
    properties = [
        f"-Dcassandra.config=file://{server / 'cassandra.yaml'}",
        f"-Dcassandra.logdir={server / 'logs'}", f"-Dlogback.configurationFile={quiet}",
    ]  # fmt: skip
    result = _tool(
        "org.apache.cassandra.tools.SSTableMetadataViewer", [*(["--scan"] if scan else []), *files],
        properties, f"sstablemetadata {keyspace}.{table}", 300,
    )  # fmt: skip
    return _parse_sstable_metadata(result.stdout)


def _parse_sstable_metadata(output: str) -> list[dict]:
    found: list[dict] = []
    in_histogram = False
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("SSTable: "):
            found.append({"file": text.removeprefix("SSTable: "), "tombstone_drop_times": 0})
            in_histogram = False
        elif not found:
            continue
        elif text.startswith("Estimated tombstone drop times"):
            in_histogram = True
        elif in_histogram:
            match = _DROP_TIME_LINE.match(line)
            if match:
                found[-1]["tombstone_drop_times"] += int(match.group(1))
            elif not text.startswith("Drop Time"):
                in_histogram = False
        else:
            for name in ("Partitions", "Rows", "Tombstones"):
                if text.startswith(f"{name}: "):
                    found[-1][name.lower()] = int(text.split(": ", 1)[1])
    return found


def sstable_tombstones(info: dict, keyspace: str, table: str) -> int:
    """Tombstones in the live SSTables of `table` as Cassandra reports them: the sum of every
    SSTable's "Estimated tombstone drop times" histogram (`sstable_metadata`). Flush first
    (`flush`): a memtable's tombstones are in no SSTable yet; and keep compaction off the table
    (``nodetool disableautocompaction``) while comparing, since compaction merges and may purge
    them."""
    return sum(int(s["tombstone_drop_times"]) for s in sstable_metadata(info, keyspace, table))
