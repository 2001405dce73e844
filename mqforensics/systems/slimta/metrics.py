"""What a slimta operator trends (`measure`), per store, from the items frame of
`frames.SlimtaFrames` at ``loaded.as_of`` (docs/history.md). ``queue`` is the store as the
frame names it (and as every finding's ``queue`` does): a DiskStorage's env_dir, a Redis
``HOST:PORT/DB``, an S3 ``s3://BUCKET/PREFIX``; every store holding an item gets its figures,
zeros included (a store holding nothing at all gives no row to the frame, hence no figure).

- ``rows`` (count): the items the store holds, of every kind (messages, tmp files, queue
  entries, other keys).
- ``live_mails`` (count): its message items: a queued message, whatever it is made of, torn
  writes and undecodable ones included, as `checks.retention_exceeded` counts what holds mail
  (slimta removes a message's parts once it is delivered or given up).
- ``mails_by_age`` (count; ``item`` = the band of `metrics.AGE_BANDS`): those messages by their
  age at ``as_of``, from the envelope's arrival ``timestamp``, else the newest part's
  modification time, else the meta's next attempt, as `retention_exceeded` judges it; all four
  bands, zeros included. A message with none of the three is in ``live_mails`` and in no band.
- ``oldest_live_age`` (seconds): the oldest of those ages, only when the store holds a dated
  message.
- ``queue_bytes`` (bytes): the stored bytes of its messages (every part: ``.env`` and
  ``.meta`` files, a Redis hash's fields, an S3 object).
- ``mails_by_attempts`` (count; ``item`` = `ATTEMPT_BUCKETS`'s label, or ``unknown``): its
  messages by the delivery attempts their meta records (``attempts``; ``unknown`` when it
  records none: the meta is missing, does not decode or lacks ``attempts``); every bucket,
  zeros included. Retries pile up in the upper buckets when a destination keeps failing
  (`retry_exhausted` says which passed the app's maximum).

One Spark job: the items grouped by store, one row per store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqforensics.metrics import Metric, age_metrics, band_counts, epoch_seconds
from mqforensics.systems.slimta.items import MESSAGE

if TYPE_CHECKING:
    from pyspark.sql import Column

    from mqforensics.spec import Loaded
    from mqforensics.systems.slimta.frames import SlimtaFrames

__all__ = ["ATTEMPT_BUCKETS", "measure"]

# Attempt buckets (label, least attempts, most attempts; None: open) of ``mails_by_attempts``.
ATTEMPT_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("0", 0, 0),
    ("1", 1, 1),
    ("2 to 4", 2, 4),
    ("5 or more", 5, None),
)
UNKNOWN_ATTEMPTS = "unknown"


def _attempts(wanted: Column) -> list[Column]:
    """One count per bucket of `ATTEMPT_BUCKETS` of the `wanted` rows, then the unknown ones."""
    from pyspark.sql import functions as F

    attempts = F.col("attempts")
    counts = []
    for index, (_, low, high) in enumerate(ATTEMPT_BUCKETS):
        inside = wanted & (attempts >= F.lit(low))
        if high is not None:
            inside = inside & (attempts <= F.lit(high))
        counts.append(F.count(F.when(inside, 1)).alias(f"attempts_{index}"))
    unknown = wanted & (attempts.isNull() | (attempts < 0))
    counts.append(F.count(F.when(unknown, 1)).alias("attempts_unknown"))
    return counts


def measure(loaded: Loaded[SlimtaFrames]) -> list[Metric]:
    """The figures of every store (see the module docstring), stores in name order."""
    from pyspark.sql import functions as F

    items = loaded.frames.items
    message = F.col("kind") == MESSAGE
    since = F.coalesce(F.col("arrival"), F.col("modified"), F.col("next_attempt"))
    age = F.lit(epoch_seconds(loaded.as_of)) - since.cast("double")
    rows = (
        items.groupBy("store")
        .agg(
            F.count("*").alias("rows"),
            F.count(F.when(message, 1)).alias("live_mails"),
            F.sum(F.when(message, F.col("stored_bytes"))).alias("queue_bytes"),
            F.max(F.when(message, age)).alias("oldest"),
            *band_counts(age, message),
            *_attempts(message),
        )
        .collect()
    )
    found: list[Metric] = []
    for row in sorted(rows, key=lambda r: r["store"] or ""):
        store = row["store"] or ""
        found += [
            Metric("rows", row["rows"], "count", queue=store),
            Metric("live_mails", row["live_mails"], "count", queue=store),
            *age_metrics(row.asDict(), store),
        ]
        found.append(Metric("queue_bytes", row["queue_bytes"] or 0, "bytes", queue=store))
        found += [
            Metric("mails_by_attempts", row[f"attempts_{i}"], "count", queue=store, item=label)
            for i, (label, _, _) in enumerate(ATTEMPT_BUCKETS)
        ]
        found.append(
            Metric("mails_by_attempts", row["attempts_unknown"], "count", queue=store,
                   item=UNKNOWN_ATTEMPTS)
        )  # fmt: skip
    return found
