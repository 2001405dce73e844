"""The Spark driver JVM's class data archive (`mqforensics prepare-spark`): which archive a
driver maps, and that a damaged or foreign one is never mapped or shown. `make test` records
the archive (``prepare-spark``) before the tests, which then run with it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mqforensics.cli import main
from mqforensics.spark import archive as spark_archive
from mqforensics.spark.archive import driver_options, find_archive


def mapped_archives(pid: int) -> set[str]:
    """The class data archives the process `pid` has mapped."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split()[-1] for line in lines if line.endswith(".jsa")}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The archive folder of a Spark home of two jars, in an empty cache directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MQF_SPARK_CDS", raising=False)
    monkeypatch.delenv("MQF_SPARK_CDS_RECORD", raising=False)
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core_2.13-4.1.4.jar", "spark-sql_2.13-4.1.4.jar"):
        (home / "jars" / name).write_bytes(b"PK" + name.encode())
    monkeypatch.setattr(spark_archive, "spark_home", lambda: home)
    return spark_archive.archive_dir()


def test_the_test_sessions_driver_maps_the_archive_prepare_spark_recorded(spark, capsys):
    """`make test` ran ``prepare-spark`` (on a clean machine: recorded the archive); this
    session's driver JVM maps it, and it is the one file left, read-only."""
    archive = find_archive()
    assert archive is not None, "no archive of this JVM and Spark: run `mqforensics prepare-spark`"
    pid = spark.sparkContext._gateway.proc.pid
    assert str(archive) in mapped_archives(pid)
    assert archive.stat().st_mode & 0o222 == 0
    assert [p.name for p in archive.parent.iterdir() if p.name.endswith(".part")] == []
    # Asked again, it records nothing (this process runs Spark already: recording would fail).
    assert main(["prepare-spark"]) == 0
    assert capsys.readouterr().out == f"Spark driver class archive present: {archive}\n"


def test_an_archive_is_used_only_under_its_own_key_and_size(cache):
    assert driver_options() == []  # none recorded yet
    key = spark_archive.archive_key()
    archive = cache / f"driver-{key}-5.jsa"
    archive.write_bytes(b"12345")
    assert find_archive() == archive
    assert driver_options()[:2] == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    # Truncated (a JVM mapping it would die of SIGBUS): not used.
    archive.write_bytes(b"1234")
    assert find_archive() is None and driver_options() == []
    archive.write_bytes(b"12345")
    # The same jars written again (a reinstalled virtualenv): the JVM would refuse the archive.
    jar = next((spark_archive.spark_home() / "jars").glob("*.jar"))
    os.utime(jar, (jar.stat().st_atime, jar.stat().st_mtime + 5))
    assert spark_archive.archive_key() != key
    assert find_archive() is None
    os.utime(jar, (jar.stat().st_atime, jar.stat().st_mtime - 5))
    assert find_archive() == archive
    # Another Spark (a jar more) has another key: this archive is not its.
    (spark_archive.spark_home() / "jars" / "extra.jar").write_bytes(b"PK")
    assert spark_archive.archive_key() != key
    assert find_archive() is None


def test_none_when_disabled_and_the_recording_file_while_recording(cache, monkeypatch):
    archive = cache / f"driver-{spark_archive.archive_key()}-1.jsa"
    archive.write_bytes(b"1")
    monkeypatch.setenv("MQF_SPARK_CDS", "0")
    assert driver_options() == []
    monkeypatch.setenv("MQF_SPARK_CDS_RECORD", "/tmp/x.part")
    assert driver_options() == [
        "-XX:ArchiveClassesAtExit=/tmp/x.part",
        *spark_archive.LOG_TO_STDERR,
    ]


def test_a_jvm_that_cannot_use_the_archive_starts_and_prints_nothing_on_stdout():
    """An archive recorded for Spark's class path, given to a JVM with another class path (as
    after an upgrade the key did not see): the JVM starts without it, and its warning goes to
    stderr (the driver's log file), never to stdout, which is the terminal."""
    archive = find_archive()
    assert archive is not None, "no archive of this JVM and Spark: run `mqforensics prepare-spark`"
    home = spark_archive.java_home()
    assert home is not None
    options = [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *spark_archive.LOG_TO_STDERR]
    done = subprocess.run(
        [str(home / "bin" / "java"), *options, "-version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout == ""
    assert "Unable to use shared archive" in done.stderr
    # Without our log options the same warning is on stdout: the options are what keeps it off.
    bare = subprocess.run(
        [str(home / "bin" / "java"), *options[:2], "-version"], capture_output=True, text=True
    )
    assert "Unable to use shared archive" in bare.stdout


def test_recording_anew_removes_superseded_archives_and_those_of_removed_installations(
    cache, tmp_path
):
    key = spark_archive.archive_key()
    kept, older = cache / f"driver-{key}-1.jsa", cache / "driver-0123456789abcdef-1.jsa"
    failed = cache / f".driver-{key}.4242.part"
    for path in (kept, older, failed):
        path.write_bytes(b"1")
    assert (cache / "spark_home").read_text() == f"{spark_archive.spark_home()}\n"
    elsewhere, gone = cache.parent / "living", cache.parent / "gone"
    for folder, home in ((elsewhere, tmp_path), (gone, tmp_path / "removed-venv")):
        folder.mkdir()
        (folder / "spark_home").write_text(f"{home}\n")
        (folder / "driver-fedcba9876543210-1.jsa").write_bytes(b"1")
    removed = spark_archive.remove_others(kept)
    assert sorted(removed) == sorted([older, failed, gone / "driver-fedcba9876543210-1.jsa"])
    assert sorted(p.name for p in cache.iterdir()) == [kept.name, "spark_home"]
    assert not gone.exists() and (elsewhere / "driver-fedcba9876543210-1.jsa").is_file()
