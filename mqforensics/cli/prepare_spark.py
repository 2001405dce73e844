"""``mqforensics prepare-spark``: record the Spark driver JVM's class data archive
(`mqforensics.spark.archive`) while running every registered system's demo (`api.demo`), so that
later commands, notebook kernels and tests start Spark sooner. ``make test``, ``make test-unit``
and ``make prepare-spark`` run it; it does nothing when the archive of this JVM and this Spark
exists already (``--force`` records anew).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics import api, systems

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "prepare-spark",
        help="record a class data archive that makes Spark's driver JVM start sooner "
        "(make test runs it)",
    )
    parser.add_argument("--force", action="store_true", help="record it again even when it exists")
    parser.set_defaults(run=run)


def audit_samples(spark: SparkSession) -> None:
    """The recorded workload: the demo of every system that has a bundled sample, in a
    temporary directory, its output discarded."""
    with tempfile.TemporaryDirectory(prefix="mqforensics-prepare-") as work:
        for spec in systems.all_systems():
            if spec.sample is None:
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                api.demo(spec.name, out=Path(work) / spec.name, spark=spark)


def recorded_session() -> SparkSession:
    """The session the archive is recorded in: every system's data sources registered."""
    from mqforensics.spark import session

    return session("mqforensics-prepare-spark", ui=False, data_sources=systems.data_sources())


def run(args: argparse.Namespace) -> int:
    from mqforensics.spark import archive as spark_archive

    path = spark_archive.find_archive()
    if path is not None and not args.force:
        print(f"Spark driver class archive present: {path}")
        return 0
    started = time.monotonic()
    path = spark_archive.record(audit_samples, recorded_session)
    for stale in spark_archive.remove_others(path):
        print(f"Removed {stale} (another JVM's or Spark's, or a failed recording)")
    print(
        f"Recorded the Spark driver class archive in {time.monotonic() - started:.0f}s: {path} "
        f"({path.stat().st_size / 1024**2:.0f} MiB); driver JVMs map it from now on"
    )
    return 0
