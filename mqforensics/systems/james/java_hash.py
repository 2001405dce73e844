"""Java's ``String.hashCode`` and the James bucket and slice rules built on it.

Sources (apache/james-project, server/queue/queue-rabbitmq):
``view/cassandra/model/BucketedSlices.java`` -- ``BucketId.of(mailKey, bucketCount)`` is
``Math.abs(mailKey.getMailKey().hashCode() % bucketCount)`` where the mail key is the mail name;
``Slice.of(instant).getStartSliceInstant()`` floors the epoch second to a multiple of the slice
window: ``floor(epoch / window) * window``.
"""

from __future__ import annotations

__all__ = ["bucket_id", "java_string_hashcode", "slice_start"]


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value >= 0x8000_0000 else value


def java_string_hashcode(s: str) -> int:
    """``java.lang.String#hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    in 32-bit two's complement arithmetic (so characters beyond the BMP count as two units)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return _to_int32(h)


def _java_rem(a: int, b: int) -> int:
    """Java's ``%``: the remainder has the sign of the dividend (truncated division)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def bucket_id(name: str, bucket_count: int) -> int:
    """James's bucket of a mail: ``Math.abs(name.hashCode() % bucketCount)``."""
    if bucket_count <= 0:
        raise ValueError(f"bucket_count must be positive, got {bucket_count}")
    return abs(_java_rem(java_string_hashcode(name), bucket_count))


def slice_start(epoch_seconds: int | float, window_seconds: int) -> int:
    """Start (epoch seconds) of the slice holding ``epoch_seconds``:
    ``floor(epoch / window) * window`` (``Slice.of`` in BucketedSlices.java)."""
    if window_seconds <= 0:
        raise ValueError(f"window_seconds must be positive, got {window_seconds}")
    return (int(epoch_seconds) // window_seconds) * window_seconds
