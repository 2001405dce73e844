"""James checks on a tiny hand-built state: each planted row, and exactly its findings."""

import datetime as dt
import json
import uuid

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.james import schema
from mqforensics.systems.james.checks import run_checks
from mqforensics.systems.james.frames import JamesState
from mqforensics.systems.james.java_hash import bucket_id
from mqforensics.systems.james.options import Settings

UTC = dt.UTC
AS_OF = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


class Builder:
    def __init__(self):
        self.entries, self.deleted, self.blobs = [], [], []
        self.counter = 0

    def mail(
        self,
        queue,
        trs,
        enqueued,
        *,
        consumed=False,
        bucket=None,
        blobs=True,
        missing_body=False,
        sender="alice@example.org",
        recipients=("bob@example.com",),
        header=None,
        body=None,
        name=None,
    ):
        self.counter += 1
        ident = str(uuid.UUID(int=self.counter))
        if name is None:
            name = f"Mail{1_700_000_000_000 + self.counter}-abcdefghijklmnopqrst"
        header, body = header or f"h-{ident}", body or f"b-{ident}"
        self.entries.append((
            queue, trs, bucket_id(name, 1) if bucket is None else bucket, ident, enqueued, name,
            "root", header, body, {"k": b"v"}, None, sender, list(recipients), "host", "10.0.0.1",
            None, [(recipients[0], "X-H", "1")], "v4",
        ))  # fmt: skip
        if consumed:
            self.deleted.append((queue, ident))
        if blobs:
            self.blob(header, 100, at(1, 0))
            if not missing_body:
                self.blob(body, 1000, at(1, 0))
        return ident

    def blob(self, key, size, modified, kind="passthrough"):
        self.blobs.append(("default", key, size, modified, None, None, kind, None, None, None))

    def state(self, spark, browse, content, history, with_blobs=True):
        return JamesState(
            entries=spark.createDataFrame(self.entries, schema.ENTRIES),
            deleted=spark.createDataFrame(self.deleted, schema.DELETED),
            browse_start=spark.createDataFrame(list(browse.items()), schema.BROWSE_START),
            content_start=spark.createDataFrame(list(content.items()), schema.CONTENT_START),
            config_history=spark.createDataFrame(history, schema.CONFIG_HISTORY),
            blobs=spark.createDataFrame(self.blobs, schema.BLOBS) if with_blobs else None,
            as_of=AS_OF,
        )


HISTORY = [(0, 7200, 1, 1000), (1, 3600, 1, 1000)]


@pytest.fixture(scope="module")
def planted(spark):
    b = Builder()
    ids = {}
    # spool: contentStart 08:00, browseStart 10:00 (today).
    ids["before_content"] = b.mail("spool", at(21, 6), at(21, 6, 5), consumed=True, blobs=False)
    ids["pending"] = b.mail("spool", at(21, 9), at(21, 9, 5), consumed=True, blobs=False)
    ids["invisible"] = b.mail("spool", at(21, 8), at(21, 8, 5))
    ids["fine"] = b.mail("spool", at(21, 10), at(21, 10, 5))
    ids["wrong_bucket"] = b.mail("spool", at(21, 11), at(21, 11, 1), bucket=3)
    ids["misaligned"] = b.mail("spool", at(21, 10, 30), at(21, 10, 31), consumed=True,
                               blobs=False)  # fmt: skip
    ids["dangling"] = b.mail("spool", at(21, 11), at(21, 11, 2), missing_body=True)
    # outgoing: no contentStart (never cleaned), browseStart 11.5 days old, pinned by a stuck mail.
    ids["never_cleaned"] = b.mail("outgoing", at(9, 0), at(9, 0, 1), consumed=True, blobs=False)
    ids["stuck"] = b.mail("outgoing", at(10, 0), at(10, 0, 10))
    # bounces: empty queue with an old browseStart; a consumed mail after it is fine.
    ids["bounced"] = b.mail("bounces", at(15, 0), at(15, 0, 3), consumed=True, blobs=False)
    b.blob("orphan-old", 4242, at(20, 0))
    b.blob("orphan-young", 7, at(21, 11, 30))  # inside the one-hour grace: not reported
    state = b.state(
        spark,
        browse={"spool": at(21, 10), "outgoing": at(10, 0), "bounces": at(1, 0)},
        content={"spool": at(21, 8)},
        history=HISTORY,
    )
    return state, ids


@pytest.fixture(scope="module")
def default_findings(planted):
    """The planted state's findings as `run_checks` gives them with the default settings (the
    live keys sent to every task, the early rows kept): run once for the tests that need
    exactly that run."""
    state, _ = planted
    return run_checks(state).collect()


def by_check(frame):
    """Findings (a frame, or its collected rows) by check and subject."""
    rows = frame if isinstance(frame, list) else frame.collect()
    result = {}
    for row in rows:
        result.setdefault(row.check, {})[row.subject] = row
    return result


@pytest.fixture(params=["broadcast", "shuffled"])
def live_keys_sent(request, monkeypatch):
    """Both ways the audit meets view rows with the live keys: sent to every task (one pass,
    the marked rows singled out by the rollup) or shuffled (a marking pass of their own)."""
    from mqforensics.systems.james import context

    if request.param == "shuffled":
        monkeypatch.setattr(context, "BROADCAST_BYTES", 0)
    return request.param


@pytest.fixture(params=["kept", "read again"])
def early_rows(request, monkeypatch):
    """Both ways `unreclaimed_slice` meets the rows of partitions before a queue's starts: kept
    by the marking pass with their addresses, or (too many of them) read again from the view."""
    from mqforensics.systems.james import context

    if request.param == "read again":
        monkeypatch.setattr(context, "KEPT_EARLY_ROWS", 0)
    return request.param


def test_every_planted_row_gives_exactly_its_findings(
    planted, live_keys_sent, early_rows, default_findings
):
    state, ids = planted
    default = (live_keys_sent, early_rows) == ("broadcast", "kept")  # nothing patched
    found = by_check(default_findings if default else run_checks(state))
    subjects = {check: sorted(rows) for check, rows in found.items()}
    assert subjects == {
        "unreclaimed_slice": sorted([
            "spool/2026-11-21T06:00:00Z/0", "spool/2026-11-21T09:00:00Z/0",
            "outgoing/2026-11-09T00:00:00Z/0",
        ]),
        "stale_browse_start": ["bounces", "outgoing"],
        "invisible_mail": [ids["invisible"]],
        "stuck_mail": [ids["stuck"]],
        "orphaned_blob": ["orphan-old"],
        "dangling_blob_ref": [ids["dangling"]],
        "bucket_mismatch": [ids["wrong_bucket"]],
        "slice_mismatch": [ids["misaligned"]],
        "config_advice": ["bounces", "outgoing", "spool"],
    }  # fmt: skip
    unreclaimed = found["unreclaimed_slice"]
    reasons = {s: json.loads(r.detail)["reason"] for s, r in unreclaimed.items()}
    assert reasons == {
        "spool/2026-11-21T06:00:00Z/0": "before_content_start",
        "spool/2026-11-21T09:00:00Z/0": "cleanup_pending",
        "outgoing/2026-11-09T00:00:00Z/0": "never_cleaned",
    }
    assert unreclaimed["spool/2026-11-21T09:00:00Z/0"].severity == "info"
    stale = {s: json.loads(r.detail) for s, r in found["stale_browse_start"].items()}
    assert stale["outgoing"]["reason"] == "pinned"
    assert stale["outgoing"]["pinning"] == [ids["stuck"]]
    assert stale["bounces"]["reason"] == "queue_empty"
    stuck = json.loads(found["stuck_mail"][ids["stuck"]].detail)
    assert stuck["republish"] == (
        "POST /mailQueues/outgoing?action=RepublishNotProcessedMails&olderThan=86400s"
    )
    assert stuck["visible"] is True
    assert json.loads(found["dangling_blob_ref"][ids["dangling"]].detail)["missing"] == [
        f"b-{ids['dangling']}"
    ]
    orphan = found["orphaned_blob"]["orphan-old"]
    assert (orphan.severity, orphan.bytes) == ("info", 4242)
    assert json.loads(orphan.detail)["deletable"] is False  # reference set not known complete


def test_unreclaimed_slice_counts_exact_bytes_and_says_what_deleting_it_takes(
    planted, live_keys_sent, early_rows
):
    """Exact bytes and addresses (`metadata_bytes`, `addresses`, `blob_bytes`) of a partition
    before contentStart; and each finding carries what a plan deletes and the purger
    re-checks: the rows' ids, the consumed ones, the newest enqueue time, the table, the
    queue's starts at milliseconds, the first partition from contentStart on that stays, the
    window and bucket count."""
    state, ids = planted
    # One run of the check per way (it was run twice, once per group of assertions below).
    found = by_check(run_checks(state, only=["unreclaimed_slice"]))["unreclaimed_slice"]
    detail = json.loads(found["spool/2026-11-21T06:00:00Z/0"].detail)
    name = f"Mail{1_700_000_000_000 + 1}-abcdefghijklmnopqrst"
    # name, state, sender, remotehost, remoteaddr, two blob ids, one recipient, one header
    # tuple, one attribute (key + value), and 16 for the enqueueId.
    ident = ids["before_content"]
    expected = (
        len(name) + len("root") + len("alice@example.org") + len("host") + len("10.0.0.1")
        + len(f"h-{ident}") + len(f"b-{ident}") + len("bob@example.com")
        + len("bob@example.com") + len("X-H") + len("1") + len("k") + len("v") + 16
    )  # fmt: skip
    assert detail["metadata_bytes"] == expected
    assert detail["addresses"] == 2
    assert detail["rows"] == 1 and detail["live_rows"] == 0
    assert detail["blob_bytes"] == 0  # its blobs were deleted at dequeue (passthrough)
    pending = json.loads(found["spool/2026-11-21T09:00:00Z/0"].detail)
    assert {k: pending[k] for k in (
        "table", "timerangestart", "bucketid", "enqueueids", "markers", "newest_enqueued_time",
        "browse_start", "content_start", "first_kept_slice", "window_seconds", "bucket_count",
    )} == {
        "table": "enqueuedmailsv4", "timerangestart": "2026-11-21T09:00:00.000Z", "bucketid": 0,
        "enqueueids": [ids["pending"]], "markers": [ids["pending"]],
        "newest_enqueued_time": "2026-11-21T09:05:00.000000Z",
        "browse_start": "2026-11-21T10:00:00.000Z", "content_start": "2026-11-21T08:00:00.000Z",
        # The invisible mail's partition (08:00) holds live mail: it stays.
        "first_kept_slice": "2026-11-21T08:00:00.000Z",
        "window_seconds": 3600, "bucket_count": 1,
    }  # fmt: skip
    never = json.loads(found["outgoing/2026-11-09T00:00:00Z/0"].detail)
    assert (never["content_start"], never["first_kept_slice"]) == (None, None)
    assert never["markers"] == never["enqueueids"] == [ids["never_cleaned"]]


def test_shared_and_gone_blobs_are_counted_once_and_never_called_orphans(
    spark, live_keys_sent, early_rows
):
    b = Builder()
    # A never-cleaned partition of two consumed mails sharing a header blob listed twice (the
    # larger size counts), one body listed, the other gone.
    b.mail("spool", at(21, 6), at(21, 6, 1), consumed=True, blobs=False, header="shared",
           body="body-1")  # fmt: skip
    b.mail("spool", at(21, 6), at(21, 6, 2), consumed=True, blobs=False, header="shared",
           body="body-2", sender="carol@example.net")  # fmt: skip
    b.blob("shared", 10, at(1, 0))
    b.blob("shared", 30, at(1, 0))
    b.blob("body-1", 100, at(1, 0))
    # A consumed mail after browseStart (no row of it is kept) whose blobs are still listed:
    # referenced, so not orphans.
    b.mail("spool", at(21, 10), at(21, 10, 1), consumed=True, header="kept-h", body="kept-b")
    # A live mail whose two blobs are gone: both missing, header first.
    gone = b.mail("spool", at(21, 11), at(21, 11, 1), blobs=False)
    b.blob("lonely", 5, at(1, 0))
    state = b.state(spark, browse={"spool": at(21, 10)}, content={}, history=HISTORY)
    checks = ["unreclaimed_slice", "orphaned_blob", "dangling_blob_ref"]
    found = by_check(run_checks(state, only=checks))
    assert {c: sorted(rows) for c, rows in found.items()} == {
        "unreclaimed_slice": ["spool/2026-11-21T06:00:00Z/0"],
        "orphaned_blob": ["lonely"],
        "dangling_blob_ref": [gone],
    }
    detail = json.loads(found["unreclaimed_slice"]["spool/2026-11-21T06:00:00Z/0"].detail)
    assert (detail["reason"], detail["rows"], detail["live_rows"]) == ("never_cleaned", 2, 0)
    assert detail["blob_bytes"] == 30 + 100
    assert detail["addresses"] == 3  # alice, carol, bob
    assert found["orphaned_blob"]["lonely"].bytes == 5
    missing = json.loads(found["dangling_blob_ref"][gone].detail)["missing"]
    assert missing == [f"h-{gone}", f"b-{gone}"]


def test_complete_references_make_passthrough_orphans_deletable(planted):
    state, _ = planted
    options = Settings(references_complete=True)
    row = run_checks(state, options, only=["orphaned_blob"]).collect()[0]
    assert row.severity == "warning"
    assert json.loads(row.detail)["deletable"] is True


def test_without_blobs_no_blob_checks_run(planted, spark):
    state, _ = planted
    state = JamesState(**{**state.__dict__, "blobs": None})
    found = by_check(run_checks(state))
    assert "orphaned_blob" not in found and "dangling_blob_ref" not in found
    detail = json.loads(found["unreclaimed_slice"]["spool/2026-11-21T06:00:00Z/0"].detail)
    assert detail["blob_bytes"] is None


def test_config_history_violations(spark, planted):
    state, _ = planted
    bad = [(0, 3600, 4, 1000), (1, 7200, 4, 1000), (2, 7200, 2, 1000), (3, 1800, 2, 1000)]
    state = JamesState(
        **{**state.__dict__, "config_history": spark.createDataFrame(bad, schema.CONFIG_HISTORY)}
    )
    rows = {r.subject: json.loads(r.detail) for r in
            run_checks(state, only=["config_violation"]).collect()}  # fmt: skip
    assert sorted(rows) == ["eventid 1", "eventid 2"]
    assert rows["eventid 1"]["problems"] == [
        "sliceWindow 3600s -> 7200s: may only shrink to a divisor"
    ]
    assert rows["eventid 2"]["problems"] == ["bucketCount 4 -> 2: may only grow"]


def test_advice_follows_the_peak_rate(spark):
    b = Builder()
    # 50 mails in one hour on spool, in two buckets and two half-hour slices (the hour's
    # partitions add up), and 30 in the hour before.
    for minute in range(50):
        slice_start = at(21, 10, 30 if minute >= 30 else 0)
        b.mail("spool", slice_start, at(21, 10, minute), bucket=minute % 2)
    for minute in range(30):
        b.mail("spool", at(21, 9), at(21, 9, minute), bucket=minute % 2)
    state = b.state(spark, {"spool": at(21, 9)}, {"spool": at(21, 9)}, [(0, 3600, 2, 1000)])
    detail = json.loads(run_checks(state, only=["config_advice"]).collect()[0].detail)
    assert detail["peak_mails_per_hour"] == 50
    assert detail["recommended_slice_window_seconds"] == 3600  # 50/h fits one slice easily
    assert detail["recommended_update_browse_start_pace"] == 50


def test_no_configuration_is_an_input_error(spark, planted):
    state, _ = planted
    state = JamesState(
        **{**state.__dict__, "config_history": spark.createDataFrame([], schema.CONFIG_HISTORY)}
    )
    with pytest.raises(InputError, match="no CassandraMailQueueViewConfiguration event"):
        run_checks(state)


@pytest.mark.parametrize("broadcast_bytes", [10**9, 0])
def test_live_rows_are_the_rows_without_a_marker(spark, monkeypatch, broadcast_bytes):
    """Whether the live keys are sent to every task or shuffled, the rows without a marker:
    a key's fingerprint tells its two parts apart."""
    from mqforensics.systems.james import context

    monkeypatch.setattr(context, "BROADCAST_BYTES", broadcast_bytes)  # 0: live keys shuffled
    b = Builder()
    stuck = b.mail("outgoing", at(10, 0), at(10, 0, 10))
    consumed = b.mail("spool", at(21, 9), at(21, 9, 5), consumed=True)
    twice = b.mail("spool", at(21, 9), at(21, 9, 6), consumed=True)
    other_queue = b.mail("outgoing", at(21, 10), at(21, 10, 1))
    keyless = b.mail("spool", at(21, 10), at(21, 10, 2))
    b.entries = [e if e[3] != keyless else (*e[:3], None, *e[4:]) for e in b.entries]
    # A duplicated marker, and a marker for the same id in another queue: it is not that one's.
    # Neither is a marker whose queue and id, run together, spell another key's, nor a marker
    # with a null id (the keyless row has no marker: it is live).
    b.deleted += [("spool", twice), ("spool", other_queue), ("outgoin", "g" + stuck)]
    b.deleted += [("outgoing" + stuck[:-1], stuck[-1]), ("spool", None)]
    state = b.state(spark, {"spool": at(21, 8), "outgoing": at(10, 0)}, {"spool": at(21, 8)},
                    HISTORY)  # fmt: skip
    ctx = context.Context(state, Settings())
    live = ctx.live.collect()
    expected = {r.enqueueid for r in context.classify(state).where("NOT consumed").collect()}
    assert sorted(r.enqueueid or "" for r in live) == sorted(e or "" for e in expected)
    assert sorted(r.enqueueid or "" for r in live) == sorted(["", stuck, other_queue])
    assert consumed not in expected
    starts = {r.enqueueid: (r.browsestart, r.contentstart) for r in live}
    naive = {k: tuple(v and v.replace(tzinfo=None) for v in pair) for k, pair in starts.items()}
    assert naive[stuck] == (at(10, 0).replace(tzinfo=None), None)
    assert naive[None] == (at(21, 8).replace(tzinfo=None),) * 2


def test_classify_marks_consumed_rows_of_a_view_made_of_several_frames(spark, planted):
    from mqforensics.systems.james.context import classify

    state, ids = planted
    rows = state.entries.collect()
    halves = [spark.createDataFrame(part, schema.ENTRIES) for part in (rows[:4], rows[4:])]
    union = JamesState(**{**state.__dict__, "entries": halves[0].unionByName(halves[1])})
    classified = classify(union).collect()
    assert classified[0].asDict().keys() == {
        **{c: None for c in state.entries.columns}, "consumed": None, "browsestart": None,
        "contentstart": None,
    }.keys()  # fmt: skip
    consumed = {r.enqueueid for r in classified if r.consumed}
    assert consumed == {r.enqueueid for r in state.deleted.collect()}
    assert len(classified) == len(rows) and ids["stuck"] not in consumed


def test_the_rollup_adds_up_to_every_partition_and_every_hour(spark, planted):
    """Its groups add up to each partition's rows (unreclaimed_slice) and to each queue's
    mails per hour of enqueue (config_advice)."""
    from pyspark.sql import functions as F

    from mqforensics.systems.james import context

    state, _ = planted
    rollup = context.partition_rollup(state)
    totals = rollup.groupBy(*context.PARTITION).agg(F.sum("rows"))
    expected = state.entries.groupBy(*context.PARTITION).agg(F.count(F.lit(1)))
    assert sorted(map(tuple, totals.collect())) == sorted(map(tuple, expected.collect()))
    hourly = rollup.groupBy("queuename", "hour").agg(F.sum("rows"))
    counted = state.entries.groupBy(
        "queuename", F.date_trunc("hour", "enqueuedtime").alias("hour")
    ).count()
    assert sorted(map(tuple, hourly.collect())) == sorted(map(tuple, counted.collect()))
    assert len(totals.collect()) > 1 and len(hourly.collect()) > 1


NAMES = [
    "Mail1700000000001-abc", "", "a", "x" * 300, "\x00\x01\x7f control", "Mail-é-ünïcödé",
    "Mail-😀-surrogates", "名前", "~!@#$%^&*()_+{}|:<>?",
]  # fmt: skip


def test_names_are_hashed_as_java_does_ascii_ones_by_generated_code(spark):
    """HiveHash's recurrence over UTF-8 bytes is String.hashCode's over UTF-16 chars for ASCII
    names; the others are left to Java's own hash (null here)."""
    import random

    from pyspark.sql import functions as F

    from mqforensics.systems.james import context
    from mqforensics.systems.james.java_hash import java_string_hashcode

    rng = random.Random(7)
    names = NAMES + ["".join(chr(rng.randrange(128)) for _ in range(rng.randrange(1, 80)))
                     for _ in range(500)]  # fmt: skip
    frame = spark.createDataFrame([(n,) for n in names] + [(None,)], "name string")
    hashed = context._ascii_hashcode(F.col("name"), spark)
    assert hashed is not None
    got = dict(frame.select("name", hashed.alias("hash")).collect())
    expected = {n: java_string_hashcode(n) if n.isascii() else None for n in names}
    assert got == {**expected, None: None}
    assert sum(v is None for v in expected.values()) == 3


@pytest.mark.parametrize("hashing", ["generated", "reflect"])
def test_buckets_are_judged_by_javas_hash_of_every_name(spark, monkeypatch, hashing):
    """ASCII names hashed by generated code, the others by Java's own String.hashCode, and every
    name by Java's when no JVM is at hand (Spark Connect): the same rows are in a wrong bucket,
    live or consumed."""
    from mqforensics.sources import jvm_columns

    if hashing == "reflect":
        monkeypatch.setattr(jvm_columns, "hive_hash", lambda column, spark: None)
    b = Builder()
    wrong = set()
    for i, name in enumerate(NAMES):
        right = bucket_id(name, 4)
        b.mail("spool", at(21, 10), at(21, 10, 1), name=name, bucket=right, consumed=i % 2 == 0)
        # Neither the bucket under 4 buckets nor bucket 0 (every name's under 1 bucket).
        other = next(x for x in (1, 2, 3) if x != right)
        wrong.add(b.mail("spool", at(21, 10), at(21, 10, 2), name=name, bucket=other,
                         consumed=i % 2 == 1))  # fmt: skip
        b.mail("spool", at(21, 10), at(21, 10, 3), name=name, bucket=0, consumed=True)
    history = [(0, 3600, 1, 1000), (1, 3600, 4, 1000)]
    state = b.state(spark, {"spool": at(21, 10)}, {"spool": at(21, 10)}, history)
    found = by_check(run_checks(state, only=["bucket_mismatch"]))
    assert set(found["bucket_mismatch"]) == wrong
    assert len(wrong) == len(NAMES)


def test_counts_not_observed_are_counted(planted, monkeypatch, default_findings):
    """Spark Connect reports no observation for a checkpoint: the audit counts by jobs then,
    and finds the same."""
    from pyspark.sql import Observation

    from mqforensics.systems.james import context

    state, _ = planted
    observed = sorted(map(tuple, default_findings))

    class Unreported(Observation):
        @property
        def get(self):
            return {}

    monkeypatch.setattr(context, "Observation", Unreported)
    assert sorted(map(tuple, run_checks(state).collect())) == observed
    monkeypatch.setattr(context, "KEPT_EARLY_ROWS", 0)
    monkeypatch.setattr(context, "BROADCAST_BYTES", 0)
    assert sorted(map(tuple, run_checks(state).collect())) == observed


def test_a_partition_with_live_mail_before_content_start_lists_only_consumed_markers(
    spark, live_keys_sent, early_rows
):
    b = Builder()
    consumed = b.mail("spool", at(21, 6), at(21, 6, 1), consumed=True, blobs=False)
    live = b.mail("spool", at(21, 6), at(21, 6, 2), blobs=False)
    dateless = b.mail("spool", at(21, 7), None, consumed=True, blobs=False)
    after = b.mail("spool", at(21, 10), at(21, 10, 1), consumed=True, blobs=False)
    state = b.state(spark, {"spool": at(21, 10)}, {"spool": at(21, 8)}, HISTORY)
    found = by_check(run_checks(state, only=["unreclaimed_slice"]))["unreclaimed_slice"]
    detail = json.loads(found["spool/2026-11-21T06:00:00Z/0"].detail)
    assert detail["enqueueids"] == sorted([consumed, live])
    assert (detail["markers"], detail["live_rows"]) == ([consumed], 1)
    assert detail["newest_enqueued_time"] == "2026-11-21T06:02:00.000000Z"
    # No enqueue time: never shown old enough.
    assert json.loads(found["spool/2026-11-21T07:00:00Z/0"].detail)["newest_enqueued_time"] is None
    # Nothing flagged from contentStart on: the first partition there stays.
    assert detail["first_kept_slice"] == "2026-11-21T10:00:00.000Z"
    assert after not in {s for f in found.values() for s in json.loads(f.detail)["enqueueids"]}
    assert dateless in json.loads(found["spool/2026-11-21T07:00:00Z/0"].detail)["markers"]


def test_consumed_blobs_are_passthrough_blobs_only_consumed_mails_reference(spark, live_keys_sent):
    b = Builder()
    # A consumed mail after browseStart whose blobs James failed to delete.
    kept = b.mail("spool", at(21, 10), at(21, 10, 1), consumed=True, header="kept-h",
                  body="kept-b")  # fmt: skip
    # A header shared with a live mail: in use.
    b.mail("spool", at(21, 10), at(21, 10, 2), consumed=True, header="shared", body="gone-1",
           blobs=False)  # fmt: skip
    b.mail("spool", at(21, 11), at(21, 11, 2), header="shared", body="live-b")
    # A deduplicated id (James keeps those, mailboxes may share them), and a consumed mail
    # of another queue sharing a passthrough blob with the first.
    b.mail("outgoing", at(21, 10), at(21, 10, 3), consumed=True, header="dedup", body="kept-b",
           blobs=False)  # fmt: skip
    b.blob("dedup", 9, at(1, 0), kind="generation_aware")
    state = b.state(spark, {"spool": at(21, 10), "outgoing": at(21, 10)}, {}, HISTORY)
    rows = run_checks(state, only=["consumed_blob", "orphaned_blob"]).collect()
    found = {r.subject: r for r in rows}
    assert sorted(found) == ["kept-b", "kept-h"]
    assert {r.check for r in rows} == {"consumed_blob"}
    header, body = json.loads(found["kept-h"].detail), json.loads(found["kept-b"].detail)
    assert (found["kept-h"].severity, found["kept-h"].queue, found["kept-h"].bytes) == (
        "warning", "spool", 100,
    )  # fmt: skip
    assert header == {
        "bucket": "default", "id_kind": "passthrough", "etag": None,
        "last_modified": "2026-11-01T00:00:00.000Z",
        "referrers": [{"queue": "spool", "enqueueid": kept,
                       "enqueued_time": "2026-11-21T10:01:00.000000Z"}],
    }  # fmt: skip
    assert found["kept-b"].queue is None  # referenced from two queues
    assert [r["queue"] for r in body["referrers"]] == ["outgoing", "spool"]


def test_personal_data_is_every_row_holding_a_searched_subject(spark, live_keys_sent):
    from mqforensics import subjects
    from mqforensics.retention.policy import subject_hash

    key = bytes(range(32))
    wanted = "Victor@Example.org"
    b = Builder()
    live = b.mail("spool", at(21, 9), at(21, 9, 1), recipients=(" victor@example.ORG",))
    sent = b.mail("spool", at(21, 9), at(21, 9, 2), consumed=True, sender=wanted)
    # Only in a per-recipient header's address.
    b.mail("spool", at(21, 10), at(21, 10, 1), consumed=True)
    b.entries[-1] = (*b.entries[-1][:16], [(wanted, "X-H", "1")], "v4")
    header = b.entries[-1][3]
    b.mail("spool", at(21, 10), at(21, 10, 2), consumed=True)  # nobody searched
    state = b.state(spark, {"spool": at(21, 10)}, {"spool": at(21, 8)}, HISTORY)
    keyed = subjects.keyed(subject_hash(wanted), key)
    other = subjects.keyed(subject_hash("someone@else.example"), key)
    options = Settings(subjects=frozenset({keyed, other}), subject_key=key)
    rows = run_checks(state, options, only=["personal_data"]).collect()
    found = {r.subject: json.loads(r.detail) for r in rows}
    assert sorted(found) == sorted([live, sent, header])
    assert all(r.check == "personal_data" and r.severity == "info" for r in rows)
    assert all(d["subjects"] == [keyed] for d in found.values())  # the matching ones only
    assert {k: found[sent][k] for k in (
        "table", "partition", "timerangestart", "bucketid", "enqueueid", "consumed",
        "partition_live_rows", "browse_start",
    )} == {
        "table": "enqueuedmailsv4", "partition": "spool/2026-11-21T09:00:00Z/0",
        "timerangestart": "2026-11-21T09:00:00.000Z", "bucketid": 0, "enqueueid": sent,
        "consumed": True, "partition_live_rows": 1, "browse_start": "2026-11-21T10:00:00.000Z",
    }  # fmt: skip
    assert found[live]["consumed"] is False and found[header]["partition_live_rows"] == 0
    assert wanted.lower() not in json.dumps(found).lower()
    # Nothing searched: no finding, and no address hashed.
    assert run_checks(state, only=["personal_data"]).collect() == []


def test_the_keys_sent_to_every_task_share_one_budget(planted, monkeypatch):
    """The live keys and the blob listing may be held in every task at the same time: the
    listing is sent only when it fits beside the live keys sent (`context.BROADCAST_BYTES`),
    and the listed keys no live row names when the listing is, or when they fit."""
    from mqforensics.systems.james import context

    state, _ = planted
    listing = state.blobs.count() * context.LISTED_BLOB_BYTES
    monkeypatch.setattr(context, "BROADCAST_BYTES", 10**9)
    roomy = context.prepare(state, Settings())
    live_bytes = roomy._sent_bytes
    assert live_bytes == roomy.live.count() * context.LIVE_KEY_BYTES > 0
    assert roomy.few_blobs
    monkeypatch.setattr(context, "BROADCAST_BYTES", live_bytes + listing)
    assert context.prepare(state, Settings()).few_blobs
    monkeypatch.setattr(context, "BROADCAST_BYTES", live_bytes + listing - 1)
    tight = context.prepare(state, Settings())
    assert tight._sent_bytes == live_bytes and not tight.few_blobs
    # The listed keys no live row names are fewer: they still fit, and are sent.
    unnamed = tight.unnamed_blobs.count()
    assert 0 < unnamed * context.LISTED_BLOB_BYTES < listing
    assert (
        tight.few_unnamed and tight._sent_bytes == live_bytes + unnamed * context.LISTED_BLOB_BYTES
    )
    monkeypatch.setattr(
        context, "BROADCAST_BYTES", live_bytes + unnamed * context.LISTED_BLOB_BYTES - 1
    )
    assert not context.prepare(state, Settings()).few_unnamed
    monkeypatch.setattr(context, "BROADCAST_BYTES", live_bytes - 1)
    assert context.prepare(state, Settings())._sent_bytes == 0


def test_a_large_view_splits_the_keys_anti_join_finer_and_finds_the_same(
    planted, monkeypatch, default_findings
):
    """The keys' anti join gets more partitions than the session's when the view's keys would
    fill them past the partition target (`spark.shuffle_partitions`); findings are the same."""
    from mqforensics.systems.james import context

    state, _ = planted
    target = int(state.entries.sparkSession.conf.get(
        "spark.sql.adaptive.advisoryPartitionSizeInBytes").rstrip("b"))  # fmt: skip
    view_rows = state.entries.count()
    monkeypatch.setattr(context, "KEY_BYTES", -(-20 * target // view_rows))  # 20 targets' worth
    split = []
    live_keys = context._live_keys

    def recorded(frames, partitions=None):
        split.append(partitions)
        return live_keys(frames, partitions)

    monkeypatch.setattr(context, "_live_keys", recorded)
    assert sorted(map(tuple, run_checks(state).collect())) == sorted(map(tuple, default_findings))
    assert split == [20]
