"""A class data sharing archive of the Spark driver JVM, so that every session starts sooner.

A JVM that starts Spark loads, parses and verifies some 11,000 classes from the JDK and Spark's
jars, and as many again by the end of a James audit of the bundled sample: seconds of CPU in
every command, notebook kernel and test. The JDK can map the classes it parsed once from an
archive instead (dynamic class data sharing, JDK 13 and later). ``mqforensics prepare-spark``
(`record`) runs the bundled samples' demos in a JVM that writes such an archive as it exits
(``-XX:ArchiveClassesAtExit``), then moves it into place; `driver_options` gives every later
local driver JVM that archive (``-XX:SharedArchiveFile``).

The archive lives in the user's cache directory, in a folder of its Spark home
(``~/.cache/mqforensics/spark-cds/HOME/``: the JVM uses an archive only with the class path it
was recorded with). It is named by a digest of the JVM (its home and the build of its
``libjvm.so``) and of Spark's jars, so an upgraded JDK or PySpark records an archive of its own,
and by its size: the JVM crashes (SIGBUS) mapping a truncated archive, so a file whose size is
not its name's is never given to it. An archive whose JDK build or class path differs from the
JVM's is ignored by the JVM itself (``-Xshare:auto``): it costs the speed-up, never a failure,
and the JVM's warning goes to the driver's log file (stderr), not to the terminal (stdout, where
the JVM logs by default).

``MQF_SPARK_CDS=0`` starts driver JVMs without the archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.environment import variables_set
from mqforensics.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Set by `record` for the one session it starts: that JVM writes its archive here at exit.
_RECORD_TO = "MQF_SPARK_CDS_RECORD"
_DISABLED = "MQF_SPARK_CDS"
# The JVM's unified log (where class data sharing warns of an archive it cannot use) on stderr,
# which `mqforensics.spark.session` sends to the driver's log file, instead of stdout, the terminal.
LOG_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
# Variables that would start a session elsewhere than in a local driver JVM.
_OTHER_SPARK = ("MQF_SPARK_MASTER", "SPARK_REMOTE")
# How long the recording JVM may take to write its archive after Spark stopped.
_WRITE_SECONDS = 300


def java_home() -> Path | None:
    """The JDK Spark's launcher runs: ``$JAVA_HOME``, else the ``java`` on the PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()).resolve()


def archive_key() -> str | None:
    """A digest of the JVM (its home and the build of its ``libjvm.so``) and of Spark's jars
    (names, sizes and modification times: the JVM refuses an archive whose jars were written
    again since, as a reinstalled virtualenv's are, and would silently run without it); None
    when no JVM is found."""
    home = java_home()
    if home is None:
        return None
    digest = hashlib.sha256()
    jvm = home / "lib" / "server" / "libjvm.so"
    built = jvm.stat() if jvm.is_file() else None
    size, mtime = (built.st_size, built.st_mtime_ns) if built else (0, 0)
    digest.update(f"{home}\0{size}\0{mtime}".encode())
    jars = spark_home() / "jars"
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else []:
        info = jar.stat()
        digest.update(f"\0{jar.name}\0{info.st_size}\0{int(info.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    """The folder of this Spark home's archives: the JVM accepts an archive only for the class
    path it was recorded with, so each installation (each virtualenv) has its own, which holds
    the installation's path in ``spark_home``."""
    from mqforensics.services.cache import cache_dir

    home = str(spark_home())
    folder = cache_dir("spark-cds", hashlib.sha256(home.encode()).hexdigest()[:16])
    marker = folder / "spark_home"
    if not marker.is_file():
        marker.write_text(home + "\n")
    return folder


def find_archive() -> Path | None:
    """The archive of this JVM and this Spark, None if there is none. Its name carries its
    size (``driver-KEY-SIZE.jsa``): a file of another size is not used, since the JVM crashes
    (SIGBUS) mapping a truncated archive rather than ignoring it."""
    key = archive_key()
    if key is None:
        return None
    for path in sorted(archive_dir().glob(f"driver-{key}-*.jsa")):
        size = path.stem.rpartition("-")[2]
        if size.isdigit() and path.stat().st_size == int(size):
            return path
    return None


def driver_options() -> list[str]:
    """The driver JVM's options for the archive: map it when it exists, write it at exit while
    `record` runs, nothing when ``MQF_SPARK_CDS=0`` or there is no archive."""
    recording = os.environ.get(_RECORD_TO)
    if recording:
        return [f"-XX:ArchiveClassesAtExit={recording}", *LOG_TO_STDERR]
    if os.environ.get(_DISABLED) == "0":
        return []
    path = find_archive()
    if path is None:
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xshare:auto", *LOG_TO_STDERR]


def record(
    workload: Callable[[SparkSession], object], start_session: Callable[[], SparkSession]
) -> Path:
    """Run `workload` in a new local Spark session (`start_session()`, which the caller names:
    ``mqforensics.spark.session`` with the data sources it needs) whose JVM writes the classes
    it loaded to an archive as it exits; wait for that JVM, then move the archive into place
    under its final name (`find_archive`), atomically. Must be called before this process
    started Spark."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        raise ConfigError("prepare-spark: Spark already runs in this process")
    key = archive_key()
    if key is None:
        raise ConfigError("prepare-spark: no java found (set JAVA_HOME or put java on the PATH)")
    partial = archive_dir() / f".driver-{key}.{os.getpid()}.part"
    # The driver JVM to record is a local one.
    with variables_set({_RECORD_TO: str(partial), **dict.fromkeys(_OTHER_SPARK)}):
        try:
            spark = start_session()
            # The JVM `launch_gateway` started (py4j's gateway keeps its process).
            process = getattr(spark.sparkContext._gateway, "proc", None)
            if process is None:
                raise ConfigError("prepare-spark: Spark's JVM was not started by this process")
            workload(spark)
            spark.stop()
            # The gateway JVM exits when its stdin closes, and writes the archive as it exits; it
            # exits with an error when it could not write all of it (a full disk).
            process.stdin.close()
            status = process.wait(timeout=_WRITE_SECONDS)
            if status != 0 or not partial.is_file() or partial.stat().st_size == 0:
                raise ConfigError(
                    f"prepare-spark: the JVM exited with status {status} without a class data "
                    f"archive in {partial.parent} (run with --debug to keep Spark's log)"
                )
            partial.chmod(0o444)
            path = archive_dir() / f"driver-{key}-{partial.stat().st_size}.jsa"
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    return path


def remove_others(keep: Path) -> list[Path]:
    """Delete this Spark home's archives but `keep` (another JDK's or Spark's), what failed
    recordings left, and the archives of Spark homes that no longer exist (a removed
    virtualenv); those removed."""
    removed = []
    for other in [*keep.parent.glob("driver-*.jsa"), *keep.parent.glob(".driver-*.part")]:
        if other != keep:
            other.unlink(missing_ok=True)
            removed.append(other)
    for folder in keep.parent.parent.iterdir():
        marker = folder / "spark_home"
        if folder == keep.parent or not marker.is_file():
            continue
        if not Path(marker.read_text().strip()).is_dir():
            removed += sorted(folder.glob("driver-*.jsa"))
            shutil.rmtree(folder, ignore_errors=True)
    return removed
