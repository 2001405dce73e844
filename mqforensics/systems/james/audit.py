"""`mqforensics audit james`: read a James state, run every check, write and summarise findings.

Outputs in ``--out``: ``findings.parquet`` (the findings schema) and ``findings.json`` (a list of
objects with every findings column, ``detail`` decoded), each written to a temporary name and
renamed, so a failed run never leaves a half-written file. Exit status: 0 when no finding is
``error`` or worse, 1 otherwise, 2 on bad input (see cli.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.findings import exit_status, summarise, write_findings
from mqforensics.units import parse_duration, parse_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.systems.james.state import JamesState


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a James state is read from: shared by `audit james` and `validate james`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cassandra",
        metavar="HOST[:PORT]",
        help="live cluster; login from MQF_CASSANDRA_USERNAME/_PASSWORD",
    )
    source.add_argument(
        "--snapshot",
        type=Path,
        metavar="DIR",
        help="directory of cqlsh CSV or Parquet table exports",
    )
    blobs = parser.add_mutually_exclusive_group()
    blobs.add_argument("--blobs", metavar="s3://BUCKET", help="list the default blob bucket")
    blobs.add_argument("--blob-inventory", metavar="MANIFEST", help="an S3 Inventory report")
    blobs.add_argument("--blob-dir", type=Path, metavar="DIR", help="a local copy of the bucket")
    blobs.add_argument(
        "--blob-listing",
        type=Path,
        metavar="PARQUET",
        help="a saved listing with the mqf_blobs columns",
    )
    parser.add_argument(
        "--blob-split",
        choices=["prefix", "hex"],
        default="prefix",
        help="list --blobs in parallel by top-level prefix, or by 17 key ranges (hex: for flat "
        "buckets of UUID/hash keys such as passthrough blob ids)",
    )
    parser.add_argument(
        "--as-of",
        type=parse_instant,
        help="instant age checks are judged at (default: snapshot time, or now)",
    )
    parser.add_argument("--keyspace", default="apache_james")
    parser.add_argument(
        "--scan",
        action="store_true",
        help="token-range full scan instead of slice enumeration (live only)",
    )
    parser.add_argument(
        "--since",
        type=parse_instant,
        help="enumerate slices from this instant (live; default: 7 days before "
        "each queue's contentStart)",
    )
    parser.add_argument("--queue", action="append", default=[], help="only this queue (repeat)")
    parser.add_argument("--consistency", default="LOCAL_QUORUM")  # fmt: skip


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("james", help="Apache James distributed mail queue")
    add_state_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="directory for the findings")
    parser.add_argument("--stuck-after", type=parse_duration, default=dt.timedelta(days=1))
    parser.add_argument("--blob-grace", type=parse_duration, default=dt.timedelta(hours=1))
    parser.add_argument(
        "--references-complete",
        action="store_true",
        help="the mail queue is the only referrer of the blob bucket",
    )
    parser.set_defaults(run=run)  # fmt: skip


def load_state(spark: SparkSession, args: argparse.Namespace) -> JamesState:
    from mqforensics.sources.blob_inventory import read_james_blobs
    from mqforensics.sources.blobstore import S3Endpoint
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    if args.cassandra:
        from mqforensics.systems.james.live import LiveOptions, read_live

        endpoint = CassandraEndpoint.parse(
            args.cassandra,
            username=os.environ.get("MQF_CASSANDRA_USERNAME") or None,
            password=os.environ.get("MQF_CASSANDRA_PASSWORD") or None,
            local_dc=os.environ.get("MQF_CASSANDRA_LOCAL_DC") or None,
        )
        options = LiveOptions(
            keyspace=args.keyspace,
            mode="scan" if args.scan else "enumerate",
            queues=tuple(args.queue),
            since=args.since,
            consistency=args.consistency,
        )
        state = read_live(spark, endpoint, options, as_of=args.as_of)
    else:
        from mqforensics.systems.james.snapshot import read_snapshot

        state = read_snapshot(spark, args.snapshot, as_of=args.as_of)
        state.source = state.source or f"snapshot {args.snapshot}"
    if args.blobs:
        state.blobs = read_james_blobs(
            spark, location=args.blobs, endpoint=S3Endpoint.from_env(), split=args.blob_split
        )
    elif args.blob_inventory:
        state.blobs = read_james_blobs(
            spark, inventory=args.blob_inventory, endpoint=S3Endpoint.from_env()
        )
    elif args.blob_dir:
        state.blobs = read_james_blobs(spark, location=str(args.blob_dir))
    elif args.blob_listing:
        attach_blob_listing(spark, state, args.blob_listing)
    return state


def attach_blob_listing(spark: SparkSession, state: JamesState, path: Path) -> None:
    """Give `state` the listing saved at `path` (`read_blob_listing`), read again by each check
    that needs it rather than kept (`JamesState.blobs_rereadable`)."""
    from mqforensics.sources import parquet_footer

    state.blobs = read_blob_listing(spark, path)
    state.blobs_rereadable = True
    state.blob_rows = parquet_footer.row_count(path)


def read_blob_listing(spark: SparkSession, path: Path) -> DataFrame:
    """A listing saved as Parquet with the `mqf_blobs` columns, with blob ids parsed."""
    from mqforensics.errors import InputError
    from mqforensics.sources import parquet_footer
    from mqforensics.sources.blobstore import SCHEMA
    from mqforensics.systems.james.blob_ids import with_parsed_blob_ids

    if not path.exists():
        raise InputError(f"blob listing {path} does not exist")
    frame = parquet_footer.read(spark, path)
    wanted = [c.split()[0] for c in SCHEMA.split(", ")]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InputError(f"blob listing {path} lacks column(s) {', '.join(missing)}")
    return with_parsed_blob_ids(frame.select(*wanted))


def add_findings_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, ``--as-of`` and ``--reveal-addresses`` of the logqueue and slimta audits."""
    parser.add_argument("--out", type=Path, required=True, help="directory for the findings")
    parser.add_argument("--as-of", type=parse_instant, help="instant judged at (default: now)")
    parser.add_argument(
        "--reveal-addresses", action="store_true",
        help="show mail addresses as they are (default: pseudonymised)",
    )  # fmt: skip


def audit(spark: SparkSession, args: argparse.Namespace) -> tuple[JamesState, list[dict[str, Any]]]:
    """Read the state the options name, run the checks and write the findings to ``args.out``;
    the state stays persisted for the caller (a notebook explores it; `run` unpersists it)."""
    from mqforensics.systems.james.checks import AuditOptions, run_checks

    state = load_state(spark, args)
    options = AuditOptions(
        stuck_after=args.stuck_after,
        blob_grace=args.blob_grace,
        references_complete=args.references_complete,
    )
    return state, write_findings(run_checks(state, options), args.out)


def run(args: argparse.Namespace) -> int:
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spark = session("mqforensics-audit-james")
    with spark_progress(spark, "audit james"):
        state, rows = audit(spark, args)
    state.unpersist()
    print(f"James queue state: {state.source}; judged at {state.as_of:%Y-%m-%dT%H:%M:%SZ}")
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'} and {args.out / 'findings.parquet'}")
    return exit_status(rows)
