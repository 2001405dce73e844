"""The small tables plots and explorers draw: reductions done in Spark, collected as pandas.

Nothing here decides what is wrong (the checks do); these functions only count and lay out what
the readers and checks produced, bounded in size whatever the store's size: a heatmap keeps at
most `max_slices` slices, a timeline one row per segment file, the sharing graph one row per
(owner, grantee).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from mqforensics.findings import COLUMNS, SEVERITIES
from mqforensics.privacy import pseudonymize_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mqforensics.systems.james.state import JamesState
    from mqforensics.systems.logqueue.state import LogQueueState

EMPTY_CELLS = pd.DataFrame(
    {
        "timerangestart": pd.Series([], dtype="datetime64[ns, UTC]"),
        "bucketid": pd.Series([], dtype="int64"),
        "live": pd.Series([], dtype="int64"),
        "consumed": pd.Series([], dtype="int64"),
    }
)


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


# --- findings ------------------------------------------------------------------------------------


def findings_table(
    findings: DataFrame | Iterable[Mapping[str, Any]], *, reveal: bool = False
) -> pd.DataFrame:
    """Findings (a findings frame, or the rows of a ``findings.json``) as pandas, ordered by
    severity (worst first), check and subject; `queue`, `subject` and `detail` text
    pseudonymised unless `reveal` (already pseudonymised text is left as it is)."""
    if hasattr(findings, "toLocalIterator"):
        rows = [row.asDict() for row in findings.toLocalIterator()]  # type: ignore[union-attr]
    else:
        rows = [dict(r) for r in findings]  # type: ignore[union-attr]
    for row in rows:
        detail = row.get("detail")
        if not isinstance(detail, str):
            row["detail"] = json.dumps(detail or {}, sort_keys=True, default=str)
        row["observed_at"] = _utc(row.get("observed_at"))
        if not reveal:
            for column in ("queue", "subject", "detail"):
                if isinstance(row.get(column), str):
                    row[column] = pseudonymize_text(row[column])
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["bytes"] = table["bytes"].fillna(0).astype("int64")
    table["observed_at"] = pd.to_datetime(table["observed_at"], utc=True)
    table["rank"] = table["severity"].map(lambda s: -SEVERITIES.index(s) if s in SEVERITIES else 1)
    table = table.sort_values(["rank", "check", "subject"], kind="stable")
    return table.drop(columns="rank").reset_index(drop=True)


# --- James: slices x buckets ---------------------------------------------------------------------


def james_queues(state: JamesState) -> list[str]:
    """Every queue of the state (those with rows and those with only a browseStart), the one
    with the most rows first, then by name."""
    from pyspark.sql import functions as F

    rows = state.entries.groupBy("queuename").agg(F.count(F.lit(1)).alias("n"))
    names = state.browse_start.select("queuename").join(rows, "queuename", "full")
    ranked = names.select("queuename", F.coalesce("n", F.lit(0)).alias("n")).collect()
    return [r.queuename for r in sorted(ranked, key=lambda r: (-r.n, r.queuename))]


def james_marks(state: JamesState, queue: str) -> dict[str, dt.datetime | None]:
    """The queue's ``browse_start`` and ``content_start`` (UTC), None when it has none."""
    browse = state.browse_start.where(state.browse_start.queuename == queue).first()
    content = state.content_start.where(state.content_start.queuename == queue).first()
    return {
        "browse_start": _utc(browse.browsestart) if browse is not None else None,
        "content_start": _utc(content.contentstart) if content is not None else None,
    }


def james_slice_cells(
    state: JamesState,
    queue: str,
    *,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    max_slices: int = 2000,
) -> pd.DataFrame:
    """Rows still live and consumed per (slice, bucket) of one queue's ``enqueuedMails``: one
    cell per Cassandra partition. Only slices in [`start`, `end`] are counted; when more than
    `max_slices` remain the newest are kept and ``attrs["note"]`` says how many were left out."""
    from pyspark.sql import functions as F

    from mqforensics.systems.james.checks import classify

    rows = classify(state).where(F.col("queuename") == queue)
    if start is not None:
        rows = rows.where(F.col("timerangestart") >= F.lit(_utc(start)))
    if end is not None:
        rows = rows.where(F.col("timerangestart") <= F.lit(_utc(end)))
    cells = rows.groupBy("timerangestart", "bucketid").agg(
        F.sum(F.when(F.col("consumed"), 0).otherwise(1)).alias("live"),
        F.sum(F.when(F.col("consumed"), 1).otherwise(0)).alias("consumed"),
    )
    slices = cells.select("timerangestart").distinct()
    total = slices.count()
    note = ""
    if total > max_slices:
        newest = slices.orderBy(F.col("timerangestart").desc()).limit(max_slices)
        cells = cells.join(newest, "timerangestart")
        note = f"the newest {max_slices} of {total} slices shown"
    table: pd.DataFrame = cells.orderBy("timerangestart", "bucketid").toPandas()  # type: ignore[assignment]
    if table.empty:
        table = EMPTY_CELLS.copy()
    else:
        table["timerangestart"] = pd.to_datetime(table["timerangestart"], utc=True)
        for column in ("bucketid", "live", "consumed"):
            table[column] = table[column].astype("int64")
    table.attrs["note"] = note
    table.attrs["queue"] = queue
    return table


def james_slice_range(state: JamesState, queue: str) -> tuple[dt.datetime, dt.datetime] | None:
    """The first and last slice start of the queue's rows (None when it has no row)."""
    from pyspark.sql import functions as F

    row = (
        state.entries.where(F.col("queuename") == queue)
        .agg(F.min("timerangestart").alias("lo"), F.max("timerangestart").alias("hi"))
        .first()
    )
    if row is None or row.lo is None:
        return None
    return _utc(row.lo), _utc(row.hi)  # type: ignore[return-value]


# --- Cyrus: who shares with whom -----------------------------------------------------------------


def cyrus_sharing_edges(
    sharing: DataFrame | pd.DataFrame | Iterable[Mapping[str, Any]], *, reveal: bool = False
) -> pd.DataFrame:
    """One row per (owner, grantee) of the sharing report (`cyrus.checks.sharing_report` rows,
    or `fleet.fleet_sharing`): the rights granted (distinct, sorted, negative ones prefixed
    with ``-``), the number of mailboxes and files. Identities are pseudonymised unless
    `reveal`, as ``audit cyrus`` does (already pseudonymised rows stay as they are)."""
    if hasattr(sharing, "toPandas"):
        table = sharing.toPandas()  # type: ignore[union-attr]
    elif isinstance(sharing, pd.DataFrame):
        table = sharing.copy()
    else:
        table = pd.DataFrame([dict(r) for r in sharing])
    columns = ["owner", "grantee", "rights", "mailboxes", "files"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    if not reveal:
        from mqforensics.systems.cyrus import checks
        from mqforensics.systems.cyrus.audit import hide_sharing_row

        admins = list(checks.DEFAULT_ADMINS)
        records = table.astype(object).where(table.notna(), None).to_dict("records")
        table = pd.DataFrame([hide_sharing_row(r, admins) for r in records])
    table["owner"] = table["owner"].fillna("(shared)")
    if "negative" in table:
        table["right"] = table["rights"].where(
            ~table["negative"].astype(bool), "-" + table["rights"]
        )
    else:
        table["right"] = table["rights"]
    if "file" not in table:
        table["file"] = ""
    grouped = table.groupby(["owner", "grantee"], sort=True).agg(
        rights=("right", lambda v: " ".join(sorted(set(v)))),
        mailboxes=("mailbox", "nunique"),
        files=("file", "nunique"),
    )
    return grouped.reset_index()[columns]


# --- log-structured queues: segments -------------------------------------------------------------


def logqueue_segments(state: LogQueueState) -> pd.DataFrame:
    """One row per segment file of each queue: its size, the time of its first and last record
    (UTC; NaT when it holds none readable), and its ``status``: ``garbage`` (wholly before the
    garbage end: reclaimable), ``partly_garbage`` (holds the garbage end) or ``live``; ``restart``
    marks the segment of the saved restart position (the working suffix's start)."""
    from pyspark.sql import functions as F

    queues = state.queues.select(
        "queue",
        "garbage_end_segment",
        "garbage_end_offset",
        "saved_suffix_segment",
        "saved_suffix_offset",
        F.explode("segments").alias("s"),
    ).select(
        "queue",
        F.col("s.segment").alias("segment"),
        F.col("s.file").alias("file"),
        F.col("s.size").alias("size"),
        "garbage_end_segment",
        "garbage_end_offset",
        "saved_suffix_segment",
        "saved_suffix_offset",
    )
    times = state.records.groupBy("queue", "segment").agg(
        F.min("time_us").alias("first_us"), F.max("time_us").alias("last_us")
    )
    joined = queues.join(times, ["queue", "segment"], "left").orderBy("queue", "segment")
    table: pd.DataFrame = joined.toPandas()  # type: ignore[assignment]
    columns = [
        "queue", "segment", "file", "size", "first_record", "last_record", "status", "restart",
        "garbage_end_segment", "garbage_end_offset", "saved_suffix_segment", "saved_suffix_offset",
    ]  # fmt: skip
    if table.empty:
        return pd.DataFrame(columns=columns)
    table["first_record"] = pd.to_datetime(table["first_us"], unit="us", utc=True)
    table["last_record"] = pd.to_datetime(table["last_us"], unit="us", utc=True)
    end = table["garbage_end_segment"]
    table["status"] = "live"
    holds_end = (table["segment"] == end) & (table["garbage_end_offset"] > 0)
    table.loc[holds_end, "status"] = "partly_garbage"
    table.loc[table["segment"] < end, "status"] = "garbage"
    table["restart"] = table["segment"] == table["saved_suffix_segment"]
    return table[columns].reset_index(drop=True)
