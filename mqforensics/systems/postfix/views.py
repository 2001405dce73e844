"""What notebooks draw of a Postfix audit (``SPEC.views``): renderings only.

- `qshape`: the queue's shape as Postfix's own ``qshape`` prints it, recipient (or sender)
  domains by age bucket, counted in Spark from the audit's frames.
- `queued_messages`: the queue files with their sender, pending recipients, arrival and size.

Nothing here decides what is wrong (the checks do). Importing this module imports neither
Spark nor pandas (the system's spec imports it): each function imports them when it runs.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column

    from mqforensics.systems.postfix.frames import PostfixFrames

# The queues qshape shows by default here: every queue postqueue lists (qshape.pl itself shows
# incoming and active unless queues are named).
QSHAPE_QUEUES = ("incoming", "active", "deferred", "hold", "maildrop")
TOTAL = "TOTAL"
# qshape's name for the null sender (``<>``, a bounce's).
NULL_SENDER = "MAILER-DAEMON"
BY = ("recipient", "sender")
MESSAGE_COLUMNS = ["host", "queue", "queue_id", "sender", "pending", "arrival", "size"]


def _number(minutes: float) -> str:
    """Minutes as Perl prints them: ``5``, ``2.5``."""
    return str(int(minutes)) if float(minutes).is_integer() else repr(float(minutes))


def qshape_bounds(tick: float = 5, buckets: int = 10, linear: bool = False) -> list[float]:
    """The upper bounds, in minutes, of every bucket but the last (which has none): bucket
    ``b`` (from 1) counts ages below ``bounds[b-1]`` and at least the bound before it. Geometric
    (qshape's default): ``tick, 2 tick, 4 tick, ...``; `linear` (``qshape -l``): ``tick, 2 tick,
    3 tick, ...``."""
    if not tick > 0 or buckets < 1 or int(buckets) != buckets:
        raise ValueError(f"qshape needs tick > 0 and buckets >= 1 (got {tick}, {buckets})")
    return [tick * (b if linear else 2 ** (b - 1)) for b in range(1, int(buckets))]


def qshape_columns(tick: float = 5, buckets: int = 10, linear: bool = False) -> list[str]:
    """The count columns of `qshape`, headed as qshape.pl's ``results()`` heads them: ``T``
    (the total), then each bucket's upper bound in minutes, the last one's lower bound with
    ``+`` (the defaults: ``T 5 10 20 40 80 160 320 640 1280 1280+``)."""
    bounds = qshape_bounds(tick, buckets, linear)
    return ["T", *map(_number, bounds), f"{_number(bounds[-1] if bounds else 0)}+"]


def _domain(address: Column) -> Column:
    """qshape.pl's ``wanted()`` on one address: lower case, the null sender as
    ``MAILER-DAEMON``, everything up to the last ``@`` removed, ``..`` made ``.``, one leading
    and one trailing dot removed. An address without ``@`` stays whole."""
    from pyspark.sql import functions as F

    lowered = F.lower(address)
    named = F.when(lowered == "", F.lit(NULL_SENDER)).otherwise(lowered)
    host = F.regexp_replace(named, "^.*@", "")
    return F.regexp_replace(F.regexp_replace(host, r"\.\.", "."), r"^\.?(.+?)\.?$", "$1")


def _bucket(age_seconds: Column, bounds: list[float], last: int) -> Column:
    from pyspark.sql import functions as F

    bucket = F.lit(last)
    for b in reversed(range(1, len(bounds) + 1)):
        bucket = F.when(age_seconds < F.lit(bounds[b - 1] * 60), F.lit(b)).otherwise(bucket)
    return bucket


def qshape(
    frames: PostfixFrames,
    *,
    as_of: dt.datetime,
    by: str = "recipient",
    queues: Sequence[str] = QSHAPE_QUEUES,
    hosts: Sequence[str] | None = None,
    tick: float = 5,
    buckets: int = 10,
    linear: bool = False,
    reveal: bool = False,
    salt: str = "",
) -> pd.DataFrame:
    """The queue's shape at `as_of` as Postfix's ``qshape`` prints it (``qshape.pl`` in
    ``postfix/auxiliary/qshape/`` of github.com/vdukhovni/postfix, and QSHAPE_README): a row per
    recipient domain (`by` ``"sender"``: sender domain, ``qshape -s``), the ``TOTAL`` row first,
    then the domains by count, most first (then shorter names first, as qshape sorts, then by
    name); a column ``domain``, then ``T`` (the row's total) and one column per age bucket
    (`qshape_columns`).

    As qshape.pl counts: every pending recipient (its ``R`` records; ``state = 'pending'``) of
    a ready (mode 0700) queue file that reads to its end record with a sender record and at
    least one pending recipient, in `queues` (of `hosts`, default all); by sender, each such
    message once. A message's age is `as_of` less its arrival (``T`` record; whole seconds as
    qshape takes them); it falls in bucket 1 below `tick` minutes, then in bucket ``2 +
    floor(log2(age / tick))`` (`linear`: ``1 + floor(age / tick)``), the last bucket taking
    every older one (qshape.pl ``bucket()``). The domain is qshape's (`_domain`).

    Where this differs from qshape.pl: a maildrop file (postdrop writes ``T`` first, which
    qshape.pl does not expect and skips the file) counts by its ``T`` record; a message whose
    expiry was forced (``postsuper -e``, Postfix 3.5: mode 0710) still counts (qshape.pl takes
    only files whose mode and 0733 is 0700); a file without ``T`` ages from its mtime, as the
    checks do; and bucket edges are compared exactly rather than through floating ``log``.

    Domains are kept (`mqforensics.privacy` keeps them); an address without ``@``, whose whole
    text qshape shows, is pseudonymised unless `reveal`.
    """
    import pandas as pd
    from pyspark.sql import functions as F

    from mqforensics.privacy import pseudonymize_address

    if by not in BY:
        raise ValueError(f"qshape by {by!r}: one of {', '.join(BY)}")
    columns = qshape_columns(tick, buckets, linear)
    bounds = qshape_bounds(tick, buckets, linear)
    pending = F.filter("recipients", lambda r: r["state"] == "pending")
    messages = frames.messages.where(
        F.col("queue").isin(list(queues))
        & F.col("ready")
        & F.col("complete")
        & F.col("sender").isNotNull()
        & (F.size(pending) > 0)
    )
    if hosts is not None:
        messages = messages.where(F.col("host").isin(list(hosts)))
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=dt.UTC)
    now = math.floor(as_of.timestamp())
    age = F.lit(now) - F.coalesce(F.col("arrival"), F.col("modified")).cast("long")
    addresses = F.array(F.col("sender")) if by == "sender" else pending["address"]
    bucketed = messages.select(
        _bucket(age, bounds, len(columns) - 1).alias("bucket"),
        F.explode(addresses).alias("address"),
    ).where(F.col("address").isNotNull())
    counted = bucketed.groupBy(
        _domain(F.col("address")).alias("domain"),
        (~F.col("address").contains("@") & (F.col("address") != "")).alias("bare"),
        "bucket",
    ).count()
    rows = [(r["domain"], r["bare"], r["bucket"], r["count"]) for r in counted.collect()]
    shown = [
        (pseudonymize_address(domain, salt) if bare and not reveal else domain, bucket, count)
        for domain, bare, bucket, count in rows
    ]
    heads = columns[1:]
    cells: dict[str, list[int]] = {}
    for domain, bucket, count in shown:
        cells.setdefault(domain, [0] * len(heads))[bucket - 1] += count
    total = [sum(counts[i] for counts in cells.values()) for i in range(len(heads))]
    ordered = sorted(cells.items(), key=lambda kv: (-sum(kv[1]), len(kv[0]), kv[0]))
    table = pd.DataFrame(
        [[TOTAL, sum(total), *total], *([d, sum(c), *c] for d, c in ordered)],
        columns=["domain", *columns],
    )
    for column in columns:
        table[column] = table[column].astype("int64")
    table.attrs.update(by=by, queues=list(queues), as_of=as_of.isoformat())
    return table


def queued_messages(frames: PostfixFrames, *, queues: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per queue file (of `queues`, default every message queue), in queue order then
    oldest first: its host, queue and id, its sender (the null sender as ``<>``), its pending
    recipients (comma-separated; None when it has none), its arrival (UTC) and size in bytes.
    Addresses are as stored: pseudonymise the table to show it (`privacy.pseudonymize_table`)."""
    import pandas as pd
    from pyspark.sql import functions as F

    from mqforensics.systems.postfix.queue_dir import MESSAGE_QUEUES

    order = list(queues or MESSAGE_QUEUES)
    pending = F.filter("recipients", lambda r: r["state"] == "pending")
    rank = F.array_position(F.array(*map(F.lit, order)), F.col("queue"))
    rows = (
        frames.messages.where(F.col("queue").isin(order))
        .select(
            "host",
            "queue",
            "queue_id",
            F.when(F.col("sender") == "", "<>").otherwise(F.col("sender")).alias("sender"),
            F.when(F.size(pending) > 0, F.array_join(pending["address"], ", ")).alias("pending"),
            "arrival",
            "size",
            rank.alias("_rank"),
        )
        .orderBy("host", "_rank", "arrival", "queue_id")
        .drop("_rank")
    )
    table: Any = rows.toPandas()
    if table.empty:
        return pd.DataFrame(columns=MESSAGE_COLUMNS)
    table["arrival"] = pd.to_datetime(table["arrival"], utc=True)
    return table[MESSAGE_COLUMNS].reset_index(drop=True)
