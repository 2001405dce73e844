"""Write the bundled James sample used by `make demo` into datasets/james/sample/.

V4, queues spool/outgoing/bounces, a slice window change 3600 s -> 900 s with bucket count 1 -> 4,
passthrough blobs, about 300 mails and every anomaly of docs/james.md at least once. The output is
a Parquet snapshot, a `blobs/` directory, ground_truth.json and ANOMALIES.md.

    .venv/bin/python datasets/james/make_sample.py [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from datasets.james.generate import AnomalyCounts, GenerationSpec, write_parquet

SAMPLE_SPEC = GenerationSpec(
    seed=20261103,
    table_version="v4",
    queues=("spool", "outgoing", "bounces"),
    blob_strategy="passthrough",
    normal_mails=300,
    anomalies=AnomalyCounts(
        unreclaimed_partitions=2,
        cleanup_pending_partitions=2,
        pinned_browse_start=1,
        empty_queue_old_browse_start=1,
        lagging_browse_start=1,
        invisible_mails=2,
        stuck_mails=2,
        orphaned_blobs=3,
        young_orphaned_blobs=2,
        dangling_blob_refs=3,
        bucket_mismatches=2,
        slice_mismatches=2,
        config_violations=1,
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "sample")
    args = parser.parse_args()
    # The demo's retention policy is written by hand, not generated: keep it.
    policy = args.out / "policy.toml"
    kept = policy.read_bytes() if policy.exists() else None
    if args.out.exists():
        shutil.rmtree(args.out)
    truth = write_parquet(SAMPLE_SPEC, args.out)
    if kept is not None:
        policy.write_bytes(kept)
    print(f"wrote {args.out} ({len(truth)} expected findings)")


if __name__ == "__main__":
    main()
