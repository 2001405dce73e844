"""Write the bundled run history of the James sample into datasets/james/history/: fourteen
daily audits of the sample as it evolves, each the real audit (`mqforensics.audit`) of that
day's snapshot, appended to one history as the store ``james-sample``.

Day 14 is judged at the sample's own instant (2026-11-03T12:00:00Z), day 1 thirteen days
before. Each day's snapshot is the bundled sample with every instant in it (enqueue times,
slices, browseStart and contentStart, the listing's write times, the snapshot's time) moved
back to that day, so that what is not planted holds still from day to day, and with three
changes planted (`evolve`; datasets/james/HISTORY.md tells them and the alerts they give):

1. from day 9 on, the browseStart and contentStart of ``bounces`` stop moving (the queue holds
   no live mail, and James moves browseStart only when a browse finds mail to hand out);
2. from day 8 on, one orphaned blob more each day, each of a sixth of the sample's orphaned
   bytes: by day 13 the orphaned bytes have doubled over seven runs;
3. from day 8 on, ``spool`` takes four mails a day that are never delivered (a dead relay):
   it grows run after run, and those mails become stuck a day after they arrive.

The audits read the snapshot and its blob listing (no broker export: its messages' own times
are RabbitMQ's and are not moved) and look for the data subject of the sample's policy.

    .venv/bin/python -m datasets.james.make_history [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mqforensics.systems.james.java_hash import bucket_id, slice_start

SAMPLE = Path(__file__).resolve().parent / "sample"
HISTORY = Path(__file__).resolve().parent / "history"
SCOPE = "james-sample"
DAYS = 14
LAST_DAY = dt.datetime(2026, 11, 3, 12, 0, tzinfo=dt.UTC)  # the sample's own instant
# From which day each change is planted.
BROWSE_STOPS_ON = 9
ORPHANS_FROM = 8
GROWTH_FROM = 8
FROZEN_QUEUE = "bounces"
GROWING_QUEUE = "spool"
MAILS_A_DAY = 4
# The view's configuration in force (docs/james.md: the eventstore's last valid event).
SLICE_SECONDS = 900
BUCKETS = 4
SEED = 20261201
TABLES = ("enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore")


def as_of(day: int) -> dt.datetime:
    """The instant day `day` (1..14) is judged at."""
    return LAST_DAY - dt.timedelta(days=DAYS - day)


@dataclass(frozen=True)
class Planted:
    """What the planted changes add by one day: orphaned blobs, undelivered mails and their
    blobs (rows as pyarrow's ``to_pylist`` gives them)."""

    orphans: list[dict[str, Any]]
    mails: list[dict[str, Any]]
    mail_blobs: list[dict[str, Any]]


def _read(path: Path) -> pa.Table:
    return pq.read_table(path)


def _shifted(table: pa.Table, by: dt.timedelta) -> pa.Table:
    """`table` with every instant moved back `by`."""
    columns = []
    for field in table.schema:
        column = table[field.name]
        if pa.types.is_timestamp(field.type):
            step = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[field.type.unit]
            moved = pc.subtract(column.cast(pa.int64()), int(by.total_seconds()) * step)
            column = moved.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)


def _orphan_bytes() -> int:
    """The bytes of the sample's orphaned blobs (its ground truth's, in its listing)."""
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())["findings"]
    keys = {f["subject"] for f in truth if f["check"] == "orphaned_blob"}
    listing = _read(SAMPLE / "blob_inventory.parquet").to_pylist()
    return sum(int(row["size"]) for row in listing if row["key"] in keys)


def planted(day: int, template: dict[str, Any]) -> Planted:
    """What days up to `day` added (cumulative), each made on its own day: the same on every
    later day, as a real store keeps what it once wrote. `template` is a view row of
    `GROWING_QUEUE` the new mails copy their other columns from."""
    rng = random.Random(SEED)
    orphan_size = -(-_orphan_bytes() // 6)
    orphans, mails, blobs = [], [], []
    for made_on in range(1, day + 1):
        when = as_of(made_on)
        keys = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(9)]
        if made_on >= ORPHANS_FROM:
            orphans.append(_blob(keys[0], orphan_size, when - dt.timedelta(hours=2)))
        if made_on < GROWTH_FROM:
            continue
        for number in range(MAILS_A_DAY):
            enqueued = when - dt.timedelta(minutes=20 + 7 * number)
            name = f"Mail{int(enqueued.timestamp() * 1000)}-history-{made_on}-{number}"
            header, body = keys[1 + 2 * number], keys[2 + 2 * number]
            mails.append(_mail(template, name, enqueued, header, body, rng))
            blobs += [_blob(header, 412, enqueued), _blob(body, 1630, enqueued)]
    return Planted(orphans, mails, blobs)


def _blob(key: str, size: int, written: dt.datetime) -> dict[str, Any]:
    return {
        "bucket": "default", "key": key, "size": size, "last_modified": written,
        "etag": uuid.uuid5(uuid.NAMESPACE_OID, key).hex, "storage_class": "STANDARD",
    }  # fmt: skip


def _mail(
    template: dict[str, Any],
    name: str,
    enqueued: dt.datetime,
    header: str,
    body: str,
    rng: random.Random,
) -> dict[str, Any]:
    start = slice_start(enqueued.timestamp(), SLICE_SECONDS)
    return {
        **template,
        "queuename": GROWING_QUEUE,
        "timerangestart": dt.datetime.fromtimestamp(start, dt.UTC),
        "bucketid": bucket_id(name, BUCKETS),
        "enqueueid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "enqueuedtime": enqueued,
        "name": name,
        "state": "transport",
        "headerblobid": header,
        "bodyblobid": body,
        "errormessage": None,
        "sender": "newsletter@lists.example.edu",
        "recipients": ["oscar@mail.example.net"],
        "lastupdated": enqueued,
    }


def _frozen(table: pa.Table, column: str, stopped: dt.timedelta) -> pa.Table:
    """A start table (one row per queue) whose `FROZEN_QUEUE` keeps the start it had `stopped`
    ago, as the sample has it moved back that far."""
    rows = table.to_pylist()
    for row in rows:
        if row["queuename"] == FROZEN_QUEUE:
            row[column] = row[column] - stopped
    return pa.Table.from_pylist(rows, schema=table.schema)


def evolve(day: int, out: Path) -> Path:
    """Write day `day`'s snapshot into `out` (a Parquet export with its blob listing)."""
    by = dt.timedelta(days=DAYS - day)
    out.mkdir(parents=True, exist_ok=True)
    tables = {name: _shifted(_read(SAMPLE / f"{name}.parquet"), by) for name in TABLES}
    if day >= BROWSE_STOPS_ON:
        # Held at day BROWSE_STOPS_ON's start: the sample's, moved back from day DAYS to it.
        stopped = dt.timedelta(days=BROWSE_STOPS_ON - day)
        for name in ("browsestart", "contentstart"):
            tables[name] = _frozen(tables[name], name, -stopped)
    view = tables["enqueuedmailsv4"]
    template = next(r for r in view.to_pylist() if r["queuename"] == GROWING_QUEUE)
    added = planted(day, template)
    if added.mails:
        tables["enqueuedmailsv4"] = pa.concat_tables(
            [view, pa.Table.from_pylist(added.mails, schema=view.schema)]
        )
    listing = _shifted(_read(SAMPLE / "blob_inventory.parquet"), by)
    extra = added.orphans + added.mail_blobs
    if extra:
        listing = pa.concat_tables([listing, pa.Table.from_pylist(extra, schema=listing.schema)])
    for name, table in tables.items():
        pq.write_table(table, out / f"{name}.parquet")
    pq.write_table(listing, out / "blob_inventory.parquet")
    taken = as_of(day).strftime("%Y-%m-%dT%H:%M:%SZ")
    (out / "snapshot.json").write_text(json.dumps({"taken_at": taken}) + "\n")
    return out


def write_history(out: Path = HISTORY) -> None:
    """Audit each day's snapshot, appending to a new history at `out` (replaced whole)."""
    import mqforensics
    from mqforensics import systems
    from mqforensics.spark import session

    spark = session("mqforensics-make-history", data_sources=systems.data_sources())
    fresh = Path(tempfile.mkdtemp(prefix="mqforensics-history-"))
    try:
        for day in range(1, DAYS + 1):
            snapshot = evolve(day, fresh / f"day{day:02d}")
            audit = mqforensics.audit(
                "james", snapshot=snapshot, blob_listing=snapshot / "blob_inventory.parquet",
                erasure_policy=SAMPLE / "policy.toml", out=fresh / f"audit{day:02d}",
                history=fresh / "history", history_scope=SCOPE, spark=spark,
            )  # fmt: skip
            print(f"day {day:2d} ({audit.as_of:%Y-%m-%d}): {len(audit.rows)} findings")
            audit.close()
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(fresh / "history", out)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HISTORY)
    write_history(parser.parse_args().out)


if __name__ == "__main__":
    main()
