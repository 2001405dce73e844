"""What a Postfix operator trends (`measure`), per Postfix queue, from the files frame of
`frames.PostfixFrames` at ``loaded.as_of`` (docs/history.md), as ``qshape`` and
``postfix_exporter`` show it, with zeros: every queue Postfix lays out gets its figures whether
or not it holds a file, so that a drained queue is a 0, not a gap in its series.

``queue`` is the Postfix queue (``maildrop``, ``incoming``, ``active``, ``deferred``, ``hold``,
``corrupt``, ``saved``; and for ``rows`` the log queues ``defer``, ``bounce``, ``trace``). An
audit of one queue directory names the queue alone. An audit of several (a fleet, ``--queue-dir
HOST=DIR`` given more than once: the frames carry a ``host`` column, the name given, or the
directory) puts them in one run, so their series must differ: then ``queue`` is
``<host>/<queue>`` (``mx1/deferred``). The host goes in ``queue``, not ``item``, because
``item`` already holds the age band, and a rule picking ``queue = "*/deferred"`` then sees each
host's deferred queue as its own series.

- ``rows`` (count): the files the queue holds (queue files in a message queue, logs in a log
  queue), whatever their state.
- ``live_mails`` (count): the queue files of a message queue: a file exists until the message
  is delivered, bounced or deleted, so each one is mail still queued (an unfinished or damaged
  one too: that is what the checks report, not a reason to uncount it).
- ``mails_by_age`` (count; ``item`` = the band of `metrics.AGE_BANDS`): those files by the age
  of their message at ``as_of``, counted from its arrival (``T`` record), else from its file's
  last change, as `checks.old_hold` and `checks.retention_exceeded` count it; all four bands,
  zeros included. A file with neither (not even stat'able) is in ``live_mails`` and in no band.
- ``oldest_live_age`` (seconds): the oldest of those ages, only when the queue holds a dated
  file.
- ``queue_bytes`` (bytes): the sizes of the queue files of a message queue (what ``qshape``
  and ``postqueue -j``'s ``message_size`` approximate; the file's own size here).

One Spark job: the files frame grouped by host, queue and kind, a few rows per queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqforensics.metrics import Metric, age_metrics, band_counts, epoch_seconds
from mqforensics.systems.postfix.queue_dir import LOG_QUEUES, MESSAGE_QUEUES

if TYPE_CHECKING:
    from mqforensics.spec import Loaded
    from mqforensics.systems.postfix.frames import PostfixFrames

__all__ = ["measure"]

# The figures of a queue counted in its row (0 when the queue holds no file).
_COUNTED = ("rows", "live_mails", "queue_bytes")


def _hosts(loaded: Loaded[PostfixFrames], found: list[Any]) -> list[str]:
    """The hosts of the audit, in the order given (those of the frames after them)."""
    given = [d.get("host") for d in loaded.plan_inputs.get("queue_dirs", [])]
    hosts = [h for h in given if isinstance(h, str)]
    return list(dict.fromkeys([*hosts, *sorted({h for h in found if h is not None})]))


def measure(loaded: Loaded[PostfixFrames]) -> list[Metric]:
    """The figures of every queue of every host (see the module docstring)."""
    from pyspark.sql import functions as F

    files = loaded.frames.files
    message = F.col("kind") == "message"
    started = F.coalesce(F.col("arrival"), F.col("modified")).cast("double")
    age = F.lit(epoch_seconds(loaded.as_of)) - started
    rows = (
        files.groupBy("host", "queue")
        .agg(
            F.count("*").alias("rows"),
            F.count(F.when(message, 1)).alias("live_mails"),
            F.sum(F.when(message, F.col("size"))).alias("queue_bytes"),
            F.max(F.when(message, age)).alias("oldest"),
            *band_counts(age, message),
        )
        .collect()
    )
    by_queue = {(row["host"], row["queue"]): row for row in rows}
    hosts = _hosts(loaded, [host for host, _ in by_queue])
    found: list[Metric] = []
    for host in hosts:
        for queue in (*MESSAGE_QUEUES, *LOG_QUEUES):
            label = f"{host}/{queue}" if len(hosts) > 1 else queue
            row = by_queue.get((host, queue))
            figure = {name: (row[name] if row else None) or 0 for name in _COUNTED}
            found.append(Metric("rows", figure["rows"], "count", queue=label))
            if queue in LOG_QUEUES:
                continue
            found.append(Metric("live_mails", figure["live_mails"], "count", queue=label))
            found += age_metrics(row.asDict() if row is not None else None, label)
            found.append(Metric("queue_bytes", figure["queue_bytes"], "bytes", queue=label))
    return found
