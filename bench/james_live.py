"""Against a live Cassandra 5.0 holding a generated James state:

* **getSize**: our Spark read of the view plus `browse.sizes` (every queue at once) against a
  straightforward implementation of James's own algorithm (``CassandraMailQueueBrowser``): for
  each queue, read browseStart, visit every slice from it to the slice holding "now" and every
  bucket of each slice, and ask deletedMailsV2 whether each row is still enqueued
  (``DeletedMailsDAO.isStillEnqueued``, one query per row). The per-row queries are issued 32
  at a time (James's reactive ``filterWhen`` issues them one after another), so the baseline is
  if anything flattered;
* **live read throughput**: our Cassandra source (`cassandra_scan`, token-range splits) reading
  the whole enqueued table against ``cqlsh COPY ... TO`` of the same table.

    python -m bench.james_live run --entries 1000000 [--keep-servers]

Cassandra is the project's own (`mqforensics.services`), under ``~/.cache/mqforensics/bench/``;
the state is the cached Parquet snapshot of `bench.james_audit`, streamed into it once per
server (a keyspace per size). Both getSize answers must agree, queue by queue, and both reads
must see every row, or the run fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import measure
from bench.james_audit import CACHE, snapshot, spark_env

ENQUEUED = "enqueuedmailsv4"
COLUMNS = [
    "queuename", "timerangestart", "bucketid", "enqueueid", "enqueuedtime", "name", "state",
    "headerblobid", "bodyblobid", "attributes", "errormessage", "sender", "recipients",
    "remotehost", "remoteaddr", "lastupdated", "perrecipientspecificheaders",
]  # fmt: skip
ISSUED_TOGETHER = 32


def _endpoint(where: str) -> Any:
    """The endpoint at `where` (HOST:PORT), logged in from MQF_CASSANDRA_USERNAME/_PASSWORD
    (credentials never go on a command line, where `ps` and the results would show them)."""
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    return CassandraEndpoint.parse(
        where,
        username=os.environ.get("MQF_CASSANDRA_USERNAME"),
        password=os.environ.get("MQF_CASSANDRA_PASSWORD"),
    )


def _logged_in(info: dict[str, Any]) -> Any:
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    return CassandraEndpoint((info["host"],), info["port"], info["username"], info["password"])


def _where(info: dict[str, Any]) -> str:
    return f"{info['host']}:{info['port']}"


def _login(info: dict[str, Any]) -> dict[str, str]:
    return {"MQF_CASSANDRA_USERNAME": info["username"], "MQF_CASSANDRA_PASSWORD": info["password"]}


def _cell(column: str, value: Any) -> Any:
    from cassandra.query import UNSET_VALUE

    if value is None:
        return UNSET_VALUE  # as James: absent fields are not bound
    if column == "enqueueid":
        return uuid.UUID(value)
    if column == "attributes":
        return dict(value)
    if column == "perrecipientspecificheaders":
        return [(h["_1"], h["_2"], h["_3"]) for h in value]
    return value


def load(directory: Path, endpoint: Any, keyspace: str) -> float:
    """Stream the snapshot into `keyspace` (James's DDL) unless a finished load is there;
    returns the seconds spent (0 when reused)."""
    import pyarrow.parquet as pq
    from cassandra.concurrent import execute_concurrent_with_args

    from datasets.james.load import james_ddl
    from mqforensics.sources.cassandra_connection import close_cluster

    cluster, session = endpoint.connect()
    try:
        done = session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
        if "bench_loaded" in {r.table_name for r in done}:
            return 0.0
        started = time.perf_counter()
        session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        session.set_keyspace(keyspace)
        for statement in james_ddl("v4"):
            session.execute(statement, timeout=120)

        def insert(table: str, columns: list[str], path: Path) -> None:
            marks = ", ".join("?" for _ in columns)
            prepared = session.prepare(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            )
            for batch in pq.ParquetFile(path).iter_batches(batch_size=20_000, columns=columns):
                rows = [tuple(_cell(c, row[c]) for c in columns) for row in batch.to_pylist()]
                execute_concurrent_with_args(
                    session, prepared, rows, concurrency=64, raise_on_first_error=True
                )

        for part in sorted((directory / f"{ENQUEUED}.parquet").glob("*.parquet")):
            insert(ENQUEUED, COLUMNS, part)
        for part in sorted((directory / "deletedmailsv2.parquet").glob("*.parquet")):
            insert("deletedmailsv2", ["queuename", "enqueueid"], part)
        for table, columns in (
            ("browsestart", ["queuename", "browsestart"]),
            ("contentstart", ["queuename", "contentstart"]),
            ("eventstore", ["aggregateid", "eventid", "snapshot", "event"]),
        ):
            for part in sorted((directory / f"{table}.parquet").glob("*.parquet")):
                insert(table, columns, part)
        session.execute("CREATE TABLE bench_loaded (id int PRIMARY KEY)")
        return time.perf_counter() - started
    finally:
        close_cluster(cluster)


def _as_of(directory: Path) -> dt.datetime:
    taken = json.loads((directory / "snapshot.json").read_text())["taken_at"]
    return dt.datetime.fromisoformat(taken.replace("Z", "+00:00"))


# --- children -----------------------------------------------------------------------------------


def getsize_ours(where: str, keyspace: str, as_of: dt.datetime) -> None:
    from mqforensics import systems
    from mqforensics.spark import session
    from mqforensics.systems.james import browse

    spark = session("mqf-bench", ui=False, data_sources=systems.data_sources())
    spark.range(1).count()
    started = time.perf_counter()
    frame = browse.live_sizes(spark, _endpoint(where), keyspace=keyspace, as_of=as_of)
    sizes = {r.queuename: int(r.size) for r in frame.collect()}
    measure.report({"sizes": sizes}, time.perf_counter() - started)


def getsize_james(where: str, keyspace: str, as_of: dt.datetime) -> None:
    """James's browse, one queue at a time, slice by slice, bucket by bucket, row by row."""
    from cassandra.concurrent import execute_concurrent_with_args

    from mqforensics.sources.cassandra_connection import close_cluster
    from mqforensics.systems.james.config_history import history_rows

    started = time.perf_counter()
    cluster, session = _endpoint(where).connect(keyspace)
    try:
        events = [r._asdict() for r in session.execute("SELECT * FROM eventstore")]
        _eventid, window, buckets, _pace = history_rows(events, keyspace)[-1]
        starts = {r.queuename: r.browsestart for r in session.execute("SELECT * FROM browsestart")}
        read_bucket = session.prepare(
            f"SELECT enqueueid FROM {ENQUEUED} "
            "WHERE queuename = ? AND timerangestart = ? AND bucketid = ?"
        )
        still_enqueued = session.prepare(
            "SELECT enqueueid FROM deletedmailsv2 WHERE queuename = ? AND enqueueid = ?"
        )
        last = int(as_of.timestamp()) // window * window
        sizes: dict[str, int] = {}
        queries = 0
        for queue, browse_start in sorted(starts.items()):
            size = 0
            first = int(browse_start.replace(tzinfo=dt.UTC).timestamp())
            for slice_start in range(first, last + 1, window):
                moment = dt.datetime.fromtimestamp(slice_start, dt.UTC)
                for bucket in range(buckets):
                    ids = [
                        r.enqueueid for r in session.execute(read_bucket, (queue, moment, bucket))
                    ]
                    queries += 1 + len(ids)
                    answers = execute_concurrent_with_args(
                        session, still_enqueued, [(queue, i) for i in ids],
                        concurrency=ISSUED_TOGETHER, raise_on_first_error=True,
                    )  # fmt: skip
                    size += sum(1 for _ok, rows in answers if not list(rows))
            sizes[queue] = size
        output = {"sizes": sizes, "queries": queries}
    finally:
        close_cluster(cluster)
    measure.report(output, time.perf_counter() - started)


def read_ours(where: str, keyspace: str) -> None:
    """Every row and column into Spark (a no-op write), counted on the way."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from mqforensics import systems
    from mqforensics.sources.cassandra_scan import read_table
    from mqforensics.spark import session

    spark = session("mqf-bench", ui=False, data_sources=systems.data_sources())
    spark.range(1).count()
    started = time.perf_counter()
    seen = Observation("read")
    frame = read_table(spark, _endpoint(where), keyspace, ENQUEUED)
    frame.observe(seen, F.count(F.lit(1)).alias("rows")).write.format("noop").mode(
        "overwrite"
    ).save()
    measure.report({"rows": int(seen.get["rows"])}, time.perf_counter() - started)


def read_cqlsh(where: str, keyspace: str) -> None:
    """``cqlsh COPY TO`` a CSV file; the login goes in a private cqlshrc, not on argv."""
    import csv

    cqlsh = Path(sys.executable).parent / "cqlsh"
    host, port = where.rsplit(":", 1)
    with tempfile.TemporaryDirectory(prefix="mqf-bench-cqlsh-") as scratch:
        rc = Path(scratch) / ".cassandra" / "cqlshrc"
        rc.parent.mkdir()
        rc.touch(mode=0o600)
        rc.write_text(
            "[authentication]\n"
            f"username = {os.environ['MQF_CASSANDRA_USERNAME']}\n"
            f"password = {os.environ['MQF_CASSANDRA_PASSWORD']}\n"
        )
        target = Path(scratch) / "export.csv"
        statement = f"COPY {keyspace}.{ENQUEUED} TO '{target}'"
        started = time.perf_counter()
        done = subprocess.run(
            [str(cqlsh), host, port, "-e", statement],
            env={**os.environ, "HOME": scratch}, capture_output=True, text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        if done.returncode != 0 or "Error for" in done.stdout + done.stderr:
            raise SystemExit(f"cqlsh COPY failed: {(done.stdout + done.stderr)[-800:]}")
        with target.open(newline="") as export:
            rows = sum(1 for _ in csv.reader(export))
        written = target.stat().st_size
    measure.report({"rows": rows, "csv_bytes": written}, seconds)


# --- parent -------------------------------------------------------------------------------------


def run(
    entries: int,
    *,
    keep_servers: bool = False,
    cassandra: dict[str, Any] | None = None,
    cache: Path | None = None,
    quick_jit: bool = False,
) -> list[measure.Measurement]:
    """Measure both pairs on `entries`; against `cassandra` (connection info of a running
    server) or one started under the bench cache (stopped afterwards unless `keep_servers`).
    `quick_jit`: see `james_audit.spark_env`."""
    from mqforensics.services.harness import Harness

    directory = snapshot(entries, cache)
    harness = Harness(CACHE / "servers") if cassandra is None else None
    if harness is not None:
        # Its own server runs as in production, with the JDK's default JIT (docs/services.md).
        os.environ.setdefault("MQF_QUICK_JIT", "0")
    info = cassandra or harness.ensure("cassandra")  # type: ignore[union-attr]
    try:
        keyspace = f"bench_{entries}"
        where = _where(info)
        load_seconds = load(directory, _logged_in(info), keyspace)
        size = f"{entries:,} entries"
        as_of = _as_of(directory).isoformat()
        target = ["--cassandra", where, "--keyspace", keyspace]
        child = ["-m", "bench.james_live", "measure"]
        login = _login(info)
        with_spark = {**login, **spark_env(quick_jit=quick_jit)}
        results = [
            measure.run_subject("getsize", "Spark read + browse.sizes", "ours", size,
                                [*child, "getsize-ours", *target, "--as-of", as_of],
                                env=with_spark),
            measure.run_subject("getsize", "James's browse + per-row isStillEnqueued",
                                "baseline", size,
                                [*child, "getsize-james", *target, "--as-of", as_of],
                                env=login),
            measure.run_subject("live_read", "our Cassandra source (Spark)", "ours", size,
                                [*child, "read-ours", *target], env=with_spark),
            measure.run_subject("live_read", "cqlsh COPY TO", "baseline", size,
                                [*child, "read-cqlsh", *target], env=login),
        ]  # fmt: skip
    finally:
        if harness is not None and not keep_servers:
            harness.stop_all()
    ours, james = results[0].output["sizes"], results[1].output["sizes"]
    if ours != james:
        raise AssertionError(f"getSize differs: ours {ours}, James's algorithm {james}")
    if results[2].output["rows"] != results[3].output["rows"]:
        raise AssertionError(f"live reads differ: {results[2].output} vs {results[3].output}")
    for m in results:
        m.output["load_seconds"] = round(load_seconds, 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("measure")
    one.add_argument(
        "subject", choices=["getsize-ours", "getsize-james", "read-ours", "read-cqlsh"]
    )
    one.add_argument("--cassandra", required=True, metavar="HOST:PORT")
    one.add_argument("--keyspace", required=True)
    one.add_argument("--as-of", type=dt.datetime.fromisoformat)
    many = sub.add_parser("run")
    many.add_argument("--entries", type=int, default=10_000)
    many.add_argument("--keep-servers", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "run":
        for m in run(args.entries, keep_servers=args.keep_servers):
            print(json.dumps(measure.as_dict(m)))
        return 0
    info, keyspace = args.cassandra, args.keyspace
    if args.subject == "getsize-ours":
        getsize_ours(info, keyspace, args.as_of)
    elif args.subject == "getsize-james":
        getsize_james(info, keyspace, args.as_of)
    elif args.subject == "read-ours":
        read_ours(info, keyspace)
    else:
        read_cqlsh(info, keyspace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
