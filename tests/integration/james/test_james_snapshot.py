"""James snapshot exports: real James DDL on the real Cassandra 5.0, exported by the real cqlsh.

The tables are created with the DDL James's ``CassandraMailQueueViewDataDefinition`` produces
(V4 with frozen collections, V3 without; reference james.md §1.3), filled with awkward values,
exported with ``cqlsh ... COPY <table> TO '<table>.csv' WITH HEADER=true`` (the PyPI ``cqlsh``
package), read back with `read_snapshot`, and compared with what the driver reads from the same
tables through the ``mqf_cassandra`` source.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import shutil
import uuid
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError, InputError, explain
from mqforensics.services import dsbulk
from mqforensics.sources.cassandra_scan import read_table
from mqforensics.systems.james import config_history
from mqforensics.systems.james.schema import (
    BROWSE_START,
    CONFIG_HISTORY,
    DELETED,
    ENTRIES,
)
from mqforensics.systems.james.snapshot import (
    TABLE_COLUMNS,
    read_snapshot,
    read_table_export,
    write_parquet_snapshot,
)
from tests.integration.james.dsbulk_support import unload_tables

pytestmark = pytest.mark.integration

T0 = dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC)
UTC = dt.UTC

# James's DDL (james.md §1.3), camelCase unquoted as SchemaBuilder writes it.
DDL = [
    """CREATE TABLE {ks}.enqueuedMailsV4 (
        queueName text, timeRangeStart timestamp, bucketId int, enqueueId uuid,
        enqueuedTime timestamp, name text, state text, headerBlobId text, bodyBlobId text,
        attributes frozen<map<text, blob>>, errorMessage text, sender text,
        recipients frozen<list<text>>, remoteHost text, remoteAddr text, lastUpdated timestamp,
        perRecipientSpecificHeaders frozen<list<tuple<text, text, text>>>,
        PRIMARY KEY ((queueName, timeRangeStart, bucketId), enqueueId))
      WITH compaction = {{'class': 'TimeWindowCompactionStrategy',
        'compaction_window_size': 1, 'compaction_window_unit': 'HOURS'}}""",
    """CREATE TABLE {ks}.enqueuedMailsV3 (
        queueName text, timeRangeStart timestamp, bucketId int, enqueueId uuid,
        enqueuedTime timestamp, name text, state text, headerBlobId text, bodyBlobId text,
        attributes map<text, blob>, errorMessage text, sender text,
        recipients list<text>, remoteHost text, remoteAddr text, lastUpdated timestamp,
        perRecipientSpecificHeaders list<frozen<tuple<text, text, text>>>,
        PRIMARY KEY ((queueName, timeRangeStart, bucketId), enqueueId))""",
    """CREATE TABLE {ks}.browseStart (queueName text, browseStart timestamp,
        PRIMARY KEY (queueName))""",
    """CREATE TABLE {ks}.contentStart (queueName text, contentStart timestamp,
        PRIMARY KEY (queueName))""",
    """CREATE TABLE {ks}.deletedMailsV2 (queueName text, enqueueId uuid,
        PRIMARY KEY ((queueName, enqueueId)))
      WITH compaction = {{'class': 'TimeWindowCompactionStrategy'}}
      AND bloom_filter_fp_chance = 0.01""",
    """CREATE TABLE {ks}.eventStore (aggregateId text, eventId int, snapshot int static,
        event text, PRIMARY KEY ((aggregateId), eventId))
      WITH compaction = {{'class': 'LeveledCompactionStrategy'}}""",
]

AWKWARD = "Mail, \"quoted\" 'single' \\ back\nline2\r\tend \x01 ü ✉ 😀 \u2028"


def _event(eventid: int, window: int, buckets: int, pace: int) -> str:
    """A ConfigurationChanged event as James's ConfigurationChangedDTO writes it."""
    return (
        '{"type":"cassandra-mail-queue-view-configuration",'
        f'"eventId":{eventid},"aggregateKey":"CassandraMailQueueViewConfiguration",'
        f'"bucketCount":{buckets},"updateBrowseStartPace":{pace},'
        f'"sliceWindow":{window}.000000000}}'
    )


def _mails() -> list[dict]:
    """Rows covering every column type with awkward values, plus filler over many partitions."""
    attribute = json.dumps({"serializer": "StringSerializer", "value": 'é, "x"\n'}).encode()
    rows = [
        {
            "queuename": "spool",
            "timerangestart": T0,
            "bucketid": 0,
            "enqueueid": uuid.UUID("5b1f2d3e-0000-4000-8000-000000000001"),
            "enqueuedtime": T0 + dt.timedelta(seconds=1, milliseconds=123),
            "name": AWKWARD,
            "state": "root",
            "headerblobid": "7f0c8e2a-1d9b-4c6e-9b8a-0e5f3c2d1a00",
            "bodyblobid": "1_1_deadbeef",
            "attributes": {
                "org.apache.james.attr": attribute,
                "empty": b"",
                "bin,}:'": bytes(range(256)),
                "ü": b"\x00",
            },
            "errormessage": '550 5.1.1 <a@b.c>: "User unknown"\nsecond line, with comma',
            "sender": None,  # the null sender <>
            "recipients": ["a@b.c", "o'brien@example.org", "ü@ñ.de", "x,y@z", ""],
            "remotehost": "mx.example.org",
            "remoteaddr": "2001:db8::1",
            "lastupdated": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
            "perrecipientspecificheaders": [
                ("a@b.c", "X-Header", "v, with 'quote' and \"dq\""),
                ("o'brien@example.org", "X-Multi", "line1\nline2"),
                ("ü@ñ.de", "X-Empty", ""),
                ("x,y@z", "X-Brackets", ")]}:, ({['"),
            ],
        },
        {
            "queuename": 'spool, "x"',
            "timerangestart": T0,
            "bucketid": 3,
            "enqueueid": uuid.UUID("5b1f2d3e-0000-4000-8000-000000000002"),
            "enqueuedtime": T0,
            "name": "Mail1790000000000-abc",
            "state": "",  # cqlsh writes '' like null: reads back as null
            "headerblobid": None,
            "bodyblobid": None,
            "attributes": {},
            "errormessage": None,
            "sender": "sender@example.org",
            "recipients": [],
            "remotehost": None,
            "remoteaddr": None,
            "lastupdated": None,
            "perrecipientspecificheaders": [],
        },
    ]
    for n in range(60):
        rows.append(
            {
                "queuename": ["spool", "outgoing", "bounces"][n % 3],
                "timerangestart": T0 + dt.timedelta(hours=n % 7),
                "bucketid": n % 4,
                "enqueueid": uuid.UUID(int=(7 << 120) + n),
                "enqueuedtime": T0 + dt.timedelta(hours=n % 7, seconds=n, milliseconds=n),
                "name": f"Mail{1790000000000 + n}-n{n}",
                "state": "root" if n % 2 else "transport",
                "headerblobid": str(uuid.UUID(int=n + 1)),
                "bodyblobid": str(uuid.UUID(int=n + 1000)),
                "attributes": {f"a{n}": n.to_bytes(2, "big")},
                "errormessage": None,
                "sender": f"s{n}@example.org",
                "recipients": [f"r{n}@example.com", f"t{n}@example.net"],
                "remotehost": "localhost",
                "remoteaddr": "127.0.0.1",
                "lastupdated": T0 + dt.timedelta(hours=n % 7, seconds=n),
                "perrecipientspecificheaders": [(f"r{n}@example.com", "X-N", str(n))],
            }
        )
    return rows


@pytest.fixture(scope="module")
def keyspace(cassandra_endpoint):
    """A fresh keyspace holding James's tables with awkward rows in V4, V3 and the others."""
    name = f"mqf_snap_{uuid.uuid4().hex[:8]}"
    cluster, session = cassandra_endpoint.connect()
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    for ddl in DDL:
        session.execute(ddl.format(ks=name))
    mails = _mails()
    columns = [c for c, _ in TABLE_COLUMNS["enqueuedmailsv4"]]
    for table in ("enqueuedmailsv4", "enqueuedmailsv3"):
        insert = session.prepare(
            f"INSERT INTO {name}.{table} ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})"
        )
        for row in mails:
            session.execute(insert, [row[c] for c in columns])
    deleted = session.prepare(
        f"INSERT INTO {name}.deletedmailsv2 (queuename, enqueueid) VALUES (?, ?)"
    )
    for row in mails[::3]:
        session.execute(deleted, (row["queuename"], row["enqueueid"]))
    for queue, browse, content in [
        ("spool", T0 + dt.timedelta(hours=1), T0),
        ("outgoing", T0, T0),
        ('spool, "x"', T0, None),
    ]:
        session.execute(
            f"INSERT INTO {name}.browsestart (queuename, browsestart) VALUES (%s, %s)",
            (queue, browse),
        )
        if content is not None:
            session.execute(
                f"INSERT INTO {name}.contentstart (queuename, contentstart) VALUES (%s, %s)",
                (queue, content),
            )
    events = [
        ("CassandraMailQueueViewConfiguration", 0, None, _event(0, 3600, 1, 1000)),
        ("CassandraMailQueueViewConfiguration", 1, None, _event(1, 1800, 4, 100)),
        (
            "BlobStoreStorageStrategyConfiguration",
            0,
            7,
            '{"type":"storage-strategy-changed","eventId":0,'
            '"aggregateKey":"BlobStoreStorageStrategyConfiguration",'
            '"storageStrategy":"PASSTHROUGH"}',
        ),
    ]
    for aggregate, eventid, snapshot, event in events:
        session.execute(
            f"INSERT INTO {name}.eventstore (aggregateid, eventid, snapshot, event) "
            "VALUES (%s, %s, %s, %s)",
            (aggregate, eventid, snapshot, event),
        )
    cluster.shutdown()
    yield name
    cluster, session = cassandra_endpoint.connect()
    session.execute(f"DROP KEYSPACE IF EXISTS {name}")
    cluster.shutdown()


@pytest.fixture(scope="module")
def exports(cqlsh, keyspace, tmp_path_factory) -> dict[str, Path]:
    """Each table exported by the real cqlsh: a V4 directory and a V3 one (no contentstart)."""
    root = tmp_path_factory.mktemp("exports")
    everything = root / "all"
    everything.mkdir()
    statements = [
        f"COPY {keyspace}.{table} TO '{everything / table}.csv' WITH HEADER=true"
        for table in TABLE_COLUMNS
    ]
    cqlsh("; ".join(statements))
    v4, v3 = root / "v4", root / "v3"
    for directory, tables in [
        (v4, ["enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore"]),
        (v3, ["enqueuedmailsv3", "deletedmailsv2", "browsestart", "eventstore"]),
    ]:
        directory.mkdir()
        for table in tables:
            shutil.copy(everything / f"{table}.csv", directory / f"{table}.csv")
    return {"all": everything, "v4": v4, "v3": v3}


def _rows(frame, key: list[str]) -> list[dict]:
    rows = [r.asDict(recursive=True) for r in frame.collect()]
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in key))


def _driver(spark, cassandra_endpoint, keyspace: str, table: str, columns: list[str]):
    return read_table(spark, cassandra_endpoint, keyspace, table, splits=4).select(*columns)


@pytest.fixture(scope="module")
def driver_rows(spark, cassandra_endpoint, keyspace):
    """`_rows` of what the driver reads of a table's `columns`, sorted by `key`: read once per
    module (no test changes the keyspace after the fixture filled it), a copy each time."""
    read: dict[tuple, list[dict]] = {}

    def rows(table: str, columns: list[str], key: list[str]) -> list[dict]:
        at = (table, tuple(columns), tuple(key))
        if at not in read:
            read[at] = _rows(_driver(spark, cassandra_endpoint, keyspace, table, columns), key)
        return copy.deepcopy(read[at])

    return rows


def _no_empty_text(rows: list[dict], columns: list[str]) -> list[dict]:
    # cqlsh COPY TO writes an empty text value exactly like null (copyutil.py: nullval ''),
    # so a top-level '' can only come back as null; nested empty strings are quoted and kept.
    return [{k: (None if k in columns and v == "" else v) for k, v in r.items()} for r in rows]


def test_cqlsh_writes_the_format_the_parser_expects(exports):
    text = (exports["all"] / "enqueuedmailsv4.csv").read_bytes()
    assert text.startswith(b"queuename,timerangestart,bucketid,enqueueid,attributes,")
    assert b"\r\n" in text  # the csv module's default line terminator
    assert b"2026-11-01 10:00:01.123+0000" in text  # timestamps truncated to milliseconds
    assert b'"spool, \\"x\\""' in text  # quotes escaped with a backslash, not doubled
    assert b"'o''brien@example.org'" in text  # quotes doubled inside collection strings
    assert len(text.splitlines()) == 1 + len(_mails())  # one line per row: \n is escaped


@pytest.mark.parametrize("version", ["v4", "v3"])
def test_csv_snapshot_equals_what_the_driver_reads(
    spark, cassandra_endpoint, keyspace, exports, version, driver_rows
):
    state = read_snapshot(spark, exports[version])
    table = f"enqueuedmails{version}"
    columns = [c for c, _ in TABLE_COLUMNS[table]]
    expected = driver_rows(table, columns, ["enqueueid"])
    by_id = {r["enqueueid"]: r for r in expected}
    empty = by_id["5b1f2d3e-0000-4000-8000-000000000002"]
    if version == "v3":
        # Non-frozen empty collections do not exist in Cassandra: they read as null.
        assert empty["recipients"] is None and empty["attributes"] is None
    else:
        assert empty["recipients"] == [] and empty["attributes"] == {}
    expected = _no_empty_text(expected, ["state"])
    entries = state.entries
    assert entries.schema.simpleString() == spark.createDataFrame([], ENTRIES).schema.simpleString()
    got = _rows(entries, ["enqueueid"])
    assert {r.pop("table_version") for r in got} == {version}
    assert got == expected
    awkward = {r["enqueueid"]: r for r in got}["5b1f2d3e-0000-4000-8000-000000000001"]
    assert awkward["name"] == AWKWARD and awkward["sender"] is None

    for frame, table_name, schema, key in [
        (state.deleted, "deletedmailsv2", DELETED, ["queuename", "enqueueid"]),
        (state.browse_start, "browsestart", BROWSE_START, ["queuename"]),
    ]:
        names = [c.split()[0] for c in schema.split(", ")]
        assert (
            frame.schema.simpleString() == spark.createDataFrame([], schema).schema.simpleString()
        )
        assert _rows(frame, key) == driver_rows(table_name, names, key)

    if version == "v4":
        driver = driver_rows("contentstart", ["queuename", "contentstart"], ["queuename"])
        assert _rows(state.content_start, ["queuename"]) == driver
    else:
        assert state.content_start.count() == 0
        assert any("no contentstart" in note for note in state.notes)

    events = read_table(spark, cassandra_endpoint, keyspace, "eventstore")
    history = config_history.history_frame(spark, events, "driver")
    assert state.config_history.schema.simpleString() == (
        spark.createDataFrame([], CONFIG_HISTORY).schema.simpleString()
    )
    assert _rows(state.config_history, ["eventid"]) == _rows(history, ["eventid"])
    assert [tuple(r) for r in state.config_history.orderBy("eventid").collect()] == [
        (0, 3600, 1, 1000),
        (1, 1800, 4, 100),
    ]
    # No snapshot.json: the newest modification time of the export files.
    newest = max(p.stat().st_mtime for p in exports[version].iterdir())
    assert state.as_of == dt.datetime.fromtimestamp(newest, UTC)


def test_eventstore_csv_equals_the_driver_including_the_static_column(spark, exports, driver_rows):
    columns = ["aggregateid", "eventid", "snapshot", "event"]
    got = read_table_export(spark, exports["all"] / "eventstore.csv", "eventstore")
    expected = driver_rows("eventstore", columns, ["aggregateid", "eventid"])
    assert _rows(got, ["aggregateid", "eventid"]) == expected


def test_small_chunks_read_every_row_exactly_once(spark, exports):
    path = exports["all"] / "enqueuedmailsv4.csv"
    whole = read_table_export(spark, path, "enqueuedmailsv4")
    for chunk in (2000, 7000):  # several partitions; lines straddle their bounds
        chunked = read_table_export(spark, path, "enqueuedmailsv4", chunk_bytes=chunk)
        assert chunked.count() == len(_mails())
        assert _rows(chunked, ["enqueueid"]) == _rows(whole, ["enqueueid"])


def test_parquet_round_trip(spark, exports, tmp_path):
    state = read_snapshot(spark, exports["v4"], as_of=dt.datetime(2026, 11, 2, 8, tzinfo=UTC))
    events = read_table_export(spark, exports["v4"] / "eventstore.csv", "eventstore")
    target = tmp_path / "parquet"
    write_parquet_snapshot(state, events, target)
    assert json.loads((target / "snapshot.json").read_text()) == {
        "taken_at": "2026-11-02T08:00:00Z"
    }
    assert (target / "enqueuedmailsv4.parquet").is_dir()
    again = read_snapshot(spark, target)
    assert again.as_of == state.as_of
    for name, frame in state.frames().items():
        other = again.frames()[name]
        assert other.schema.simpleString() == frame.schema.simpleString(), name
        key = [frame.columns[0], frame.columns[-1]] if name != "entries" else ["enqueueid"]
        assert _rows(other, key) == _rows(frame, key), name

    with pytest.raises(ConfigError, match=re.escape("already holds")):
        write_parquet_snapshot(state, events, target)


def test_parquet_with_named_tuple_fields_and_a_single_file(spark, exports, tmp_path):
    """A Parquet export with other struct field names and a single file reads the same."""
    state = read_snapshot(spark, exports["v3"])
    target = tmp_path / "single"
    target.mkdir()
    for table in ("deletedmailsv2", "browsestart", "eventstore"):
        shutil.copy(exports["v3"] / f"{table}.csv", target / f"{table}.csv")
    frame = state.entries.drop("table_version").selectExpr(
        *[
            c
            for c in state.entries.columns
            if c not in ("table_version", "perrecipientspecificheaders")
        ],
        "transform(perrecipientspecificheaders, h -> named_struct('user', h._1, 'header', h._2, "
        "'value', h._3)) AS perrecipientspecificheaders",
    )
    parts = tmp_path / "parts"
    frame.coalesce(1).write.parquet(str(parts))
    (part,) = parts.glob("part-*.parquet")
    shutil.copy(part, target / "enqueuedmailsv3.parquet")
    again = read_snapshot(spark, target)
    assert _rows(again.entries, ["enqueueid"]) == _rows(state.entries, ["enqueueid"])


def test_a_table_written_by_spark_into_its_own_directory_reads_the_same(spark, exports, tmp_path):
    """Spark's own layout, ``<table>/part-*.parquet`` and ``_SUCCESS`` (the enqueued table also
    in hive-style partition folders, ``queuename=spool/``), is the same state as the CSV."""
    state = read_snapshot(spark, exports["v4"], as_of=dt.datetime(2026, 11, 2, 8, tzinfo=UTC))
    events = read_table_export(spark, exports["v4"] / "eventstore.csv", "eventstore")
    target = tmp_path / "spark"
    frames = {
        "enqueuedmailsv4": state.entries.drop("table_version"),
        "deletedmailsv2": state.deleted,
        "browsestart": state.browse_start,
        "contentstart": state.content_start,
        "eventstore": events,
    }
    for table, frame in frames.items():
        writer = frame.write.partitionBy("queuename") if table == "enqueuedmailsv4" else frame.write
        writer.parquet(str(target / table))
    assert (target / "deletedmailsv2" / "_SUCCESS").is_file()
    assert [p.name for p in (target / "enqueuedmailsv4").glob("queuename=*")]
    again = read_snapshot(spark, target, as_of=state.as_of)
    assert "enqueuedmailsv4 from enqueuedmailsv4" in again.notes
    for name, frame in state.frames().items():
        other = again.frames()[name]
        assert other.schema.simpleString() == frame.schema.simpleString(), name
        key = [frame.columns[0], frame.columns[-1]] if name != "entries" else ["enqueueid"]
        assert _rows(other, key) == _rows(frame, key), name
    # A table in two layouts is refused, naming both.
    shutil.copy(exports["v4"] / "browsestart.csv", target / "browsestart.csv")
    with pytest.raises(ConfigError, match=re.escape("both browsestart.csv and browsestart/")):
        read_snapshot(spark, target)


def test_a_cqlsh_export_split_by_maxoutputsize_reads_the_same(
    spark, exports, keyspace, cqlsh, tmp_path
):
    """cqlsh's own split (``MAXOUTPUTSIZE=3``): the header and 3 rows in ``<table>.csv``, then
    ``<table>.csv.1``, ``.2``, ... of 3 rows without a header."""
    split = _copy(exports, "v4", tmp_path)
    (split / "enqueuedmailsv4.csv").unlink()
    cqlsh(
        f"COPY {keyspace}.enqueuedmailsv4 TO '{split / 'enqueuedmailsv4.csv'}' "
        "WITH HEADER=true AND MAXOUTPUTSIZE=3"
    )
    parts = sorted(p.name for p in split.glob("enqueuedmailsv4.csv.*"))
    assert len(parts) == -(-len(_mails()) // 3) - 1 and "enqueuedmailsv4.csv.1" in parts
    assert not (split / "enqueuedmailsv4.csv.1").read_bytes().startswith(b"queuename,")
    whole = read_snapshot(spark, exports["v4"])
    state = read_snapshot(spark, split, as_of=whole.as_of)
    assert f"enqueuedmailsv4 from enqueuedmailsv4.csv and {len(parts)} split file(s) " in " ".join(
        state.notes
    )
    assert _rows(state.entries, ["enqueueid"]) == _rows(whole.entries, ["enqueueid"])
    assert state.entries.count() == len(_mails())
    # A part lost in the copy, or the first file missing, is an error naming the file.
    first_part = (split / "enqueuedmailsv4.csv.1").read_bytes()
    (split / "enqueuedmailsv4.csv.1").unlink()
    lost = f"has enqueuedmailsv4.csv.{len(parts)} but not enqueuedmailsv4.csv.1 "
    with pytest.raises(InputError, match=re.escape(lost)):
        read_snapshot(spark, split)
    (split / "enqueuedmailsv4.csv.1").write_bytes(first_part)
    (split / "enqueuedmailsv4.csv").unlink()
    with pytest.raises(InputError, match=re.escape("holds enqueuedmailsv4.csv.1 but not ")):
        read_snapshot(spark, split)


def test_a_cqlsh_export_with_other_copy_options_reads_the_same_with_its_sidecar(
    spark, exports, keyspace, cqlsh, tmp_path
):
    """Every v4 table exported by the real cqlsh with a ``|`` delimiter, doubled quotes, a
    ``NULL`` marker and ISO timestamps, and the options recorded in ``cqlsh_copy.json``."""
    directory = tmp_path / "options"
    directory.mkdir()
    options = {"DELIMITER": "|", "QUOTE": '"', "ESCAPE": '"', "NULL": "<null>",
               "DATETIMEFORMAT": "%Y-%m-%dT%H:%M:%S.%f%z"}  # fmt: skip
    given = " AND ".join(f"{name}='{value}'" for name, value in options.items())
    tables = ["enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore"]
    cqlsh("; ".join(
        f"COPY {keyspace}.{table} TO '{directory / table}.csv' WITH HEADER=true AND {given}"
        for table in tables
    ))  # fmt: skip
    text = (directory / "enqueuedmailsv4.csv").read_bytes()
    assert text.startswith(b"queuename|timerangestart|") and b"<null>" in text
    assert b'"spool, ""x"""' in text  # a quote doubled, not escaped with a backslash
    assert b"2026-11-01T10:00:01.123+0000" in text  # COPY TO writes %f as milliseconds
    # Without the sidecar the bytes cannot be read as the default export: one clear line.
    with pytest.raises(InputError, match=r"enqueuedmailsv4.csv: header .* does not match"):
        read_snapshot(spark, directory)
    (directory / "cqlsh_copy.json").write_text(json.dumps(options))
    whole = read_snapshot(spark, exports["v4"])
    state = read_snapshot(spark, directory, as_of=whole.as_of)
    texts = [c for c, kind in TABLE_COLUMNS["enqueuedmailsv4"] if kind == "text"]
    # The default export writes an empty text as null; with a NULL marker it stays empty.
    assert _no_empty_text(_rows(state.entries, ["enqueueid"]), texts) == _rows(
        whole.entries, ["enqueueid"]
    )
    for name in ("deleted", "browse_start", "content_start", "config_history"):
        frame, other = whole.frames()[name], state.frames()[name]
        key = [frame.columns[0], frame.columns[-1]]
        assert _rows(other, key) == _rows(frame, key), name


def _copy(exports, version: str, tmp_path: Path) -> Path:
    target = tmp_path / version
    shutil.copytree(exports[version], target)
    return target


def _replace_line(path: Path, number: int, edit) -> None:
    lines = path.read_bytes().split(b"\r\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_bytes(b"\r\n".join(lines))


def _error_of(action) -> str:
    with pytest.raises(Exception) as caught:
        action()
    message = explain(caught.value)
    assert message is not None, caught.value
    return message


def test_malformed_csv_lines_name_file_line_and_column(spark, exports, tmp_path):
    directory = _copy(exports, "v4", tmp_path)
    path = directory / "enqueuedmailsv4.csv"
    original = path.read_bytes()
    header = original.split(b"\r\n")[0].decode().split(",")
    line = 17

    def set_field(column: str, value: bytes):
        index = header.index(column)

        def edit(raw: bytes) -> bytes:
            import csv
            import io

            (fields,) = csv.reader(
                [raw.decode()], delimiter=",", quotechar='"', escapechar="\\", doublequote=False
            )
            fields[index] = "\x00"
            out = io.StringIO()
            csv.writer(
                out,
                delimiter=",",
                quotechar='"',
                escapechar="\\",
                doublequote=False,
                lineterminator="",
            ).writerow(fields)
            return out.getvalue().encode().replace(b"\x00", value)

        return edit

    cases = [
        (
            set_field("enqueuedtime", b"xyz"),
            "InputError: enqueuedmailsv4.csv line 17: cannot parse 'xyz' as timestamp "
            "for column enqueuedtime",
        ),
        (
            set_field("enqueueid", b"not-a-uuid"),
            "InputError: enqueuedmailsv4.csv line 17: cannot parse 'not-a-uuid' as uuid "
            "for column enqueueid",
        ),
        (
            set_field("attributes", b"\"{'a': 0xzz}\""),
            "InputError: enqueuedmailsv4.csv line 17: cannot parse \"{'a': 0xzz}\" as "
            "frozen<map<text, blob>> for column attributes ('0xzz' is not a valid blob at "
            "position 6)",
        ),
        (
            set_field("recipients", b"\"['a', 'b\""),
            "InputError: enqueuedmailsv4.csv line 17: cannot parse \"['a', 'b\" as "
            "frozen<list<text>> for column recipients (unterminated string at position 6)",
        ),
        (
            lambda raw: raw.rsplit(b",", 1)[0],
            "InputError: enqueuedmailsv4.csv line 17: 16 field(s), the header has 17",
        ),
        (
            lambda raw: raw + b',"unterminated',
            "InputError: enqueuedmailsv4.csv line 17: malformed CSV (unexpected end of data; "
            "cqlsh never writes a line break inside a value)",
        ),
        (
            lambda raw: raw.replace(b"Mail", b"M\xffil", 1),
            "InputError: enqueuedmailsv4.csv line 17: not UTF-8",
        ),
    ]
    for edit, message in cases:
        path.write_bytes(original)
        _replace_line(path, line, edit)
        # Line 17 lies in a later 2000-byte partition: its number is still counted right.
        frame = read_table_export(spark, path, "enqueuedmailsv4", chunk_bytes=2000)
        assert _error_of(frame.collect).startswith(message)
    state = read_snapshot(spark, directory)  # one partition, through the whole state
    assert _error_of(state.entries.count).startswith(message)


def test_headers_must_name_the_table_columns(spark, exports, tmp_path):
    directory = _copy(exports, "v4", tmp_path)
    path = directory / "browsestart.csv"
    rows = path.read_bytes().split(b"\r\n", 1)[1]
    path.write_bytes(b"queuename,browse_start\r\n" + rows)
    with pytest.raises(InputError) as caught:
        read_snapshot(spark, directory)
    assert caught.value.message == (
        "browsestart.csv: header queuename, browse_start does not match table browsestart "
        "(missing column(s) browsestart; unexpected column(s) browse_start)"
    )
    path.write_bytes(rows)  # exported without HEADER=true: the first row is no header
    headerless = r"browsestart.csv: header .* \(missing column\(s\) queuename, browsestart; "
    with pytest.raises(InputError, match=headerless):
        read_snapshot(spark, directory)
    path.write_bytes(b"")
    with pytest.raises(InputError, match=re.escape("browsestart.csv line 1: no header line")):
        read_snapshot(spark, directory)
    # A header alone is an empty table, not an error.
    path.write_bytes(b"queuename,browsestart\r\n")
    assert read_snapshot(spark, directory).browse_start.count() == 0


def test_missing_and_doubled_tables(spark, exports, tmp_path):
    directory = _copy(exports, "v4", tmp_path)
    (directory / "deletedmailsv2.csv").unlink()
    (directory / "eventstore.csv").unlink()
    with pytest.raises(InputError) as caught:
        read_snapshot(spark, directory)
    assert caught.value.message == (
        f"snapshot directory {directory} lacks table(s) deletedmailsv2, eventstore "
        "(expected <table>.csv, <table>.parquet or a directory <table>/ of Parquet or DSBulk "
        "files)"
    )
    shutil.copy(exports["v4"] / "deletedmailsv2.csv", directory / "deletedmailsv2.csv")
    shutil.copy(exports["v4"] / "eventstore.csv", directory / "eventstore.csv")
    (directory / "enqueuedmailsv4.csv").rename(directory / "other.csv")
    with pytest.raises(InputError, match=r"lacks table.s. enqueuedmailsv4 or enqueuedmailsv3 "):
        read_snapshot(spark, directory)
    (directory / "other.csv").rename(directory / "enqueuedmailsv4.csv")
    shutil.copy(exports["all"] / "enqueuedmailsv3.csv", directory / "enqueuedmailsv3.csv")
    with pytest.raises(
        ConfigError, match=re.escape("both enqueuedmailsv4.csv and enqueuedmailsv3.csv")
    ):
        read_snapshot(spark, directory)
    (directory / "enqueuedmailsv3.csv").unlink()
    (directory / "browsestart.parquet").mkdir()
    with pytest.raises(
        ConfigError, match=re.escape("both browsestart.csv and browsestart.parquet")
    ):
        read_snapshot(spark, directory)
    (directory / "browsestart.parquet").rmdir()
    with pytest.raises(InputError, match=re.escape("does not exist or is not a directory")):
        read_snapshot(spark, directory / "nowhere")


def test_snapshot_json_and_bad_events(spark, exports, tmp_path):
    directory = _copy(exports, "v3", tmp_path)
    (directory / "snapshot.json").write_text('{"taken_at": "2026-11-03T12:00:00+01:00"}')
    assert read_snapshot(spark, directory).as_of == dt.datetime(2026, 11, 3, 11, tzinfo=UTC)
    (directory / "snapshot.json").write_text('{"taken_at": "2026-11-03T12:00:00"}')
    with pytest.raises(InputError, match=r"snapshot.json: taken_at .* has no UTC offset"):
        read_snapshot(spark, directory)
    (directory / "snapshot.json").write_text("{")
    with pytest.raises(InputError, match=re.escape('snapshot.json: expected {"taken_at"')):
        read_snapshot(spark, directory)
    (directory / "snapshot.json").unlink()

    path = directory / "eventstore.csv"
    path.write_bytes(path.read_bytes().replace(b"3600.000000000", b"oops", 1))
    with pytest.raises(
        InputError, match=re.escape("eventstore.csv eventid 0: malformed configuration")
    ):
        read_snapshot(spark, directory)


def test_parquet_with_wrong_columns_or_types(spark, exports, tmp_path):
    directory = _copy(exports, "v4", tmp_path)
    (directory / "browsestart.csv").unlink()
    spark.createDataFrame(
        [("spool", "2026-11-01")], "queuename string, browsestart string"
    ).write.parquet(str(directory / "browsestart.parquet"))
    with pytest.raises(InputError) as caught:
        read_snapshot(spark, directory)
    assert caught.value.message == (
        "browsestart.parquet: column browsestart has type string, expected timestamp"
    )
    shutil.rmtree(directory / "browsestart.parquet")
    spark.createDataFrame([("spool",)], "queue string").write.parquet(
        str(directory / "browsestart.parquet")
    )
    with pytest.raises(InputError, match=r"missing column.s. queuename, browsestart; unexpected"):
        read_snapshot(spark, directory)
    shutil.rmtree(directory / "browsestart.parquet")
    (directory / "browsestart.parquet").write_bytes(b"not parquet")
    with pytest.raises(
        InputError, match=re.escape("browsestart.parquet: cannot be read as Parquet")
    ):
        read_snapshot(spark, directory)


# ---------------------------------------------------------------------------------------------
# DSBulk unloads (the real DSBulk 1.10 from Maven Central).

V4_TABLES = ["enqueuedmailsv4", "deletedmailsv2", "browsestart", "contentstart", "eventstore"]


@pytest.fixture(scope="module")
def unloads(cassandra, keyspace, tmp_path_factory) -> dict[str, Path]:
    """Every v4 table unloaded by DSBulk as CSV (``dsbulk unload -t <table> -url DIR/<table>``),
    the enqueued tables and the eventstore as JSON (``-c json``), and the v4 enqueued table as
    gzipped CSV of 20 rows a file."""
    root = tmp_path_factory.mktemp("dsbulk")
    csv_dir = unload_tables(cassandra, keyspace, V4_TABLES, root / "csv", "csv")
    # JSON for the tables with every kind of value; the others as CSV beside them.
    json_dir = root / "json"
    shutil.copytree(csv_dir, json_dir)
    for table in ("enqueuedmailsv4", "eventstore"):
        shutil.rmtree(json_dir / table)
    unload_tables(cassandra, keyspace, ["enqueuedmailsv4", "eventstore"], json_dir, "json")
    v3 = root / "v3"
    v3.mkdir()
    for table in ("deletedmailsv2", "browsestart", "eventstore"):
        shutil.copytree(json_dir / table, v3 / table)
    unload_tables(cassandra, keyspace, ["enqueuedmailsv3"], v3, "json")
    gzipped = root / "gzip"
    shutil.copytree(csv_dir, gzipped)
    shutil.rmtree(gzipped / "enqueuedmailsv4")
    unload_tables(
        cassandra, keyspace, ["enqueuedmailsv4"], gzipped, "csv",
        "--connector.csv.compression", "gzip", "-maxRecords", "20",
    )  # fmt: skip
    # A query that selects no row: DSBulk leaves the table's directory empty.
    empty = root / "empty"
    shutil.copytree(csv_dir, empty)
    shutil.rmtree(empty / "contentstart")
    dsbulk.unload(
        cassandra, keyspace, "contentstart", empty / "contentstart",
        query="SELECT * FROM contentstart WHERE queuename = 'none'",
    )  # fmt: skip
    return {"csv": csv_dir, "json": json_dir, "v3": v3, "gzip": gzipped, "empty": empty}


def test_dsbulk_writes_the_format_the_reader_expects(unloads):
    files = sorted(p.name for p in (unloads["csv"] / "enqueuedmailsv4").iterdir())
    assert files == ["output-000001.csv"]
    text = (unloads["csv"] / "enqueuedmailsv4" / "output-000001.csv").read_text()
    assert text.startswith("queuename,timerangestart,bucketid,enqueueid,attributes,")
    assert '"spool, \\"x\\""' in text  # a quote escaped with a backslash
    assert "2026-11-01T10:00:01.123Z" in text and "1969-12-31T23:59:59.999Z" in text
    assert '"550 5.1.1 <a@b.c>: \\"User unknown\\"\nsecond line' in text  # a raw line break
    assert ',""\n' in text  # the empty state (the last column), quoted: not null
    json_text = (unloads["json"] / "eventstore" / "output-000001.json").read_text()
    assert json_text.count("\n") == 3 and '"snapshot":7' in json_text
    assert len(list((unloads["gzip"] / "enqueuedmailsv4").glob("output-*.csv.gz"))) == 4
    assert list((unloads["empty"] / "contentstart").iterdir()) == []  # no rows, no file


@pytest.mark.parametrize("layout", ["csv", "json", "gzip"])
def test_a_dsbulk_unload_reads_what_the_driver_reads(spark, unloads, layout, driver_rows):
    state = read_snapshot(spark, unloads[layout])
    kind = "JSON" if layout == "json" else "CSV"
    files = 4 if layout == "gzip" else 1
    assert f"enqueuedmailsv4 from enqueuedmailsv4/ (DSBulk {kind}, {files} file(s))" in state.notes
    columns = [c for c, _ in TABLE_COLUMNS["enqueuedmailsv4"]]
    expected = driver_rows("enqueuedmailsv4", columns, ["enqueueid"])
    got = _rows(state.entries, ["enqueueid"])
    assert {r.pop("table_version") for r in got} == {"v4"}
    assert got == expected  # the empty state stays empty: DSBulk tells it from null
    awkward = {r["enqueueid"]: r for r in got}["5b1f2d3e-0000-4000-8000-000000000001"]
    assert awkward["name"] == AWKWARD and awkward["sender"] is None
    for frame, table, key in [
        (state.deleted, "deletedmailsv2", ["queuename", "enqueueid"]),
        (state.browse_start, "browsestart", ["queuename"]),
        (state.content_start, "contentstart", ["queuename"]),
    ]:
        names = [c for c, _ in TABLE_COLUMNS[table]]
        driver = driver_rows(table, names, key)
        assert _rows(frame, key) == driver, table
    assert [tuple(r) for r in state.config_history.collect()] == [
        (0, 3600, 1, 1000),
        (1, 1800, 4, 100),
    ]


def test_a_v3_dsbulk_json_unload_reads_empty_collections_as_null(spark, unloads, driver_rows):
    state = read_snapshot(spark, unloads["v3"])
    columns = [c for c, _ in TABLE_COLUMNS["enqueuedmailsv3"]]
    expected = driver_rows("enqueuedmailsv3", columns, ["enqueueid"])
    got = _rows(state.entries, ["enqueueid"])
    assert {r.pop("table_version") for r in got} == {"v3"}
    assert got == expected
    empty = {r["enqueueid"]: r for r in got}["5b1f2d3e-0000-4000-8000-000000000002"]
    assert empty["recipients"] is None and empty["attributes"] is None


def test_broken_dsbulk_files_name_file_and_line(spark, unloads, tmp_path):
    directory = tmp_path / "broken"
    shutil.copytree(unloads["csv"], directory)
    path = directory / "enqueuedmailsv4" / "output-000001.csv"
    original = path.read_text()
    lines = original.split("\n")

    def broken(edit_line: int, text: str) -> str:
        path.write_text("\n".join([*lines[: edit_line - 1], text, *lines[edit_line:]]))
        return _error_of(lambda: read_snapshot(spark, directory).entries.count())

    # A plain row (the awkward one spans lines), and the last row.
    number = next(i + 1 for i, line in enumerate(lines) if i and "-n" in line)
    row = lines[number - 1].split(",")
    at = f"InputError: enqueuedmailsv4/output-000001.csv line {number}:"
    assert broken(number, ",".join([*row[:2], "x", *row[3:]])) == (
        f"{at} cannot read 'x' as int for column bucketid"
    )
    assert broken(number, ",".join(row[:-1])).startswith(f"{at} 16 field(s), the header has 17")
    # The plain row moved to the end with a quote opened and never closed.
    others = [line for i, line in enumerate(lines) if i != number - 1 and line]
    path.write_text("\n".join([*others, lines[number - 1] + ',"never closed']) + "\n")
    assert _error_of(lambda: read_snapshot(spark, directory).entries.count()) == (
        f"InputError: enqueuedmailsv4/output-000001.csv line {len(others) + 1}: a quoted field "
        "is never closed"
    )
    path.write_text(original.replace("queuename,", "queue,", 1))
    assert _error_of(lambda: read_snapshot(spark, directory)).endswith(
        "does not match table enqueuedmailsv4 (missing column(s) queuename; unexpected "
        "column(s) queue)"
    )
    path.write_text(original)

    json_dir = tmp_path / "broken-json"
    shutil.copytree(unloads["json"], json_dir)
    events = json_dir / "eventstore" / "output-000001.json"
    first, *rest = events.read_text().splitlines()
    events.write_text("\n".join([first.replace('"eventid":', '"eventId":"x","other":'), *rest]))
    assert _error_of(lambda: read_snapshot(spark, json_dir)) == (
        "InputError: eventstore/output-000001.json line 1: unexpected column(s) other for table "
        "eventstore"
    )
    events.write_text("\n".join([first[:-1], *rest]))
    assert _error_of(lambda: read_snapshot(spark, json_dir)).startswith(
        "InputError: eventstore/output-000001.json line 1: malformed JSON"
    )


def test_an_empty_table_directory_is_an_empty_table_only_beside_dsbulk_unloads(
    spark, exports, unloads, tmp_path
):
    state = read_snapshot(spark, unloads["empty"])
    assert "contentstart from contentstart/ (empty: DSBulk's unload of no rows)" in state.notes
    assert state.content_start.count() == 0 and state.browse_start.count() == 3
    cqlsh_export = _copy(exports, "v4", tmp_path)
    (cqlsh_export / "contentstart.csv").unlink()
    (cqlsh_export / "contentstart").mkdir()
    with pytest.raises(InputError, match=r"contentstart: an empty directory, and no other table"):
        read_snapshot(spark, cqlsh_export)
