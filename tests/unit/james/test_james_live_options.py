"""Data source options of the James readers: bad values are ConfigErrors naming the option."""

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


@pytest.mark.parametrize("bad", ["0", "-5", "64MiB"])
def test_a_bad_csv_chunk_size_is_a_config_error(tmp_path, bad):
    from mqforensics.systems.james.snapshot import CqlshCsvSource

    export = tmp_path / "deletedmailsv2.csv"
    export.write_text("spool,8a1f0e3c-6b1d-4a57-9c2e-1f0d4b7a9e10\n")
    source = CqlshCsvSource({"path": str(export), "table": "deletedmailsv2", "chunk_bytes": bad})
    with pytest.raises(ConfigError, match="option 'chunk_bytes' must be a positive integer"):
        source.reader(None)
