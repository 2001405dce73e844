"""Browse order, getSize and delete selections equal James's own per-row algorithm.

`james_browse` below is a direct transcription of CassandraMailQueueBrowser: walk the slices from
browseStart to the slice holding now, read buckets 0..bucketCount-1 of each, keep the rows with
no deletedMailsV2 marker, sort each slice by enqueuedTime (a stable sort). It shares no code with
mqforensics.systems.james.browse.
"""

import datetime as dt
import random
import uuid

import pytest

from mqforensics.errors import ConfigError
from mqforensics.systems.james import schema
from mqforensics.systems.james.browse import browsable, delete_selection, sizes
from mqforensics.systems.james.frames import JamesState

UTC = dt.UTC
AS_OF = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WINDOW = 900
BUCKETS = 3
QUEUES = ["spool", "outgoing", "empty"]
SENDERS = ["a@example.org", "b@example.org", None]
RECIPIENTS = ["x@example.com", "y@example.com", "z@example.net"]


def random_state(seed: int):
    rng = random.Random(seed)
    entries, deleted = [], set()
    last_slice = int(AS_OF.timestamp()) // WINDOW * WINDOW
    browse = {"spool": last_slice - 40 * WINDOW, "outgoing": last_slice - 10 * WINDOW,
              "empty": last_slice - 5 * WINDOW}  # fmt: skip
    for n in range(400):
        queue = rng.choice(["spool", "outgoing"])
        # Slices before and after browseStart, some misaligned, some in the future.
        slice_start = last_slice - rng.randint(-2, 50) * WINDOW
        if rng.random() < 0.05:
            slice_start += 7  # not on the window grid: never browsed
        bucket = rng.randint(0, BUCKETS)  # BUCKETS itself is out of range: never browsed
        enqueued = slice_start + rng.randint(0, WINDOW - 1)
        if rng.random() < 0.1 and entries:
            enqueued = entries[-1][4].timestamp()  # ties in enqueuedTime
        ident = str(uuid.UUID(int=rng.getrandbits(128)))
        recipients = rng.sample(RECIPIENTS, rng.randint(0, 2))
        entries.append((
            queue, dt.datetime.fromtimestamp(slice_start, UTC), bucket, ident,
            dt.datetime.fromtimestamp(enqueued, UTC), f"name-{n % 7}", "root", "h", "b", {},
            None, rng.choice(SENDERS), recipients, None, None, None, [], "v4",
        ))  # fmt: skip
        if rng.random() < 0.4:
            deleted.add((queue, ident))
    return entries, deleted, browse


def james_browse(entries, deleted, browse, queue):
    """CassandraMailQueueBrowser, row by row."""
    partitions = {}
    for row in entries:
        partitions.setdefault((row[0], int(row[1].timestamp()), row[2]), []).append(row)
    now = int(AS_OF.timestamp())
    result = []
    start = browse[queue]
    for slice_start in range(start, now // WINDOW * WINDOW + 1, WINDOW):
        items = []
        for bucket in range(BUCKETS):
            # Cassandra returns a partition's rows in clustering order (here: enqueueid text).
            for row in sorted(partitions.get((queue, slice_start, bucket), []),
                              key=lambda r: r[3]):  # fmt: skip
                if (queue, row[3]) not in deleted:
                    items.append(row)
        items.sort(key=lambda r: r[4])  # Java's List.sort is stable
        result.extend(items)
    return [row[3] for row in result]


@pytest.fixture(scope="module", params=[1, 2])
def case(request, spark):
    entries, deleted, browse = random_state(request.param)
    state = JamesState(
        entries=spark.createDataFrame(entries, schema.ENTRIES),
        deleted=spark.createDataFrame(sorted(deleted), schema.DELETED),
        browse_start=spark.createDataFrame(
            [(q, dt.datetime.fromtimestamp(b, UTC)) for q, b in browse.items()],
            schema.BROWSE_START,
        ),
        content_start=spark.createDataFrame([], schema.CONTENT_START),
        config_history=spark.createDataFrame(
            [(0, 3600, 1, 1000), (1, WINDOW, BUCKETS, 1000)], schema.CONFIG_HISTORY
        ),
        as_of=AS_OF,
    )
    return state, entries, deleted, browse


def test_browse_order_equals_james(case):
    state, entries, deleted, browse = case
    rows = browsable(state).orderBy("queuename", "position").collect()
    for queue in QUEUES:
        ours = [r.enqueueid for r in rows if r.queuename == queue]
        assert ours == james_browse(entries, deleted, browse, queue)
    assert any(r.queuename == "spool" for r in rows)  # the case is not trivially empty


def test_sizes_equal_james(case):
    state, entries, deleted, browse = case
    ours = {r.queuename: r.size for r in sizes(state).collect()}
    assert ours == {q: len(james_browse(entries, deleted, browse, q)) for q in QUEUES}
    assert ours["empty"] == 0


@pytest.mark.parametrize(
    ("condition", "keep"),
    [
        ({}, lambda row: True),
        ({"sender": "a@example.org"}, lambda row: row[11] == "a@example.org"),
        ({"name": "name-3"}, lambda row: row[5] == "name-3"),
        ({"recipient": "y@example.com"}, lambda row: "y@example.com" in row[12]),
    ],
)
def test_delete_selections_equal_james(case, condition, keep):
    state, entries, deleted, browse = case
    by_id = {row[3]: row for row in entries}
    expected = [i for i in james_browse(entries, deleted, browse, "spool") if keep(by_id[i])]
    ours = delete_selection(state, "spool", **condition).orderBy("position").collect()
    assert [r.enqueueid for r in ours] == expected


def test_two_conditions_are_refused(case):
    state, *_ = case
    with pytest.raises(ConfigError):
        delete_selection(state, "spool", sender="a@example.org", name="x")
