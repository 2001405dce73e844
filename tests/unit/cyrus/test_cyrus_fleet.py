"""The Spark fleet readers over the real Cyrus 3.6.1 fixtures equal the pure-Python readers, and
the checks run on their frames equal the pure-Python checks."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError, InputError, explain
from mqforensics.sources.arrow_rows import ArrowRows
from mqforensics.spec import AuditArgs
from mqforensics.systems.cyrus import checks, database, dbchecks, fleet, perfile
from mqforensics.systems.cyrus.frames import READ
from mqforensics.systems.cyrus.options import Settings

DATA = Path(__file__).resolve().parents[2] / "data" / "cyrus"
TWOSKIP = DATA / "mailboxes_twoskip.db"
SKIPLIST = DATA / "mailboxes_skiplist.db"
EVIL = DATA / "evil_twoskip.db"
SHOW = DATA / "mailboxes_twoskip.show"
CTL = DATA / "mailboxes_twoskip.ctl_mboxlist_d.json"
AS_OF = dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.UTC)


@pytest.fixture
def flipped(tmp_path: Path) -> Path:
    """The twoskip fixture with one bit of a record's tail CRC region flipped (at 0x3c0)."""
    data = bytearray(TWOSKIP.read_bytes())
    data[0x3C0 + 96 - 20] ^= 1
    path = tmp_path / "flipped.db"
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def junk(tmp_path: Path) -> Path:
    path = tmp_path / "junk.bin"
    path.write_bytes(b"no tabs here\n")
    return path


def _records(paths: list[Path]) -> set[tuple[str, int, bytes, bytes]]:
    out = set()
    for path in paths:
        db = database.read_database(path)
        out |= {(str(path), i, k, v) for i, (k, v) in enumerate(db.items or ())}
    return out


def test_read_records_equal_the_pure_reader_one_partition_per_file(spark, flipped) -> None:
    from pyspark.sql import functions as F

    paths = [TWOSKIP, EVIL, SHOW, flipped, CTL]
    frame = fleet.read_records(spark, paths)
    assert frame.rdd.getNumPartitions() == 5
    rows = frame.withColumn("part", F.spark_partition_id()).collect()
    assert {(r.file, r.seq, bytes(r.key), bytes(r.value)) for r in rows} == _records(paths)
    assert len(rows) == 25 + 4 + 25 + len(database.read_database(flipped).items or ())
    assert len(database.read_database(flipped).problems) == 1
    # Every file is read by exactly one task, each by its own; the JSON dump has no records.
    parts = {r.file: {s.part for s in rows if s.file == r.file} for r in rows}
    assert all(len(p) == 1 for p in parts.values())
    assert len({p.pop() for p in parts.values()}) == 4
    assert str(CTL) not in parts


def test_record_columns(spark, tmp_path) -> None:
    legacy = tmp_path / "legacy.show"
    legacy.write_bytes(b"$RACL\t\n$RACL$U$bob$user.alice\t\nuser.alice\t%(A %(bob lr))\n")
    frame = fleet.read_records(spark, [TWOSKIP, EVIL, legacy])
    got = {
        (Path(r.file).name, bytes(r.key)): (r.seq, r.kind, r.name, r.user, r.namespace)
        for r in frame.collect()
    }
    assert got[("mailboxes_twoskip.db", b"AS\x1e")] == (0, "racl_marker", None, None, None)
    assert got[("mailboxes_twoskip.db", b"AU\x1ebob\x1euser\x1falice")] == (
        6, "racl", "user.alice", "bob", "U"
    )  # fmt: skip
    assert got[("mailboxes_twoskip.db", b"AS\x1eanyone\x1eshared\x1fteam")] == (
        1, "racl", "shared.team", "anyone", "S"
    )  # fmt: skip
    assert got[("mailboxes_twoskip.db", b"Nexample.com\x1duser\x1feve")] == (
        18, "mailbox", "example.com!user.eve", None, None
    )  # fmt: skip
    assert got[("mailboxes_twoskip.db", b"Nuser\x1falice\x1fDot.ted")][1:3] == (
        "mailbox", "user.alice.Dot^ted"
    )  # fmt: skip
    assert got[("mailboxes_twoskip.db", b"I11111111-1111-4111-8111-111111111111")][1:] == (
        "id", None, None, None
    )  # fmt: skip
    # Invalid UTF-8 is U+FFFD in the strings; the key keeps its bytes.
    assert got[("evil_twoskip.db", b"\xff\xfe")] == (
        3,
        "legacy_mailbox",
        "\ufffd\ufffd",
        None,
        None,
    )
    assert got[("evil_twoskip.db", b"key\twith\x00nul")][1:3] == (
        "legacy_mailbox",
        "key\twith\0nul",
    )
    assert got[("legacy.show", b"$RACL")] == (0, "legacy_racl_marker", None, None, None)
    assert got[("legacy.show", b"$RACL$U$bob$user.alice")] == (
        1, "legacy_racl", "user.alice", "bob", "U"
    )  # fmt: skip
    assert got[("legacy.show", b"user.alice")] == (2, "legacy_mailbox", "user.alice", None, None)
    assert len(got) == 25 + 4 + 3


def test_single_path_option(spark) -> None:
    fleet.read_records(spark, [SHOW])  # registers the sources on this session
    frame = spark.read.format("cyrus_mailboxes").option("path", str(SKIPLIST)).load()
    assert {(bytes(r.key), bytes(r.value)) for r in frame.collect()} == set(
        database.read_database(SKIPLIST).items or ()
    )


def _finding_keys(rows) -> set[tuple]:
    return {(r[0], r[1], r[2], r[3], r[4], r[5], r[-1]) for r in rows}


def _settings(version="3.6", admins=("cyrus",), default_domain=None, as_of=AS_OF) -> Settings:
    common = AuditArgs(Path("."), as_of, False)
    return Settings(as_of, version, tuple(admins), default_domain, common)  # type: ignore[arg-type]


def _per_file_findings(frames, settings) -> list:
    from mqforensics.findings import union_all

    per_file = [c for name, c in checks.CHECKS.items() if name != "personal_data"]
    return union_all(frames.spark, [check(frames, settings) for check in per_file]).collect()


def test_the_fleet_reader_judges_nothing(spark, flipped) -> None:
    """The reader's frame is what each file holds, rebuilt exactly into its `Database` on the
    frames; its only option is the paths."""
    from pyspark.sql.types import StructType

    paths = [TWOSKIP, SKIPLIST, SHOW, flipped, CTL, EVIL]
    frames = fleet.read_fleet(spark, paths)
    assert frames.read.schema.simpleString() == StructType.fromDDL(READ).simpleString()
    rows = {r.file: r.asDict(recursive=True) for r in frames.read.collect()}
    assert list(rows) == [str(p) for p in paths]
    for path in paths:
        expected = database.read_database(path)
        rebuilt = perfile.database_of(rows[str(path)])
        assert (rebuilt.source, rebuilt.problems) == (expected.source, expected.problems)
        assert rebuilt.items == (None if expected.items is None else list(expected.items))
        assert rebuilt.given_entries == expected.given_entries
        assert (rebuilt.format, rebuilt.size, rebuilt.sha256) == (
            expected.format, expected.size, expected.sha256
        )  # fmt: skip
        assert [r._replace(value=b"", pointers=()) for r in expected.history] == list(
            rebuilt.history
        )
        assert (rebuilt.entries, rebuilt.undecodable) == (expected.entries, expected.undecodable)
    assert rows[str(CTL)]["items"] is None and rows[str(CTL)]["given_entries"]
    assert rows[str(TWOSKIP)]["history"] and not rows[str(SHOW)]["history"]
    # The reader's rows are `read_row` of each file: no findings, no ACL entries, no counts
    # that take a judgement.
    schema = frames.read.schema
    reader = fleet.CyrusFleetSource({"paths": json.dumps([str(SHOW)])}).reader(schema)
    (batch,) = reader.read(reader.partitions()[0])
    assert batch == ArrowRows(schema).batch([fleet.read_row(database.read_database(SHOW))])
    assert not {"findings", "acl", "mailboxes", "bare_userids"} & set(frames.read.columns)


@pytest.mark.parametrize(
    ("version", "admins"), [("3.6", ("cyrus",)), ("3.4.2", ("cyrus", "alice")), ("3.6", ())]
)
def test_checks_on_the_frames_equal_run_checks_per_file(spark, flipped, version, admins) -> None:
    paths = [TWOSKIP, SKIPLIST, SHOW, flipped, CTL]
    frames = fleet.read_fleet(spark, paths)
    assert frames.read.count() == len(paths)
    rows = _per_file_findings(frames, _settings(version, admins))
    expected = [
        f.as_row()
        for path in paths
        for f in dbchecks.run_checks(database.read_database(path), version, admins, AS_OF)
    ]
    assert _finding_keys(rows) == _finding_keys(expected)
    assert len(rows) == len(expected)
    # One judgement per server settings, kept for every check.
    assert len(frames._judged) == 1
    assert {r.observed_at.timestamp() for r in rows} == {AS_OF.timestamp()}
    integrity = [
        (r.severity, r.subject, json.loads(r.detail)) for r in rows if r.check == "integrity"
    ]
    assert integrity == [
        (
            "critical",
            f"{flipped}@0x3c0",
            {
                "file": str(flipped),
                "kind": "crc_tail",
                "offset": 0x3C0,
                "problem": database.read_database(flipped).problems[0].detail,
            },
        )
    ]
    # The JSON dump has mailbox entries only: ACL findings, no RACL ones.
    from_ctl = {r.check for r in rows if json.loads(r.detail)["file"] == str(CTL)}
    assert "anyone_share" in from_ctl and not from_ctl & {"racl_missing", "racl_stale"}
    # The details are byte for byte the pure functions'.
    assert sorted(r.detail for r in rows) == sorted(row[-1] for row in expected)


def test_files_frame_says_what_each_input_is(spark, flipped) -> None:
    paths = [TWOSKIP, SKIPLIST, SHOW, flipped, CTL]
    files = {r.file: r.asDict() for r in fleet.read_fleet(spark, paths).files.collect()}
    assert list(files) == [str(p) for p in paths]
    assert {Path(f).name: r["format"] for f, r in files.items()} == {
        "mailboxes_twoskip.db": "twoskip",
        "mailboxes_skiplist.db": "skiplist",
        "mailboxes_twoskip.show": "show",
        "flipped.db": "twoskip",
        "mailboxes_twoskip.ctl_mboxlist_d.json": "ctl_mboxlist",
    }
    for path in paths:
        row = files[str(path)]
        data = path.read_bytes()
        assert (row["size"], row["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
        db = database.read_database(path)
        assert row["records"] == len(db.items if db.items is not None else db.entries)
        assert row["mailboxes"] == len(db.entries) and row["undecodable"] == 0
        assert row["problems"] == len(db.problems)
        assert row["complete"] is (path != flipped)
    # No default domain: the bare userids of ACL entries match no erasure request.
    assert files[str(TWOSKIP)]["bare_userids"] > 0


def test_a_naive_as_of_is_utc(spark) -> None:
    frames = fleet.read_fleet(spark, [SHOW])
    naive = _per_file_findings(frames, _settings(as_of=AS_OF.replace(tzinfo=None)))
    assert {r.observed_at.timestamp() for r in naive} == {AS_OF.timestamp()}
    assert {r.observed_at for r in _per_file_findings(frames, _settings(as_of=None))} == {None}


def test_acl_and_sharing_equal_the_reports(spark) -> None:
    paths = [TWOSKIP, SHOW, CTL]
    admins = ["cyrus", "bob"]
    frames = fleet.read_fleet(spark, paths, admins=admins, default_domain="example.org")
    acl = [r.asDict() for r in frames.acl.collect()]
    expected_acl = [
        {"file": str(p), **row}
        for p in paths
        for row in dbchecks.acl_report(database.read_database(p).entries, admins, "example.org")
    ]
    assert acl == expected_acl
    rows = [r.asDict() for r in frames.sharing.collect()]
    expected = [
        {"file": str(p), **row}
        for p in paths
        for row in dbchecks.sharing_report(database.read_database(p).entries, admins, "example.org")
    ]

    def key(r: dict) -> list[str]:
        return [str(r[k]) for k in sorted(r)]

    assert sorted(rows, key=key) == sorted(expected, key=key)
    assert len(rows) == 3 * 8 and not any(r["grantee"] == "bob" for r in rows)


def test_bad_input_is_an_input_error_naming_the_file(spark, junk, tmp_path) -> None:
    message = f"{junk}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist dump"
    with pytest.raises(InputError) as caught:
        fleet.read_fleet(spark, [TWOSKIP, junk])
    assert caught.value.message == message
    # read_records is lazy: the error comes at the action, wrapped, and explain recovers it.
    frame = fleet.read_records(spark, [junk])
    with pytest.raises(Exception) as wrapped:
        frame.collect()
    assert explain(wrapped.value) == f"InputError: {message}"
    missing = tmp_path / "absent.db"
    for run in (fleet.read_records, fleet.read_fleet):
        with pytest.raises(InputError, match=re.escape(f"[mqforensics:InputError] {missing}: no")):
            run(spark, [TWOSKIP, missing])
        with pytest.raises(InputError, match=r"is a directory, not a mailboxes\.db or a dump"):
            run(spark, [TWOSKIP, tmp_path])
        with pytest.raises(ConfigError, match="given twice"):
            run(spark, [TWOSKIP, TWOSKIP])
        with pytest.raises(ConfigError, match=r"no mailboxes\.db file given"):
            run(spark, [])
