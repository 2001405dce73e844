"""The columnar reader over a mapped segment file (`ColumnarSegment.open`): the same rows and
problems as the reference reading the file, through windows small enough that records and
damage straddle their edges, with and without the kernel; the resident part of the mapping
stays within its window; empty, short and non-UTF-8-named files."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from mqforensics import native
from mqforensics.errors import InputError
from mqforensics.systems.logqueue import columnar, fleet
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.segment import read_segment
from tests.unit.logqueue.test_segment_columnar import SEED, T0, _damaged, _segment

PAGE = 4096
# Linux maps a file's page cache by folios (up to 2 MiB on x86-64) and around each read fault:
# the resident part of a mapping is counted at that granularity, beyond the pages touched.
FOLIO = 2 << 20


def _assert_same_mapped(path: Path | bytes, rows: int, window: int) -> columnar.ColumnarSegment:
    """The mapped reader of `path` through `window` equals the reference reading the file."""
    source = os.fsdecode(path)
    reference = read_segment(Path(source))
    fast = columnar.ColumnarSegment.open(path, window=window)
    assert fast.source == source and fast.mapped == (fast.size > 0)
    batches = [
        columnar.columns_batch("q", Path(source).name, fast.number, c) for c in fast.batches(rows)
    ]
    got = [tuple(r.values()) for b in batches for r in b.to_pylist()]
    assert got == list(fleet.record_rows("q", reference))
    assert fast.problems == reference.problems
    assert (fast.records, fast.size, fast.header) == (
        len(reference.records),
        reference.size,
        reference.header,
    )
    counted = columnar.ColumnarSegment.open(path, window=window).count()
    assert (counted.records, counted.problems) == (fast.records, fast.problems)
    return fast


def _big_segment(rng: random.Random, number: int, size: int) -> bytes:
    """A segment of at least `size` bytes: whole records with odd ones among them (a few runs
    of 200 records, repeated)."""
    runs = [_segment(rng, number, 200)[fmt.SEGMENT_HEADER_SIZE :] for _ in range(5)]
    data = bytearray(fmt.encode_segment_header(number, T0))
    while len(data) < size:
        data += rng.choice(runs)
    return bytes(data)


def test_records_straddle_window_edges(tmp_path: Path) -> None:
    rng = random.Random(SEED + 10)
    path = tmp_path / fmt.segment_name(1)
    path.write_bytes(_big_segment(rng, 1, 1 << 20))
    for window, rows in ((PAGE, 7), (3 * PAGE, 64), (64 << 10, columnar.BATCH_ROWS)):
        seg = _assert_same_mapped(path, rows, window)
        assert seg.records > 1000 and seg.problems


def test_damaged_files_through_a_small_window(tmp_path: Path) -> None:
    rng = random.Random(SEED + 11)
    bases = [_big_segment(rng, n, 12_000) for n in (1, 2, 3)]
    names = [fmt.segment_name(1), "restart.lq", fmt.segment_name(3)]
    kinds: set[str] = set()
    for i in range(60):
        path = tmp_path / str(i) / rng.choice(names)
        path.parent.mkdir()
        path.write_bytes(_damaged(rng, rng.choice(bases), rng.choice(bases)))
        seg = _assert_same_mapped(path, rng.choice([1, 5, 1000]), rng.choice([PAGE, 2 * PAGE]))
        kinds.update(p.kind for p in seg.problems)
    assert {"torn_tail", "crc_mismatch", "unreadable"} <= kinds


def test_without_the_kernel_a_mapped_file_is_read_by_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(SEED + 12)
    path = tmp_path / fmt.segment_name(2)
    path.write_bytes(_damaged(rng, _big_segment(rng, 2, 200_000), _segment(rng, 4, 50)))
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    try:
        assert native.load(columnar.KERNEL) is None
        _assert_same_mapped(path, 9, PAGE)
    finally:
        monkeypatch.delenv("MQF_NATIVE")
        native.forget()


def _mapping_rss(path: Path) -> int:
    """The resident bytes of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):
            inside = line.endswith(" " + str(path))
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_resident_part_of_the_mapping_stays_within_its_window(tmp_path: Path) -> None:
    rng = random.Random(SEED + 13)
    path = tmp_path / fmt.segment_name(1)
    path.write_bytes(_big_segment(rng, 1, 16 << 20))
    window = 256 << 10
    seg = columnar.ColumnarSegment.open(path, window=window)
    peak = 0
    for _ in seg.batches(rows=2048):
        peak = max(peak, _mapping_rss(path))
    # The kernel runs a window ahead at most and the walk releases every quarter window.
    assert 0 < peak <= window + window // 4 + 2 * FOLIO < seg.size // 3
    assert _mapping_rss(path) == 0  # all released at the end
    whole = columnar.ColumnarSegment(path.read_bytes(), str(path))
    for _ in whole.batches(rows=2048):
        pass
    assert (whole.records, whole.problems) == (seg.records, seg.problems)


def test_empty_and_short_files(tmp_path: Path) -> None:
    header = fmt.encode_segment_header(1, T0)
    for content in (b"", b"RQ", header[:31], header, header + b"RQ\x01"):
        path = tmp_path / fmt.segment_name(1)
        path.write_bytes(content)
        seg = _assert_same_mapped(path, 3, PAGE)
        assert seg.records == 0 and seg.size == len(content)
        assert seg.sha256() == hashlib.sha256(content).hexdigest()


def test_a_non_utf8_name(tmp_path: Path) -> None:
    rng = random.Random(SEED + 14)
    directory = os.fsencode(tmp_path) + b"/queue-\xff\xfe"
    os.mkdir(directory)
    raw = directory + b"/" + os.fsencode(fmt.segment_name(5))
    content = _big_segment(rng, 5, 100_000)
    with open(raw, "wb") as handle:
        handle.write(content)
    as_bytes = _assert_same_mapped(raw, 50, PAGE)
    as_text = _assert_same_mapped(os.fsdecode(raw), 50, PAGE)
    assert as_bytes.number == as_text.number == 5
    seg, sha256 = fleet.read_file_digest(os.fsdecode(raw))
    assert sha256 == hashlib.sha256(content).hexdigest()
    assert (seg.records, seg.problems) == (as_text.records, as_text.problems)


def test_a_vanished_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "queue-\udcff" / fmt.segment_name(1)
    with pytest.raises(InputError, match=r"queue-\\xff/seg-00000001.lq: No such file"):
        fleet.open_segment(str(path))
