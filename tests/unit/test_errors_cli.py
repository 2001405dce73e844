"""The CLI's one error line (issue 29, "Errors"), for failures found before Spark starts: the
line is pseudonymised unless --reveal-addresses, a usage error is one line, a broken input is
named, and an audit that fails leaves --out as it found it."""

from __future__ import annotations

import random
import shutil
import socket
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.errors import InputError, ServerUnavailable
from mqforensics.privacy import pseudonymize_address
from mqforensics.runner import out_kept_on_failure
from mqforensics.sources.reachable import check_reachable
from mqforensics.subjects import KEY_FILE
from mqforensics.systems.cyrus.database import looks_binary, sniff
from mqforensics.systems.james.snapshot import check_parquet

DATA = Path(__file__).resolve().parents[1] / "data" / "cyrus"
JAMES_SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "james" / "sample"


@pytest.fixture
def no_spark(monkeypatch):
    import mqforensics.spark

    monkeypatch.setattr(mqforensics.spark, "session", lambda *a, **k: pytest.fail("Spark started"))


def _lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_an_address_in_an_error_line_is_pseudonymised_unless_revealed(no_spark, tmp_path, capsys):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(JAMES_SAMPLE, snapshot, ignore=shutil.ignore_patterns("blobs"))
    shutil.rmtree(snapshot / "enqueuedmailsv4.parquet")
    (snapshot / "enqueuedmailsv4.csv").write_text("queuename,victor@example.com\nspool,x\n")
    argv = ["audit", "james", "--snapshot", str(snapshot), "--out", str(tmp_path / "out")]
    line = (
        "mqforensics: error: InputError: enqueuedmailsv4.csv: header queuename, {} does not "
        "match table enqueuedmailsv4 (missing column(s) "
    )
    assert main(argv) == 2
    [shown] = _lines(capsys)
    assert shown.startswith(line.format(pseudonymize_address("victor@example.com")))
    assert "victor" not in shown
    assert main([*argv, "--reveal-addresses"]) == 2
    [revealed] = _lines(capsys)
    assert revealed.startswith(line.format("victor@example.com"))
    assert not (tmp_path / "out").exists()


def test_a_usage_error_is_one_line_naming_the_options(no_spark, tmp_path, capsys):
    argv = ["audit", "james", "--snapshot", str(tmp_path), "--cassandra", "h", "--out", "o"]
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert _lines(capsys) == [
        "mqforensics: error: ConfigError: mqforensics audit james: argument --cassandra: not "
        "allowed with argument --snapshot (see mqforensics audit james --help)"
    ]
    with pytest.raises(SystemExit):
        main(["audit", "logqueue", "--out", "o"])
    assert _lines(capsys) == [
        "mqforensics: error: ConfigError: mqforensics audit logqueue: the following arguments "
        "are required: DIR (see mqforensics audit logqueue --help)"
    ]


def test_random_bytes_for_a_cyrus_database_say_what_they_look_like(no_spark, tmp_path, capsys):
    junk = tmp_path / "mailboxes.db"
    junk.write_bytes(bytes.fromhex("8f3a00c1") + random.Random(1).randbytes(4092))
    assert main(["audit", "cyrus", str(junk), "--out", str(tmp_path / "out")]) == 2
    head = junk.read_bytes()[:8].hex(" ")
    assert _lines(capsys) == [
        f"mqforensics: error: InputError: {junk}: not a twoskip or skiplist database, nor a "
        f"text dump (first bytes {head})"
    ]
    assert head.startswith("8f 3a 00 c1")


def test_dumps_and_databases_are_not_binary_to_the_sniffer():
    # A show dump holding a key with a NUL, dumps with Cyrus's 0x1d-0x1f separators, databases.
    for name in ("evil_twoskip.show", "evil_twoskip.batchshow", "mailboxes_twoskip.show",
                 "mailboxes_twoskip.flat", "mailboxes_twoskip.db", "mailboxes_skiplist.db",
                 "mailboxes_twoskip.ctl_mboxlist_d.json"):  # fmt: skip
        path = DATA / name
        sniff(path, path.read_bytes()[:4096])
    assert looks_binary(random.Random(2).randbytes(4096))
    assert not looks_binary(b"") and not looks_binary(b"user.bob\t%(A %(bob lrs))\n")


def test_a_parquet_table_is_checked_from_its_magic_numbers_and_footer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = tmp_path / "t.parquet"
    table.mkdir()
    with pytest.raises(InputError, match="an empty directory, not a Parquet table"):
        check_parquet(table)
    part = table / "part-00000.parquet"
    pq.write_table(pa.table({"a": list(range(100))}), part)
    (table / "_SUCCESS").write_bytes(b"")
    check_parquet(table)
    data = part.read_bytes()
    part.write_bytes(data[:-10])
    with pytest.raises(InputError) as caught:
        check_parquet(table)
    assert caught.value.message == (
        f"{part}: a truncated Parquet file: no footer at its end ({len(data) - 10} bytes)"
    )
    part.write_bytes(b"")
    with pytest.raises(InputError, match=r"an empty file \(0 bytes\), not Parquet"):
        check_parquet(table)
    part.write_bytes(b"PK\x03\x04 a zip, not parquet PAR1")
    with pytest.raises(InputError) as caught:
        check_parquet(part)
    assert caught.value.message == f"{part}: not a Parquet file (first bytes 50 4b 03 04)"


def test_a_server_that_does_not_answer_is_unreachable_before_spark_starts():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_reachable([("127.0.0.1", 1), ("127.0.0.1", port)], "Redis")
    with pytest.raises(ServerUnavailable) as caught:
        check_reachable([("127.0.0.1", port)], "Redis", where=f"127.0.0.1:{port}/0")
    assert caught.value.message == (
        f"Redis at 127.0.0.1:{port}/0 is unreachable (Connection refused)"
    )


def test_a_failed_audit_leaves_its_output_directory_as_it_found_it(tmp_path):
    made = tmp_path / "new" / "out"
    with pytest.raises(RuntimeError), out_kept_on_failure(made):
        made.mkdir(parents=True)
        (made / KEY_FILE).write_text("k1\n")
        raise RuntimeError("the load failed")
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine\n")
    with pytest.raises(RuntimeError), out_kept_on_failure(existing):
        (existing / KEY_FILE).write_text("k2\n")
        raise RuntimeError("the checks failed")
    assert sorted(p.name for p in existing.iterdir()) == ["notes.txt"]
    (existing / KEY_FILE).write_text("old key\n")
    with pytest.raises(RuntimeError), out_kept_on_failure(existing):
        (existing / KEY_FILE).write_text("k3\n")
        raise RuntimeError("the checks failed")
    assert (existing / KEY_FILE).read_text() == "old key\n"
    with out_kept_on_failure(existing):
        (existing / KEY_FILE).write_text("k4\n")
    assert (existing / KEY_FILE).read_text() == "k4\n"


def test_a_quoted_address_keeps_its_quotes_and_the_pseudonym_of_the_address():
    from mqforensics.cli import pseudonymized

    victor = pseudonymize_address("victor@example.com")
    assert pseudonymized("line 2: cannot parse 'victor@example.com' as int") == (
        f"line 2: cannot parse '{victor}' as int"
    )
    assert pseudonymized("from victor@example.com, 'x' and 'victor@example.com'") == (
        f"from {victor}, 'x' and '{victor}'"
    )
    assert pseudonymized(f"already '{victor}'") == f"already '{victor}'"
