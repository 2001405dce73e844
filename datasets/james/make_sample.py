"""Write the bundled James sample used by `make demo` into datasets/james/sample/.

V4, queues spool/outgoing/bounces, a slice window change 3600 s -> 900 s with bucket count 1 -> 4,
passthrough blobs, about 300 mails and every anomaly of docs/james.md at least once. The output is
a Parquet snapshot, a `blobs/` directory, ground_truth.json and ANOMALIES.md. The sample is
audited for the data subjects of its policy's erasure rule (``--erasure-policy policy.toml``), so
the ground truth also holds a `personal_data` finding for every view row holding one.

    .venv/bin/python -m datasets.james.make_sample [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

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


def erased_subjects(policy: Path) -> set[str]:
    """The SHA-256 of every subject of the policy's erase_subject rules (as the policy module
    hashes them: lower-cased, trimmed)."""
    from mqforensics.retention.policy import subject_hash

    document = tomllib.loads(policy.read_text())
    hashes: set[str] = set()
    for rule in document.get("rules", []):
        if rule.get("kind") == "erase_subject":
            hashes |= {subject_hash(a) for a in rule.get("addresses", [])}
            hashes |= set(rule.get("address_sha256", []))
    return hashes


def personal_data(directory: Path, subjects: set[str]) -> list[dict[str, Any]]:
    """The `personal_data` findings of the sample's view rows: one per row whose sender, a
    recipient or a per-recipient header's address is a subject (docs/james.md)."""
    import pyarrow.parquet as pq

    from mqforensics.retention.policy import subject_hash

    found = []
    for row in pq.read_table(directory / "enqueuedmailsv4.parquet").to_pylist():
        addresses = [row["sender"], *(row["recipients"] or [])]
        addresses += [t["_1"] for t in row["perrecipientspecificheaders"] or []]
        if any(a is not None and subject_hash(a) in subjects for a in addresses):
            found.append({"check": "personal_data", "severity": "info",
                          "queue": row["queuename"], "subject": row["enqueueid"]})  # fmt: skip
    return found


def add_personal_data(directory: Path, policy: Path) -> int:
    """Add the personal_data findings of `policy`'s erasure rules to the sample's ground truth
    and ANOMALIES.md; how many."""
    found = personal_data(directory, erased_subjects(policy))
    path = directory / "ground_truth.json"
    truth = json.loads(path.read_text())
    truth["findings"] = sorted(
        truth["findings"] + found, key=lambda f: (f["check"], f["queue"] or "", f["subject"])
    )
    truth["notes"].append(
        f"audited with --erasure-policy {policy.name}: each view row holding a data subject of "
        "its erase_subject rules is a personal_data finding (info)"
    )
    path.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    anomalies = directory / "ANOMALIES.md"
    text = anomalies.read_text()
    text += (
        f"\nAudited with `--erasure-policy {policy.name}` (as `mqforensics demo` does), the "
        f"{len(found)} view rows holding the data subject of its `erase_subject` rule are "
        "`personal_data` findings (info) too; `ground_truth.json` lists them.\n"
    )
    anomalies.write_text(text)
    return len(found)


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
    subjects = 0
    if kept is not None:
        policy.write_bytes(kept)
        subjects = add_personal_data(args.out, policy)
    print(f"wrote {args.out} ({len(truth) + subjects} expected findings)")


if __name__ == "__main__":
    main()
