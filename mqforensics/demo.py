"""`mqforensics demo`: start Spark, read the bundled sample through a data source, summarise it.

For now the bundled sample is a small local blob store (datasets/sample/blobstore); the James
audit and its cleanup plan replace this summary as they land.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError

BUNDLED = Path(__file__).resolve().parent.parent / "datasets" / "sample" / "blobstore"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("demo", help="summarise the bundled sample with local Spark")
    parser.add_argument(
        "--dataset",
        type=Path,
        default=BUNDLED,
        help="blob directory to read (default: the bundled sample)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("out/demo"),
        help="where summary.json is written (default: %(default)s)",
    )
    parser.set_defaults(run=run)


def summarise_blobs(blobs: Any) -> dict[str, Any]:
    """Counts, bytes and size quartiles of a `mqf_blobs` frame, computed in Spark."""
    from pyspark.sql import functions as F

    row = blobs.agg(
        F.count("*").alias("objects"),
        F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
        F.percentile_approx("size", [0.25, 0.5, 0.75]).alias("quartiles"),
        F.max("size").alias("largest"),
    ).first()
    return {
        "objects": int(row["objects"]),
        "bytes": int(row["bytes"]),
        "size_quartiles": [int(q) for q in (row["quartiles"] or [])],
        "largest_object_bytes": int(row["largest"] or 0),
    }


def run(args: argparse.Namespace) -> int:
    from mqforensics.blobstore import read_blobs
    from mqforensics.spark import describe, session

    if not args.dataset.is_dir():
        raise InputError(f"dataset directory {args.dataset} does not exist")
    started = time.monotonic()
    spark = session("mqforensics-demo")
    print(f"Spark {spark.version} ({describe(spark)}) started in {time.monotonic() - started:.1f}s")
    blobs = read_blobs(spark, str(args.dataset))
    summary = {"dataset": str(args.dataset), **summarise_blobs(blobs)}
    print(f"Blob store {args.dataset}:")
    print(f"  objects            {summary['objects']:>10,}")
    print(f"  bytes              {summary['bytes']:>10,}")
    print(f"  size quartiles     {', '.join(f'{q:,}' for q in summary['size_quartiles'])}")
    print(f"  largest object     {summary['largest_object_bytes']:>10,}")
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "summary.json"
    target.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"Wrote {target}")
    return 0
