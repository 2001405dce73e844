"""The Python worker daemon of our Spark sessions: PySpark's own, minus the archived copies of
PySpark on its import path when the same PySpark is installed.

Spark starts its Python workers with ``PYTHONPATH`` holding ``$SPARK_HOME/python/lib/pyspark.zip``,
the py4j zip and the spark-core jar. Before every task, a worker calls
``importlib.invalidate_caches()``, and each zip importer then reads its archive's directory again:
one per package of ``pyspark.zip`` plus the 15 MB jar, about 0.25 s of CPU per task on Python
3.11 (a 16-way scan of a small Cassandra table spent 2.4 of its 2.8 s there), and modules
imported from a zip are compiled from source in every new worker. When the interpreter has the
same PySpark installed (the package this one depends on), these archives are dropped from the
path before PySpark is imported, and the daemon runs as it would have. Otherwise (another
PySpark version, or none installed) nothing changes.

Used through ``spark.python.daemon.module`` (`mqforensics.spark.session`); the worker module
Spark names (``pyspark.worker``...) is passed on unchanged.

Spark starts the driver's data source planners (``pyspark.sql.worker.create_data_source``,
``plan_data_source_read``, ``data_source_pushdown_filters``, ``lookup_data_sources``) with
PySpark's own daemon, whatever that setting says: four daemons per session, each compiling
PySpark from the zip as it starts (0.8 CPU-s, 0.25 from the installed copy). A local driver JVM
therefore starts with `WORKER_SITE` on its ``PYTHONPATH`` (`worker_site_on_path`), which Spark
appends to every Python worker's: its ``sitecustomize`` drops the archives there, before any
worker imports PySpark.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import zipfile

# The archives Spark puts on a worker's path (PythonUtils.sparkPythonPath).
_SPARK_ARCHIVES = ("pyspark.zip", "py4j-", "spark-core_")


def _is_spark_archive(entry: str) -> bool:
    name = os.path.basename(entry)
    return name.startswith(_SPARK_ARCHIVES) and name.endswith((".zip", ".jar"))


def _version_in(archive: str) -> str | None:
    try:
        with zipfile.ZipFile(archive) as handle:
            return handle.read("pyspark/version.py").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_version(path: list[str]) -> str | None:
    for entry in path:
        candidate = os.path.join(entry or ".", "pyspark", "version.py")
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                return handle.read()
    return None


def unarchived_path(path: list[str]) -> list[str]:
    """`path` without Spark's archives, if the PySpark they hold is also installed on the rest of
    it (same ``pyspark/version.py``); else `path` as it is."""
    archives = [entry for entry in path if _is_spark_archive(entry)]
    rest = [entry for entry in path if entry not in archives]
    zipped = next((v for v in map(_version_in, archives) if v is not None), None)
    if zipped is None or zipped != _installed_version(rest):
        return path
    return rest


# The folder of the ``sitecustomize`` that runs `drop_spark_archives` in every Python worker of
# a local driver JVM (data source planners included).
WORKER_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_site")


def drop_spark_archives() -> None:
    """Take Spark's archives off this interpreter's `sys.path` (`unarchived_path`)."""
    kept = unarchived_path(sys.path)
    for dropped in set(sys.path) - set(kept):  # finding modules made their importers
        sys.path_importer_cache.pop(dropped, None)
    sys.path[:] = kept


def worker_python_path(current: str | None) -> str:
    """A driver JVM's ``PYTHONPATH``: `WORKER_SITE`, then `current` (the variable's value)."""
    return os.pathsep.join([WORKER_SITE, *([current] if current else [])])


def worker_site_on_path() -> contextlib.AbstractContextManager[None]:
    """Within: ``PYTHONPATH`` is `worker_python_path`, for the driver JVM launched there to
    inherit (and with it each Python process it starts); the variable as it was after."""
    # Imported here: `sitecustomize` loads this file in every worker before PySpark is found.
    from mqforensics.environment import variables_set

    return variables_set({"PYTHONPATH": worker_python_path(os.environ.get("PYTHONPATH"))})


def main() -> None:
    drop_spark_archives()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
