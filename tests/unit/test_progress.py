"""Progress: Spark tasks seen while a block runs, a bar per purge action, and never on stdout."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mqforensics.api import DATASETS
from mqforensics.cli import main
from mqforensics.purge.engine import run_purge
from mqforensics.views import progress
from tests.unit.test_purge_engine import PLANNED, STORE, DictExecutor, make_plan

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self) -> None:
        self.updates: list[tuple[int, int]] = []
        self.summary: str | None = None

    def update(self, state: progress.Progress) -> None:
        self.updates.append((state.done, state.total))

    def close(self, summary: str) -> None:
        self.summary = summary


def test_a_spark_job_is_followed_to_its_last_task(spark, monkeypatch) -> None:
    monkeypatch.setattr(progress, "POLL_SECONDS", 0.05)
    recorder = Recorder()

    def slow(rows):
        import time

        time.sleep(0.3)
        return rows

    with progress.spark_progress(spark, "count", renderer=recorder) as watcher:
        spark.sparkContext.parallelize(range(8), 8).mapPartitions(slow).count()
    assert watcher is not None and not watcher._thread.is_alive()
    assert recorder.updates, "no progress was sampled while the job ran"
    assert recorder.updates[-1] == (8, 8)
    assert all(done <= total for done, total in recorder.updates)
    assert recorder.summary.startswith("count: 8 Spark tasks in 1 stage, ")


def test_each_step_is_shown_at_once_and_its_clock_runs_without_a_job(spark, monkeypatch) -> None:
    import time

    monkeypatch.setattr(progress, "POLL_SECONDS", 0.05)
    seen: list[tuple[str, float, int]] = []

    class Titles(Recorder):
        def update(self, state: progress.Progress) -> None:
            seen.append((state.title, state.elapsed, state.total))

    progress.step("outside any block")  # nothing to show it: ignored
    with progress.spark_progress(spark, "audit toy", renderer=Titles()):
        progress.step("reading the store")
        time.sleep(0.4)  # the driver busy, no Spark job
        progress.step("checks")
        spark.sparkContext.parallelize(range(4), 4).count()
    reading = [(t, e) for t, e, total in seen if t == "audit toy: reading the store"]
    assert reading[0][1] < 0.2, "the step was not shown when it began"
    assert len(reading) >= 3 and reading[-1][1] > reading[0][1] + 0.2, "the clock stood still"
    assert seen[-1][0] == "audit toy: checks" and seen[-1][2] == 4
    assert not any("outside" in t for t, _, _ in seen)
    assert progress._WATCHERS == []


def test_the_watcher_stops_when_the_block_fails(spark) -> None:
    recorder = Recorder()
    with (
        pytest.raises(ZeroDivisionError),
        progress.spark_progress(spark, "x", renderer=recorder) as w,
    ):
        1 / 0  # noqa: B018
    assert not w._thread.is_alive() and recorder.summary == ""


def test_progress_is_off_without_a_terminal_or_when_asked(monkeypatch) -> None:
    monkeypatch.setenv("MQF_PROGRESS", "0")
    assert progress.default_renderer("x") is None and progress.purge_progress(3) is None
    monkeypatch.delenv("MQF_PROGRESS")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert progress.default_renderer("x") is None and progress.purge_progress(3) is None
    monkeypatch.setenv("MQF_PROGRESS", "1")
    assert isinstance(progress.default_renderer("x"), progress.TqdmRenderer)


def test_the_notebook_bar_ends_full_and_leaves_its_summary() -> None:
    bar = progress.WidgetRenderer("read")
    bar.update(progress.Progress("read", done=0, total=0))
    assert bar.bar is None  # no task yet: nothing displayed
    bar.update(progress.Progress("read", done=3, total=10, stages=1))
    assert (bar.bar.value, bar.bar.max) == (3, 10)
    assert bar.label.value == "read: 3/10 tasks, 1 stage"
    bar.close("read: 10 Spark tasks")
    assert bar.bar.value == bar.bar.max == 10 and bar.label.value == "read: 10 Spark tasks"
    assert bar.bar.layout.display == "none"


def test_spark_connect_stages_are_summed_and_a_failed_block_is_not_shown_complete() -> None:
    from pyspark.sql.connect.shell.progress import StageInfo

    recorder = Recorder()
    watcher = progress.SparkWatcher(object(), "read", recorder)
    # Called as pyspark's Connect client calls its progress handlers: keywords only.
    watcher._on_connect_progress(
        stages=[StageInfo(0, 4, 4, 0, True), StageInfo(1, 6, 1, 0, False)],
        inflight_tasks=5, operation_id="op", done=False,
    )  # fmt: skip
    assert recorder.updates == [(5, 10)]
    watcher.stop(failed=True)
    assert recorder.updates[-1] == (5, 10)
    assert recorder.summary.startswith("read: 5/10 Spark tasks in 2 stages, ")
    assert recorder.summary.endswith("s (stopped)")


def test_the_purge_reports_each_action_with_the_bytes_freed(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, PLANNED)
    store = dict(STORE)
    store["b"] = "changed"  # drift: this action is skipped and frees nothing
    calls: list[tuple[int, int, int]] = []
    run_purge(plan, [DictExecutor(store, plan)], apply=True, out=lambda _: None,
              on_action=lambda *a: calls.append(a))  # fmt: skip
    assert calls == [(1, 3, 1), (2, 3, 1), (3, 3, 2)]
    dry: list[tuple[int, int, int]] = []
    run_purge(plan, [DictExecutor(dict(STORE), plan)], apply=False, out=lambda _: None,
              on_action=lambda *a: dry.append(a))  # fmt: skip
    assert dry == [(1, 3, 0), (2, 3, 0), (3, 3, 0)]


def test_the_purge_bar_goes_to_stderr_and_leaves_stdout_alone(tmp_path: Path, spark) -> None:
    queue = tmp_path / "outbound"
    shutil.copytree(DATASETS / "logqueue" / "sample" / "outbound", queue)
    policy = DATASETS / "logqueue" / "sample" / "policy.toml"
    plan = tmp_path / "plan"

    def cli(*argv: str, bar: str) -> subprocess.CompletedProcess[str]:
        env = {"MQF_PROGRESS": bar, "PATH": "/usr/bin:/bin"}
        return subprocess.run([sys.executable, "-m", "mqforensics", *argv], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120, check=True)  # fmt: skip

    # The plan in this process (its Spark session); the purges, whose terminal is the point, apart.
    assert main(["plan", "logqueue", str(queue), "--policy", str(policy), "--out", str(plan)]) == 0
    quiet = cli("purge", str(plan), bar="0")
    shown = cli("purge", str(plan), bar="1")
    assert quiet.stdout == shown.stdout and "dry run" in shown.stdout
    assert quiet.stderr == ""
    assert "purge: 100%" in shown.stderr and "2/2" in shown.stderr
