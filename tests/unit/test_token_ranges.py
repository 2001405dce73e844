import itertools

import pytest

from mqforensics.errors import ConfigError
from mqforensics.sources.cassandra_scan import MAX_TOKEN, MIN_TOKEN, token_ranges


@pytest.mark.parametrize("splits", [1, 2, 7, 16, 1000])
def test_ranges_cover_the_ring_exactly_once(splits):
    ranges = token_ranges(splits)
    assert len(ranges) == splits
    assert ranges[0].lo == MIN_TOKEN and ranges[0].includes_lo
    assert ranges[-1].hi == MAX_TOKEN
    for left, right in itertools.pairwise(ranges):
        assert left.hi == right.lo  # (lo, hi] ranges: contiguous, no overlap
        assert not right.includes_lo
        assert left.lo < left.hi


def _above_lo(r, token):
    return r.lo <= token if r.includes_lo else r.lo < token


def test_every_token_falls_in_exactly_one_range():
    ranges = token_ranges(5)
    for token in [MIN_TOKEN, MIN_TOKEN + 1, -1, 0, 1, ranges[2].hi, ranges[2].hi + 1, MAX_TOKEN]:
        owners = [r for r in ranges if _above_lo(r, token) and token <= r.hi]
        assert len(owners) == 1, token


def test_zero_splits_is_a_config_error():
    with pytest.raises(ConfigError):
        token_ranges(0)


MIB = 1 << 20


def test_splits_follow_the_estimated_table_size():
    from mqforensics.sources.cassandra_scan import DEFAULT_SPLITS, MIN_SPLITS, splits_for

    whole_ring = [(MIN_TOKEN, MAX_TOKEN, 1000, 500 * MIB // 1000)]  # 500 MiB on one node
    assert splits_for(whole_ring) == 8  # one per 64 MiB, rounded up
    assert splits_for([(MIN_TOKEN, MAX_TOKEN, 10, 100)]) == MIN_SPLITS  # tiny table
    assert splits_for([]) == DEFAULT_SPLITS  # no estimate rows
    assert splits_for([(MIN_TOKEN, MAX_TOKEN, 0, 0)]) == DEFAULT_SPLITS  # not estimated yet


def test_a_node_estimating_part_of_the_ring_is_scaled_to_the_whole():
    from mqforensics.sources.cassandra_scan import splits_for

    quarter = 2**62
    # This node owns a quarter of the ring, as two ranges (one wrapping around), 64 MiB in all.
    owned = [
        (MAX_TOKEN - quarter // 4 + 1, MIN_TOKEN + quarter // 4, 1, 32 * MIB),
        (0, quarter // 2, 1, 32 * MIB),
    ]
    assert splits_for(owned) == 4  # 256 MiB for the whole ring


def test_a_bad_splits_option_is_a_config_error():
    from mqforensics.sources.cassandra_scan import positive_count

    for bad in ("0", "-3", "many", " "):
        with pytest.raises(ConfigError, match="'splits' must be a positive integer"):
            positive_count(bad, "splits")
    assert positive_count("12", "splits") == 12
