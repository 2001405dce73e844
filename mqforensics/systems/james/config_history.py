"""James's mail queue view configuration history, from its event-sourced `eventstore` rows.

James appends a ``ConfigurationChanged`` event (type ``cassandra-mail-queue-view-configuration``)
to aggregate ``CassandraMailQueueViewConfiguration`` whenever sliceWindow, bucketCount or
updateBrowseStartPace change at start-up. ``sliceWindow`` is a Java Duration written as decimal
seconds (``3600.000000000``). Source: ConfigurationChangedDTO.java.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from mqforensics.errors import InputError
from mqforensics.spark import local_frame
from mqforensics.systems.james.schema import CONFIG_AGGREGATE, CONFIG_HISTORY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENT_TYPE = "cassandra-mail-queue-view-configuration"
# James's defaults (CassandraMailQueueViewConfiguration), used when a store has no event at all.
DEFAULT = (3600, 1, 1000)


def parse_event(event_json: str, where: str) -> tuple[int, int, int, int]:
    """(eventid, slice_window_seconds, bucket_count, update_browse_start_pace) of one event."""
    try:
        event = json.loads(event_json)
        if event.get("type") != EVENT_TYPE:
            raise InputError(f"{where}: event type {event.get('type')!r} is not {EVENT_TYPE!r}")
        window = Decimal(str(event["sliceWindow"]))
        if window != window.to_integral_value() or window <= 0:
            raise InputError(f"{where}: sliceWindow {window} is not a positive whole second count")
        return (
            int(event["eventId"]),
            int(window),
            int(event["bucketCount"]),
            int(event["updateBrowseStartPace"]),
        )
    except InputError:
        raise
    except (ValueError, KeyError, TypeError, InvalidOperation) as exc:
        raise InputError(f"{where}: malformed configuration event ({exc})") from None


def history_rows(event_rows: list[Any], where: str) -> list[tuple[int, int, int, int]]:
    """Parsed events of the configuration aggregate from raw eventstore rows, in eventid order.

    `event_rows` have ``aggregateid, eventid, event``; other aggregates are ignored.
    """
    parsed = []
    for row in event_rows:
        if row["aggregateid"] != CONFIG_AGGREGATE:
            continue
        parsed.append(parse_event(row["event"], f"{where} eventid {row['eventid']}"))
    return sorted(parsed)


def history_frame(spark: SparkSession, event_store: DataFrame, where: str) -> DataFrame:
    """The CONFIG_HISTORY frame from an EVENT_STORE frame (small: one row per config change)."""
    rows = (
        event_store.where(event_store.aggregateid == CONFIG_AGGREGATE)
        .select("aggregateid", "eventid", "event")
        .collect()
    )
    return local_frame(spark, history_rows(rows, where), CONFIG_HISTORY)
