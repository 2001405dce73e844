"""Against the session's real Cassandra 5.0: cassandra-driver, and the `mqf_cassandra` source."""

import dataclasses
import datetime as dt
import random
import subprocess
import sys
import uuid

import pytest
from cassandra.util import uuid_from_time

from mqforensics.errors import AuthenticationFailed, InputError, ServerUnavailable, explain
from mqforensics.sources.cassandra_scan import read_table

pytestmark = pytest.mark.integration

ROWS = 400
QUEUES = ["spool", "outgoing", "bounces"]


@pytest.fixture(scope="module")
def mails(cassandra_endpoint):
    """A keyspace with one queue-like table: partitions of (queue, slice, bucket), like James's."""
    keyspace = f"mqf_it_{uuid.uuid4().hex[:8]}"
    cluster, session = cassandra_endpoint.connect()
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(
        f"CREATE TABLE {keyspace}.mails (queue text, slice timestamp, bucket int, id timeuuid, "
        "sender text, recipients frozen<list<text>>, headers map<text, blob>, size bigint, "
        "PRIMARY KEY ((queue, slice, bucket), id))"
    )
    insert = session.prepare(
        f"INSERT INTO {keyspace}.mails (queue, slice, bucket, id, sender, recipients, headers, "
        "size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    rng = random.Random(5)
    start = dt.datetime(2026, 11, 1)
    expected = set()
    for n in range(ROWS):
        queue = QUEUES[n % 3]
        slice_start = start + dt.timedelta(hours=n % 17)
        bucket = n % 5
        ident = uuid_from_time(1_790_000_000 + n)
        sender = f"sender{n}@example.org"
        recipients = [f"r{n}@example.com", f"s{n}@example.net"]
        headers = {"Subject": bytes([n % 256, 0, 255])}
        size = rng.randint(100, 100_000)
        session.execute(
            insert, (queue, slice_start, bucket, ident, sender, recipients, headers, size)
        )
        expected.add(
            (
                queue,
                slice_start.replace(tzinfo=dt.UTC),
                bucket,
                str(ident),
                sender,
                tuple(recipients),
                frozenset(headers.items()),
                size,
            )
        )
    yield keyspace, expected
    session.execute(f"DROP KEYSPACE {keyspace}")
    cluster.shutdown()


def as_tuples(rows):
    return {
        (
            r.queue,
            r.slice.replace(tzinfo=dt.UTC),
            r.bucket,
            r.id,
            r.sender,
            tuple(r.recipients),
            frozenset(r.headers.items()),
            r.size,
        )
        for r in rows
    }


def test_the_server_is_a_real_cassandra_5_0(cassandra_endpoint):
    cluster, session = cassandra_endpoint.connect()
    try:
        version = session.execute("SELECT release_version FROM system.local").one()[0]
    finally:
        cluster.shutdown()
    assert version.startswith("5.0.")


def test_rows_written_with_the_driver_read_back_with_the_driver(cassandra_endpoint, mails):
    keyspace, _expected = mails
    cluster, session = cassandra_endpoint.connect(keyspace)
    try:
        assert session.execute("SELECT count(*) FROM mails").one()[0] == ROWS
        row = session.execute(
            "SELECT sender, recipients FROM mails WHERE queue = 'spool' AND slice = %s "
            "AND bucket = 0 LIMIT 1",
            (dt.datetime(2026, 11, 1),),
        ).one()
    finally:
        cluster.shutdown()
    assert row.sender == "sender0@example.org"
    assert row.recipients == ["r0@example.com", "s0@example.net"]


@pytest.mark.parametrize("splits", [1, 7, 40])
def test_token_range_scan_reads_every_row_exactly_once(spark, cassandra_endpoint, mails, splits):
    keyspace, expected = mails
    frame = read_table(spark, cassandra_endpoint, keyspace, "mails", splits=splits, page_size=50)
    assert frame.rdd.getNumPartitions() == splits
    rows = frame.collect()
    assert len(rows) == ROWS  # no duplicates across token ranges and pages
    assert as_tuples(rows) == expected


def test_schema_follows_the_table(spark, cassandra_endpoint, mails):
    keyspace, _ = mails
    frame = read_table(spark, cassandra_endpoint, keyspace, "mails")
    assert frame.columns == [
        "queue",
        "slice",
        "bucket",
        "id",
        "headers",
        "recipients",
        "sender",
        "size",
    ]
    assert frame.schema.simpleString() == (
        "struct<queue:string,slice:timestamp,bucket:int,id:string,headers:map<string,binary>,"
        "recipients:array<string>,sender:string,size:bigint>"
    )


def test_a_column_subset(spark, cassandra_endpoint, mails):
    keyspace, expected = mails
    frame = read_table(spark, cassandra_endpoint, keyspace, "mails", columns="id,size")
    assert {(r.id, r.size) for r in frame.collect()} == {(e[3], e[7]) for e in expected}


def test_wrong_password_is_an_authentication_error_that_hides_the_password(cassandra_endpoint):
    wrong = dataclasses.replace(cassandra_endpoint, password="not-the-password")
    with pytest.raises(AuthenticationFailed) as caught:
        wrong.connect()
    assert "refused the credentials of user 'cassandra'" in str(caught.value)
    assert "not-the-password" not in str(caught.value)


def test_errors_from_inside_spark_come_out_as_one_line(spark, cassandra_endpoint, mails):
    keyspace, _ = mails
    cases = [
        (
            dataclasses.replace(cassandra_endpoint, password="nope"),
            keyspace,
            "mails",
            f"AuthenticationFailed: Cassandra at 127.0.0.1:{cassandra_endpoint.port} refused the "
            "credentials of user 'cassandra'",
        ),
        (
            cassandra_endpoint,
            keyspace,
            "nope",
            f"InputError: table {keyspace}.nope does not exist (tables in {keyspace}: mails)",
        ),
        (
            cassandra_endpoint,
            "no_such_keyspace",
            "mails",
            "InputError: keyspace 'no_such_keyspace' does not",
        ),
        (
            dataclasses.replace(cassandra_endpoint, port=1, connect_timeout=2),
            keyspace,
            "mails",
            "ServerUnavailable: Cassandra at 127.0.0.1:1 is unreachable",
        ),
    ]
    for bad, ks, table, message in cases:
        with pytest.raises(Exception) as caught:
            read_table(spark, bad, ks, table).count()
        assert explain(caught.value).startswith(message)


def test_connect_errors_are_typed(cassandra_endpoint):
    with pytest.raises(ServerUnavailable):
        dataclasses.replace(cassandra_endpoint, port=1, connect_timeout=2).connect()
    with pytest.raises(InputError, match="keyspace 'no_such_keyspace' does not exist"):
        cassandra_endpoint.connect("no_such_keyspace")


CLOSE_THEN_EXIT = """
import sys, threading
from mqforensics.sources.cassandra_connection import CassandraEndpoint, close_cluster
endpoint = CassandraEndpoint(("127.0.0.1",), int(sys.argv[1]), "cassandra", sys.argv[2])
for _ in range(2):  # the second connect must get a working reactor again
    cluster, session = endpoint.connect()
    version = session.execute("SELECT release_version FROM system.local").one()[0]
    close_cluster(cluster)
    print(version, sorted(t.name for t in threading.enumerate()), flush=True)
sys.exit(3)
"""


def test_closing_the_last_cluster_stops_the_reactor_thread_before_exit(cassandra):
    """No native event-loop thread is left for interpreter exit to race with (a CLI that
    exited right after closing its cluster aborted once with glibc heap corruption)."""
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_THEN_EXIT, str(cassandra["port"]), cassandra["password"]],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        version, threads = line.split(" ", 1)
        assert version.startswith("5.0.")
        assert threads == "['MainThread']"
