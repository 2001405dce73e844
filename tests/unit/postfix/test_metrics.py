"""What a Postfix operator trends (`systems/postfix/metrics.py`), on the bundled sample (read once)
against figures counted here from its files and from what postqueue -j said before anything was
planted (ANOMALIES.md says how each plant moved an arrival time), and on a handmade fleet of
two hosts, one of which holds no mail at all."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.api import read
from mqforensics.metrics import AGE_BANDS, age_band, epoch_seconds
from mqforensics.systems.postfix.queue_dir import LOG_QUEUES, MESSAGE_QUEUES
from mqforensics.systems.postfix.sample import BUNDLED
from tests.metric_figures import figures_of

pytestmark = pytest.mark.postfix

BANDS = [label for label, _, _ in AGE_BANDS]
DAY = 86_400


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    bundled = systems.get("postfix").sample(tmp_path_factory.mktemp("postfix-metrics"))
    frames = read("postfix", options=bundled.options, as_of=bundled.as_of, spark=spark)
    queue_dir = Path(bundled.options.queue_dir[0].split("=", 1)[1])
    yield queue_dir, bundled.as_of, systems.get("postfix").metrics(frames._loaded)
    frames.close()


def _files(queue_dir: Path, queue: str) -> list[Path]:
    return [p for p in (queue_dir / queue).rglob("*") if p.is_file()]


def _arrivals() -> dict[str, list[int]]:
    """Queue -> the arrival time of each queue file in it: postqueue -j's, before planting, moved
    as each plant says (ANOMALIES.md)."""
    listed = [json.loads(line) for line in (BUNDLED / "postqueue.jsonl").read_text().splitlines()]
    arrival = {m["queue_id"]: m["arrival_time"] for m in listed}
    arrival["82668A0A256"] -= 30 * DAY  # expired: T 30 days earlier
    arrival["4C4B4A0A252"] -= 20 * DAY  # old_hold: T 20 days earlier
    removed = "DA3D3A0A24F"  # orphan_log: its queue file was removed
    queues: dict[str, list[int]] = {q: [] for q in MESSAGE_QUEUES}
    for m in listed:
        if m["queue_id"] != removed:
            queues[m["queue_name"]].append(arrival[m["queue_id"]])
    queues["incoming"].append(arrival["71DC5A0A105"] - DAY)  # incomplete: a copy a day older
    queues["corrupt"].append(arrival["12EC9A0A242"])  # corrupt: a whole copy
    return queues


def _ages(as_of: str) -> dict[str, list[float]]:
    now = epoch_seconds(dt.datetime.fromisoformat(as_of))
    return {q: [now - a for a in arrivals] for q, arrivals in _arrivals().items()}


def test_rows_are_the_files_of_every_queue(sample):
    queue_dir, _, metrics = sample
    expected = {(q, ""): len(_files(queue_dir, q)) for q in (*MESSAGE_QUEUES, *LOG_QUEUES)}
    assert figures_of(metrics, "rows") == expected
    assert expected[("deferred", "")] == 6 and expected[("defer", "")] == 8


def test_live_mails_are_the_queue_files_of_each_message_queue(sample):
    queue_dir, _, metrics = sample
    assert figures_of(metrics, "live_mails") == {
        (q, ""): len(_files(queue_dir, q)) for q in MESSAGE_QUEUES
    }
    assert {q: len(a) for q, a in _arrivals().items() if a} == {
        "deferred": 6, "hold": 2, "incoming": 1, "corrupt": 1,
    }  # fmt: skip


def test_mails_by_age_counts_from_the_arrival_time(sample):
    _, as_of, metrics = sample
    expected = {(q, band): 0 for q in MESSAGE_QUEUES for band in BANDS}
    for queue, ages in _ages(as_of).items():
        for age in ages:
            expected[(queue, age_band(age))] += 1
    assert figures_of(metrics, "mails_by_age") == expected
    assert expected[("deferred", "7d or more")] == 1 and expected[("incoming", "1d to 7d")] == 1


def test_oldest_live_age_only_for_queues_holding_mail(sample):
    _, as_of, metrics = sample
    oldest = figures_of(metrics, "oldest_live_age")
    expected = {(q, ""): max(ages) for q, ages in _ages(as_of).items() if ages}
    assert oldest.keys() == expected.keys()
    for key, age in expected.items():  # postqueue -j gives whole seconds
        assert oldest[key] == pytest.approx(age, abs=1)


def test_queue_bytes_are_the_sizes_of_the_queue_files(sample):
    queue_dir, _, metrics = sample
    assert figures_of(metrics, "queue_bytes") == {
        (q, ""): sum(p.stat().st_size for p in _files(queue_dir, q)) for q in MESSAGE_QUEUES
    }
    assert figures_of(metrics, "queue_bytes")[("deferred", "")] == 4719


def test_no_other_figure(sample):
    _, _, metrics = sample
    assert {m.metric for m in metrics} == {
        "rows", "live_mails", "mails_by_age", "oldest_live_age", "queue_bytes",
    }  # fmt: skip
    assert all(not m.check for m in metrics)


# --- handmade ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(spark, tmp_path_factory):
    """Two hosts: ``mx1`` holds only a defer log (its message gone), ``mx2`` one held message."""
    root = tmp_path_factory.mktemp("postfix-fleet")
    for host in ("mx1", "mx2"):
        for queue in (*MESSAGE_QUEUES, *LOG_QUEUES):
            (root / host / queue).mkdir(parents=True)
    log = root / "mx1" / "defer" / "E" / "E1AE5A0A254"
    log.parent.mkdir()
    shutil.copyfile(BUNDLED / "queue" / "defer" / "E" / "E1AE5A0A254", log)
    held = root / "mx2" / "hold" / "E1AE5A0A254"
    shutil.copyfile(BUNDLED / "queue" / "hold" / "E1AE5A0A254", held)
    held.chmod(0o700)
    frames = read(
        "postfix", queue_dir=[f"mx1={root / 'mx1'}", f"mx2={root / 'mx2'}"],
        as_of="2026-11-28T03:09:31Z", spark=spark,
    )  # fmt: skip
    yield held, systems.get("postfix").metrics(frames._loaded)
    frames.close()


def test_a_host_without_live_mail(fleet):
    _, metrics = fleet
    mx1 = {(m.metric, m.queue, m.item): m.value for m in metrics if m.queue.startswith("mx1/")}
    expected = {("rows", f"mx1/{q}", ""): 0 for q in (*MESSAGE_QUEUES, *LOG_QUEUES)}
    expected[("rows", "mx1/defer", "")] = 1
    for q in MESSAGE_QUEUES:
        expected[("live_mails", f"mx1/{q}", "")] = 0
        expected[("queue_bytes", f"mx1/{q}", "")] = 0
        expected.update({("mails_by_age", f"mx1/{q}", band): 0 for band in BANDS})
    assert mx1 == expected  # no oldest_live_age


def test_a_fleet_names_each_queue_by_its_host(fleet):
    held, metrics = fleet
    mx2 = {(m.metric, m.item): m.value for m in metrics if m.queue == "mx2/hold"}
    assert mx2[("live_mails", "")] == 1 and mx2[("mails_by_age", "under 1h")] == 1
    assert mx2[("queue_bytes", "")] == held.stat().st_size and ("oldest_live_age", "") in mx2
    assert {m.queue.split("/")[0] for m in metrics} == {"mx1", "mx2"}
