"""JamesState.persist: what is kept, and what is left to be read again."""

import datetime as dt

from mqforensics.systems.james import schema
from mqforensics.systems.james.frames import JamesState


def _state(spark, *, rereadable, blobs_rereadable=False):
    blobs = spark.createDataFrame(
        [("default", "k", 1, dt.datetime(2026, 11, 1, tzinfo=dt.UTC), None, None, "passthrough",
          None, None, None)],
        schema.BLOBS,
    )  # fmt: skip
    empty = spark.createDataFrame([], schema.ENTRIES)
    return JamesState(
        entries=empty,
        deleted=spark.createDataFrame([], schema.DELETED),
        browse_start=spark.createDataFrame([], schema.BROWSE_START),
        content_start=spark.createDataFrame([], schema.CONTENT_START),
        config_history=spark.createDataFrame([], schema.CONFIG_HISTORY),
        blobs=blobs,
        as_of=dt.datetime(2026, 11, 2, tzinfo=dt.UTC),
        rereadable=rereadable,
        blobs_rereadable=blobs_rereadable,
    )


def _kept(frame):
    return frame.storageLevel.useMemory or frame.storageLevel.useDisk


def test_a_bucket_listing_next_to_a_parquet_snapshot_is_kept_and_the_snapshot_is_not(spark):
    state = _state(spark, rereadable=True).persist()
    try:
        assert _kept(state.blobs)
        assert not _kept(state.entries) and not _kept(state.deleted)
    finally:
        state.unpersist()
    assert not _kept(state.blobs)


def test_a_saved_listing_next_to_a_parquet_snapshot_is_read_again(spark):
    state = _state(spark, rereadable=True, blobs_rereadable=True).persist()
    assert not _kept(state.blobs) and not _kept(state.entries)


def test_a_live_state_keeps_every_frame(spark):
    state = _state(spark, rereadable=False).persist()
    try:
        assert all(_kept(f) for f in state.frames().values())
    finally:
        state.unpersist()
