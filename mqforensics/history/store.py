"""Appending a run to the history and reading the history back.

Where: a local directory (a path, or ``file:`` nothing else), or any URL Spark writes
(``s3a://bucket/history``, ``hdfs://nn/history``). The option ``--history`` (``history=`` in
the API, ``HISTORY`` in the notebooks) names it; ``MQF_HISTORY`` does when none is given.

Appends are atomic and never collide:

- in a local directory, a run is one Parquet file written under a hidden name (a leading
  ``.``, which Spark and pyarrow skip), flushed to disk, then renamed into place
  (``system=<name>/run-<as_of>-<run_id>.parquet``): a run killed at any point leaves the history
  without that run or with all of it, never a part; two runs write two files;
- at a URL, Spark appends the run's rows as one file (one partition of a partitioned
  ``append``): its output committer writes under ``_temporary`` (skipped by readers) and makes
  the one file visible by one rename, an atomic step on HDFS and a single object copy on S3.

Reads check the format: every column of `schema.COLUMNS` must be there, and a run written in a
newer schema version than this one knows is refused, naming the version.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, InputError
from mqforensics.history.collect import Run
from mqforensics.history.schema import (
    FORMAT,
    MARKER,
    NAMES,
    PARTITION,
    SCHEMA_VERSION,
    arrow_schema,
    spark_schema,
)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

ENVIRONMENT = "MQF_HISTORY"


@dataclass(frozen=True)
class Location:
    """Where a history is: `local` when a directory of this machine, else `url` for Spark."""

    given: str
    local: Path | None

    @property
    def url(self) -> str:
        return str(self.local) if self.local is not None else self.given

    def __str__(self) -> str:
        return mask_secrets(self.given)


def location(given: str | Path | None) -> Location | None:
    """The history `given`, else the one ``MQF_HISTORY`` names, else None (no history)."""
    text = str(given) if given is not None else os.environ.get(ENVIRONMENT, "").strip()
    if not text:
        return None
    scheme = urlparse(text).scheme
    if scheme == "file":
        return Location(text, Path(urlparse(text).path))
    if len(scheme) > 1:  # "C:" is a drive, not a scheme
        return Location(text, None)
    return Location(text, Path(text))


def check_writable(where: Location, what: str = "--history") -> None:
    """Before Spark starts: a local history must be a directory this process can write in (or
    make), holding a history or nothing; a URL is Spark's to reach."""
    from mqforensics.outputs import check_out

    if where.local is None:
        return
    check_out(where.local, what)
    read_marker(where.local, what)


def read_marker(root: Path, what: str = "--history") -> dict[str, Any] | None:
    """The marker of a local history (None when the directory holds none yet); a directory
    holding files that are not a history, or a newer history, is refused."""
    marker = root / MARKER
    if not marker.is_file():
        shown = root.is_dir() and any(not p.name.startswith((".", "_")) for p in root.iterdir())
        if shown and not any(root.glob(f"{PARTITION}=*")):
            raise ConfigError(f"{what} {root}: holds files and is not a run history")
        return None
    try:
        document = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{marker}: not a history marker ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise InputError(f"{marker}: not a history marker (format {FORMAT})")
    version = document.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise InputError(
            f"{root}: a history of schema version {version}; this mqforensics reads and writes "
            f"version {SCHEMA_VERSION} and older"
        )
    return document


def append(run: Run, where: Location, *, spark: SparkSession | None = None) -> str:
    """Append `run` to the history at `where`, atomically; the file or URL it went to."""
    if where.local is not None:
        return str(_append_local(run, where.local))
    if spark is None:
        raise ConfigError(f"the history {where} is a URL: Spark writes it, and none is running")
    _append_spark(run, where, spark)
    return str(where)


def run_file_name(run: Run) -> str:
    return f"run-{run.as_of:%Y%m%dT%H%M%SZ}-{run.run_id}.parquet"


def _append_local(run: Run, root: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mqforensics.retention.manifest import fsync_directory, write_atomically

    root.mkdir(parents=True, exist_ok=True)
    if read_marker(root) is None:
        marker = {"format": FORMAT, "schema_version": SCHEMA_VERSION}
        write_atomically(root / MARKER, (json.dumps(marker, indent=1) + "\n").encode())
    directory = root / f"{PARTITION}={run.system}"
    directory.mkdir(exist_ok=True)
    path = directory / run_file_name(run)
    tmp = directory / f".{path.name}.tmp-{os.getpid()}"
    table = pa.Table.from_pylist(run.rows(), schema=arrow_schema())
    try:
        pq.write_table(table, tmp)
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    return path


def _append_spark(run: Run, where: Location, spark: SparkSession) -> None:
    rows = [{**row, PARTITION: run.system} for row in run.rows()]
    frame = spark.createDataFrame(rows, schema=spark_schema())
    frame.coalesce(1).write.mode("append").partitionBy(PARTITION).parquet(where.url)


def check_readable(where: Location) -> None:
    """Before Spark starts: a local history must hold a run."""
    if where.local is None:
        return
    if not where.local.is_dir():
        raise InputError(f"history {where.local} does not exist")
    read_marker(where.local, "history")
    if not any(where.local.glob(f"{PARTITION}=*/*.parquet")):
        raise InputError(f"history {where.local} holds no run")


def read(spark: SparkSession, where: Location) -> DataFrame:
    """Every run of the history as one Spark frame (`schema.COLUMNS` and ``system``)."""
    from pyspark.sql import functions as F

    check_readable(where)
    try:
        frame = spark.read.option("mergeSchema", "true").parquet(where.url)
        columns = set(frame.columns)
    except Exception as exc:
        if "UNABLE_TO_INFER_SCHEMA" in str(exc) or "PATH_NOT_FOUND" in str(exc):
            raise InputError(f"history {where} holds no run") from None
        raise
    missing = [name for name in (*NAMES, PARTITION) if name not in columns]
    if missing:
        raise InputError(f"history {where}: not a run history (no column {missing[0]})")
    first = frame.agg(F.max("schema_version")).first()
    newest = first[0] if first is not None else None
    if newest is not None and newest > SCHEMA_VERSION:
        raise InputError(
            f"history {where} holds runs of schema version {newest}; this mqforensics reads "
            f"version {SCHEMA_VERSION} and older"
        )
    return frame.select(*NAMES, PARTITION)


def read_pandas(where: Location) -> pd.DataFrame:
    """Every run of a local history in pandas (what ``pandas.read_parquet(DIR)`` gives, the
    partition column as text), sorted by series and time."""
    import pandas as pd

    check_readable(where)
    assert where.local is not None
    frame = pd.read_parquet(where.local)
    frame[PARTITION] = frame[PARTITION].astype(str)
    return frame.sort_values(["system", "scope", "metric", "as_of", "run_at"], ignore_index=True)
