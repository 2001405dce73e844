"""What a James operator trends (`systems/james/metrics.py`), on the bundled sample: the figures
of an audit (which reuses the rows its checks kept) and of a plain read (a validation's path: an
anti-join of the view against the markers) against figures counted here with pandas from the
sample's Parquet tables, its blob listing and RabbitMQ's queues.json."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mqforensics import systems
from mqforensics.api import audit, read
from mqforensics.metrics import AGE_BANDS, age_band, epoch_seconds
from mqforensics.systems.james.sample import BUNDLED
from tests.metric_figures import figures_of

pytestmark = pytest.mark.james

AS_OF = epoch_seconds(pd.Timestamp("2026-11-03T12:00:00Z").to_pydatetime())


@pytest.fixture(scope="module")
def measured(spark, tmp_path_factory):
    """(the audit's figures, the plain read's figures) of the bundled sample."""
    spec = systems.get("james")
    options = spec.sample(tmp_path_factory.mktemp("james-metrics")).options
    done = audit("james", options=options, out=tmp_path_factory.mktemp("audit"), spark=spark)
    assert done._loaded is not None and done._loaded.frames.context is not None
    from_audit = spec.metrics(done._loaded)
    frames = read("james", options=options, spark=spark)
    assert frames._loaded is not None and frames._loaded.frames.context is None
    from_read = spec.metrics(frames._loaded)
    yield from_audit, from_read
    done.close()
    frames.close()


def _expected() -> dict[str, dict[tuple[str, str], float]]:
    view = pd.read_parquet(BUNDLED / "enqueuedmailsv4.parquet")
    markers = pd.read_parquet(BUNDLED / "deletedmailsv2.parquet")
    consumed = set(zip(markers["queuename"], markers["enqueueid"], strict=True))
    view["live"] = [
        (q, e) not in consumed for q, e in zip(view["queuename"], view["enqueueid"], strict=True)
    ]
    live = view[view["live"]]
    ages = AS_OF - live["enqueuedtime"].map(lambda t: t.timestamp())
    queues = sorted(set(view["queuename"]))
    bands = {(q, b): 0 for q in queues for b, _, _ in AGE_BANDS}
    for queue, age in zip(live["queuename"], ages, strict=True):
        bands[(queue, age_band(age))] += 1
    rows = view.groupby("queuename").size()
    alive = live.groupby("queuename").size().reindex(queues, fill_value=0)
    starts = {}
    for name, column in (("browse_start", "browsestart"), ("content_start", "contentstart")):
        table = pd.read_parquet(BUNDLED / f"{column}.parquet")
        starts[name] = {(q, ""): t.timestamp() for q, t in zip(table["queuename"], table[column],
                                                                  strict=True)}  # fmt: skip
        starts[f"{name}_lag"] = {key: AS_OF - at for key, at in starts[name].items()}
    listing = pd.read_parquet(BUNDLED / "blob_inventory.parquet")
    broker = json.loads((BUNDLED / "broker" / "queues.json").read_text())
    return {
        "rows": {(q, ""): int(rows[q]) for q in queues},
        "live_mails": {(q, ""): int(alive[q]) for q in queues},
        "consumed_rows": {(q, ""): int(rows[q] - alive[q]) for q in queues},
        "mails_by_age": bands,
        "oldest_live_age": {
            (q, ""): float(ages[live["queuename"] == q].max()) for q in sorted(set(live.queuename))
        },
        **starts,
        "blobs": {("", ""): len(listing)},
        "blob_bytes": {("", ""): int(listing["size"].sum())},
        "broker_messages": {
            (q["name"], ""): q["messages_ready"] + q["messages_unacknowledged"]
            for q in broker
            if q["name"].startswith("JamesMailQueue-")
        },
    }


def test_every_figure_is_what_the_tables_say(measured):
    from_audit, _ = measured
    expected = _expected()
    for name, figures in expected.items():
        assert figures_of(from_audit, name) == pytest.approx(figures), name
    # The planted state, as ANOMALIES.md tells it: spool holds stuck and invisible mail more
    # than a day old; bounces holds no live mail and keeps its old browseStart.
    assert expected["live_mails"][("bounces", "")] == 0
    assert (
        expected["mails_by_age"][("spool", "1d to 7d")]
        + expected["mails_by_age"][("spool", "7d or more")]
        >= 6
    )
    assert figures_of(from_audit, "browse_start_lag")[("bounces", "")] == 9 * 86400
    assert ("bounces", "") not in figures_of(from_audit, "oldest_live_age")


def test_a_plain_read_measures_what_the_audit_does(measured):
    from_audit, from_read = measured
    key = lambda m: (m.metric, m.queue, m.item)  # noqa: E731
    assert sorted(from_read, key=key) == sorted(from_audit, key=key)


def test_units_and_labels(measured):
    from_audit, _ = measured
    units = {m.metric: m.unit for m in from_audit}
    assert units == {
        "rows": "count", "live_mails": "count", "consumed_rows": "count",
        "mails_by_age": "count", "oldest_live_age": "seconds", "browse_start": "instant",
        "content_start": "instant", "browse_start_lag": "seconds",
        "content_start_lag": "seconds", "broker_messages": "count", "blobs": "count",
        "blob_bytes": "bytes",
    }  # fmt: skip
    # Every queue has a point in each series: a drained queue is a 0, not a gap.
    for name in ("rows", "live_mails", "consumed_rows"):
        assert {q for q, _ in figures_of(from_audit, name)} == {"spool", "outgoing", "bounces"}
