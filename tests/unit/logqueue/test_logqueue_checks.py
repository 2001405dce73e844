"""The logqueue Spark readers, the per-queue replay and every check, on queue directories written
here with the format, one directory per planted anomaly (and a clean one), all read at once; and
``audit logqueue`` through the one audit runner."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import uuid
from pathlib import Path

import pytest

from mqforensics import cli, subjects
from mqforensics.errors import ConfigError, InputError
from mqforensics.retention.policy import subject_hash
from mqforensics.systems.logqueue import checks, fleet, frames, layout, spec
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.options import Settings
from mqforensics.systems.logqueue.segment import read_segment

T0 = 1_800_000_000_000_000  # 2027-01-15T08:00:00Z
DAY = 86_400_000_000
AS_OF = dt.datetime(2027, 1, 15, 9, 0, tzinfo=dt.UTC)
LAG = 4096  # restart_lag_bytes of the planted queues (64 MiB would need 64 MiB of test data)
OPTIONS = Settings(as_of=AS_OF, restart_lag_bytes=LAG)
Pos = tuple[int, int]


def _mid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, name)


def _where(pos: Pos) -> str:
    return f"{fmt.segment_name(pos[0])}@{pos[1]}"


class Queue:
    """A queue directory being written: segments and spool in memory until `write`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.segments: dict[int, bytearray] = {}
        self.spool: dict[str, bytes] = {}
        self.spool_of: dict[uuid.UUID, str] = {}
        self.restart_bytes: bytes | None = None
        self.rotate()

    def rotate(self, number: int | None = None) -> None:
        number = number or max(self.segments, default=0) + 1
        self.current = number
        self.segments[number] = bytearray(fmt.encode_segment_header(number, T0))

    def add(self, code: int, mid: uuid.UUID, ref: Pos | None, values: dict, t: int = T0) -> Pos:
        data = self.segments[self.current]
        pos = (self.current, len(data))
        data += fmt.encode_record(code, mid, t, ref or (0, 0), values)
        return pos

    def size_at(self, pos: Pos) -> int:
        """The size of the record at `pos`."""
        data = bytes(self.segments[pos[0]])
        return next(r.size for r in read_segment(data).records if r.offset == pos[1])

    def envelope(
        self, mid: uuid.UUID, recipients: list[str], ref: Pos | None = None, attempt: int = 0,
        t: int = T0, spool: bool = True,
    ) -> Pos:  # fmt: skip
        name = f"{mid.hex[:12]}.eml"
        if spool:
            self.spool.setdefault(name, b"Subject: x\r\n\r\n" + mid.bytes)
        self.spool_of[mid] = name
        values = {"sender": "s@example.org", "recipients": recipients, "spool": name,
                  "attempt": attempt, "not_before_us": t}  # fmt: skip
        return self.add(fmt.ENVELOPE, mid, ref, values, t)

    def start(self, mid: uuid.UUID, envelope: Pos, t: int = T0) -> Pos:
        return self.add(fmt.START, mid, envelope, {"runner": "fast"}, t)

    def delivery(self, mid: uuid.UUID, start: Pos, *outcomes: tuple[str, int], t: int = T0) -> Pos:
        values = {
            "outcomes": [(a, s, "250 ok" if s == fmt.DELIVERED else "451") for a, s in outcomes]
        }
        return self.add(fmt.DELIVERY, mid, start, values, t)

    def finish(self, mid: uuid.UUID, start: Pos, keep_spool: bool = False) -> Pos:
        if not keep_spool:
            self.spool.pop(self.spool_of[mid], None)
        return self.add(fmt.FINISH, mid, start, {"reason": 0})

    def delivered(self, mid: uuid.UUID, recipient: str = "r@example.net") -> Pos:
        """A whole message, delivered and finished; its envelope's position."""
        env = self.envelope(mid, [recipient])
        start = self.start(mid, env)
        self.delivery(mid, start, (recipient, fmt.DELIVERED))
        self.finish(mid, start)
        return env

    def restart(self, suffix: Pos) -> None:
        self.restart_bytes = layout.encode_restart(suffix, (("fast", *suffix),), T0)

    def write(self) -> Path:
        self.root.mkdir(parents=True)
        for number, data in self.segments.items():
            (self.root / fmt.segment_name(number)).write_bytes(bytes(data))
        if self.restart_bytes is not None:
            (self.root / layout.RESTART_FILE).write_bytes(self.restart_bytes)
        (self.root / layout.SPOOL_DIR).mkdir()
        for name, content in self.spool.items():
            (self.root / layout.SPOOL_DIR / name).write_bytes(content)
        return self.root


# --- the planted queues --------------------------------------------------------------------------

Expected = set[tuple[str, str, str, int | None]]  # check, severity, subject, bytes


def _clean(q: Queue) -> Expected:
    """Finished, waiting, in-flight and retried messages over two segments: nothing wrong."""
    q.delivered(_mid("A"))
    q.envelope(_mid("B"), ["b@example.net"])
    c = q.envelope(_mid("C"), ["c1@example.net", "c2@example.net"])
    c_start = q.start(_mid("C"), c)
    q.delivery(_mid("C"), c_start, ("c1@example.net", fmt.DELIVERED), ("c2@example.net", 1))
    d = q.envelope(_mid("D"), ["d@example.net"])
    d_start = q.start(_mid("D"), d)
    q.delivery(_mid("D"), d_start, ("d@example.net", fmt.TEMPORARY_FAILURE))
    q.envelope(_mid("D"), ["d@example.net"], ref=d, attempt=1)
    q.rotate()
    q.envelope(_mid("E"), ["e@example.net"])
    q.delivered(_mid("F"))
    q.restart((1, fmt.SEGMENT_HEADER_SIZE))
    return set()


def _torn(q: Queue) -> tuple[Expected, int]:
    q.envelope(_mid("B"), ["b@example.net"])
    c = q.envelope(_mid("C"), ["c@example.net"])
    start = q.start(_mid("C"), c)
    size = q.size_at(start)
    assert size == 50
    del q.segments[1][-3:]
    return {("torn_tail", "warning", _where(start), size - 3)}, start[1]


def _crc(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    c = q.envelope(_mid("C"), ["c@example.net"])
    start = q.start(_mid("C"), c)
    deferred = q.delivery(_mid("C"), start, ("c@example.net", fmt.TEMPORARY_FAILURE))
    size = q.size_at(deferred)
    q.segments[1][deferred[1] + size - 1] ^= 0x01  # last payload byte
    q.envelope(_mid("E"), ["e@example.net"])
    return {("crc_mismatch", "error", _where(deferred), size)}


def _corrupt(q: Queue) -> Expected:
    """Seven junk bytes between two records; segment 2's header with another magic."""
    q.envelope(_mid("B"), ["b@example.net"])
    junk = len(q.segments[1])
    q.segments[1] += bytes(7)
    q.envelope(_mid("E"), ["e@example.net"])
    q.rotate()
    q.envelope(_mid("F"), ["f@example.net"])
    q.segments[2][0:4] = b"XXXX"
    return {
        ("corrupt_segment", "critical", f"seg-00000001.lq@{junk}", 7),
        ("corrupt_segment", "critical", "seg-00000002.lq@0", fmt.SEGMENT_HEADER_SIZE),
    }


def _orphans(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    g = q.envelope(_mid("G"), ["g@example.net"])
    g_start = q.start(_mid("G"), g)
    q.finish(_mid("G"), g_start)
    late = q.delivery(_mid("G"), g_start, ("g@example.net", fmt.DELIVERED))
    q.envelope(_mid("H"), ["h@example.net"])
    stray = q.start(_mid("H"), (1, 9999))
    return {
        ("orphan_delivery", "error", _where(late), q.size_at(late)),
        ("orphan_record", "warning", _where(stray), q.size_at(stray)),
    }


def _duplicate(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    j = q.envelope(_mid("J"), ["j1@example.org", "j2@example.org"])
    start = q.start(_mid("J"), j)
    q.delivery(_mid("J"), start, ("j1@example.org", fmt.DELIVERED))
    q.delivery(
        _mid("J"), start, ("j1@example.org", fmt.DELIVERED), ("j2@example.org", fmt.DELIVERED)
    )
    q.finish(_mid("J"), start)
    subject = f"{_mid('J')} j1@example.org"  # as stored: the runner pseudonymises, not checks
    return {("duplicate_delivery", "error", subject, None)}


def _stuck(q: Queue) -> Expected:
    """K first enqueued 6 days ago and retried yesterday; L enqueued 4 days ago."""
    k = q.envelope(_mid("K"), ["k@example.net"], t=T0 - 6 * DAY)
    start = q.start(_mid("K"), k, t=T0 - 6 * DAY)
    q.delivery(_mid("K"), start, ("k@example.net", fmt.TEMPORARY_FAILURE), t=T0 - 6 * DAY)
    q.envelope(_mid("K"), ["k@example.net"], ref=k, attempt=1, t=T0 - DAY)
    q.envelope(_mid("L"), ["l@example.net"], t=T0 - 4 * DAY)
    size = len(q.spool[q.spool_of[_mid("K")]])
    return {("stuck_message", "warning", str(_mid("K")), size)}


def _unreclaimed(q: Queue) -> Expected:
    """Segments 1 and 2 hold finished messages only; the saved suffix is at segment 2."""
    q.delivered(_mid("M"))
    q.rotate()
    q.delivered(_mid("N"))
    q.rotate()
    q.envelope(_mid("B"), ["b@example.net"])
    q.restart((2, fmt.SEGMENT_HEADER_SIZE))
    return {
        ("unreclaimed_segment", "warning", fmt.segment_name(n), len(q.segments[n])) for n in (1, 2)
    }


def _lag(q: Queue) -> tuple[Expected, int]:
    for i in range(20):
        q.delivered(_mid(f"lag{i}"))
    b = q.envelope(_mid("B"), ["b@example.net"])
    q.restart((1, fmt.SEGMENT_HEADER_SIZE))
    assert b[1] - fmt.SEGMENT_HEADER_SIZE > LAG
    return {("restart_lag", "warning", "restart.lq", b[1] - 32)}, b[1]


def _lost(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    p = q.envelope(_mid("P"), ["p@example.net"])
    start = q.start(_mid("P"), p)
    q.delivery(_mid("P"), start, ("p@example.net", fmt.DELIVERED))
    q.finish(_mid("P"), start, keep_spool=True)
    q.envelope(_mid("Q"), ["q@example.net"], spool=False)
    q.spool["stray.eml"] = b"no envelope"
    kept = q.spool[q.spool_of[_mid("P")]]
    return {
        ("lost_envelope", "error", "spool/stray.eml", len(b"no envelope")),
        ("lost_envelope", "error", f"spool/{q.spool_of[_mid('P')]}", len(kept)),
        ("lost_envelope", "error", str(_mid("Q")), None),
    }


def _gap(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    q.rotate(3)
    q.envelope(_mid("E"), ["e@example.net"])
    return {("corrupt_segment", "critical", "seg-00000002.lq@0", 0)}


def _bad_restart(q: Queue) -> Expected:
    q.envelope(_mid("B"), ["b@example.net"])
    q.restart((1, fmt.SEGMENT_HEADER_SIZE))
    assert q.restart_bytes is not None
    damaged = bytearray(q.restart_bytes)
    damaged[-1] ^= 0x01
    q.restart_bytes = bytes(damaged)
    size = len(damaged) - fmt.SEGMENT_HEADER_SIZE
    # Any damage to restart.lq is corrupt_segment (bad_restart), a CRC mismatch too.
    return {("corrupt_segment", "critical", "restart.lq@32", size)}


class Planted:
    def __init__(self, root: Path) -> None:
        self.queues: dict[str, Path] = {}
        self.expected: dict[str, Expected] = {}
        self.facts: dict[str, object] = {}
        plants = {
            "clean": _clean, "torn": _torn, "crc": _crc, "corrupt": _corrupt,
            "orphans": _orphans, "duplicate": _duplicate, "stuck": _stuck,
            "unreclaimed": _unreclaimed, "lag": _lag, "lost": _lost, "gap": _gap,
            "bad_restart": _bad_restart,
        }  # fmt: skip
        for name, plant in plants.items():
            q = Queue(root / name)
            expected = plant(q)
            if isinstance(expected, tuple):
                expected, self.facts[name] = expected
            self.expected[name] = expected
            self.queues[name] = q.write()
        self.queues["empty"] = root / "empty"
        self.queues["empty"].mkdir()
        self.expected["empty"] = set()


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Planted:
    return Planted(tmp_path_factory.mktemp("logqueues"))


@pytest.fixture(scope="module")
def audited(spark, planted):
    """The state of every planted queue, read at once, and the findings as dicts."""
    found = frames.read_state(spark, list(planted.queues.values()))
    rows = [r.asDict() for r in checks.run_checks(found, OPTIONS).collect()]
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return found, rows


def _of(rows: list[dict], queue: Path) -> Expected:
    return {(r["check"], r["severity"], r["subject"], r["bytes"]) for r in rows
            if r["queue"] == str(queue)}  # fmt: skip


# --- readers -------------------------------------------------------------------------------------


def test_records_one_partition_per_segment_file(spark, planted) -> None:
    from pyspark.sql import functions as F

    dirs = [planted.queues[n] for n in ("clean", "unreclaimed", "empty", "corrupt")]
    frame = fleet.read_records(spark, dirs)
    assert frame.rdd.getNumPartitions() == 2 + 3 + 0 + 2  # restart.lq is no segment
    rows = frame.withColumn("part", F.spark_partition_id()).collect()
    parts: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        parts.setdefault((r.queue, r.file), set()).add(r.part)
    assert all(len(p) == 1 for p in parts.values())
    assert len({next(iter(p)) for p in parts.values()}) == len(parts) == 7
    expected = set()
    for d in dirs:
        for path in layout.segments(d).values():
            for rec in read_segment(path).records:
                expected.add(
                    (str(d), path.name, rec.segment, rec.offset, rec.type, rec.type_name,
                     rec.time_us, str(rec.message_id), *rec.ref, rec.size,
                     json.dumps(rec.values, sort_keys=True))
                )  # fmt: skip
    assert {tuple(r)[:-1] for r in rows} == expected and len(rows) == len(expected)
    # segment 2 of "corrupt" has a bad header: its records still carry the file's number
    assert {r.segment for r in rows if r.file == "seg-00000002.lq"} == {2}
    assert fleet.read_records(spark, [planted.queues["empty"]]).collect() == []


def test_problems_frame(spark, planted) -> None:
    corrupt = planted.queues["corrupt"]
    rows = [tuple(r) for r in fleet.read_problems(spark, [corrupt]).orderBy("file").collect()]
    (_, _, subject_junk, _), _ = sorted(planted.expected["corrupt"])
    junk = int(subject_junk.rpartition("@")[2])
    assert rows == [
        (str(corrupt), "seg-00000001.lq", "unreadable", junk, 7,
         "no record marker (b'\\x00\\x00')"),
        (str(corrupt), "seg-00000002.lq", "bad_segment_header", 0, 32,
         "segment header: magic b'XXXX', expected b'MQLQ'"),
    ]  # fmt: skip


def test_segment_files_frame_has_each_files_digest_and_record_count(audited, planted) -> None:
    found, _ = audited
    rows = {(r.queue, r.file): r for r in found.segment_files.collect()}
    expected = {}
    for directory in planted.queues.values():
        for number, path in layout.segments(directory).items():
            data = path.read_bytes()
            parsed = read_segment(path)
            expected[(str(directory), path.name)] = (
                number, len(data), hashlib.sha256(data).hexdigest(), len(parsed.records),
                [p.kind for p in parsed.problems],
            )  # fmt: skip
    got = {
        key: (r.segment, r.size, r.sha256, r.records, [p.kind for p in r.problems])
        for key, r in rows.items()
    }
    assert got == expected
    assert not [key for key in rows if key[0] == str(planted.queues["empty"])]


def test_missing_and_repeated_dirs(spark, planted, tmp_path) -> None:
    missing = tmp_path / "absent"
    for read in (fleet.read_records, fleet.read_problems, fleet.read_segments, frames.read_state):
        with pytest.raises(InputError, match=f"{missing}: no such queue directory"):
            read(spark, [planted.queues["clean"], missing])
        with pytest.raises(ConfigError, match="given twice"):
            read(spark, [planted.queues["clean"], planted.queues["clean"]])
        with pytest.raises(ConfigError, match="no queue directory given"):
            read(spark, [])


# --- state ---------------------------------------------------------------------------------------


def test_state_of_the_clean_queue(audited, planted) -> None:
    found, _ = audited
    clean = str(planted.queues["clean"])
    messages = {r.message_id: r for r in found.messages.where(f"queue = '{clean}'").collect()}
    got = {
        m: (r.state, r.attempts, r.recipients_remaining, r.delivered, r.spool_bytes is not None)
        for m, r in messages.items()
    }
    assert got == {
        str(_mid("A")): ("finished", 0, [], ["r@example.net"], False),
        str(_mid("B")): ("waiting", 0, ["b@example.net"], [], True),
        str(_mid("C")): ("in_flight", 0, ["c2@example.net"], ["c1@example.net"], True),
        str(_mid("D")): ("waiting", 1, ["d@example.net"], [], True),
        str(_mid("E")): ("waiting", 0, ["e@example.net"], [], True),
        str(_mid("F")): ("finished", 0, [], ["r@example.net"], False),
    }
    c = messages[str(_mid("C"))]
    assert (c.runner, c.start_segment, c.first_enqueued_us) == ("fast", 1, T0)
    (queue,) = found.queues.where(f"queue = '{clean}'").collect()
    b = messages[str(_mid("B"))]
    sizes = {n: p.stat().st_size for n, p in layout.segments(Path(clean)).items()}
    assert queue.asDict() | {"segments": None} == {
        "queue": clean, "suffix_source": "restart.lq",
        "saved_suffix_segment": 1, "saved_suffix_offset": 32,
        "garbage_end_segment": 1, "garbage_end_offset": b.envelope_offset,
        "end_of_log_segment": 2, "end_of_log_offset": sizes[2],
        "bytes_behind": b.envelope_offset - 32, "segments": None, "missing_segments": [],
        "restart_problems": [], "waiting": 3, "in_flight": 1, "finished": 2, "orphans": 0,
        "spool_files": 4,
    }  # fmt: skip
    assert [tuple(s) for s in queue.segments] == [
        (n, fmt.segment_name(n), size) for n, size in sizes.items()
    ]
    (empty,) = found.queues.where(f"queue = '{planted.queues['empty']}'").collect()
    assert (empty.saved_suffix_segment, empty.garbage_end_segment, empty.segments) == (
        None, None, []
    )  # fmt: skip


def test_state_after_damage(audited, planted) -> None:
    found, _ = audited
    queues = {r.queue: r for r in found.queues.collect()}
    bad = queues[str(planted.queues["bad_restart"])]
    assert (bad.suffix_source, bad.saved_suffix_segment, bad.saved_suffix_offset) == (
        "default", 1, 32
    )  # fmt: skip
    assert [(p.kind, p.detail) for p in bad.restart_problems] == [
        ("bad_restart", "crc_mismatch: RESTART record CRC")
    ]
    gap = queues[str(planted.queues["gap"])]
    assert [tuple(m) for m in gap.missing_segments] == [(2, 2)]
    torn = {r.message_id: r.state for r in found.messages.collect()
            if r.queue == str(planted.queues["torn"])}  # fmt: skip
    assert torn == {str(_mid("B")): "waiting", str(_mid("C")): "waiting"}


def test_restart_file_ranges_and_lag_in_plain_python(tmp_path) -> None:
    """`read_restart` never fails; gaps and lag are counted over the segments present."""
    assert frames.read_restart(tmp_path) == (None, [])
    restart = tmp_path / layout.RESTART_FILE
    restart.write_bytes(layout.encode_restart((3, 40), (), T0))
    assert frames.read_restart(tmp_path) == ((3, 40), [])
    two = layout.encode_restart((3, 40), (), T0)
    restart.write_bytes(two + two[fmt.SEGMENT_HEADER_SIZE :])
    suffix, problems = frames.read_restart(tmp_path)
    assert suffix is None and [(p.kind, p.detail) for p in problems] == [
        ("bad_restart", "2 RESTART records, expected 1")
    ]
    restart.write_bytes(fmt.encode_segment_header(7, T0) + two[fmt.SEGMENT_HEADER_SIZE :])
    suffix, problems = frames.read_restart(tmp_path)
    assert suffix == (3, 40) and [p.detail for p in problems] == [
        "segment number 7 in the header, expected 0"
    ]
    restart.write_bytes(fmt.encode_segment_header(0, T0))
    assert frames.read_restart(tmp_path)[1][0].detail == "no RESTART record"
    assert frames.missing_ranges([1, 2, 5, 6, 9], 2) == [
        {"first": 3, "last": 4},
        {"first": 7, "last": 8},
    ]
    assert frames.missing_ranges([5], 3) == [{"first": 3, "last": 4}]
    assert frames.missing_ranges([], 3) == [{"first": 3, "last": 3}]
    sizes = {1: 100, 2: 200, 4: 400}
    assert frames.bytes_between(sizes, (1, 40), (4, 50)) == 60 + 200 + 50
    assert frames.bytes_between(sizes, (2, 40), (2, 90)) == 50
    assert frames.bytes_between(sizes, (4, 50), (2, 10)) == 0
    seg = tmp_path / "seg-00000009.lq"
    seg.write_bytes(fmt.encode_segment_header(8, T0))
    assert [(p.kind, p.detail) for p in fleet.read_file(str(seg)).problems] == [
        ("bad_segment_header", "header says segment 8, the file name 9")
    ]


# --- checks --------------------------------------------------------------------------------------

NAMES = ("clean", "torn", "crc", "corrupt", "orphans", "duplicate", "stuck", "unreclaimed", "lag",
         "lost", "gap", "bad_restart", "empty")  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_each_queue_has_exactly_its_planted_findings(audited, planted, name) -> None:
    _, rows = audited
    assert _of(rows, planted.queues[name]) == planted.expected[name]


def test_every_check_is_planted_and_rows_are_well_formed(audited, planted) -> None:
    _, rows = audited
    # personal_data and unreadable_content find something only when the audit looks for data
    # subjects (below).
    assert {c for e in planted.expected.values() for c, *_ in e} == {
        name for name in checks.CHECKS if name not in ("personal_data", "unreadable_content")
    }
    assert len(rows) == sum(len(e) for e in planted.expected.values())
    assert {(r["system"], r["observed_at"].timestamp()) for r in rows} == {
        ("logqueue", AS_OF.timestamp())
    }
    assert all(r["queue"] in {str(p) for p in planted.queues.values()} for r in rows)
    assert all(r["severity"] == spec.SPEC.check(r["check"]).severity for r in rows)


def _detail(rows: list[dict], check: str, queue: Path) -> list[dict]:
    return sorted(
        (r["detail"] for r in rows if r["check"] == check and r["queue"] == str(queue)),
        key=json.dumps,
    )


def test_finding_details(audited, planted) -> None:
    _, rows = audited
    q = planted.queues
    torn_at = planted.facts["torn"]
    assert _detail(rows, "torn_tail", q["torn"]) == [
        {"kind": "torn_tail", "offset": torn_at, "size": 47, "detail": "47 of 50 bytes of a record"}
    ]
    assert _detail(rows, "corrupt_segment", q["gap"]) == [
        {"kind": "missing_segment", "offset": 0, "size": 0,
         "detail": "segment 2 of the working suffix has no file"}
    ]  # fmt: skip
    orphans = _detail(rows, "orphan_delivery", q["orphans"]) + _detail(
        rows, "orphan_record", q["orphans"]
    )
    assert [(d["type"], d["reason"], d["message_id"]) for d in orphans] == [
        ("DELIVERY", "DELIVERY without its live START", str(_mid("G"))),
        ("START", "START of an envelope that is not live", str(_mid("H"))),
    ]
    assert orphans[1]["ref"] == "seg-00000001.lq@9999"
    (dup,) = _detail(rows, "duplicate_delivery", q["duplicate"])
    assert dup["recipient"] == "j1@example.org"
    assert (dup["deliveries"], dup["state"], len(dup["positions"])) == (2, "finished", 2)
    (stuck,) = _detail(rows, "stuck_message", q["stuck"])
    assert stuck == {
        "state": "waiting", "attempts": 1, "first_enqueued": "2027-01-09T08:00:00Z",
        "recipients_remaining": 1, "spool": f"{_mid('K').hex[:12]}.eml", "runner": None,
    }  # fmt: skip
    unreclaimed = _detail(rows, "unreclaimed_segment", q["unreclaimed"])
    assert [(d["segment"], d["below_saved_suffix"], d["saved_suffix"]) for d in unreclaimed] == [
        (1, True, "seg-00000002.lq@32"),
        (2, False, "seg-00000002.lq@32"),
    ]
    assert {d["garbage_end"] for d in unreclaimed} == {"seg-00000003.lq@32"}
    # What a plan records and the purger checks again: the file and the digest of what was read.
    for d in unreclaimed:
        path = q["unreclaimed"] / fmt.segment_name(d["segment"])
        data = path.read_bytes()
        assert (d["path"], d["size"], d["sha256"]) == (
            str(path), len(data), hashlib.sha256(data).hexdigest()
        )  # fmt: skip
        assert (d["saved_positions"], d["saved_suffix_segment"]) == ("restart.lq", 2)
    b = planted.facts["lag"]
    assert _detail(rows, "restart_lag", q["lag"]) == [
        {"saved": "seg-00000001.lq@32", "actual": f"seg-00000001.lq@{b}", "bytes_behind": b - 32}
    ]
    lost = {d["direction"] + ":" + str(d["message_id"]): d for d in
            _detail(rows, "lost_envelope", q["lost"])}  # fmt: skip
    assert lost == {
        "spool_without_envelope:None": {
            "direction": "spool_without_envelope", "spool": "stray.eml", "message_id": None,
            "state": None},
        f"spool_without_envelope:{_mid('P')}": {
            "direction": "spool_without_envelope", "spool": f"{_mid('P').hex[:12]}.eml",
            "message_id": str(_mid("P")), "state": "finished"},
        f"envelope_without_spool:{_mid('Q')}": {
            "direction": "envelope_without_spool", "spool": f"{_mid('Q').hex[:12]}.eml",
            "message_id": str(_mid("Q")), "state": "waiting"},
    }  # fmt: skip


def test_thresholds(audited, planted) -> None:
    found, _ = audited
    options = Settings(as_of=AS_OF, retry_horizon=dt.timedelta(days=3))
    stuck = checks.stuck_message(found, options).collect()
    assert {r.subject for r in stuck} == {str(_mid("K")), str(_mid("L"))}
    assert checks.restart_lag(found, options).collect() == []  # 64 MiB by default


def test_saved_positions_of_each_segment(audited, planted) -> None:
    """Missing or damaged restart.lq: no segment is below a saved suffix anyone can trust."""
    found, _ = audited
    facts = {(r.queue, r.file): r for r in checks.segment_facts(found).collect()}

    def saved(name: str) -> set[tuple[str, bool, bool]]:
        queue = str(planted.queues[name])
        return {(r.saved_positions, r.garbage, r.below_saved_suffix)
                for (q, _), r in facts.items() if q == queue}  # fmt: skip

    assert saved("clean") == {("restart.lq", False, False)}
    assert saved("torn") == {("missing", False, False)}  # no restart.lq written
    assert saved("bad_restart") == {("damaged", False, False)}
    assert saved("unreclaimed") == {
        ("restart.lq", True, True), ("restart.lq", True, False), ("restart.lq", False, False)
    }  # fmt: skip


KEY = b"k" * 32


def _keyed(address: str) -> str:
    return subjects.keyed(subject_hash(address), KEY)


def test_personal_data_names_each_segment_holding_a_searched_subject(audited, planted) -> None:
    """Senders, recipients of envelopes and of delivery outcomes; keyed hashes only."""
    found, _ = audited
    wanted = ["J1@example.org ", "c2@example.net", "m-unknown@example.com", "g@example.net"]
    options = Settings(as_of=AS_OF, subjects=frozenset(_keyed(a) for a in wanted), subject_key=KEY)
    rows = [r.asDict() for r in checks.personal_data(found, options).collect()]
    got = {(Path(r["queue"]).name, r["subject"], r["severity"], r["bytes"]):
           json.loads(r["detail"]) for r in rows}  # fmt: skip
    size = {name: (planted.queues[name] / "seg-00000001.lq").stat().st_size
            for name in ("duplicate", "clean", "orphans")}  # fmt: skip
    assert sorted(got) == sorted(
        (name, "seg-00000001.lq", "info", size[name]) for name in ("duplicate", "clean", "orphans")
    )
    subjects_of = {key[0]: detail["subjects"] for key, detail in got.items()}
    assert subjects_of == {
        "duplicate": [_keyed("j1@example.org")],  # an envelope and two delivery outcomes
        "clean": [_keyed("c2@example.net")],  # an envelope and a deferred outcome
        "orphans": [_keyed("g@example.net")],  # finished: its records are all garbage
    }
    detail = got[("orphans", "seg-00000001.lq", "info", size["orphans"])]
    path = planted.queues["orphans"] / "seg-00000001.lq"
    assert {k: detail[k] for k in ("path", "sha256", "garbage", "saved_positions")} == {
        "path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "garbage": False, "saved_positions": "missing",
    }  # fmt: skip
    text = json.dumps(list(got.values())).lower()
    assert not [a for a in wanted if a.strip().lower() in text]  # keyed hashes, no address
    assert checks.personal_data(found, OPTIONS).collect() == []  # nothing searched


# --- damage never crashes ------------------------------------------------------------------------


def _variants(clean: bytes) -> dict[str, bytes]:
    rng = random.Random(6)
    out = {
        f"cut{n}": clean[:n] for n in (0, 1, 20, 31, 32, 33, 75, len(clean) // 2, len(clean) - 1)
    }
    for i in range(8):
        flipped = bytearray(clean)
        for _ in range(i + 1):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        out[f"flip{i}"] = bytes(flipped)
    out["random"] = rng.randbytes(600)
    out["markers"] = clean[:32] + b"RQ" * 40 + clean[32:]
    return out


def test_corrupt_and_truncated_files_never_crash(spark, planted, tmp_path) -> None:
    clean = (planted.queues["clean"] / "seg-00000001.lq").read_bytes()
    dirs = {}
    for name, data in _variants(clean).items():
        d = tmp_path / name
        d.mkdir()
        (d / "seg-00000001.lq").write_bytes(data)
        (d / layout.RESTART_FILE).write_bytes(data[:60])  # a damaged restart.lq too
        dirs[name] = d
    found = frames.read_state(spark, list(dirs.values()))
    rows = checks.run_checks(found, OPTIONS).collect()
    damage_checks = {"torn_tail", "crc_mismatch", "corrupt_segment"}
    for name, d in dirs.items():
        got = {(r.check, r.subject, r.bytes) for r in rows
               if r.queue == str(d) and r.subject.startswith("seg-")}  # fmt: skip
        problems = read_segment(d / "seg-00000001.lq").problems
        expected = {
            (p.kind if p.kind in ("torn_tail", "crc_mismatch") else "corrupt_segment",
             f"seg-00000001.lq@{p.offset}", p.size)
            for p in problems
        }  # fmt: skip
        assert {g for g in got if g[0] in damage_checks} == expected, name
        restart = {r.subject for r in rows if r.queue == str(d) and r.check in damage_checks
                   and r.subject.startswith("restart.lq@")}  # fmt: skip
        assert restart, name
    assert {r.queue for r in found.queues.collect()} == {str(d) for d in dirs.values()}


# --- the command ---------------------------------------------------------------------------------


def test_cli_writes_findings_and_exit_codes(planted, tmp_path) -> None:
    q = planted.queues
    as_of = ["--as-of", "2027-01-15T09:00:00Z"]
    clean_out = tmp_path / "clean"
    assert cli.main(["audit", "logqueue", str(q["clean"]), "--out", str(clean_out), *as_of]) == 0
    assert json.loads((clean_out / "findings.json").read_text()) == []
    manifest = json.loads((clean_out / "manifest.json").read_text())
    segments = layout.segments(q["clean"])
    assert (manifest["system"], manifest["as_of"], manifest["objects"]) == (
        "logqueue", "2027-01-15T09:00:00Z",
        len(segments) + sum(len(read_segment(p).records) for p in segments.values()),
    )  # fmt: skip
    assert manifest["plan_inputs"] == {"queues": [str(q["clean"])]}
    (given,) = manifest["inputs"]
    assert {k: given[k] for k in ("kind", "location", "segments")} == {
        "kind": "directory", "location": str(q["clean"]), "segments": 2
    }  # fmt: skip
    assert manifest["checks"] == [c.name for c in spec.CHECKS]
    out = tmp_path / "out"
    argv = ["audit", "logqueue", str(q["duplicate"]), str(q["stuck"]), str(q["lag"]),
            "--out", str(out), *as_of, "--restart-lag-bytes", str(LAG),
            "--reveal-addresses"]  # fmt: skip
    assert cli.main(argv) == 1  # duplicate_delivery is an error
    rows = json.loads((out / "findings.json").read_text())
    assert {(r["check"], r["subject"]) for r in rows} == {
        ("duplicate_delivery", f"{_mid('J')} j1@example.org"),
        ("stuck_message", str(_mid("K"))),
        ("restart_lag", "restart.lq"),
    }
    assert {r["observed_at"] for r in rows} == {"2027-01-15T09:00:00Z"}
    assert (out / "findings.parquet").is_dir()
    # Pseudonymised by default, by the runner: the same ids, the recipient's local part hidden.
    hidden = tmp_path / "hidden"
    assert cli.main([*argv[:-1], "--out", str(hidden)]) == 1
    shown = {r["id"]: r for r in json.loads((hidden / "findings.json").read_text())}
    assert sorted(shown) == sorted(r["id"] for r in rows)
    (dup,) = [r for r in shown.values() if r["check"] == "duplicate_delivery"]
    assert "j1@" not in json.dumps(dup) and dup["subject"].endswith("@example.org")
    warnings = tmp_path / "warnings"
    argv = ["audit", "logqueue", str(q["stuck"]), "--out", str(warnings), *as_of,
            "--retry-horizon", "7d"]  # fmt: skip
    assert cli.main(argv) == 0
    assert json.loads((warnings / "findings.json").read_text()) == []
    bad = ["audit", "logqueue", str(q["clean"]), "--out", str(tmp_path / "y")]
    assert cli.main([*bad, "--restart-lag-bytes", "lots"]) == 2
    assert not (tmp_path / "y").exists()


def test_positions_are_not_pseudonymised_as_addresses(planted, tmp_path) -> None:
    """``seg-00000001.lq@75`` names a place in a file: findings.json shows it as it is."""
    out = tmp_path / "torn"
    assert cli.main(["audit", "logqueue", str(planted.queues["torn"]), "--out", str(out)]) == 0
    (row,) = json.loads((out / "findings.json").read_text())
    (expected,) = planted.expected["torn"]
    assert (row["check"], row["subject"]) == ("torn_tail", expected[2])


def test_an_empty_queue_directory_is_nothing_to_audit(spark, planted, tmp_path, capsys) -> None:
    empty = planted.queues["empty"]
    out = tmp_path / "a"
    assert cli.main(["audit", "logqueue", str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mqforensics: error: InputError: nothing to audit: log queue(s) {empty} "
                   "holds nothing logqueue keeps"]  # fmt: skip
    assert not (out / "findings.json").exists()
    # Next to a queue that holds segments, it is audited (a note says it held none).
    both = tmp_path / "b"
    assert cli.main(["audit", "logqueue", str(planted.queues["clean"]), str(empty),
                     "--out", str(both)]) == 0  # fmt: skip
    assert f"note: {empty} holds no segment file" in capsys.readouterr().out


def test_a_bad_directory_fails_before_spark_starts(planted, tmp_path, capsys, monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))
    clean = str(planted.queues["clean"])
    absent = tmp_path / "absent"
    for command in ("audit", "validate"):
        out = tmp_path / command
        assert cli.main([command, "logqueue", clean, str(absent), "--out", str(out)]) == 2
        assert f"InputError: {absent}: no such queue directory" in capsys.readouterr().err
        a_file = tmp_path / "file"
        a_file.write_text("x")
        assert cli.main([command, "logqueue", str(a_file), "--out", str(out)]) == 2
        assert f"InputError: {a_file}: not a directory" in capsys.readouterr().err
        assert cli.main([command, "logqueue", clean, clean, "--out", str(out)]) == 2
        assert "given twice" in capsys.readouterr().err
        assert not out.exists()
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[[rules]]\nid = "gc"\nkind = "garbage_segments"\n'
                      'legal_basis = "storage hygiene"\n')  # fmt: skip
    plan = ["plan", "logqueue", str(absent), "--policy", str(policy), "--out"]
    assert cli.main([*plan, str(tmp_path / "plan")]) == 2
    assert f"InputError: {absent}: no such queue directory" in capsys.readouterr().err
    assert not (tmp_path / "plan").exists() and not (tmp_path / "plan.audit").exists()


def test_every_check_says_what_why_and_what_to_do() -> None:
    assert [c.name for c in spec.CHECKS] == list(checks.CHECKS)
    for check in spec.CHECKS:
        assert check.what and check.why and check.todo, check.name
        assert check.severity in ("info", "warning", "error", "critical")
        assert check.run.__name__ == check.name
