"""What `audit james --sstables` checks before a node starts: where each table's SSTables are,
their formats and versions, the schema beside them and the snapshot's time (no Cassandra)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.errors import ConfigError, InputError
from mqforensics.systems.james import sstables

TABLE_ID = "009c5e70ea7f11f1997a1df1287d704c"
SCHEMA = """CREATE TABLE IF NOT EXISTS apache_james.{table} (
    queuename text,
    PRIMARY KEY (queuename)
) WITH ID = 01c770f0-ea7f-11f1-997a-1df1287d704c
    AND comment = '';
ALTER TABLE apache_james.{table} DROP gone USING TIMESTAMP 1700000000000000;
"""


def snapshot(root: Path, tables=("enqueuedmailsv4", "deletedmailsv2", "browsestart",
                                 "eventstore"), version: str = "nb-1-big") -> Path:  # fmt: skip
    """A nodetool snapshot's layout: <ks>/<table>-<id>/snapshots/t1/ with a Data.db, the
    schema and the manifest (the files are empty: nothing here reads them)."""
    for table in tables:
        where = root / "apache_james" / f"{table}-{TABLE_ID}" / "snapshots" / "t1"
        where.mkdir(parents=True)
        (where / f"{version}-Data.db").write_bytes(b"")
        (where / "schema.cql").write_text(SCHEMA.format(table=table))
        (where / "manifest.json").write_text(
            json.dumps({"files": [f"{version}-Data.db"], "created_at": "2026-11-27T16:24:44.383Z"})
        )
    return root


def test_tables_are_found_under_snapshots_and_other_tables_left_alone(tmp_path):
    root = snapshot(tmp_path)
    other = root / "apache_james" / f"mailbox-{TABLE_ID}"
    other.mkdir()
    (other / "nb-1-big-Data.db").write_bytes(b"")
    found = sstables.locate(root)
    assert sorted(found) == ["browsestart", "deletedmailsv2", "enqueued", "enqueuedmailsv4",
                             "eventstore"]  # fmt: skip
    assert found["enqueued"].table == "enqueuedmailsv4"
    assert found["browsestart"].directory.name == "t1"
    assert sstables.versions(found) == "4 big/nb"
    assert sstables.taken_at(found) == (
        dt.datetime(2026, 11, 27, 16, 24, 44, 383000, tzinfo=dt.UTC),
        "created_at of the snapshot's manifest.json",
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nb-1-big-Data.db", ("big", "nb")),
        ("oa-3gz5_0xyz_2abcd1234efgh5678-big-Data.db", ("big", "oa")),
        ("da-1-bti-Data.db", ("bti", "da")),
        ("apache_james-browsestart-ka-12-Data.db", ("big", "ka")),
    ],
)
def test_formats_and_versions_from_file_names(name, expected):
    assert sstables.format_of(Path(name)) == expected


def test_what_cassandra_5_reads():
    assert [v for v in ("ka", "la", "ma", "me", "na", "nb", "oa", "pa") if
            sstables.readable("big", v)] == ["ma", "me", "na", "nb", "oa"]  # fmt: skip
    assert sstables.readable("bti", "da") and not sstables.readable("bti", "ea")
    assert not sstables.readable("trie", "da")


def test_an_unreadable_version_is_one_line_naming_the_file_before_any_node(tmp_path, capsys):
    root = snapshot(tmp_path, version="ka-7-big")
    status = main(["audit", "james", "--sstables", str(root), "--out", str(tmp_path / "out")])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert (
        "ka-7-big-Data.db: SSTable format 'big' version 'ka' (Cassandra 2.1) cannot be read " in err
    )
    assert not (tmp_path / "out").exists()


def test_missing_doubled_and_schemaless_tables(tmp_path):
    root = snapshot(tmp_path / "a", tables=("enqueuedmailsv4", "browsestart"))
    with pytest.raises(InputError, match=r"holds no SSTables of table\(s\) deletedmailsv2, "
                       r"eventstore \(expected <table>-<id>/"):  # fmt: skip
        sstables.locate(root)
    root = snapshot(tmp_path / "b")
    again = root / "apache_james" / f"browsestart-{TABLE_ID}" / "snapshots" / "t2"
    again.mkdir()
    (again / "nb-2-big-Data.db").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"SSTables of browsestart in .*t1 and .*t2: point at"):
        sstables.locate(root)
    root = snapshot(tmp_path / "c")
    (next(root.rglob("deletedmailsv2-*/snapshots/t1")) / "schema.cql").unlink()
    with pytest.raises(InputError, match=r"no schema.cql beside the SSTables of deletedmailsv2"):
        sstables.locate(root)
    with pytest.raises(InputError, match=r"does not exist or is not a directory"):
        sstables.locate(tmp_path / "nowhere")


def test_the_schema_moves_to_the_private_keyspace(tmp_path):
    found = sstables.locate(snapshot(tmp_path))
    statements = sstables.private_schema(found["browsestart"])
    assert statements[0].startswith(
        "CREATE TABLE IF NOT EXISTS offline_snapshot.browsestart (\n    queuename text,"
    )
    assert statements[1] == (
        "ALTER TABLE offline_snapshot.browsestart DROP gone USING TIMESTAMP 1700000000000000"
    )


def test_live_options_are_refused_with_sstables(tmp_path, capsys):
    root = snapshot(tmp_path)
    status = main(["audit", "james", "--sstables", str(root), "--scan", "--out",
                   str(tmp_path / "out")])  # fmt: skip
    assert status == 2
    assert "--scan is for a live read (--cassandra): it cannot be given with --sstables" in (
        capsys.readouterr().err
    )
