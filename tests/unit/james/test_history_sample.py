"""The bundled run history of the James sample (datasets/james/HISTORY.md): each day's snapshot
as `make_history.evolve` writes it, the planted figures in the history, and the exact alerts the
bundled rules give at every run, nothing else."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq
import pytest

from datasets.james import make_history
from mqforensics.api_history import open_history

pytestmark = pytest.mark.james

DAY = 86_400


def day_of(instant) -> int:
    return make_history.DAYS - (make_history.LAST_DAY - instant.to_pydatetime()).days


def test_day_14_is_the_sample_and_what_was_planted(tmp_path) -> None:
    out = make_history.evolve(14, tmp_path / "day14")
    sample = pq.read_table(make_history.SAMPLE / "enqueuedmailsv4.parquet")
    view = pq.read_table(out / "enqueuedmailsv4.parquet")
    assert view.schema == sample.schema
    assert view.slice(0, sample.num_rows).equals(sample)  # nothing moved on the last day
    added = view.slice(sample.num_rows).to_pylist()
    assert len(added) == 4 * 7 and {r["queuename"] for r in added} == {"spool"}
    assert all(r["bucketid"] == make_history.bucket_id(r["name"], 4) for r in added)
    assert all(r["timerangestart"].timestamp() % 900 == 0 for r in added)
    listing = pq.read_table(out / "blob_inventory.parquet").to_pylist()
    keys = {r["key"] for r in listing}
    assert all(r["headerblobid"] in keys and r["bodyblobid"] in keys for r in added)
    starts = {r["queuename"]: r["browsestart"] for r in
              pq.read_table(out / "browsestart.parquet").to_pylist()}  # fmt: skip
    assert starts["bounces"] == dt.datetime(2026, 10, 20, 12, tzinfo=dt.UTC)


def test_day_1_is_the_sample_moved_back_13_days(tmp_path) -> None:
    out = make_history.evolve(1, tmp_path / "day1")
    sample = pq.read_table(make_history.SAMPLE / "browsestart.parquet").to_pylist()
    moved = pq.read_table(out / "browsestart.parquet").to_pylist()
    assert [r["browsestart"] + dt.timedelta(days=13) for r in moved] == [
        r["browsestart"] for r in sample
    ]
    assert pq.read_table(out / "enqueuedmailsv4.parquet").num_rows == 320


@pytest.fixture(scope="module")
def history(spark):
    return open_history(make_history.HISTORY, spark=spark)


def _by_day(history, metric: str, **labels: str) -> dict[int, float]:
    points = history.series(metric, **labels)
    assert len(points) == 14
    return {day_of(t): v for t, v in zip(points["as_of"], points["value"], strict=True)}


def test_the_planted_figures(history) -> None:
    runs = history.runs()
    assert (len(runs), set(runs["scope"]), set(runs["kind"])) == (14, {"james-sample"}, {"audit"})
    bounces = _by_day(history, "browse_start", queue="bounces")
    assert len({bounces[d] for d in range(9, 15)}) == 1
    assert len({bounces[d] for d in range(1, 10)}) == 9
    lag = _by_day(history, "browse_start_lag", queue="bounces")
    assert [lag[d] / DAY for d in range(8, 15)] == [9, 9, 10, 11, 12, 13, 14]
    live = _by_day(history, "live_mails", queue="spool")
    assert [live[d] for d in range(1, 15)] == [22] * 7 + [22 + 4 * n for n in range(1, 8)]
    orphans = _by_day(history, "reclaimable_bytes", check="orphaned_blob")
    assert [orphans[d] for d in range(1, 15)] == [1218] * 7 + [1218 + 203 * n for n in
                                                                range(1, 8)]  # fmt: skip
    stuck = _by_day(history, "findings", check="stuck_mail")
    assert [stuck[d] for d in range(1, 15)] == [6] * 8 + [6 + 4 * n for n in range(1, 7)]


def test_the_bundled_rules_give_exactly_the_documented_alerts(history) -> None:
    alerts = history.alerts(every_run=True)
    fired = {
        (a.rule, a.queue or a.check, day_of_alert)
        for a in alerts
        for day_of_alert in [make_history.DAYS - (make_history.LAST_DAY - a.as_of).days]
    }
    expected = (
        {("james-browse-start-over-7-days", q, d) for q in ("bounces", "spool")
         for d in range(1, 15)}
        | {("mail-older-than-5-days", "spool", d) for d in range(1, 15)}
        | {("queue-size-jump", "spool", d) for d in (8, 9)}
        | {("queue-grows", "spool", d) for d in (12, 13, 14)}
        | {("james-browse-start-stuck", "bounces", d) for d in (13, 14)}
        | {("reclaimable-bytes-doubled", "orphaned_blob", d) for d in (13, 14)}
    )  # fmt: skip
    assert fired == expected and len(alerts) == 51
    stuck = next(a for a in alerts if a.rule == "james-browse-start-stuck")
    assert stuck.since == make_history.as_of(9)
    latest = history.alerts()
    assert sorted(a.rule for a in latest) == sorted([
        "james-browse-start-over-7-days", "james-browse-start-over-7-days",
        "mail-older-than-5-days", "queue-grows", "james-browse-start-stuck",
        "reclaimable-bytes-doubled",
    ])  # fmt: skip
