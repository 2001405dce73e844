"""The history's columns, format version and layout.

One row per figure of one run (`Metric`), with what identifies the run. On storage the history
is a Parquet dataset partitioned by system (``system=<name>/``), one file per run, so Spark
(``spark.read.parquet(DIR)``) and pandas (``pandas.read_parquet(DIR)``) read it as it is. A
marker, ``_mqforensics_history.json``, says what the directory is and the newest schema version
written into it; names starting with ``_`` or ``.`` are skipped by both readers.

Schema versions: every row carries ``schema_version``; a reader refuses runs of a newer version
than it knows (naming the version), and reads every older one. Version 1 is this module.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1
FORMAT = "mqforensics-history"
MARKER = "_mqforensics_history.json"
PARTITION = "system"

# (name, Arrow type name, what it holds), in file order; `system` is the partition column.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("schema_version", "int32", "the history schema version the row was written in"),
    ("run_id", "string", "the run: 32 hex digits, one per audit or validation"),
    ("run_at", "timestamp", "when the run appended (UTC)"),
    ("as_of", "timestamp", "the instant the run judged the store at (UTC): the series' order"),
    ("kind", "string", "audit or validate"),
    ("scope", "string", "the host or cluster the figures are of (--history-scope)"),
    ("tool_version", "string", "the mqforensics version of the run"),
    ("queue", "string", "the queue (mailbox database, segment directory) or empty"),
    ("check", "string", "the check's stable name or empty"),
    ("item", "string", "a table, severity, age band or expectation, or empty"),
    ("metric", "string", "the figure's stable name (docs/history.md lists them)"),
    ("unit", "string", "count, bytes, seconds, ratio, instant or success"),
    ("value", "double", "the figure"),
)
NAMES = tuple(name for name, _, _ in COLUMNS)
# What makes one series: a figure of one store, followed over runs ordered by as_of, run_at;
# the runs of one kind only (audits and validations are two scheduled jobs: alerts.STORE).
SERIES = ("system", "scope", "metric", "queue", "check", "item")


def arrow_schema() -> Any:
    """The Arrow schema of one run's file (the partition column left out)."""
    import pyarrow as pa

    types = {
        "int32": pa.int32(),
        "string": pa.string(),
        "double": pa.float64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    metadata = {b"mqforensics.history.schema_version": str(SCHEMA_VERSION).encode()}
    return pa.schema([(name, types[kind]) for name, kind, _ in COLUMNS], metadata=metadata)


def spark_schema() -> str:
    """The Spark DDL of a run's rows, partition column included."""
    types = {"int32": "int", "string": "string", "double": "double", "timestamp": "timestamp"}
    return ", ".join(
        [f"`{name}` {types[kind]}" for name, kind, _ in COLUMNS] + [f"`{PARTITION}` string"]
    )
