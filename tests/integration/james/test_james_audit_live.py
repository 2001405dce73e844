"""The James audit on generated states loaded into the real Cassandra and SeaweedFS.

Every check must return exactly the planted findings (the generator's ground truth), through
the live reader in both modes (slice enumeration and token-range scan).

S3 sets an object's LastModified to its upload time, so the generator's planted object ages do
not survive the upload: the state is generated as of one day after now, every uploaded object is
then older than the one-hour grace, and the "young" orphans (which the ground truth says must not
be reported when their age is kept) are expected as orphans too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import uuid
from pathlib import Path

import pytest

from datasets.james import generate as gen
from datasets.james.load import load_into_cassandra, load_into_s3, unload
from mqforensics.cli import main
from mqforensics.services import seaweedfs
from mqforensics.services.cassandra import nodetool as cassandra_nodetool
from mqforensics.sources.cassandra_scan import read_table
from mqforensics.systems.james.config_history import history_rows
from mqforensics.systems.james.read import ROW_CHECKS
from mqforensics.systems.james.snapshot import read_snapshot
from mqforensics.units import plural
from tests.integration.james.dsbulk_support import unload_tables

pytestmark = pytest.mark.integration

ANOMALIES = gen.AnomalyCounts(
    pinned_browse_start=1,
    lagging_browse_start=1,
    empty_queue_old_browse_start=1,
    invisible_mails=2,
    stuck_mails=2,
    orphaned_blobs=3,
    young_orphaned_blobs=1,
    dangling_blob_refs=2,
    bucket_mismatches=2,
    slice_mismatches=2,
    config_violations=1,
)
CASES = {
    "v4-passthrough": ("v4", "passthrough", {"unreclaimed_partitions": 2,
                                             "cleanup_pending_partitions": 1}),
    "v3-deduplication": ("v3", "deduplication", {"never_cleaned_partitions": 2}),
}  # fmt: skip


def spec_for(case: str) -> gen.GenerationSpec:
    version, strategy, extra = CASES[case]
    as_of = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).replace(
        minute=0, second=0, microsecond=0
    )
    return gen.GenerationSpec(
        seed=7,
        table_version=version,
        blob_strategy=strategy,
        queues=("spool", "outgoing", "bounces", "relay"),
        as_of=as_of,
        normal_mails=300,
        anomalies=dataclasses.replace(ANOMALIES, **extra),
    )


def expected_findings(state: gen.GeneratedState) -> set[tuple]:
    truth = {(f["check"], f["severity"], f["queue"], f["subject"]) for f in state.ground_truth}
    young = {p["subject"] for p in state.planted if p["anomaly"] == "young_orphaned_blob"}
    assert young, "the case plants a young orphan"
    return truth | {("orphaned_blob", "info", None, key) for key in young}


def unreachable_by_enumeration(state: gen.GeneratedState) -> set[str]:
    """Subjects (enqueueIds, partitions) of rows slice enumeration cannot read: on no grid of
    the history's windows, beyond the largest bucket count, or older than 7 days before the
    queue's earliest browse/content start (docs/james.md, Readers)."""
    history = history_rows(state.event_store, "eventstore")
    windows = {h[1] for h in history}
    buckets = max(h[2] for h in history)
    starts: dict[str, int] = {}
    for row in [*state.browse_start, *state.content_start]:
        value = row.get("browsestart") or row.get("contentstart")
        epoch = int(value.timestamp())
        starts[row["queuename"]] = min(starts.get(row["queuename"], epoch), epoch)
    end = int(state.as_of.timestamp())
    subjects = set()
    for row in state.entries:
        trs = row["timerangestart"].timestamp()
        lookback = starts[row["queuename"]] - 7 * 86400
        # On some window's grid, from that grid's first slice (the one holding the lookback).
        on_a_grid = trs == int(trs) and any(
            int(trs) % window == 0 and lookback // window * window <= trs for window in windows
        )
        reachable = on_a_grid and 0 <= row["bucketid"] < buckets and trs <= end
        if not reachable:
            subjects.add(row["enqueueid"])
            subjects.add(gen.partition_subject(row["queuename"], int(trs), row["bucketid"]))
    return subjects


@pytest.fixture(scope="module", params=sorted(CASES))
def loaded(request, cassandra_endpoint, s3):
    state = gen.generate(spec_for(request.param))
    endpoint = cassandra_endpoint
    keyspace = f"james_audit_{uuid.uuid4().hex[:8]}"
    bucket = f"james-audit-{uuid.uuid4().hex[:8]}"
    s3_endpoint = seaweedfs.s3_endpoint(s3)
    load_into_cassandra(state, endpoint, keyspace)
    load_into_s3(state, s3_endpoint, bucket)
    yield state, keyspace, bucket
    unload(state, endpoint, s3_endpoint, keyspace, bucket)


@pytest.fixture
def environment(monkeypatch, cassandra, s3):
    monkeypatch.setenv("MQF_CASSANDRA_USERNAME", cassandra["username"])
    monkeypatch.setenv("MQF_CASSANDRA_PASSWORD", cassandra["password"])
    monkeypatch.setenv("MQF_S3_ENDPOINT", s3["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3["region"])
    return f"{cassandra['host']}:{cassandra['port']}"


@pytest.mark.parametrize("mode", [[], ["--scan"]], ids=["enumerate", "scan"])
def test_live_audit_finds_exactly_the_planted_anomalies(
    spark, loaded, environment, tmp_path, mode, capsys
):
    state, keyspace, bucket = loaded
    status = main([
        "audit", "james", "--cassandra", environment, "--keyspace", keyspace,
        "--blobs", f"s3://{bucket}", "--out", str(tmp_path),
        "--as-of", state.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"), *mode,
    ])  # fmt: skip
    rows = json.loads((tmp_path / "findings.json").read_text())
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    expected = expected_findings(state)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    printed = capsys.readouterr()
    err = printed.err
    if not mode:
        hidden = unreachable_by_enumeration(state)
        assert hidden, "the case plants rows only a full scan can see"
        expected = {f for f in expected if f[3] not in hidden}
        # The run says which checks are partial, and why: the partitions it did not read.
        unread = {s for s in hidden if s.count("/") == 2}
        [why] = set(manifest["partial"].values())
        assert why.startswith(
            f"the slice enumeration did not read {plural(len(unread), 'partition')} "
        )
        assert set(manifest["partial"]) == set(ROW_CHECKS)
        assert f"warning: partial results of {', '.join(sorted(ROW_CHECKS))}: {why}" in err
    else:
        assert manifest["partial"] == {} and "partial" not in err
    assert sorted(found - expected, key=str) == []
    assert sorted(expected - found, key=str) == []
    assert len(rows) == len(found)
    assert status == 1  # errors (stuck, invisible, dangling, config) were found
    out = printed.out
    assert f"keyspace {keyspace}" in out
    assert ("scan" if mode else "enumerate") in out


def test_wrong_keyspace_and_credentials_are_one_line_errors(spark, environment, tmp_path,
                                                            capsys, monkeypatch):  # fmt: skip
    base = ["audit", "james", "--cassandra", environment, "--out", str(tmp_path)]
    assert main([*base, "--keyspace", "no_such_keyspace"]) == 2
    assert "InputError: keyspace 'no_such_keyspace' does not exist" in capsys.readouterr().err
    monkeypatch.setenv("MQF_CASSANDRA_PASSWORD", "wrong")
    assert main([*base, "--keyspace", "system"]) == 2
    err = capsys.readouterr().err
    assert "AuthenticationFailed: Cassandra at" in err and "wrong" not in err
    assert not (tmp_path / "findings.json").exists()


def test_a_keyspace_without_james_tables_is_named(spark, environment, tmp_path, capsys):
    base = ["audit", "james", "--cassandra", environment, "--out", str(tmp_path)]
    assert main([*base, "--keyspace", "system_auth"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mqforensics: error: InputError: keyspace 'system_auth' at ")
    assert "no table enqueuedmailsv4 or enqueuedmailsv3, deletedmailsv2, browsestart" in err


def _export(tool: str, state: gen.GeneratedState, keyspace: str, export: Path, run) -> str:
    """The state's tables exported into `export` by the real `tool`, in the layout the case
    uses for it; the layout's name."""
    tables = [state.enqueued_table, "deletedmailsv2", "browsestart", "eventstore"]
    if state.table_version == "v4":
        tables.append("contentstart")
    v4 = state.table_version == "v4"
    if tool == "cqlsh":
        # The v4 enqueued table split by cqlsh into files of 50 rows (MAXOUTPUTSIZE).
        split = " AND MAXOUTPUTSIZE=50" if v4 else ""
        export.mkdir()
        run["cqlsh"]("; ".join(
            f"COPY {keyspace}.{table} TO '{export / table}.csv' WITH HEADER=true"
            + (split if table == state.enqueued_table else "")
            for table in tables
        ))  # fmt: skip
        assert (export / f"{state.enqueued_table}.csv.1").exists() == v4
        return "cqlsh CSV split by MAXOUTPUTSIZE" if v4 else "cqlsh CSV"
    if tool == "dsbulk":
        unload_tables(run["cassandra"], keyspace, tables, export, "csv" if v4 else "json")
        return "DSBulk CSV" if v4 else "DSBulk JSON"
    export.mkdir()
    for table in tables:
        frame = read_table(run["spark"], run["endpoint"], keyspace, table, splits=4)
        if v4:  # Spark's own layout: <table>/part-*.parquet and _SUCCESS
            frame.write.parquet(str(export / table))
        else:  # one Parquet file per table
            parts = export.parent / f"parts-{table}"
            frame.coalesce(1).write.parquet(str(parts))
            (part,) = parts.glob("part-*.parquet")
            shutil.move(part, export / f"{table}.parquet")
    return "Spark directories" if v4 else "Parquet files"


def _held(state) -> dict[str, list]:
    """Every canonical frame of a state as sorted rows. cqlsh writes an empty text like null
    (its one loss), so a top-level empty string counts as null here."""
    held = {}
    for name, frame in state.frames().items():
        rows = [
            {k: None if v == "" else v for k, v in row.asDict(recursive=True).items()}
            for row in frame.collect()
        ]
        held[name] = sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))
    return held


def test_every_export_layout_holds_the_same_state_and_the_audit_finds_the_planted_anomalies(
    spark, loaded, environment, cqlsh, cassandra, cassandra_endpoint, tmp_path
):
    """The state exported by cqlsh, DSBulk and Spark (two layouts each over the two cases):
    every canonical frame is the same from each layout, and the checks see nothing else, so
    the findings are the same; one audit per case (cqlsh split for v4, DSBulk JSON for v3)
    finds exactly the planted anomalies."""
    state, keyspace, bucket = loaded
    run = {"cqlsh": cqlsh, "cassandra": cassandra, "spark": spark, "endpoint": cassandra_endpoint}
    exports = {tool: tmp_path / tool for tool in ("cqlsh", "dsbulk", "spark")}
    layouts = {tool: _export(tool, state, keyspace, path, run) for tool, path in exports.items()}
    held = {
        tool: _held(read_snapshot(spark, path, as_of=state.as_of)) for tool, path in exports.items()
    }
    assert len(held["cqlsh"]["entries"]) == len(state.entries)
    for tool in ("dsbulk", "spark"):
        for name, rows in held["cqlsh"].items():
            assert held[tool][name] == rows, (layouts[tool], name)
    audited = exports["cqlsh" if state.table_version == "v4" else "dsbulk"]
    out = tmp_path / "out"
    status = main([
        "audit", "james", "--snapshot", str(audited), "--blobs", f"s3://{bucket}",
        "--out", str(out), "--as-of", state.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
    ])  # fmt: skip
    rows = json.loads((out / "findings.json").read_text())
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    expected = expected_findings(state)  # an export holds every row, like a full scan
    assert sorted(found - expected, key=str) == []
    assert sorted(expected - found, key=str) == []
    assert len(rows) == len(found)
    assert status == 1


def _shadowed_writes(cassandra_endpoint, cassandra: dict, state, keyspace: str) -> None:
    """Rows that must not be read, written so that their data and their deletion end up in
    different SSTables: junk mails deleted row by row, a junk partition deleted whole, junk
    mails and deletion markers of real live mails written with a TTL of one second. Read, they
    would add dangling references and hide live mails."""
    table = state.enqueued_table
    slice_start = state.as_of - dt.timedelta(days=2)
    gone = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    live = [(e["queuename"], uuid.UUID(e["enqueueid"])) for e in state.entries
            if (e["queuename"], e["enqueueid"]) not in gone]  # fmt: skip
    columns = "queuename, timerangestart, bucketid, enqueueid, name, headerblobid, bodyblobid"
    cluster, session = cassandra_endpoint.connect(keyspace)

    def junk(bucket: int, n: int, ttl: str = "") -> list[uuid.UUID]:
        ids = [uuid.uuid4() for _ in range(n)]
        for mail in ids:
            session.execute(
                f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s){ttl}",
                ("spool", slice_start, bucket, mail, f"junk-{mail}", f"h-{mail}", f"b-{mail}"),
            )
        return ids

    try:
        rows, partition = junk(0, 3), junk(1, 2)
        cassandra_nodetool(cassandra, "flush", keyspace)
        for mail in rows:
            session.execute(
                f"DELETE FROM {table} WHERE queuename = %s AND timerangestart = %s "
                "AND bucketid = 0 AND enqueueid = %s",
                ("spool", slice_start, mail),
            )
        session.execute(
            f"DELETE FROM {table} WHERE queuename = %s AND timerangestart = %s AND bucketid = 1",
            ("spool", slice_start),
        )
        junk(2, 2, " USING TTL 1")
        for queue, mail in live[:3]:
            session.execute(
                "INSERT INTO deletedmailsv2 (queuename, enqueueid) VALUES (%s, %s) USING TTL 1",
                (queue, mail),
            )
    finally:
        cluster.shutdown()
    assert partition and live


# One case (a private node costs a start): V3, whose non-frozen collections are stored cell by
# cell, the harder read.
@pytest.mark.parametrize("loaded", ["v3-deduplication"], indirect=True)
def test_audit_of_an_offline_sstable_snapshot_finds_exactly_the_planted_anomalies(
    spark, loaded, environment, cassandra, cassandra_endpoint, tmp_path
):
    """nodetool flush and snapshot on the real Cassandra, the snapshot copied out as an operator
    would, and `audit james --sstables` of the copy: exactly the planted findings, with the
    deleted and expired rows of the SSTables left out."""
    state, keyspace, bucket = loaded
    _shadowed_writes(cassandra_endpoint, cassandra, state, keyspace)
    tag = f"mqf-{uuid.uuid4().hex[:8]}"
    cassandra_nodetool(cassandra, "flush", keyspace)
    cassandra_nodetool(cassandra, "snapshot", "-t", tag, keyspace)
    data = Path(cassandra["log"]).parents[1] / "data" / "data" / keyspace
    copy = tmp_path / "backup" / keyspace
    for table_dir in data.iterdir():
        taken = table_dir / "snapshots" / tag
        if taken.is_dir():
            shutil.copytree(taken, copy / table_dir.name / "snapshots" / tag)
    enqueued = next(copy.glob(f"{state.enqueued_table}-*/snapshots/{tag}"))
    assert len(list(enqueued.glob("*-Data.db"))) >= 2  # the junk and its deletion apart
    out = tmp_path / "out"
    status = main([
        "audit", "james", "--sstables", str(copy.parent), "--blobs", f"s3://{bucket}",
        "--out", str(out), "--as-of", state.as_of.strftime("%Y-%m-%dT%H:%M:%SZ"),
    ])  # fmt: skip
    rows = json.loads((out / "findings.json").read_text())
    found = {(r["check"], r["severity"], r["queue"], r["subject"]) for r in rows}
    expected = expected_findings(state)
    assert sorted(found - expected, key=str) == []
    assert sorted(expected - found, key=str) == []
    assert status == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["kind"] == "sstables"


@pytest.fixture(scope="module")
def full_entries(spark, loaded, cassandra_endpoint) -> list:
    """The enumerated read of every enqueued column, collected once per case."""
    from mqforensics.systems.james.live import LiveOptions, read_live

    state, keyspace, _ = loaded
    full = read_live(spark, cassandra_endpoint, LiveOptions(keyspace=keyspace), as_of=state.as_of)
    return full.entries.collect()


@pytest.mark.parametrize(
    "columns",
    [
        ("queuename", "timerangestart", "bucketid", "enqueueid"),  # getSize's: only ids fetched
        ("enqueueid", "bucketid", "sender", "queuename"),  # key columns out of table order
        ("bucketid",),  # nothing but key columns: one row per mail all the same
    ],
    ids=["key-columns", "reordered", "key-only"],
)
def test_a_narrow_enumerated_read_is_the_projection_of_the_full_one(
    spark, loaded, cassandra_endpoint, full_entries, columns
):
    """Only non-key columns are fetched (the key comes from the query), uuids come as text:
    the rows must be exactly those of the full read, column for column."""
    from mqforensics.systems.james.live import LiveOptions, read_live

    state, keyspace, _ = loaded
    narrow = read_live(
        spark, cassandra_endpoint, LiveOptions(keyspace=keyspace, columns=columns),
        as_of=state.as_of,
    )  # fmt: skip
    assert narrow.entries.columns == [*columns, "table_version"]
    expected = [tuple(row[c] for c in (*columns, "table_version")) for row in full_entries]
    got = narrow.entries.collect()
    assert len(got) == len(expected) > 0
    assert sorted(map(tuple, got), key=repr) == sorted(map(tuple, expected), key=repr)
    assert {r.table_version for r in got} == {state.table_version}
    if "enqueueid" in columns:
        ids = {r.enqueueid for r in got}
        assert all(str(uuid.UUID(i)) == i for i in ids)  # canonical lowercase text
        assert ids <= {row["enqueueid"] for row in state.entries}


def test_a_read_paged_within_partitions_has_every_row_once(spark, loaded, cassandra_endpoint):
    """Partitions longer than a page are read page after page: two rows a page must give the
    same rows as the default page."""
    state, keyspace, _ = loaded
    history = history_rows(state.event_store, "eventstore")
    first = min(int(r["timerangestart"].timestamp()) for r in state.entries)
    ranges = {q: [first, int(state.as_of.timestamp())] for q in state.spec.queues}

    def read(**extra):
        reader = spark.read.format("mqf_james_enqueued")
        options = {
            **cassandra_endpoint.to_options(), "keyspace": keyspace,
            "table": state.enqueued_table, "ranges": json.dumps(ranges),
            "window": str(min(h[1] for h in history)),
            "bucket_count": str(max(h[2] for h in history)),
            "columns": "queuename,timerangestart,bucketid,enqueueid,name", **extra,
        }  # fmt: skip
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted(map(tuple, reader.load().collect()), key=repr)

    paged, whole = read(page_size="2"), read()
    assert paged == whole
    longest = max(sum(1 for r in whole if r[:3] == key[:3]) for key in whole)
    assert longest > 2, "some partition spans several pages"
    assert len({r[3] for r in paged}) == len(paged)


def browse_sizes(state: gen.GeneratedState) -> dict[str, int]:
    """getSize by James's algorithm on the generated rows: per queue, the partitions from
    browseStart to the slice of as_of on the latest window and buckets, minus marked mails."""
    _eventid, window, buckets, _pace = history_rows(state.event_store, "eventstore")[-1]
    last = int(state.as_of.timestamp()) // window * window
    deleted = {(d["queuename"], d["enqueueid"]) for d in state.deleted}
    sizes = {}
    for row in state.browse_start:
        queue, start = row["queuename"], int(row["browsestart"].timestamp())
        visited = {(queue, s, b) for s in range(start, last + 1, window) for b in range(buckets)}
        sizes[queue] = sum(
            1
            for e in state.entries
            if (e["queuename"], e["timerangestart"].timestamp(), e["bucketid"]) in visited
            and (queue, e["enqueueid"]) not in deleted
        )
    return sizes


def test_a_browse_only_read_holds_what_james_browses(spark, loaded, cassandra_endpoint):
    """getSize's read: only the partitions James's browse visits (latest window and buckets,
    from each browseStart), no separate scan of blob references, and James's sizes."""
    from mqforensics.systems.james import browse
    from mqforensics.systems.james.live import LiveOptions, read_live

    state, keyspace, _ = loaded
    _eventid, window, buckets, _pace = history_rows(state.event_store, "eventstore")[-1]
    options = LiveOptions(keyspace=keyspace, columns=browse.SIZE_COLUMNS, from_browse_start=True)
    read = read_live(spark, cassandra_endpoint, options, as_of=state.as_of)
    assert read.blob_references is None and read.references_complete is False
    starts = {r["queuename"]: r["browsestart"].timestamp() for r in state.browse_start}
    rows = read.entries.collect()
    assert rows
    for r in rows:
        epoch = r.timerangestart.replace(tzinfo=dt.UTC).timestamp()
        assert epoch % window == 0 and 0 <= r.bucketid < buckets
        assert epoch >= starts[r.queuename] // window * window
    sizes = browse.live_sizes(spark, cassandra_endpoint, keyspace=keyspace, as_of=state.as_of)
    expected = browse_sizes(state)
    assert {r.queuename: r.size for r in sizes.collect()} == expected
    assert sum(expected.values()) > 0
