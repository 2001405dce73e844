"""Live enumeration on the real Cassandra after a slice-window change James's rule forbids
(3600 s, then 2400 s, which does not divide it): every historical window's grid is walked, so
the enumerated read finds every partition a full token-range scan finds."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from datasets.james import generate as gen
from datasets.james.load import load_into_cassandra
from mqforensics.sources.cassandra_connection import close_cluster
from mqforensics.systems.james.live import LiveOptions, read_live
from mqforensics.systems.james.read import unread_partitions

pytestmark = pytest.mark.integration


def partitions(state) -> set[tuple[str, int, int]]:
    rows = state.entries.select("queuename", "timerangestart", "bucketid").distinct().collect()
    return {(r[0], int(r[1].timestamp()), r[2]) for r in rows}


def test_enumerate_finds_every_partition_a_scan_finds_across_a_window_change(
    spark, cassandra_endpoint
):
    as_of = gen.DEFAULT_AS_OF
    spec = gen.GenerationSpec(
        seed=11,
        queues=("spool", "outgoing"),
        as_of=as_of,
        config_history=(
            gen.ConfigEvent(3600, 2, 1000),
            gen.ConfigEvent(2400, 2, 1000, as_of - dt.timedelta(hours=6)),
        ),
        normal_mails=400,
        anomalies=gen.AnomalyCounts(unreclaimed_partitions=3, cleanup_pending_partitions=2),
    )
    state = gen.generate(spec)
    keyspace = f"james_grid_{uuid.uuid4().hex[:8]}"
    load_into_cassandra(state, cassandra_endpoint, keyspace)
    try:
        scanned = partitions(
            read_live(
                spark, cassandra_endpoint, LiveOptions(keyspace=keyspace, mode="scan"), as_of=as_of
            )
        )
        enumerated_state = read_live(spark, cassandra_endpoint, LiveOptions(keyspace=keyspace),
                                     as_of=as_of)  # fmt: skip
        enumerated = partitions(enumerated_state)
        unread = unread_partitions(enumerated_state)
    finally:
        cluster, session = cassandra_endpoint.connect()
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        finally:
            close_cluster(cluster)
    # Slices only the 3600 s grid holds: what walking the smallest window's grid alone missed.
    only_hourly = {p for p in scanned if p[1] % 3600 == 0 and p[1] % 2400}
    assert only_hourly, "the state has slices written before the change, off the 2400 s grid"
    assert enumerated == scanned
    # The table's partition keys were read apart, and the walk reached every one of them.
    assert {(q, ms // 1000, b) for q, ms, b in enumerated_state.table_partitions} == scanned
    assert unread == []
    assert enumerated_state.notes == [
        "enumerated the slice grids of 3600 s and 2400 s, buckets 0..1 (2400 s does not divide "
        "3600 s, against James's rule: the smallest grid alone would miss their slices)"
    ]
