"""What a log queue operator trends (`systems/logqueue/metrics.py`), on the bundled sample (read
once) against figures counted here from its files and its ground truth, and on two handmade
queue directories: one whose only message is finished (no live mail), one with a message in
flight (the live records of the garbage ratio)."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.api import read
from mqforensics.metrics import AGE_BANDS, age_band, epoch_seconds
from mqforensics.systems.logqueue import format as fmt
from mqforensics.systems.logqueue.sample import SAMPLE
from mqforensics.systems.logqueue.segment import read_segment
from tests.metric_figures import figures_of

pytestmark = pytest.mark.logqueue

AS_OF = json.loads((SAMPLE / "sample.json").read_text())["as_of"]
QUEUES = json.loads((SAMPLE / "sample.json").read_text())["queues"]
SEGMENT_NAME = re.compile(r"seg-\d{8,}\.lq")
BANDS = [label for label, _, _ in AGE_BANDS]


@pytest.fixture(scope="module")
def metrics(spark):
    frames = read("logqueue", sample=True, as_of=AS_OF, spark=spark)
    yield systems.get("logqueue").metrics(frames._loaded)
    frames.close()


def _segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if SEGMENT_NAME.fullmatch(p.name))


def _truth(directory: Path) -> dict:
    return json.loads((directory / "ground_truth.json").read_text())


def _live(directory: Path) -> dict[str, dict]:
    """The messages not finished, by UUID text, from what the MTA itself did."""
    return {m: v for m, v in _truth(directory)["messages"].items() if v["state"] != "finished"}


def _records(directory: Path) -> list:
    return [r for path in _segments(directory) for r in read_segment(path).records]


def _ages(directory: Path) -> list[float]:
    """Each live message's age at AS_OF from its earliest ENVELOPE record."""
    first: dict[str, int] = {}
    for r in _records(directory):
        if r.type == fmt.ENVELOPE:
            mid = str(r.message_id)
            first[mid] = min(first.get(mid, r.time_us), r.time_us)
    as_of = epoch_seconds(dt.datetime.fromisoformat(AS_OF))
    return [as_of - first[mid] / 1e6 for mid in _live(directory)]


def _garbage_ratio(directory: Path) -> float:
    """Garbage over all record bytes: a waiting message's last ENVELOPE is live; an in-flight
    one's last START, the ENVELOPE it refers to and the DELIVERY records referring to it."""
    truth = _truth(directory)
    suffix = tuple(truth["saved_suffix"])
    records = sorted(
        (r for r in _records(directory) if r.position >= suffix), key=lambda r: r.position
    )
    live_positions = set()
    for mid, message in _live(directory).items():
        mine = [r for r in records if str(r.message_id) == mid]
        if message["state"] == "waiting":
            live_positions.add([r for r in mine if r.type == fmt.ENVELOPE][-1].position)
        else:
            start = [r for r in mine if r.type == fmt.START][-1]
            live_positions |= {start.position, start.ref}
            live_positions |= {
                r.position for r in mine if r.type == fmt.DELIVERY and r.ref == start.position
            }
    every = _records(directory)
    total = sum(r.size for r in every)
    live = sum(r.size for r in every if r.position in live_positions)
    return (total - live) / total


def test_rows_are_the_whole_records_of_the_segments(metrics):
    expected = {
        (str(SAMPLE / q), ""): sum(len(read_segment(p).records) for p in _segments(SAMPLE / q))
        for q in QUEUES
    }
    assert figures_of(metrics, "rows") == expected
    assert expected[(str(SAMPLE / "inbound"), "")] == 5


def test_live_mails_are_the_messages_the_mta_did_not_finish(metrics):
    assert figures_of(metrics, "live_mails") == {
        (str(SAMPLE / "outbound"), ""): 27,
        (str(SAMPLE / "inbound"), ""): 0,
    }
    assert len(_live(SAMPLE / "outbound")) == 27 and not _live(SAMPLE / "inbound")


def test_mails_by_age_bands_every_live_message_by_its_first_envelope(metrics):
    expected = {(str(SAMPLE / q), band): 0 for q in QUEUES for band in BANDS}
    for age in _ages(SAMPLE / "outbound"):
        expected[(str(SAMPLE / "outbound"), age_band(age))] += 1
    assert figures_of(metrics, "mails_by_age") == expected
    assert expected[(str(SAMPLE / "outbound"), "1d to 7d")] == 27


def test_oldest_live_age_only_where_mail_is_live(metrics):
    oldest = figures_of(metrics, "oldest_live_age")
    assert list(oldest) == [(str(SAMPLE / "outbound"), "")]
    assert oldest[(str(SAMPLE / "outbound"), "")] == pytest.approx(max(_ages(SAMPLE / "outbound")))


def test_queue_bytes_are_the_spool_files_of_live_messages(metrics):
    spool = SAMPLE / "outbound" / "spool"
    names = {m["spool"] for m in _live(SAMPLE / "outbound").values()}
    expected = sum((spool / n).stat().st_size for n in names if (spool / n).is_file())
    assert figures_of(metrics, "queue_bytes") == {
        (str(SAMPLE / "outbound"), ""): expected,
        (str(SAMPLE / "inbound"), ""): 0,
    }
    assert expected == 1019


def test_segments_are_the_segment_files(metrics):
    assert figures_of(metrics, "segments") == {
        (str(SAMPLE / q), ""): len(_segments(SAMPLE / q)) for q in QUEUES
    }
    assert figures_of(metrics, "segments")[(str(SAMPLE / "outbound"), "")] == 24


def test_segment_bytes_are_their_sizes(metrics):
    assert figures_of(metrics, "segment_bytes") == {
        (str(SAMPLE / q), ""): sum(p.stat().st_size for p in _segments(SAMPLE / q)) for q in QUEUES
    }


def test_segment_garbage_ratio(metrics):
    ratios = figures_of(metrics, "segment_garbage_ratio")
    assert ratios.keys() == {(str(SAMPLE / q), "") for q in QUEUES}
    assert ratios[(str(SAMPLE / "outbound"), "")] == pytest.approx(
        _garbage_ratio(SAMPLE / "outbound")
    )
    # inbound ran to completion: every record left is garbage
    assert ratios[(str(SAMPLE / "inbound"), "")] == 1.0


def test_spool_files(metrics):
    assert figures_of(metrics, "spool_files") == {
        (str(SAMPLE / q), ""): len(list((SAMPLE / q / "spool").glob("*")))
        if (SAMPLE / q / "spool").is_dir()
        else 0
        for q in QUEUES
    }


def test_every_figure_is_of_a_queue_and_no_other_name(metrics):
    assert {m.metric for m in metrics} == {
        "rows", "live_mails", "mails_by_age", "oldest_live_age", "queue_bytes", "segments",
        "segment_bytes", "segment_garbage_ratio", "spool_files",
    }  # fmt: skip
    assert all(m.queue and not m.check for m in metrics)


# --- handmade ------------------------------------------------------------------------------------

T0 = 1_800_000_000_000_000  # 2027-01-15T08:00:00Z
HOUR_US = 3_600_000_000


def _write_queue(directory: Path, records: list[bytes]) -> None:
    (directory / "spool").mkdir(parents=True)
    data = fmt.encode_segment_header(1, T0) + b"".join(records)
    (directory / fmt.segment_name(1)).write_bytes(data)


@pytest.fixture(scope="module")
def handmade(spark, tmp_path_factory):
    """``done``: one message delivered and finished. ``busy``: that, then a message in flight
    (envelope, start, one deferred outcome) whose envelope is two hours old."""
    root = tmp_path_factory.mktemp("logqueue-metrics")
    done_id, busy_id = uuid.UUID(int=1), uuid.UUID(int=2)
    header = fmt.SEGMENT_HEADER_SIZE

    def finished(offset: int) -> list[bytes]:
        envelope = fmt.encode_record(
            fmt.ENVELOPE, done_id, T0, (0, 0),
            {"sender": "s@example.org", "recipients": ["a@example.org"], "spool": "done",
             "attempt": 0, "not_before_us": T0},
        )  # fmt: skip
        start = fmt.encode_record(fmt.START, done_id, T0, (1, offset), {"runner": "fast"})
        at_start = offset + len(envelope)
        delivery = fmt.encode_record(
            fmt.DELIVERY, done_id, T0, (1, at_start), {"outcomes": [["a@example.org", 0, "250"]]}
        )
        finish = fmt.encode_record(fmt.FINISH, done_id, T0, (1, at_start), {"reason": 0})
        return [envelope, start, delivery, finish]

    done = finished(header)
    _write_queue(root / "done", done)
    offset = header + sum(map(len, done))
    envelope = fmt.encode_record(
        fmt.ENVELOPE, busy_id, T0 - 2 * HOUR_US, (0, 0),
        {"sender": "s@example.org", "recipients": ["b@example.org", "c@example.org"],
         "spool": "busy", "attempt": 0, "not_before_us": T0},
    )  # fmt: skip
    start = fmt.encode_record(fmt.START, busy_id, T0, (1, offset), {"runner": "slow"})
    delivery = fmt.encode_record(
        fmt.DELIVERY, busy_id, T0, (1, offset + len(envelope)),
        {"outcomes": [["b@example.org", 1, "451 later"]]},
    )  # fmt: skip
    busy = [*done, envelope, start, delivery]
    _write_queue(root / "busy", busy)
    (root / "busy" / "spool" / "busy").write_bytes(b"x" * 100)
    (root / "busy" / "spool" / "done").write_bytes(b"y" * 7)  # left over: not live
    frames = read(
        "logqueue", dirs=[root / "done", root / "busy"], as_of="2027-01-15T08:00:00Z", spark=spark
    )
    measured = systems.get("logqueue").metrics(frames._loaded)
    yield root, measured, {"done": done, "busy": busy, "live": [envelope, start, delivery]}
    frames.close()


def test_a_queue_without_live_mail(handmade):
    root, metrics, written = handmade
    done = str(root / "done")
    mine = [m for m in metrics if m.queue == done]
    assert {(m.metric, m.item): m.value for m in mine} == {
        ("rows", ""): 4,
        ("live_mails", ""): 0,
        **{("mails_by_age", band): 0 for band in BANDS},
        ("queue_bytes", ""): 0,
        ("segments", ""): 1,
        ("segment_bytes", ""): fmt.SEGMENT_HEADER_SIZE + sum(map(len, written["done"])),
        ("segment_garbage_ratio", ""): 1.0,
        ("spool_files", ""): 0,
    }
    assert "oldest_live_age" not in {m.metric for m in mine}


def test_a_message_in_flight_keeps_its_envelope_start_and_deliveries_live(handmade):
    root, metrics, written = handmade
    busy = {(m.metric, m.item): m.value for m in metrics if m.queue == str(root / "busy")}
    total = sum(map(len, written["busy"]))
    live = sum(map(len, written["live"]))
    assert busy[("segment_garbage_ratio", "")] == pytest.approx((total - live) / total)
    assert busy[("live_mails", "")] == 1 and busy[("mails_by_age", "1h to 1d")] == 1
    assert busy[("oldest_live_age", "")] == 7200
    assert busy[("queue_bytes", "")] == 100 and busy[("spool_files", "")] == 2
    assert busy[("rows", "")] == 7
