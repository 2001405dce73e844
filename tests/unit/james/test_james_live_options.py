"""Data source options of the James readers: bad values are ConfigErrors naming the option."""

import json

import pytest

from mqforensics.errors import ConfigError
from mqforensics.systems.james.live import (
    JamesEnqueuedReader,
    enumerate_partitions,
    partition_queries,
)


def options(**extra):
    return {"ranges": json.dumps({"spool": [0, 7200]}), "window": "3600", "bucket_count": "2",
            **extra}  # fmt: skip


def test_partitions_are_chunked_by_the_chunk_option():
    chunks = JamesEnqueuedReader(options(chunk="3")).partitions()
    # Slices 0, 3600 and 7200 (the range is inclusive), two buckets each: 6 partitions.
    assert [len(c.keys) for c in chunks] == [3, 3]


@pytest.mark.parametrize(("per_query", "fullest"), [(1, 1), (3, 3), (4, 4), (20, 20), (100, 40)])
def test_partition_queries_read_each_enumerated_partition_once(per_query, fullest):
    import random

    rng = random.Random(per_query)
    # Two queues; slices of 900 s with four buckets, a slice cut by a Spark chunk's end (only
    # buckets 0-1), and a gap in the slices.
    keys = enumerate_partitions({"spool": (0, 9000), "relay": (3600, 7200)}, 900, 4)
    keys = [k for k in keys if k[1] != 2700] + [("bounces", 1800, 0), ("bounces", 1800, 1)]
    rng.shuffle(keys)
    queries = partition_queries(keys, per_query)
    products = [(q, s, b) for q, starts, buckets in queries for s in starts for b in buckets]
    assert sorted(products) == sorted(keys)  # every partition, each once
    assert all(len(starts) * len(buckets) <= per_query for _, starts, buckets in queries)
    # As full as the limit lets them be: spool's ten whole slices (40 partitions) in one query.
    assert max(len(starts) * len(buckets) for _, starts, buckets in queries) == fullest


def test_every_window_of_the_history_is_walked_on_its_own_grid():
    """3600 s then 2400 s (no divisor, a config_violation): slices of both grids, each once.
    The smallest grid alone would miss 3600 and 10800 (on the 3600 s grid only)."""
    keys = enumerate_partitions({"spool": (0, 14400)}, [3600, 2400], 1)
    assert [k[1] for k in keys] == [0, 2400, 3600, 4800, 7200, 9600, 10800, 12000, 14400]
    # A divisor's grid already holds the larger window's starts: nothing is read twice.
    assert enumerate_partitions({"spool": (0, 7200)}, [3600, 900], 2) == enumerate_partitions(
        {"spool": (0, 7200)}, 900, 2
    )
    chunks = JamesEnqueuedReader({**options(), "windows": "3600,2400"}).partitions()
    assert sorted(k[1] for c in chunks for k in c.keys) == [0, 0, 2400, 2400, 3600, 3600,
                                                              4800, 4800, 7200, 7200]  # fmt: skip


def test_the_enumeration_note_says_which_grids_and_why():
    from mqforensics.systems.james.live import enumeration_note

    assert (
        enumeration_note([3600, 900], 4)
        == "enumerated the slice grids of 3600 s and 900 s, buckets 0..3"
    )
    assert enumeration_note([3600, 2400], 1) == (
        "enumerated the slice grids of 3600 s and 2400 s, buckets 0..0 (2400 s does not divide "
        "3600 s, against James's rule: the smallest grid alone would miss their slices)"
    )


def test_partition_queries_split_more_buckets_than_one_query_reads():
    keys = enumerate_partitions({"spool": (0, 900)}, 900, 5)
    assert partition_queries(keys, 2) == [
        ("spool", [0], (0, 1)), ("spool", [900], (0, 1)),
        ("spool", [0], (2, 3)), ("spool", [900], (2, 3)),
        ("spool", [0, 900], (4,)),
    ]  # fmt: skip


@pytest.mark.parametrize("option", ["chunk", "concurrency", "page_size", "partitions_per_query"])
@pytest.mark.parametrize("bad", ["0", "-1", "many"])
def test_a_bad_count_option_is_a_config_error(option, bad):
    with pytest.raises(ConfigError, match=f"option '{option}' must be a positive integer"):
        JamesEnqueuedReader(options(**{option: bad})).partitions()


@pytest.mark.parametrize("bad", ["0", "-5", "64MiB"])
def test_a_bad_csv_chunk_size_is_a_config_error(tmp_path, bad):
    from mqforensics.systems.james.snapshot import CqlshCsvSource

    export = tmp_path / "deletedmailsv2.csv"
    export.write_text("spool,8a1f0e3c-6b1d-4a57-9c2e-1f0d4b7a9e10\n")
    source = CqlshCsvSource({"path": str(export), "table": "deletedmailsv2", "chunk_bytes": bad})
    with pytest.raises(ConfigError, match="option 'chunk_bytes' must be a positive integer"):
        source.reader(None)
