"""Java's ``String.hashCode`` and the James bucket and slice rules built on it.

Sources (apache/james-project, server/queue/queue-rabbitmq):
``view/cassandra/model/BucketedSlices.java`` -- ``BucketId.of(mailKey, bucketCount)`` is
``Math.abs(mailKey.getMailKey().hashCode() % bucketCount)`` where the mail key is the mail name;
``Slice.of(instant).getStartSliceInstant()`` floors the epoch second to a multiple of the slice
window: ``floor(epoch / window) * window``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["bucket_id", "bucket_ids", "java_string_hashcode", "slice_start"]


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


def _hashcodes(names: pa.Array) -> np.ndarray:
    """`java_string_hashcode` of every string of `names` (nulls: 0), as int64, vectorised.

    For an ASCII string the UTF-16 code units are its bytes, so the hash is a polynomial over
    the Arrow value buffer: byte j of a string ending at e contributes ``byte * 31^(e-1-j)``
    (mod 2^32), and the contributions are summed per string with ``np.add.reduceat``. The few
    non-ASCII strings go through `java_string_hashcode` one by one.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    names = names.cast(pa.large_string())
    count = len(names)
    hashes: np.ndarray = np.zeros(count, dtype=np.int64)
    if count == 0:
        return hashes
    offsets = np.frombuffer(names.buffers()[1], dtype=np.int64)[
        names.offset : names.offset + count + 1
    ]
    data = names.buffers()[2]
    values = (
        np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]].astype(np.uint64)
        if data is not None
        else np.zeros(0, dtype=np.uint64)
    )
    starts = offsets[:-1] - offsets[0]
    lengths = np.diff(offsets)
    if values.size:
        longest = int(lengths.max())
        powers = np.ones(longest + 1, dtype=np.uint64)
        for i in range(1, longest + 1):
            powers[i] = (powers[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
        ends = np.repeat(starts + lengths, lengths)
        exponents = ends - 1 - np.arange(values.size)
        terms = (values * powers[exponents]) & np.uint64(0xFFFFFFFF)
        filled = lengths > 0
        sums = np.zeros(count, dtype=np.uint64)
        sums[filled] = np.add.reduceat(terms, starts[filled])
        unsigned = (sums & np.uint64(0xFFFFFFFF)).astype(np.int64)
        hashes = np.where(unsigned >= 0x8000_0000, unsigned - 0x1_0000_0000, unsigned)
    ascii_ = pc.fill_null(pc.string_is_ascii(names), True).to_numpy(zero_copy_only=False)
    for index in np.flatnonzero(~ascii_).tolist():
        hashes[index] = java_string_hashcode(names[index].as_py())
    return hashes


def bucket_ids(names: pa.Array | pa.ChunkedArray, bucket_count: int) -> np.ndarray:
    """`bucket_id` of every name (int64; -1 for a null name), vectorised over Arrow strings."""
    import numpy as np

    if bucket_count <= 0:
        raise ValueError(f"bucket_count must be positive, got {bucket_count}")
    import pyarrow as pa

    chunks = names.chunks if isinstance(names, pa.ChunkedArray) else [names]
    # In slices small enough for the per-byte arrays to stay in cache (20x faster at 1M names).
    hashes = np.concatenate(
        [np.zeros(0, dtype=np.int64)]
        + [
            _hashcodes(chunk.slice(i, _SLICE))
            for chunk in chunks
            for i in range(0, len(chunk), _SLICE)
        ]
    )
    buckets = np.abs(hashes) % bucket_count
    return np.where(names.is_null().to_numpy(zero_copy_only=False), -1, buckets)


_SLICE = 16_384
