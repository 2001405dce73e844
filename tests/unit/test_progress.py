"""Progress: Spark tasks seen while a block runs, a bar per purge action, and never on stdout."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import types
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
        self.announced: list[str] = []

    def announce(self, text: str) -> None:
        self.announced.append(text)

    def update(self, state: progress.Progress) -> None:
        self.updates.append((state.done, state.total))

    def close(self, summary: str, failed: bool = False) -> None:
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
    monkeypatch.setenv("MQF_PROGRESS", "1")  # asked for where stderr is no terminal: lines
    assert isinstance(progress.default_renderer("x"), progress.LineRenderer)


def test_the_notebook_bar_ends_full_and_leaves_its_summary() -> None:
    bar = progress.WidgetRenderer("read")
    bar.update(progress.Progress("read", done=0, total=0))
    assert bar.bar is None  # no task yet: nothing displayed
    bar.update(progress.Progress("read", done=3, total=10, stages=1))
    assert (bar.bar.value, bar.bar.max) == (3, 10)
    assert bar.label.value == "read: 3/10 tasks, 1 stage"
    shown = bar.handle  # outside a kernel nothing is displayed: no handle
    assert shown is None
    bar.handle = Handle()
    bar.close("read: 10 Spark tasks")
    assert bar.bar.value == bar.bar.max == 10 and bar.label.value == "read: 10 Spark tasks"
    assert bar.bar.layout.display == "none"
    # What a saved notebook keeps of the output: the summary as text, not the widget's repr.
    assert bar.handle.updates == [{"text/plain": "read: 10 Spark tasks"}]


def test_a_setup_cell_run_again_leaves_no_bar_running(monkeypatch) -> None:
    """The cell that enables the notebook's progress, run a second time (or the next notebook's
    in the same kernel): the watcher the old callbacks started for that cell is stopped when the
    cell ends, never left to draw a bar under a later cell's jobs."""
    from IPython.core.events import EventManager, available_events

    shell = types.SimpleNamespace(events=EventManager(None, available_events))
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    monkeypatch.delenv("MQF_PROGRESS", raising=False)

    def watching() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "mqf-progress" and t.is_alive()]

    progress.enable_notebook_progress(None)
    shell.events.trigger("pre_run_cell", None)
    assert len(watching()) == 1
    progress.enable_notebook_progress(None)  # the same cell enables it again
    assert len(shell.events.callbacks["pre_run_cell"]) == 1
    shell.events.trigger("post_run_cell", types.SimpleNamespace(success=True))
    assert watching() == []
    shell.events.trigger("pre_run_cell", None)  # the next cell: one watcher, stopped at its end
    assert len(watching()) == 1
    shell.events.trigger("post_run_cell", types.SimpleNamespace(success=True))
    assert watching() == []


def test_the_notebook_bar_of_a_command_counts_its_checks_not_sparks_tasks() -> None:
    bar = progress.WidgetRenderer("audit toy")
    bar.announce("mqforensics: auditing toy q; findings into o")
    bar.update(progress.Progress("audit toy", step="starting Spark"))
    assert bar.label.value == "audit toy: starting Spark (0s)"
    bar.update(progress.Progress("audit toy", step="running check 3 of 17: stuck", of=(3, 17),
                                 done=4, total=31, elapsed=12.0))  # fmt: skip
    assert (bar.bar.value, bar.bar.max) == (3, 17)
    assert bar.label.value == "audit toy: running check 3 of 17: stuck (12s)"
    bar.update(progress.Progress("audit toy", step="computing and writing the findings",
                                 done=9, total=40))  # fmt: skip
    assert (bar.bar.value, bar.bar.max) == (3, 17)
    bar.close("audit toy: done in 14.0s")
    assert (bar.bar.value, bar.bar.max) == (17, 17) and bar.label.value.endswith("14.0s")


class Handle:
    def __init__(self) -> None:
        self.updates: list[dict] = []

    def update(self, data: dict, raw: bool = False) -> None:
        assert raw
        self.updates.append(data)


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


def test_a_command_says_what_it_reads_before_spark_then_each_step_in_words(
    spark, tmp_path: Path, capsys, monkeypatch
) -> None:
    import mqforensics.spark
    from mqforensics import systems

    monkeypatch.setenv("MQF_PROGRESS", "1")  # asked for, stderr no terminal: plain lines
    started = mqforensics.spark.session

    def marked(*args, **kwargs):
        print("<Spark starts>", file=sys.stderr)
        return started(*args, **kwargs)

    monkeypatch.setattr(mqforensics.spark, "session", marked)
    queue = DATASETS / "logqueue" / "sample" / "outbound"
    out = tmp_path / "a"
    assert main(["audit", "logqueue", str(queue), "--out", str(out)]) in (0, 1)
    err = capsys.readouterr().err
    shown = [line for line in err.splitlines() if line.startswith(("mqforensics:", "audit", "<"))]
    assert shown[:4] == [
        f"mqforensics: auditing logqueue {queue}; findings into {out}",
        "audit logqueue: starting Spark",
        "<Spark starts>",
        "audit logqueue: reading the store",
    ], err
    manifest = json.loads((out / "manifest.json").read_text())
    ran = [c.name for c in systems.get("logqueue").checks if c.name not in manifest["not_run"]]
    assert shown[4:-3] == [
        "audit logqueue: preparing the checks",
        *(f"audit logqueue: running check {n} of {len(ran)}: {name}"
          for n, name in enumerate(ran, 1)),
    ], err  # fmt: skip
    assert shown[-3:-1] == [
        "audit logqueue: computing and writing the findings",
        "audit logqueue: writing the manifest",
    ], err
    assert re.fullmatch(r"audit logqueue: done in \d+\.\ds", shown[-1]), err
    # Spark's own words never: its job descriptions, its tasks, its growing totals.
    assert not re.search(r"task|toArrow|localCheckpoint|collect at|\d+/\d+", err), err
    argv = ["--quiet", "audit", "logqueue", str(queue), "--out", str(tmp_path / "b")]
    assert main(argv) in (0, 1)
    assert "audit logqueue" not in capsys.readouterr().err


def test_the_terminal_shows_one_status_line_then_a_summary() -> None:
    stream = io.StringIO()
    status = progress.StatusRenderer("audit toy", file=stream)
    status.announce("mqforensics: auditing toy q; findings into o")
    status.update(progress.Progress("audit toy", step="reading the store", elapsed=1.0))
    status.update(progress.Progress("audit toy", step="running check 1 of 2: a", of=(1, 2),
                                    done=3, total=31, stages=2))  # fmt: skip
    status.close("audit toy: done in 1.0s")
    text = stream.getvalue()
    assert text.startswith("mqforensics: auditing toy q; findings into o\n")
    assert "\raudit toy: reading the store [00:00]" in text
    assert "\raudit toy: running check 1 of 2: a [00:00]" in text
    assert text.endswith("audit toy: done in 1.0s\n")
    assert "task" not in text and "31" not in text
    failed = io.StringIO()
    status = progress.StatusRenderer("audit toy", file=failed)
    status.update(progress.Progress("audit toy", step="reading the store"))
    status.close("audit toy: reading the store: stopped after 2.0s", failed=True)
    assert "stopped" not in failed.getvalue()  # the error line follows, alone


def test_the_status_line_stays_on_the_terminal_while_fd_2_goes_to_sparks_log(
    tmp_path: Path, monkeypatch
) -> None:
    terminal, log = tmp_path / "terminal", tmp_path / "spark.log"
    with open(terminal, "w") as stderr:
        monkeypatch.setattr(sys, "stderr", stderr)
        stream, own = progress.terminal_stream()
        assert own
        saved = os.dup(stderr.fileno())
        target = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(target, stderr.fileno())  # as the JVM's launch does (spark._stderr_into)
        try:
            print("starting Spark", file=stream, flush=True)
            print("a JVM line", file=stderr, flush=True)
        finally:
            os.dup2(saved, stderr.fileno())
            os.close(saved)
            os.close(target)
        stream.close()
    assert terminal.read_text() == "starting Spark\n"
    assert log.read_text() == "a JVM line\n"


NOTEBOOK_CELL = """
from mqforensics.views.progress import spark_progress, step
with spark_progress(None, "audit toy", about="mqforensics: auditing toy q; findings into o"):
    step("reading the store")
    step("running check 1 of 2: a", (1, 2))
"""


def test_an_executed_notebook_keeps_the_progress_as_a_line_of_text(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(NOTEBOOK_CELL))
    NotebookClient(notebook, kernel_name="python3", timeout=120,
                   resources={"metadata": {"path": str(REPO)}}).execute()  # fmt: skip
    saved = tmp_path / "executed.ipynb"
    nbformat.write(notebook, str(saved))
    outputs = json.loads(saved.read_text())["cells"][0]["outputs"]
    texts = ["".join(o.get("data", {}).get("text/plain", "")) for o in outputs]
    assert not any("HBox" in text or "IntProgress" in text for text in texts), outputs
    assert len(outputs) == 1 and re.fullmatch(r"'?audit toy: done in \d+\.\ds'?", texts[0]), texts
