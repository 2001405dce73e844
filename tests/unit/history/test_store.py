"""Appends to the history: atomic under SIGKILL at any point, concurrent runs both land, the
schema version is checked, Spark and pandas read it directly, labels pseudonymised."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from mqforensics.errors import ConfigError, InputError
from mqforensics.history.collect import Run, pseudonymised
from mqforensics.history.schema import MARKER
from mqforensics.history.store import Location, append, check_writable, location, read
from mqforensics.metrics import Metric

FIGURES = 20_000  # a run big enough that a kill often lands while its file is written

# A process appending runs of FIGURES figures forever, saying "ready" once it is about to.
APPENDER = textwrap.dedent(
    """
    import datetime as dt, sys, tempfile
    from mqforensics.history.collect import Run
    from mqforensics.history.store import append, location
    from mqforensics.metrics import Metric

    where = location(sys.argv[1])
    label, count = sys.argv[2], int(sys.argv[3])
    metrics = tuple(Metric("live_mails", n, "count", queue="q%d" % n) for n in range({figures}))
    warm = Run("postfix", "audit", label, dt.datetime(2027, 1, 1, tzinfo=dt.UTC), metrics[:1])
    append(warm, location(tempfile.mkdtemp()))  # what an append imports, imported first
    # A slow disk: most of the time goes between writing a run's file and renaming it, so that
    # most kills land while a run is written (the rest anywhere else in the loop).
    import os, time
    fsync = os.fsync
    os.fsync = lambda fd: (time.sleep(0.1), fsync(fd))[1]
    print("ready", flush=True)
    number = 0
    while count < 0 or number < count:
        as_of = dt.datetime(2027, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=number)
        append(Run("postfix", "audit", label, as_of, metrics), where)
        number += 1
    """
).format(figures=FIGURES)


def appender(root: Path, label: str, count: int = -1) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(root), label, str(count)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def whole_runs(root: Path) -> pd.Series:
    """Figures per run as pandas reads the history directly."""
    frame = pd.read_parquet(root)
    return frame.groupby("run_id").size()


def test_a_run_killed_at_any_point_is_whole_or_absent(tmp_path: Path) -> None:
    rng = random.Random(46)
    landed = 0
    for _ in range(6):
        process = appender(tmp_path, "killed")
        time.sleep(rng.uniform(0.0, 0.8))
        process.send_signal(signal.SIGKILL)
        process.wait()
        if not any(tmp_path.glob("system=*/*.parquet")):
            continue
        sizes = whole_runs(tmp_path)
        assert set(sizes) == {FIGURES}, "a run was read in part"
        landed = len(sizes)
    assert landed >= 1
    # What a kill leaves is hidden from both readers: at most a temporary file per kill.
    hidden = [p.name for p in tmp_path.glob("system=*/.*")]
    assert all(".tmp-" in name for name in hidden)
    assert hidden, "no kill landed while a run was written: the test tried nothing"
    visible = list(tmp_path.glob("system=*/run-*.parquet"))
    assert len(visible) == landed


def test_two_concurrent_appenders_both_land(tmp_path: Path) -> None:
    first, second = appender(tmp_path, "a", 5), appender(tmp_path, "b", 5)
    assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0
    frame = pd.read_parquet(tmp_path)
    assert frame.groupby("scope")["run_id"].nunique().to_dict() == {"a": 5, "b": 5}
    assert set(frame.groupby("run_id").size()) == {FIGURES}


def a_run(scope: str = "mx1", **labels: str) -> Run:
    as_of = dt.datetime(2027, 1, 2, 3, tzinfo=dt.UTC)
    return Run("postfix", "audit", scope, as_of, (Metric("live_mails", 4, "count", **labels),))


def test_spark_and_pandas_read_the_same_rows(spark, tmp_path: Path) -> None:
    where = location(tmp_path)
    assert where is not None
    run = a_run(queue="deferred")
    append(run, where)
    rows = read(spark, where).collect()
    assert [(r.system, r.scope, r.queue, r.metric, r.value, r.run_id) for r in rows] == [
        ("postfix", "mx1", "deferred", "live_mails", 4.0, run.run_id)
    ]
    frame = pd.read_parquet(tmp_path)
    assert frame.loc[0, "as_of"] == pd.Timestamp("2027-01-02T03:00:00Z")
    assert str(frame.loc[0, "system"]) == "postfix"


def test_spark_appends_to_a_url(spark, tmp_path: Path) -> None:
    # A URL (s3a://, hdfs://) is written by Spark: here a file: URL taken as one.
    where = Location(f"file://{tmp_path}/h", None)
    append(a_run("one"), where, spark=spark)
    append(a_run("two"), where, spark=spark)
    rows = read(spark, where).collect()
    assert sorted(r.scope for r in rows) == ["one", "two"]
    files = list((tmp_path / "h" / "system=postfix").glob("*.parquet"))
    assert len(files) == 2  # one file per run


def test_a_newer_schema_version_is_refused_by_name(spark, tmp_path: Path) -> None:
    where = location(tmp_path)
    assert where is not None
    append(a_run(), where)
    (tmp_path / MARKER).write_text(json.dumps({"format": "mqforensics-history",
                                               "schema_version": 2}))  # fmt: skip
    with pytest.raises(InputError, match="schema version 2"):
        read(spark, where)
    with pytest.raises(InputError, match="schema version 2"):
        append(a_run(), where)


def test_a_directory_that_is_not_a_history_is_refused_before_spark(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    where = location(tmp_path)
    assert where is not None
    with pytest.raises(ConfigError, match="is not a run history"):
        check_writable(where)


def test_mqf_history_names_the_history_when_none_is_given(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MQF_HISTORY", str(tmp_path))
    assert location(None) == Location(str(tmp_path), tmp_path)
    monkeypatch.delenv("MQF_HISTORY")
    assert location(None) is None


def test_labels_holding_addresses_are_pseudonymised() -> None:
    metric = Metric("live_mails", 1, "count", queue="alice@example.org")
    (hidden,) = pseudonymised([metric])
    assert hidden.queue.endswith("@example.org") and "alice" not in hidden.queue
    assert pseudonymised([metric])[0].queue == hidden.queue  # stable from run to run


def test_a_run_file_is_invisible_until_renamed(tmp_path: Path) -> None:
    where = location(tmp_path)
    assert where is not None
    append(a_run(), where)
    (tmp_path / "system=postfix" / ".run-x.parquet.tmp-1").write_bytes(b"PAR1 torn")
    assert len(pd.read_parquet(tmp_path)) == 1
    assert os.listdir(tmp_path / "system=postfix")
