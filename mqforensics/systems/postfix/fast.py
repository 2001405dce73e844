"""The records of a queue file its envelope reader needs, walked by a C kernel (``walk.c``).

`records.read_records` builds one `records.Record` per record, and a queue file is mostly its
message body, one record per line, that `envelope.read_envelope` skips. The kernel walks the
file as `read_records` does and leaves out only the body records `read_envelope` ignores, so
`read_envelope` of its records equals `read_envelope` of the reference's. It answers only for a
file that reads cleanly to its end record; for any damage (or when the kernel cannot be built:
`native.unavailable`) `envelope_records` answers None and the caller uses the reference, which
locates the damage. tests/unit/postfix/test_postfix_fast.py compares both on every bundled
queue file and on fuzzed ones.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from mqforensics import native
from mqforensics.systems.postfix.records import QueueFileRecords, Record

_P = ctypes.c_void_p
KERNEL = native.Kernel(
    "postfix_walk",
    (Path(__file__).resolve().with_name("walk.c"),),
    {
        "mqf_postfix_envelope_records": (
            ctypes.c_int64,
            [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int64, _P, _P, _P, _P],
        )
    },
)
# Records kept per call before the kernel gives up (the reference reads such a file): a real
# envelope, its headers and extracted records are a few dozen.
CAPACITY = 4096


class _Buffers:
    """The kernel's output arrays, reused from call to call (one reader per process)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.offsets = np.empty(capacity, np.int64)
        self.types = np.empty(capacity, np.uint8)
        self.starts = np.empty(capacity, np.int64)
        self.lengths = np.empty(capacity, np.int64)
        self.pointers = [a.ctypes.data for a in (self.offsets, self.types, self.starts,
                                                 self.lengths)]  # fmt: skip


_buffers: _Buffers | None = None


def available() -> bool:
    return native.load(KERNEL) is not None


def kernel_note() -> str | None:
    """None when the kernel is in use, else why the reference reads every queue file."""
    return native.note(KERNEL, "Postfix queue files read by the reference reader")


def envelope_records(data: bytes) -> QueueFileRecords | None:
    """The records of `data` `read_envelope` needs, complete and undamaged; None when the file
    does not read cleanly or the kernel is unavailable (use `records.read_records`)."""
    global _buffers
    library = native.load(KERNEL)
    if library is None:
        return None
    if _buffers is None:
        _buffers = _Buffers(CAPACITY)
    b = _buffers
    count = library.mqf_postfix_envelope_records(data, len(data), b.capacity, *b.pointers)
    if count <= 0:
        return None
    offsets, starts, lengths = (a[:count].tolist() for a in (b.offsets, b.starts, b.lengths))
    types = b.types[:count].tobytes().decode("latin-1")
    records = tuple(
        Record(offset, kind, data[start : start + length])
        for offset, kind, start, length in zip(offsets, types, starts, lengths, strict=True)
    )
    return QueueFileRecords(records, None)
