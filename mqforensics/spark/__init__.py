"""One way to get a SparkSession, bound to loopback and with the project's data sources.

Local mode (``local[*]``) is the default. ``SPARK_REMOTE`` (e.g. ``sc://host:15002``) selects
Spark Connect; ``MQF_SPARK_MASTER`` (e.g. ``spark://host:7077``) selects a cluster master. Either
is refused when it holds a credential (a Spark Connect token goes in
``SPARK_CONNECT_AUTHENTICATE_TOKEN``), before Spark starts.

Spark's own output never reaches the terminal (docs/errors.md): the JVM this module launches
gets a log file as its stderr (the driver's log4j log, executor output, the Python workers'
tracebacks all go there), and so does py4j's Python logger. The file is ``MQF_SPARK_LOG`` when
set, else a new ``mqforensics-spark-*.log`` in the system temp directory (`log_file`), which
the CLI removes when a command ends, failed or not, unless ``--debug`` asked to keep it
(`discard_log`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.spark import archive, daemon

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import pyarrow
    from pyspark.sql import DataFrame, SparkSession

LOOPBACK = "127.0.0.1"
# Adaptive execution joins by hashing instead of sorting when every shuffled partition of a join
# turns out at most this large (measured after the shuffle, so a large input still sorts and
# spills): the audits' joins of view rows with markers need no order (bench/). A hash join
# cannot spill, so the limit follows the memory a task gets (`hash_join_limit`).
_HASH_JOIN_LIMIT = "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold"
HASH_JOIN_LIMIT = 256 * 1024**2
# Spark hashes only when its target partition size (64 MiB by default) is within that limit
# too (`DynamicJoinSelection.preferShuffledHashJoin`), so the target is lowered to the limit.
_PARTITION_TARGET = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
# Spark's memory a task may use for execution: (heap - 300 MiB reserved) x spark.memory.fraction
# (UnifiedMemoryManager), shared by the tasks running at once.
_RESERVED_MEMORY = 300 * 1024**2
_MEMORY_FRACTION = 0.6
# A sixteenth of a task's share (measured on the 10M-entry James audit, two cores: a 23 MB
# partition of markers peaked at 68 MB hashed with a 3 GiB heap, yet failed to hash with 1 GiB,
# about 190 MB a task, while 12 MB partitions hashed there; the kept frames and the stage's
# other operators share that memory).
_HASH_MAP_SHARE = 16
# A frame sent to every task is built whole on the driver and held whole by each executor, beside
# what its tasks use: at most this share of the memory Spark manages there (`broadcast_limit`).
_BROADCAST_SHARE = 2
# Cores per executor assumed when a cluster's executors do not say (more is more conservative).
_CLUSTER_CORES = 8
# `local_frame` holds at most this many rows in the plan; more are a distributed collection
# (each value is bound through the JVM gateway: a few rows are quicker, hundreds slower).
LOCAL_ROWS = 16


# The file the JVM's stderr and py4j's log go to, once this process launched a JVM.
_LOG_FILE: Path | None = None


def log_file() -> Path | None:
    """Where this process's Spark log goes (None until `session` launched a local JVM)."""
    return _LOG_FILE


def discard_log() -> None:
    """Remove this process's Spark log (a command run without ``--debug`` keeps nothing in the
    temp directory, whether it failed or not), unless it is the ``MQF_SPARK_LOG`` the user
    chose. The JVM may go on writing to it until it exits."""
    if _LOG_FILE is not None and not os.environ.get("MQF_SPARK_LOG"):
        _LOG_FILE.unlink(missing_ok=True)


def _new_log_file() -> Path:
    """``MQF_SPARK_LOG``, else a new file of the system temp directory (owner-only)."""
    chosen = os.environ.get("MQF_SPARK_LOG")
    if chosen:
        path = Path(chosen)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        return path
    handle, name = tempfile.mkstemp(prefix="mqforensics-spark-", suffix=".log")
    os.close(handle)
    return Path(name)


@contextlib.contextmanager
def _stderr_into(path: Path) -> Iterator[None]:
    """File descriptor 2 is `path` inside the block: a JVM launched within keeps it as its
    stderr for good (and the Python workers it forks too); this process's own stderr is given
    back after. Where fd 2 cannot be duplicated, nothing is redirected."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _log_py4j_to(path: Path) -> None:
    """py4j's Python logger writes to `path` only (never to stderr through logging's last
    resort handler)."""
    logger = logging.getLogger("py4j")
    if not any(getattr(h, "baseFilename", None) == str(path) for h in logger.handlers):
        logger.addHandler(logging.FileHandler(path, encoding="utf-8"))
    logger.propagate = False


@contextlib.contextmanager
def _spark_output_logged() -> Iterator[None]:
    """Around the launch of the JVM: its output (and py4j's) into `log_file`, the first time
    only (a session that exists is returned as it is)."""
    global _LOG_FILE
    if _LOG_FILE is not None:
        yield
        return
    path = _LOG_FILE = _new_log_file()
    _log_py4j_to(path)
    with _stderr_into(path):
        yield


def _prepare_environment() -> None:
    # Spark otherwise binds to the first non-loopback interface it finds.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Python workers must run this interpreter: a system python3 lacks pyarrow and this package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session(
    app_name: str = "mqforensics", *, ui: bool = True, data_sources: Sequence[type] = ()
) -> SparkSession:
    """Return the active SparkSession, creating it if needed, with the shared data sources and
    `data_sources` (the systems', which the caller names: `systems.data_sources()`) registered.

    Timestamps are handled in UTC throughout (``spark.sql.session.timeZone=UTC``): queue state
    from several servers is compared on one clock.
    """
    _prepare_environment()
    from pyspark.sql import SparkSession

    from mqforensics.credentials import SPARK_CONNECT_TOKEN, refuse_in_variable

    remote = os.environ.get("SPARK_REMOTE")
    refuse_in_variable("SPARK_REMOTE", remote, SPARK_CONNECT_TOKEN)
    refuse_in_variable("MQF_SPARK_MASTER", os.environ.get("MQF_SPARK_MASTER"))
    if remote:
        spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    else:
        master = _master()
        log_config = Path(__file__).parent.with_name("log4j2.properties")
        builder = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
            .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.python.filterPushdown.enabled", "true")
            .config("spark.ui.enabled", "true" if ui else "false")
            .config("spark.ui.showConsoleProgress", "false")
            # Audits shuffle small frames; 200 partitions would mostly schedule empty tasks.
            .config("spark.sql.shuffle.partitions", os.environ.get("MQF_SHUFFLE_PARTITIONS", "8"))
            # Generated classes named without their stage's id, so the same code generated for
            # two stages is compiled once (an audit generates about 150; bench/: 1M-row James
            # audits about 0.5 s faster).
            .config("spark.sql.codegen.useIdInClassName", "false")
            # PySpark records the Python call site of every DataFrame call in the JVM, for its
            # error messages: eight py4j round trips per call. Without them the James checks'
            # tests make 46,000 py4j calls instead of 94,000 and take 20% less CPU; our errors
            # name the input instead.
            .config(_CALL_SITES, _call_sites())
            .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
            # Workers import the installed PySpark, not Spark's zips: each zip costs every
            # Python task a re-read of its directory (mqforensics/spark/daemon.py).
            .config("spark.python.daemon.module", daemon.__name__)
            # A result this process collects is served on a local socket that waits 15 s for
            # it to connect; on a host loaded enough to stall it longer, the socket is gone and
            # collect() fails with "Connection reset by peer" (seen under `make test`).
            .config("spark.python.authenticate.socketTimeout", "120s")
            .config("spark.driver.extraJavaOptions", " ".join(_driver_java_options(log_config)))
        )
        if master.startswith("local"):
            # Files split into at least 4 tasks per core: tasks of even size keep both cores
            # busy to the end of a scan (a table in 7 files was read by 3 tasks on 2 cores).
            builder = builder.config(
                "spark.sql.files.minPartitionNum", str(4 * (os.cpu_count() or 1))
            )
        # Its data source planners import the installed PySpark too (mqforensics/spark/daemon.py).
        with _spark_output_logged(), daemon.worker_site_on_path():
            spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("MQF_SPARK_LOG_LEVEL", "ERROR"))
    # Spark Connect logs each operation's plan, data source options included, as text.
    _redact_secret_options(spark)
    limit = hash_join_limit(memory_settings(spark))
    spark.conf.set(_HASH_JOIN_LIMIT, str(limit))
    target = lowered_partition_target(spark.conf.get(_PARTITION_TARGET, None), limit)
    if target is not None:
        spark.conf.set(_PARTITION_TARGET, str(target))
    register_data_sources(spark, data_sources)
    return spark


_CALL_SITES = "spark.python.sql.dataFrameDebugging.enabled"


def _call_sites() -> str:
    """``true`` when ``MQF_SPARK_CALL_SITES=1`` asks for PySpark's DataFrame call sites in Spark's
    error messages (analysts debugging their own notebook code), else ``false``."""
    return "true" if os.environ.get("MQF_SPARK_CALL_SITES") == "1" else "false"


_MEMORY_SETTINGS = (
    "spark.master", "spark.driver.memory", "spark.executor.memory", "spark.executor.cores",
    "spark.memory.fraction",
)  # fmt: skip


def memory_settings(spark: SparkSession) -> dict[str, str | None]:
    """The session's `_MEMORY_SETTINGS` (None where unset), what `hash_join_limit` and
    `broadcast_limit` are computed from."""
    return {key: spark.conf.get(key, None) for key in _MEMORY_SETTINGS}


def broadcast_limit(settings: Mapping[str, str | None]) -> int:
    """The largest frame (bytes, as Spark's hash relation of it) to send to every task: a
    `_BROADCAST_SHARE` of the memory Spark manages, (heap - 300 MiB) x
    ``spark.memory.fraction``, in the driver, which builds it, and, on a cluster, in an
    executor, which holds it. `settings` as for `hash_join_limit`. A 3 GiB local heap sends up
    to 831 MiB (a 100M-entry James audit's 4.3M live keys took 576 MiB, and marking the view
    against them took 85 s where shuffling the view took 223 s); Spark's default 1 GiB heap
    217 MiB."""
    master = settings.get("spark.master") or "local[*]"
    heaps = [_size(settings.get("spark.driver.memory"))]
    if not master.startswith("local"):
        heaps.append(_size(settings.get("spark.executor.memory")))
    fraction = float(settings.get("spark.memory.fraction") or _MEMORY_FRACTION)
    managed = min(max(0, heap - _RESERVED_MEMORY) for heap in heaps) * fraction
    return int(managed / _BROADCAST_SHARE)


def shuffle_partitions(spark: SparkSession, shuffled_bytes: int) -> int:
    """Partitions for a shuffle of about `shuffled_bytes`: the session's
    ``spark.sql.shuffle.partitions`` (8 here: what most audits need), or more when that many
    would be larger than the partition target (``spark.sql.adaptive.advisoryPartitionSizeInBytes``,
    at most the hash-join limit), which adaptive execution cannot split: 8 partitions of a
    100M-entry James audit's keys were sorted and spilled 5.4 GB, where partitions within the
    target are hashed."""
    default = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    target = max(1, _size(spark.conf.get(_PARTITION_TARGET, None) or "64m"))
    return max(default, -(-shuffled_bytes // target))


def hash_join_limit(settings: Mapping[str, str | None]) -> int:
    """The largest shuffled partition (bytes) a join may hash rather than sort: a sixteenth of
    the execution memory one task gets, at most `HASH_JOIN_LIMIT`. `settings` are the session's
    `_MEMORY_SETTINGS` (None when unset: Spark's defaults, a 1 GiB heap). In local mode every
    task runs in the driver's heap, one per core; a cluster's executors are asked
    ``spark.executor.cores`` (`_CLUSTER_CORES` when unset). With a 1 GiB heap on two cores a
    10M-entry James audit's markers (23 MB partitions) are sorted, as hashing them failed
    there ("not enough memory to build hash map"); with 3 GiB they are hashed."""
    master = settings.get("spark.master") or "local[*]"
    local = master.startswith("local")
    heap = _size(settings.get("spark.driver.memory" if local else "spark.executor.memory"))
    cores = _local_cores(master) if local else int(settings.get("spark.executor.cores") or 0)
    fraction = float(settings.get("spark.memory.fraction") or _MEMORY_FRACTION)
    per_task = max(0, heap - _RESERVED_MEMORY) * fraction / max(1, cores or _CLUSTER_CORES)
    return min(HASH_JOIN_LIMIT, int(per_task / _HASH_MAP_SHARE))


def lowered_partition_target(current: str | None, limit: int) -> int | None:
    """The partition target (bytes) a session with hash-join `limit` gets instead of `current`
    (its ``spark.sql.adaptive.advisoryPartitionSizeInBytes``, 64 MiB when unset): the limit when
    the target is above it; None to leave it, also when nothing can be hashed (a limit of 0:
    Spark rejects a target of 0)."""
    if 0 < limit < _size(current or "64m"):
        return limit
    return None


def _size(text: str | None) -> int:
    """Bytes of a JVM memory setting (``3g``, ``512m``, ``1024k``, plain bytes); 1 GiB unset."""
    value = (text or "1g").strip().lower().removesuffix("b")
    units = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)


def _local_cores(master: str) -> int:
    """Tasks a local master runs at once: ``local`` 1, ``local[N]`` or ``local[N,F]`` N."""
    inside = master.partition("[")[2].rstrip("]").split(",")[0]
    if not inside:
        return 1
    if inside == "*":
        return os.cpu_count() or 1
    return int(inside)


def _master() -> str:
    return os.environ.get("MQF_SPARK_MASTER", "local[*]")


def _driver_java_options(log_config: Path) -> list[str]:
    options = [f"-Dlog4j2.configurationFile={log_config}"]
    if _master().startswith("local"):
        # The driver JVM runs every task in local mode: a throughput collector spends less of
        # two cores on garbage collection than the default G1 (bench/: 10% faster audits, the
        # bare scan unchanged).
        options.append("-XX:+UseParallelGC")
    # Classes mapped from the archive `mqforensics prepare-spark` recorded, if there is one.
    options += archive.driver_options()
    return options


def _redact_secret_options(spark: SparkSession) -> None:
    """Make the session redact data source options named like secrets wherever it shows a plan
    as text (Spark Connect's operation events and event log: `credentials.OPTION_REDACTION`)."""
    from mqforensics.credentials import SPARK_STRING_REDACTION, redaction_pattern

    try:
        current = spark.conf.get(SPARK_STRING_REDACTION, None)
    except Exception:  # Spark Connect: an unset setting without a default is an error
        current = None
    spark.conf.set(SPARK_STRING_REDACTION, redaction_pattern(current))


def describe(spark: SparkSession) -> str:
    """Where `spark` runs: its master, or the Spark Connect URL (no SparkContext there)."""
    from mqforensics.credentials import mask_secrets

    remote = os.environ.get("SPARK_REMOTE")
    if remote and type(spark).__module__.startswith("pyspark.sql.connect"):
        return mask_secrets(f"Spark Connect {remote}")
    return mask_secrets(str(spark.sparkContext.master))


def register_data_sources(spark: SparkSession, data_sources: Sequence[type] = ()) -> None:
    """Register the shared Python data sources and `data_sources` on `spark` (registration is
    per session)."""
    from mqforensics.sources.blob_inventory import InventorySource
    from mqforensics.sources.blobstore import BlobListingSource
    from mqforensics.sources.cassandra_scan import CassandraScanSource

    sources: list[type] = [BlobListingSource, InventorySource, CassandraScanSource]
    for source in [*sources, *data_sources]:
        spark.dataSource.register(source)


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str) -> DataFrame:
    """A small frame of `rows` with the DDL `schema`, held in the query plan (a local relation).

    Reading it runs no Spark job, where a ``createDataFrame`` of Python rows is a distributed
    collection read by tasks: worth it for the handful of rows of a queue's starts, a
    configuration history or the findings made on the driver. The values are bound as
    parameters of a ``VALUES`` list (never spliced into SQL text), then cast to the schema.
    More than `LOCAL_ROWS` rows are a ``createDataFrame`` all the same.
    """
    from pyspark.sql.types import DataType, StructType

    struct = DataType.fromDDL(schema)
    if not isinstance(struct, StructType) or not struct.fields:
        raise ValueError(f"not a schema of named columns: {schema!r}")
    if len(rows) > LOCAL_ROWS:
        return spark.createDataFrame(list(rows), schema)
    width = len(struct.fields)
    for row in rows:
        if len(row) != width:
            raise ValueError(f"row of {len(row)} values for {width} columns: {row!r}")
    values = [list(row) for row in rows] or [[None] * width]
    marks = ", ".join("(" + ", ".join("?" * width) + ")" for _ in values)
    columns = ", ".join(
        f"CAST(col{i} AS {field.dataType.simpleString()}) AS `{field.name}`"
        for i, field in enumerate(struct.fields, 1)
    )
    frame = spark.sql(
        f"SELECT {columns} FROM VALUES {marks}", args=[v for row in values for v in row]
    )
    return frame if rows else frame.where("false")


def computed(frame: DataFrame) -> DataFrame:
    """`frame` computed now (kept on the executors); a toolkit error raised in an executor is
    re-raised here as its own type (an `InputError` naming a file, not a Java traceback)."""
    with typed_errors():
        return frame.localCheckpoint(eager=True)


def collected(frame: DataFrame) -> pyarrow.Table:
    """`frame`'s rows on the driver, as Arrow, by one job; errors typed as by `computed`."""
    with typed_errors():
        return frame.toArrow()


@contextlib.contextmanager
def typed_errors() -> Iterator[None]:
    """A toolkit error raised in an executor by a job run within, re-raised as its own type; a
    file Spark could not read, as an InputError naming it (`errors.translated`)."""
    from mqforensics import errors

    with errors.translated():
        yield
