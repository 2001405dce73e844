"""Sequences over a Cyrus database file whose records a kernel scanned into numpy columns
(`twoskip_fast`, `skiplist_fast`): keys, values and `Record`s are cut from the file only when
read, a batch at a time, and a mapped file's pages are released after each batch, so iterating
a file of any size keeps a bounded part of it resident.

The views equal any sequence of the same items, so a `TwoskipFile` holding them compares, and is
consumed, like one holding lists.
"""

from __future__ import annotations

import itertools
import mmap
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast, overload

import numpy as np

from mqforensics import native
from mqforensics.systems.cyrus.twoskip import Record, TwoskipFile

WINDOW = 16 << 20  # bytes of a mapped file touched between two releases of its pages
BATCH = 1 << 14  # records cut from the file per batch of an iteration
# A mapped file larger than SPILL_BYTES, or whose header counts more than SPILL_RECORDS
# records, keeps its columns in temporary files: below both, its columns (35 bytes a record at
# the peak) stay under about 100 MiB for usual records, and the scan is a little faster.
SPILL_BYTES = 256 << 20
SPILL_RECORDS = 2_000_000

# Per batch: the first row's position, and per row where its key starts and ends and where its
# value starts and ends.
Spans = tuple[int, list[int], list[int], list[int], list[int]]


def address(array: np.ndarray) -> int:
    """Where `array`'s data starts, for a kernel."""
    return int(array.ctypes.data)


class Buffer:
    """The file's bytes (a read-only mapping of a path, or bytes given), their address, and
    where the columns scanned from them are kept (`column`)."""

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        self.array = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
        self.address = address(self.array)
        self.spill = False
        self._spilled: list[mmap.mmap] = []

    def spill_if_large(self, records: int) -> None:
        """Keep the columns of a large mapped file (see `SPILL_BYTES`) in temporary files
        mapped shared, their pages written back and released like the file's, so that neither
        the file nor its columns stay resident: memory does not grow with the file."""
        large = len(self.data) > SPILL_BYTES or records > SPILL_RECORDS
        self.spill = isinstance(self.data, mmap.mmap) and large

    def column(self, count: int, dtype: Any) -> np.ndarray:
        """A zeroed column of `count` values, in memory or (`spill`) in a temporary file; its
        pages are only allocated when written."""
        if not self.spill:
            return np.zeros(count, dtype)
        size = max(1, count * np.dtype(dtype).itemsize)
        with tempfile.TemporaryFile(prefix="mqf-cyrus-columns-") as handle:
            handle.truncate(size)  # sparse: no disk is used until a page is written
            mapped = mmap.mmap(handle.fileno(), size)
        self._spilled.append(mapped)
        return np.frombuffer(mapped, dtype, count)

    def release(self) -> None:
        """Drop the resident pages of the mapping and of spilled columns (they are read again
        from the page cache when touched): they would otherwise count in the peak memory."""
        if isinstance(self.data, mmap.mmap) and len(self.data):
            self.data.madvise(mmap.MADV_DONTNEED)
        for mapped in self._spilled:
            mapped.madvise(mmap.MADV_DONTNEED)

    def copy(self) -> bytes:
        """The bytes, for the reference reader."""
        return self.data if isinstance(self.data, bytes) else self.data[:]


def open_buffer(source: bytes | str | Path | mmap.mmap, name: str | None) -> tuple[Buffer, str]:
    """`source` as a `Buffer` (a path is mapped read-only, never read whole) and the name
    messages use, as `problems.load` names it."""
    if isinstance(source, mmap.mmap):
        return Buffer(source), name or "<mmap>"
    if isinstance(source, bytes | bytearray | memoryview):
        return Buffer(bytes(source)), name or "<bytes>"
    path = Path(source)
    with path.open("rb") as handle:
        size = path.stat().st_size
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    return Buffer(data), name or str(path)


def reference_input(source: bytes | str | Path | mmap.mmap) -> bytes | str | Path:
    """What a reference reader takes for `source`."""
    return source[:] if isinstance(source, mmap.mmap) else source


def read_through(
    kernel: native.Kernel,
    fast: Callable[[Any, Buffer, str, bool], TwoskipFile | None],
    reference: Callable[..., TwoskipFile],
    source: bytes | str | Path | mmap.mmap,
    history: bool,
    name: str | None,
) -> TwoskipFile:
    """`fast` over the kernel's library when it loads, and `reference` where there is no
    kernel or `fast` answers None (the file holds what only the reference reports)."""
    lib = native.load(kernel)
    if lib is None:
        return reference(reference_input(source), history=history, name=name)
    buffer, label = open_buffer(source, name)
    parsed = fast(lib, buffer, label, history)
    if parsed is None:
        return reference(buffer.copy(), history=history, name=label)
    return parsed


class Rows(ABC):
    """Some of a file's scanned records in some order: where their keys and values are, and
    how each becomes a `Record`."""

    def __init__(self, buffer: Buffer, count: int) -> None:
        self.buffer, self.count = buffer, count

    def __len__(self) -> int:
        return self.count

    @abstractmethod
    def spans(self, start: int = 0, stop: int | None = None) -> Iterator[Spans]:
        """Batches of rows from `start` to `stop`; a mapped file's pages are released when the
        next batch is asked for."""

    @abstractmethod
    def records(self, spans: Spans, committed_below: int) -> list[Record]:
        """The `Record`s of one batch; rows from `committed_below` on are not committed."""


class _View:
    """A read-only sequence over rows, equal to any sequence of the same items."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        mine = cast(Sequence[Any], self)
        return len(self) == len(other) and all(a == b for a, b in zip(mine, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self)}>"

    def _position(self, i: int) -> int:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return i


class ItemsView(_View, Sequence[tuple[bytes, bytes]]):
    """(key, value) of the rows, cut from the file when read."""

    @overload
    def __getitem__(self, i: int) -> tuple[bytes, bytes]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[bytes, bytes]]: ...
    def __getitem__(self, i: int | slice) -> tuple[bytes, bytes] | list[tuple[bytes, bytes]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        at = self._position(i)
        return self._pairs(next(self.rows.spans(at, at + 1)))[0]

    def _pairs(self, spans: Spans) -> list[tuple[bytes, bytes]]:
        data = self.rows.buffer.data
        _, keys, key_ends, values, value_ends = spans
        return [
            (data[k:ke], data[v:ve])
            for k, ke, v, ve in zip(keys, key_ends, values, value_ends, strict=True)
        ]

    def batches(self) -> Iterator[list[tuple[bytes, bytes]]]:
        """The pairs a batch at a time: the pages of one batch are released before the next."""
        for spans in self.rows.spans():
            yield self._pairs(spans)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return itertools.chain.from_iterable(self.batches())


class RecordsView(_View, Sequence[Record]):
    """`Record`s built from the file when read; rows from `committed_below` on are not
    committed (a twoskip history: the records after the last COMMIT)."""

    def __init__(self, rows: Rows, committed_below: int | None = None) -> None:
        super().__init__(rows)
        self.committed_below = len(rows) if committed_below is None else committed_below

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...
    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        at = self._position(i)
        return self.rows.records(next(self.rows.spans(at, at + 1)), self.committed_below)[0]

    def batches(self) -> Iterator[list[Record]]:
        """The records a batch at a time (see `ItemsView.batches`)."""
        for spans in self.rows.spans():
            yield self.rows.records(spans, self.committed_below)

    def __iter__(self) -> Iterator[Record]:
        return itertools.chain.from_iterable(self.batches())


class FastFile(TwoskipFile):
    """A `TwoskipFile` whose records and history are views over scanned columns."""

    def items(self) -> Sequence[tuple[bytes, bytes]]:
        records = self.records
        if isinstance(records, RecordsView):
            return ItemsView(records.rows)
        return super().items()
