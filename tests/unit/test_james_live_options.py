"""The `mqf_james_enqueued` source's options: bad values are ConfigErrors naming the option."""

import json

import pytest

from mqforensics.errors import ConfigError
from mqforensics.systems.james.live import JamesEnqueuedReader


def options(**extra):
    return {"ranges": json.dumps({"spool": [0, 7200]}), "window": "3600", "bucket_count": "2",
            **extra}  # fmt: skip


def test_partitions_are_chunked_by_the_chunk_option():
    chunks = JamesEnqueuedReader(options(chunk="3")).partitions()
    # Slices 0, 3600 and 7200 (the range is inclusive), two buckets each: 6 partitions.
    assert [len(c.keys) for c in chunks] == [3, 3]


@pytest.mark.parametrize("option", ["chunk", "concurrency", "page_size"])
@pytest.mark.parametrize("bad", ["0", "-1", "many"])
def test_a_bad_count_option_is_a_config_error(option, bad):
    with pytest.raises(ConfigError, match=f"option '{option}' must be a positive integer"):
        JamesEnqueuedReader(options(**{option: bad})).partitions()
