"""The baseline: the James audit's checks written in pandas, in one process.

The same conditions as `mqforensics.systems.james.checks` (docs/james.md), on the same Parquet
snapshot, written the way a careful pandas user would: only the columns a check needs are read,
joins are `merge`s, per-partition figures are `groupby`s, and the byte counts of flagged
partitions are computed for their rows only. The bucket check hashes names with the project's
numpy version of Java's String.hashCode (`java_hash.bucket_ids`, 0.5 s for 1M names); our Spark
check calls the JVM's own.

It returns (check, queue, subject, bytes) per finding; the benchmark asserts these equal the
Spark audit's findings, so a faster baseline cannot be a baseline that checks less.
"""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from mqforensics.systems.james.blob_ids import PASSTHROUGH, parse_blob_id
from mqforensics.systems.james.checks import BROWSE_START_HEALTH_GRACE
from mqforensics.systems.james.config_history import history_rows
from mqforensics.systems.james.context import SLICE_EARLY_TOLERANCE_SECONDS
from mqforensics.systems.james.java_hash import bucket_ids

Finding = tuple[str, str | None, str, int | None]
KEY_COLUMNS = [
    "queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name",
    "headerblobid", "bodyblobid",
]  # fmt: skip
STRINGS = [
    "name", "state", "sender", "errormessage", "remotehost", "remoteaddr", "headerblobid",
    "bodyblobid",
]  # fmt: skip


def _iso(value: Any) -> str:
    return pd.Timestamp(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(series: pd.Series) -> pd.Series:
    return series.astype("datetime64[us, UTC]").astype("int64") // 1_000_000


def _utf8(value: Any) -> int:
    return len(value.encode("utf-8")) if isinstance(value, str) else 0


def _metadata_bytes(row: dict[str, Any]) -> int:
    total = 16 + sum(_utf8(row[c]) for c in STRINGS)
    total += sum(_utf8(r) for r in (row["recipients"] if row["recipients"] is not None else []))
    for triple in row["perrecipientspecificheaders"] or []:
        total += sum(_utf8(v) for v in triple.values())
    for key, value in row["attributes"] or []:
        total += _utf8(key) + (len(value) if value is not None else 0)
    return total


def read_tables(snapshot: Path) -> dict[str, pd.DataFrame]:
    enqueued = next(snapshot.glob("enqueuedmailsv*.parquet"))
    tables = {
        "entries": pq.read_table(enqueued, columns=KEY_COLUMNS).to_pandas(),
        "deleted": pq.read_table(snapshot / "deletedmailsv2.parquet").to_pandas(),
        "browse": pq.read_table(snapshot / "browsestart.parquet").to_pandas(),
        "events": pq.read_table(snapshot / "eventstore.parquet").to_pandas(),
    }
    content = snapshot / "contentstart.parquet"
    tables["content"] = (
        pq.read_table(content).to_pandas()
        if content.exists()
        else pd.DataFrame({"queuename": [], "contentstart": []})
    )
    listing = snapshot / "blob_inventory.parquet"
    if listing.exists():
        columns = ["key", "size", "last_modified"]
        tables["blobs"] = pq.read_table(listing, columns=columns).to_pandas()
    tables["enqueued_path"] = pd.DataFrame({"path": [str(enqueued)]})
    return tables


def audit(
    snapshot: Path,
    as_of: dt.datetime,
    *,
    stuck_after: dt.timedelta = dt.timedelta(days=1),
    blob_grace: dt.timedelta = dt.timedelta(hours=1),
) -> list[Finding]:
    t = read_tables(snapshot)
    history = history_rows(t["events"].to_dict("records"), str(snapshot))
    windows = sorted({h[1] for h in history})
    counts = sorted({h[2] for h in history})
    window = history[-1][1]
    now = pd.Timestamp(as_of)

    markers = t["deleted"][["queuename", "enqueueid"]].drop_duplicates().assign(consumed=True)
    e = t["entries"].merge(markers, on=["queuename", "enqueueid"], how="left")
    e["consumed"] = e["consumed"].fillna(False).astype(bool)
    e = e.merge(t["browse"], on="queuename", how="left").merge(
        t["content"], on="queuename", how="left"
    )
    live = e[~e["consumed"]]
    found: list[Finding] = []

    # unreclaimed_slice
    part = ["queuename", "timerangestart", "bucketid"]
    per = e.groupby(part, sort=False).agg(
        rows=("enqueueid", "size"),
        live_rows=("consumed", lambda c: int((~c).sum())),
        browsestart=("browsestart", "first"),
        contentstart=("contentstart", "first"),
    )
    per = per.reset_index()
    trs, b, c = per["timerangestart"], per["browsestart"], per["contentstart"]
    empty = per["live_rows"] == 0
    reason = np.select(
        [
            c.notna() & (trs < c),
            c.notna() & (trs >= c) & (trs < b) & empty,
            c.isna() & (trs < b) & empty,
        ],
        ["before_content_start", "cleanup_pending", "never_cleaned"],
        default="",
    )
    flagged = per[reason != ""]
    if len(flagged):
        found += _unreclaimed_bytes(t, flagged)

    # stale_browse_start
    oldest = live.groupby("queuename")["timerangestart"].min()
    for row in t["browse"].itertuples():
        start = pd.Timestamp(row.browsestart)
        age = (now - start).total_seconds()
        oldest_live = oldest.get(row.queuename)
        lagging = oldest_live is not None and start.timestamp() < (
            pd.Timestamp(oldest_live).timestamp() - window
        )
        if age > BROWSE_START_HEALTH_GRACE.total_seconds() or lagging:
            found.append(("stale_browse_start", row.queuename, row.queuename, None))

    # invisible_mail, stuck_mail
    invisible = live[live["timerangestart"] < live["browsestart"]]
    found += _mails("invisible_mail", invisible)
    stuck = live[live["enqueuedtime"] < now - pd.Timedelta(stuck_after)]
    found += _mails("stuck_mail", stuck)

    # orphaned_blob, dangling_blob_ref
    blobs = t.get("blobs")
    if blobs is not None:
        refs = pd.concat([e["headerblobid"], e["bodyblobid"]]).dropna().unique()
        old = blobs[blobs["last_modified"] < now - pd.Timedelta(blob_grace)]
        orphans = old[~old["key"].isin(refs)]
        sizes = zip(orphans.key, orphans["size"], strict=True)
        found += [("orphaned_blob", None, k, int(size)) for k, size in sizes]
        keys = pd.Index(blobs["key"].unique())
        header_gone = live["headerblobid"].notna() & ~live["headerblobid"].isin(keys)
        body_gone = live["bodyblobid"].notna() & ~live["bodyblobid"].isin(keys)
        dangling = live[header_gone | body_gone]
        found += [
            ("dangling_blob_ref", q, i, None)
            for q, i in zip(dangling.queuename, dangling.enqueueid, strict=False)
        ]
        found += _consumed_blobs(e, live, blobs)

    # bucket_mismatch
    names = pa.array(e["name"], type=pa.string(), from_pandas=True)
    wanted = e["bucketid"].fillna(-2).astype("int64").to_numpy()
    fits = np.zeros(len(e), dtype=bool)
    for count in counts:
        fits |= bucket_ids(names, count) == wanted
    fits &= e["bucketid"].notna().to_numpy() & e["name"].notna().to_numpy()
    wrong = e[~fits]
    found += _mails("bucket_mismatch", wrong)

    # slice_mismatch
    start_us = e["timerangestart"].astype("datetime64[us, UTC]").astype("int64")
    enq_us = e["enqueuedtime"].astype("datetime64[us, UTC]").astype("int64")
    whole = start_us % 1_000_000 == 0
    epoch = start_us // 1_000_000
    aligned = whole & np.logical_or.reduce([epoch % w == 0 for w in windows])
    in_range = (enq_us >= start_us - SLICE_EARLY_TOLERANCE_SECONDS * 1_000_000) & (
        enq_us < start_us + windows[-1] * 1_000_000
    )
    bad = e[~(aligned & in_range)]
    found += _mails("slice_mismatch", bad)

    # config_violation
    for previous, event in itertools.pairwise(history):
        if event[1] > previous[1] or previous[1] % event[1] != 0 or event[2] < previous[2]:
            found.append(("config_violation", None, f"eventid {event[0]}", None))

    # config_advice: the peak hourly rate of every queue with entries (one finding each)
    per_hour = e.groupby(["queuename", e["enqueuedtime"].dt.floor("h")]).size()
    peaks = per_hour.groupby(level=0).max()
    found += [("config_advice", q, q, None) for q in sorted(peaks.index)]
    return found


def _consumed_blobs(e: pd.DataFrame, live: pd.DataFrame, blobs: pd.DataFrame) -> list[Finding]:
    """consumed_blob: listed passthrough blobs that consumed rows, and no live row, reference."""
    live_keys = set(pd.concat([live["headerblobid"], live["bodyblobid"]]).dropna())
    consumed = e[e["consumed"]]
    queues: dict[str, set[str]] = {}
    for column in ("headerblobid", "bodyblobid"):
        for queue, key in zip(consumed.queuename, consumed[column], strict=True):
            if key is not None and key not in live_keys:
                queues.setdefault(key, set()).add(queue)
    listed = blobs[blobs["key"].isin(list(queues))]
    return [
        ("consumed_blob", next(iter(queues[k])) if len(queues[k]) == 1 else None, k, int(size))
        for k, size in zip(listed.key, listed["size"], strict=True)
        if parse_blob_id(k)[0] == PASSTHROUGH
    ]


def _mails(check: str, rows: pd.DataFrame) -> list[Finding]:
    return [(check, q, i, None) for q, i in zip(rows.queuename, rows.enqueueid, strict=True)]


def _unreclaimed_bytes(t: dict[str, pd.DataFrame], flagged: pd.DataFrame) -> list[Finding]:
    """metadata + blob bytes of each flagged partition, from its full rows only."""
    path = t["enqueued_path"]["path"][0]
    keys = set(zip(flagged.queuename, flagged.timerangestart, flagged.bucketid, strict=False))
    queues = sorted({k[0] for k in keys})
    starts = sorted({pd.Timestamp(k[1]).to_pydatetime() for k in keys})
    table = ds.dataset(path, format="parquet").to_table(
        filter=ds.field("queuename").isin(queues) & ds.field("timerangestart").isin(starts)
    )
    rows = table.to_pylist()
    sizes = dict(zip(t["blobs"]["key"], t["blobs"]["size"], strict=False)) if "blobs" in t else None
    out: list[Finding] = []
    by_partition: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["queuename"], pd.Timestamp(row["timerangestart"]), row["bucketid"])
        by_partition.setdefault(key, []).append(row)
    for queue, start, bucket in sorted(keys):
        members = by_partition.get((queue, pd.Timestamp(start), bucket), [])
        metadata = sum(_metadata_bytes(r) for r in members)
        blob_bytes = 0
        if sizes is not None:
            ids = {r[c] for r in members for c in ("headerblobid", "bodyblobid") if r[c]}
            blob_bytes = sum(int(sizes[i]) for i in ids if i in sizes)
        subject = f"{queue}/{_iso(start)}/{bucket}"
        out.append(("unreclaimed_slice", queue, subject, metadata + blob_bytes))
    return out
