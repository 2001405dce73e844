"""Broken inputs, as a user meets them: the real CLI in a subprocess (issue 29, "Errors").

Every case runs ``python -m mqforensics ...`` on inputs it builds under its own directory and
asserts: exit 2; stderr is the one expected line ``mqforensics: error: Kind: message`` (at most
3 lines in any case) naming the input (a path, a host, or the option at fault); no
``Traceback``, ``Py4J``, ``java.`` or `` at org.`` anywhere in stderr; nothing on stdout; the
output directory never created (or the file given as one unchanged); every input file unchanged
(bytes, size and modification time).

Cases (system, command: broken input -> what the line says); (S) marks the cases that start
Spark, the rest fail before it starts:

- james audit: ``enqueuedmailsv4.parquet`` is random bytes -> not a Parquet file, its first bytes
- james audit: a part file of ``enqueuedmailsv4.parquet`` cut in half -> truncated, no footer
- james audit: ``deletedmailsv2.parquet`` an empty directory -> no part files
- james audit: an empty snapshot directory -> the tables it lacks
- james audit: ``--snapshot`` given a file -> not a directory
- james audit: ``--sstables`` of Cassandra 2.1 (version ``ka``) -> the first such file, its
  format and version, before any node starts
- james audit: ``--blob-listing`` random bytes -> not a Parquet file
- james audit: ``--cassandra 127.0.0.1:1`` (nothing listens) -> Cassandra unreachable
- james audit: ``--snapshot DIR --scan`` (a live-only option) -> refused with --snapshot
- james audit: ``--snapshot DIR --cassandra HOST`` (either, not both) -> a one-line usage error
- james audit: ``--out`` an existing file -> not a directory
- james audit (S): a part file whose footer is intact but whose pages are overwritten -> Spark's
  read failure, as an InputError naming the part file
- james validate (S): the same -> exit 2 (not 1), no quality.json
- james audit (S): ``enqueuedmailsv4.csv`` with an address where a number belongs -> the file,
  line and column, the address pseudonymised
- logqueue audit: a queue directory that does not exist -> no such queue directory
- logqueue audit: a file given as a queue directory -> not a directory
- logqueue audit: the same directory twice -> given twice
- cyrus audit: random bytes as ``mailboxes.db`` -> not a twoskip or skiplist database, nor a
  text dump, its first bytes
- cyrus audit: a directory given as the database -> is a directory
- cyrus audit: ``--version 9.9`` -> not a Cyrus version the checks know
- cyrus audit (S): a ``cyr_dbtool show`` dump cut mid-line -> no final newline, its line
- logqueue audit: an empty queue directory -> nothing to audit, before Spark starts (the Spark
  log a failed command names with ``--debug``: tests/integration/test_spark_log.py)
- slimta audit: ``--redis redis://127.0.0.1:1`` (nothing listens) -> Redis unreachable
- slimta audit: ``--disk`` given a file -> not a slimta queue directory
- slimta audit: ``--disk`` a missing directory -> no such slimta queue directory
- slimta audit: ``--meta-dir`` without ``--disk`` -> describes a --disk store
- slimta audit: ``--sqs-export`` a directory -> not an SQS export file
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mqforensics.privacy import pseudonymize_address
from mqforensics.systems.james.schema import TABLE_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
JAMES_SAMPLE = ROOT / "datasets" / "james" / "sample"
CYRUS_SHOW = ROOT / "tests" / "data" / "cyrus" / "mailboxes_twoskip.show"
FORBIDDEN = ("Traceback", "Py4J", "java.", " at org.")
TIMEOUT = 300


def random_bytes(count: int, seed: int = 29) -> bytes:
    """The same `count` random-looking bytes on every run (so messages quoting them are known)."""
    return random.Random(seed).randbytes(count)


def james_snapshot(inputs: Path) -> Path:
    """A copy of the bundled James export's tables (without its blobs) under `inputs`."""
    snapshot = inputs / "snapshot"
    shutil.copytree(JAMES_SAMPLE, snapshot, ignore=shutil.ignore_patterns("blobs"))
    return snapshot


def first_part(table: Path) -> Path:
    return sorted(table.glob("part-*.parquet"))[0]


@dataclass(frozen=True)
class Broken:
    """What a case runs and what it must say: `argv` after ``python -m mqforensics``, the
    `line` stderr must be (a regex, matched in full after ``mqforensics: error: ``), and the
    text naming the input that the line must hold."""

    argv: list[str]
    line: str
    names: str


# --- james ------------------------------------------------------------------------------------


def james_random_parquet(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    table = snapshot / "enqueuedmailsv4.parquet"
    shutil.rmtree(table)
    table.write_bytes(random_bytes(4096))
    head = random_bytes(4096)[:4].hex(" ")
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(f"InputError: {table}: not a Parquet file (first bytes {head})"),
        str(table),
    )


def james_truncated_part(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    part = sorted((snapshot / "enqueuedmailsv4.parquet").glob("part-*.parquet"))[2]
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(
            f"InputError: {part}: a truncated Parquet file: no footer at its end "
            f"({len(data) // 2} bytes)"
        ),
        str(part),
    )


def james_empty_table_directory(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    table = snapshot / "deletedmailsv2.parquet"
    shutil.rmtree(table)
    table.mkdir()
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(f"InputError: {table}: an empty directory, not a Parquet table (no part files)"),
        str(table),
    )


def james_empty_snapshot(inputs: Path, out: Path) -> Broken:
    empty = inputs / "empty"
    empty.mkdir()
    return Broken(
        ["audit", "james", "--snapshot", str(empty), "--out", str(out)],
        re.escape(
            f"InputError: snapshot directory {empty} lacks table(s) enqueuedmailsv4 or "
            "enqueuedmailsv3, deletedmailsv2, browsestart, eventstore (expected <table>.csv, "
            "<table>.parquet or a directory <table>/ of Parquet or DSBulk files)"
        ),
        str(empty),
    )


def james_snapshot_is_a_file(inputs: Path, out: Path) -> Broken:
    file = inputs / "snapshot.tar"
    file.write_bytes(random_bytes(512))
    return Broken(
        ["audit", "james", "--snapshot", str(file), "--out", str(out)],
        re.escape(f"InputError: snapshot directory {file} does not exist or is not a directory"),
        str(file),
    )


def james_random_blob_listing(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    listing = inputs / "listing.parquet"
    listing.write_bytes(random_bytes(2048, seed=7))
    head = random_bytes(2048, seed=7)[:4].hex(" ")
    argv = ["audit", "james", "--snapshot", str(snapshot), "--blob-listing", str(listing)]
    return Broken(
        [*argv, "--out", str(out)],
        re.escape(f"InputError: {listing}: not a Parquet file (first bytes {head})"),
        str(listing),
    )


def james_sstables_of_cassandra_2(inputs: Path, out: Path) -> Broken:
    root = inputs / "backup" / "apache_james"
    for table in ("enqueuedmailsv4", "deletedmailsv2", "browsestart", "eventstore"):
        where = root / f"{table}-{'0' * 32}" / "snapshots" / "t1"
        where.mkdir(parents=True)
        (where / "ka-7-big-Data.db").write_bytes(random_bytes(256))
        (where / "schema.cql").write_text(f"CREATE TABLE apache_james.{table} (k int PRIMARY KEY)")
    first = root / f"browsestart-{'0' * 32}" / "snapshots" / "t1" / "ka-7-big-Data.db"
    return Broken(
        ["audit", "james", "--sstables", str(root.parent), "--out", str(out)],
        re.escape(
            f"InputError: {first}: SSTable format 'big' version 'ka' (Cassandra 2.1) cannot be "
            "read by Cassandra 5.0 (it reads big ma..oa, Cassandra 3.0 to 5.0, and bti da); "
            "upgrade the SSTables with nodetool upgradesstables"
        ),
        str(first),
    )


def james_unreachable_cassandra(inputs: Path, out: Path) -> Broken:
    return Broken(
        ["audit", "james", "--cassandra", "127.0.0.1:1", "--out", str(out)],
        re.escape("ServerUnavailable: Cassandra at 127.0.0.1:1 is unreachable (") + r"[^()]+\)",
        "127.0.0.1:1",
    )


def james_live_option_with_a_snapshot(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--scan", "--out", str(out)],
        re.escape(
            "ConfigError: --scan is for a live read (--cassandra): it cannot be given with "
            "--snapshot"
        ),
        "--scan",
    )


def james_snapshot_and_cassandra(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    argv = ["audit", "james", "--snapshot", str(snapshot), "--cassandra", "127.0.0.1:1"]
    return Broken(
        [*argv, "--out", str(out)],
        re.escape(
            "ConfigError: mqforensics audit james: argument --cassandra: not allowed with "
            "argument --snapshot (see mqforensics audit james --help)"
        ),
        "--cassandra",
    )


def james_out_is_a_file(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    file = inputs / "findings.txt"
    file.write_text("an earlier report\n")
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(file)],
        re.escape(f"ConfigError: --out {file} exists and is not a directory"),
        str(file),
    )


def _damaged_pages(inputs: Path) -> tuple[Path, Path]:
    """A snapshot whose first enqueued part keeps its magic numbers and footer (pyarrow reads
    its metadata) while its data pages are random bytes."""
    snapshot = james_snapshot(inputs)
    part = first_part(snapshot / "enqueuedmailsv4.parquet")
    data = bytearray(part.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    start = 4
    end = len(data) - footer
    data[start:end] = random_bytes(end - start, seed=11)
    part.write_bytes(bytes(data))
    pq.read_metadata(part)  # the footer is intact: only Spark's page reader finds the damage
    return snapshot, part


def james_damaged_pages_audit(inputs: Path, out: Path) -> Broken:
    snapshot, part = _damaged_pages(inputs)
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(f"InputError: {part}: cannot be read (") + r"[^()]+\)",
        str(part),
    )


def james_damaged_pages_validate(inputs: Path, out: Path) -> Broken:
    snapshot, part = _damaged_pages(inputs)
    return Broken(
        ["validate", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(f"InputError: {part}: cannot be read (") + r"[^()]+\)",
        str(part),
    )


def james_csv_with_an_address_for_a_number(inputs: Path, out: Path) -> Broken:
    snapshot = james_snapshot(inputs)
    shutil.rmtree(snapshot / "enqueuedmailsv4.parquet")
    columns = [name for name, _ in TABLE_COLUMNS["enqueuedmailsv4"]]
    row = ["" for _ in columns]
    row[columns.index("queuename")] = "spool"
    row[columns.index("bucketid")] = "victor@example.com"
    csv = snapshot / "enqueuedmailsv4.csv"
    csv.write_text(",".join(columns) + "\n" + ",".join(row) + "\n")
    shown = pseudonymize_address("victor@example.com")
    return Broken(
        ["audit", "james", "--snapshot", str(snapshot), "--out", str(out)],
        re.escape(
            f"InputError: enqueuedmailsv4.csv line 2: cannot parse '{shown}' as int for column "
            "bucketid"
        ),
        "enqueuedmailsv4.csv line 2",
    )


# --- logqueue ---------------------------------------------------------------------------------


def logqueue_missing_directory(inputs: Path, out: Path) -> Broken:
    missing = inputs / "outbound"
    return Broken(
        ["audit", "logqueue", str(missing), "--out", str(out)],
        re.escape(f"InputError: {missing}: no such queue directory"),
        str(missing),
    )


def logqueue_file_for_a_directory(inputs: Path, out: Path) -> Broken:
    segment = inputs / "seg-00000001.lq"
    segment.write_bytes(random_bytes(256))
    return Broken(
        ["audit", "logqueue", str(segment), "--out", str(out)],
        re.escape(f"InputError: {segment}: not a directory (a queue is a directory of segments)"),
        str(segment),
    )


def logqueue_directory_twice(inputs: Path, out: Path) -> Broken:
    queue = inputs / "outbound"
    queue.mkdir()
    return Broken(
        ["audit", "logqueue", str(queue), str(queue), "--out", str(out)],
        re.escape(f"ConfigError: {queue.resolve()} is given twice"),
        str(queue),
    )


# --- cyrus ------------------------------------------------------------------------------------


def cyrus_random_bytes(inputs: Path, out: Path) -> Broken:
    database = inputs / "mailboxes.db"
    database.write_bytes(random_bytes(8192))
    head = random_bytes(8192)[:8].hex(" ")
    return Broken(
        ["audit", "cyrus", str(database), "--out", str(out)],
        re.escape(
            f"InputError: {database}: not a twoskip or skiplist database, nor a text dump "
            f"(first bytes {head})"
        ),
        str(database),
    )


def cyrus_directory_for_a_database(inputs: Path, out: Path) -> Broken:
    directory = inputs / "mailboxes.db"
    directory.mkdir()
    return Broken(
        ["audit", "cyrus", str(directory), "--out", str(out)],
        re.escape(f"InputError: {directory}: is a directory, not a mailboxes.db or a dump"),
        str(directory),
    )


def cyrus_unknown_version(inputs: Path, out: Path) -> Broken:
    dump = inputs / "mailboxes.show"
    shutil.copy(CYRUS_SHOW, dump)
    return Broken(
        ["audit", "cyrus", str(dump), "--version", "9.9", "--out", str(out)],
        re.escape(
            "ConfigError: --version '9.9': not a Cyrus version whose RACL rule the checks know "
            "(known: 3.0, 3.1, "
        )
        + r".*",
        "--version",
    )


def cyrus_truncated_dump(inputs: Path, out: Path) -> Broken:
    dump = inputs / "mailboxes.show"
    data = CYRUS_SHOW.read_bytes()
    cut = data[: data.index(b"\n", len(data) // 2) + 5]
    dump.write_bytes(cut)
    line = cut.count(b"\n") + 1
    return Broken(
        ["audit", "cyrus", str(dump), "--out", str(out)],
        re.escape(f"InputError: {dump}: line {line}: no final newline (truncated dump?)"),
        str(dump),
    )


# --- slimta -----------------------------------------------------------------------------------


def slimta_unreachable_redis(inputs: Path, out: Path) -> Broken:
    return Broken(
        ["audit", "slimta", "--redis", "redis://127.0.0.1:1", "--out", str(out)],
        re.escape("ServerUnavailable: Redis at 127.0.0.1:1/0 is unreachable (") + r"[^()]+\)",
        "127.0.0.1:1",
    )


def slimta_disk_is_a_file(inputs: Path, out: Path) -> Broken:
    file = inputs / "queue.env"
    file.write_bytes(random_bytes(300))
    return Broken(
        ["audit", "slimta", "--disk", str(file), "--out", str(out)],
        re.escape(f"InputError: --disk {file}: is a file: no such slimta queue directory"),
        str(file),
    )


def slimta_missing_disk(inputs: Path, out: Path) -> Broken:
    missing = inputs / "env"
    return Broken(
        ["audit", "slimta", "--disk", str(missing), "--out", str(out)],
        re.escape(f"InputError: {missing.resolve()}: no such slimta queue directory"),
        str(missing.resolve()),
    )


def slimta_meta_dir_without_disk(inputs: Path, out: Path) -> Broken:
    meta = inputs / "meta"
    meta.mkdir()
    argv = ["audit", "slimta", "--redis", "redis://127.0.0.1:1", "--meta-dir", str(meta)]
    return Broken(
        [*argv, "--out", str(out)],
        re.escape("ConfigError: --meta-dir and --tmp-dir describe a --disk store"),
        "--meta-dir",
    )


def slimta_sqs_export_is_a_directory(inputs: Path, out: Path) -> Broken:
    export = inputs / "sqs"
    export.mkdir()
    argv = ["audit", "slimta", "--s3", "s3://queue-bucket", "--sqs-export", str(export)]
    return Broken(
        [*argv, "--out", str(out)],
        re.escape(f"InputError: {export}: a directory, not an SQS export file"),
        str(export),
    )


CASES: dict[str, Callable[[Path, Path], Broken]] = {
    case.__name__: case
    for case in (
        james_random_parquet,
        james_truncated_part,
        james_empty_table_directory,
        james_empty_snapshot,
        james_snapshot_is_a_file,
        james_sstables_of_cassandra_2,
        james_random_blob_listing,
        james_unreachable_cassandra,
        james_live_option_with_a_snapshot,
        james_snapshot_and_cassandra,
        james_out_is_a_file,
        james_damaged_pages_audit,
        james_damaged_pages_validate,
        james_csv_with_an_address_for_a_number,
        logqueue_missing_directory,
        logqueue_file_for_a_directory,
        logqueue_directory_twice,
        cyrus_random_bytes,
        cyrus_directory_for_a_database,
        cyrus_unknown_version,
        cyrus_truncated_dump,
        slimta_unreachable_redis,
        slimta_disk_is_a_file,
        slimta_missing_disk,
        slimta_meta_dir_without_disk,
        slimta_sqs_export_is_a_directory,
    )
}


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: kind, and for a file its size, modification time and SHA-256."""
    state: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_dir():
            state[name] = ("dir", path.stat().st_mtime_ns)
        else:
            stat = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            state[name] = ("file", stat.st_size, stat.st_mtime_ns, digest)
    return state


def run_cli(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "TMPDIR": str(tmp),  # where the Spark log goes: outside the inputs
        "MQF_PROGRESS": "0",
    }
    env.pop("MQF_SPARK_LOG", None)
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", *argv],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_input_is_one_line_exit_2_and_nothing_written(case: str, tmp_path: Path):
    inputs, out, tmp = tmp_path / "inputs", tmp_path / "out", tmp_path / "tmp"
    inputs.mkdir()
    tmp.mkdir()
    broken = CASES[case](inputs, out)
    before = tree_state(inputs)

    done = run_cli(broken.argv, tmp)

    err = done.stderr
    assert done.returncode == 2, err[-3000:]
    assert len(err.splitlines()) <= 3, err[-3000:]
    assert not [word for word in FORBIDDEN if word in err], err[-3000:]
    line = err.strip()
    assert re.fullmatch("mqforensics: error: " + broken.line, line), line
    assert broken.names in line
    assert done.stdout == ""
    assert not out.exists()
    assert tree_state(inputs) == before
