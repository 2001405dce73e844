"""What an audit of slimta reads (`options.SlimtaOptions`: ``disk=``, ``redis=``, ``s3=``...).

The loader the audit runner calls (`load`): every store is listed on the driver and read by
Spark tasks (`fleet`), each pickle decoded by the allow-list unpickler (`safe_pickle`) and, in
an erasure audit, each message searched for the subjects (`items.Item.search`), into the
items frame (`frames.SlimtaFrames`, `items.ITEMS`) every check reads (`checks`, with
`settings`). The runner writes the findings, the manifest and the summary, and pseudonymises
addresses; an empty store is nothing to audit (exit 2). What can be checked before Spark starts
is `SlimtaOptions.check`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.file_digest import listing_fingerprint
from mqforensics.filenames import first_listed, is_odd, odd_names_note, shown, unescaped
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.slimta.disk import DiskLayout, foreign_tmp_files
from mqforensics.systems.slimta.frames import SlimtaFrames
from mqforensics.systems.slimta.options import Settings, SlimtaOptions
from mqforensics.units import plural, utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.systems.slimta.fleet import Stores

KINDS = ("message", "tmp_file", "queue_entry", "other_key")


def _file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def inputs_of(stores: Stores) -> list[dict[str, Any]]:
    """The run manifest's inputs: where each store is (never a credential)."""
    inputs: list[dict[str, Any]] = []
    if stores.disk is not None:
        layout = stores.disk
        dirs = [d for d in dict.fromkeys((layout.env_dir, layout.meta_dir, layout.tmp_dir)) if d]
        inputs.append({"kind": "slimta DiskStorage", "location": shown(layout.env_dir),
                       "meta_dir": shown(layout.meta_dir),
                       "tmp_dir": _shown_or_none(layout.tmp_dir),
                       "fingerprint": listing_fingerprint(dirs)})  # fmt: skip
    if stores.redis is not None:
        inputs.append({"kind": "slimta RedisStorage", "location": stores.redis.where,
                       "prefix": stores.redis_prefix})  # fmt: skip
    if stores.s3 is not None:
        inputs.append({"kind": "slimta cloud storage", "location": stores.s3.store,
                       "endpoint": stores.s3_endpoint.endpoint_url or "AWS"})  # fmt: skip
    if stores.sqs_export is not None:
        path = Path(stores.sqs_export)
        inputs.append({"kind": "SQS export", "location": shown(path.resolve()),
                       "fingerprint": _file_fingerprint(path)})  # fmt: skip
    return inputs


def _shown_or_none(path: str | None) -> str | None:
    return None if path is None else shown(path)


def _odd_dirs(stores: Stores) -> list[str]:
    """The DiskStorage directories whose own names are odd (`filenames.is_odd`), escaped."""
    layout = stores.disk
    if layout is None:
        return []
    given = (layout.env_dir, layout.meta_dir, layout.tmp_dir)
    return [shown(d) for d in dict.fromkeys(given) if d is not None and is_odd(d)]


def foreign_note(layout: DiskLayout, foreign: list[str]) -> str:
    """What an audit says of the files of tmp_dir slimta never writes: how many, and the first."""
    listed = first_listed([shown(name) for name in foreign])
    return (
        f"{shown(str(layout.tmp_dir))} holds {plural(len(foreign), 'file')} slimta never writes "
        f"(not named tmpXXXXXXXX as mkstemp names its files), neither judged nor planned: "
        f"{listed}"
    )


def plan_inputs(stores: Stores, retry_maximum: int) -> dict[str, Any]:
    """The plan header's inputs: the stores (no credential) and the disk layout, which the
    executor's census needs to find each ``.meta``."""
    inputs: dict[str, Any] = {"stores": stores.describe(), "retry_maximum": retry_maximum}
    if stores.disk is not None:
        layout = stores.disk
        inputs["disk"] = {"env_dir": shown(layout.env_dir), "meta_dir": shown(layout.meta_dir),
                          "tmp_dir": _shown_or_none(layout.tmp_dir)}  # fmt: skip
    return inputs


def load(spark: SparkSession, options: SlimtaOptions, common: AuditArgs) -> Loaded[SlimtaFrames]:
    """The stores read into the items frame (computed now: every check reads it)."""
    from pyspark.sql import functions as F

    from mqforensics.spark import computed
    from mqforensics.systems.slimta.fleet import read_items

    stores = options.stores()
    items = computed(read_items(spark, stores, common.searched))
    escaped = F.filter(F.transform("parts", lambda p: p["name"]), lambda n: n.contains("\\x"))
    grouped = (
        items.groupBy("kind")
        .agg(
            F.count("*").alias("count"),
            F.flatten(F.collect_list(F.when(F.col("backend") == "disk", escaped))).alias("escaped"),
        )
        .collect()
    )
    counts = {r["kind"]: r["count"] for r in grouped}
    notes = ["items: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)]
    foreign = [] if stores.disk is None else foreign_tmp_files(stores.disk)
    if foreign and stores.disk is not None:
        notes.append(foreign_note(stores.disk, foreign))
    odd = odd_names_note(_odd_dirs(stores) + [
        name for r in grouped for name in r["escaped"] if is_odd(unescaped(os.path.basename(name)))
    ])  # fmt: skip
    if odd is not None:
        notes.append(odd)
    return Loaded(
        frames=SlimtaFrames(items),
        source="; ".join(stores.describe()),
        as_of=common.as_of or utc_now(),
        objects=sum(counts.values()),
        inputs=inputs_of(stores),
        plan_inputs=plan_inputs(stores, options.retry_maximum),
        notes=notes,
    )


def settings(options: SlimtaOptions, common: AuditArgs, loaded: Loaded[SlimtaFrames]) -> Settings:
    """What every check judges against."""
    disk = loaded.plan_inputs.get("disk") or {}
    return Settings(
        as_of=loaded.as_of,
        retry_maximum=options.retry_maximum,
        retention=options.retention,
        stale_tmp=options.stale_tmp,
        sqs_export=options.sqs_export is not None,
        env_dir=disk.get("env_dir"),
        meta_dir=disk.get("meta_dir"),
        tmp_dir=disk.get("tmp_dir"),
        subjects=common.subjects,
        subject_key=common.subject_key,
        depth=common.searched.depth,
    )
