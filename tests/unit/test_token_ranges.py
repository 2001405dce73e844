import itertools

import pytest

from mqforensics.cassandra_scan import MAX_TOKEN, MIN_TOKEN, token_ranges
from mqforensics.errors import ConfigError


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
