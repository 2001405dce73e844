"""Progress of long Spark reads and of purges: a widget in notebooks, a bar on the CLI's stderr.

Spark progress comes from the session itself: classic Spark (local or a cluster) is polled
through ``sparkContext.statusTracker()`` by a daemon thread; a Spark Connect session has no
SparkContext and reports progress to a handler registered with ``registerProgressHandler``
(pyspark >= 4.0). Either feeds one `Progress` (tasks done / total of the running stages) that a
renderer shows: an ipywidgets bar in a notebook, a tqdm bar on stderr in a terminal. The CLI
never writes progress to stdout (its output is parsed), and shows it only when stderr is a
terminal; ``MQF_PROGRESS=1`` forces it, ``MQF_PROGRESS=0`` (the CLI's ``--quiet``) turns every
progress display off.

A command says which step it is in (`step`: reading the store, running the checks, writing the
findings): the bar's description names it, and the bar is drawn (its clock running) from the
start of the block, so a step that runs no Spark job (the driver planning a query, reading
footers, writing files) is not silence.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Protocol

from mqforensics.credentials import mask_secrets
from mqforensics.units import plural

POLL_SECONDS = 0.5


@dataclass
class Progress:
    """What is running: the active stages' tasks and a label."""

    label: str
    step: str = ""
    done: int = 0
    total: int = 0
    stages: int = 0
    detail: str = ""
    elapsed: float = 0.0

    @property
    def title(self) -> str:
        """The label with the current step: ``audit james: checks``."""
        return f"{self.label}: {self.step}" if self.step else self.label


class Renderer(Protocol):
    def update(self, progress: Progress) -> None: ...

    def close(self, summary: str) -> None: ...


def setting() -> bool | None:
    """``MQF_PROGRESS``: True (force), False (off), None (decide from the output)."""
    value = os.environ.get("MQF_PROGRESS", "").strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    return None


def in_notebook() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel), not in a terminal IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class TqdmRenderer:
    """A tqdm bar, on stderr unless told otherwise."""

    def __init__(self, label: str, file: IO[str] | None = None, unit: str = "task") -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=0, desc=label, unit=unit, file=file or sys.stderr, leave=False,
                         dynamic_ncols=True, mininterval=0.2)  # fmt: skip
        self._file = file or sys.stderr

    def update(self, progress: Progress) -> None:
        if self._bar.total != progress.total:
            self._bar.total = progress.total
        self._bar.n = progress.done
        self._bar.set_description_str(progress.title, refresh=False)
        self._bar.set_postfix_str(progress.detail, refresh=False)
        self._bar.refresh()

    def close(self, summary: str) -> None:
        self._bar.close()
        if summary:
            print(summary, file=self._file)


class WidgetRenderer:
    """An ipywidgets progress bar with a label, displayed once and updated in place; at the end
    the bar is hidden and the label keeps a one-line summary.

    The widgets are made on the first update: a cell that runs no Spark job opens no widget
    (each widget is a comm channel to the browser)."""

    def __init__(self, label: str) -> None:
        self.text = label
        self.bar: Any = None
        self.label: Any = None

    def _show(self) -> None:
        if self.bar is None:
            import ipywidgets
            from IPython.display import display

            self.bar = ipywidgets.IntProgress(value=0, min=0, max=1, description="Spark")
            self.label = ipywidgets.Label(self.text)
            display(ipywidgets.HBox([self.bar, self.label]))

    def update(self, progress: Progress) -> None:
        if progress.total <= 0:
            return
        self._show()
        self.bar.max = max(progress.total, 1)
        self.bar.value = min(progress.done, progress.total)
        stages = f", {plural(progress.stages, 'stage')}" if progress.stages else ""
        detail = f", {progress.detail}" if progress.detail else ""
        elapsed = f", {progress.elapsed:.0f}s" if progress.elapsed else ""
        self.label.value = (
            f"{progress.title}: {progress.done}/{progress.total} tasks{stages}{detail}{elapsed}"
        )

    def close(self, summary: str) -> None:
        if self.bar is None:  # nothing was shown
            return
        if summary.endswith("(stopped)"):
            self.bar.bar_style = "danger"
        else:
            self.bar.value = self.bar.max
            self.bar.bar_style = "success"
        self.bar.layout.display = "none"
        if summary:
            self.label.value = summary


def default_renderer(label: str) -> Renderer | None:
    """The renderer for where we run, or None when progress is not to be shown."""
    chosen = setting()
    if chosen is False:
        return None
    if in_notebook():
        return WidgetRenderer(label)
    if chosen or sys.stderr.isatty():
        return TqdmRenderer(label)
    return None


class SparkWatcher:
    """Feeds a renderer with the progress of the Spark jobs running on a session."""

    def __init__(self, spark: Any, label: str, renderer: Renderer) -> None:
        self.spark = spark
        self.progress = Progress(mask_secrets(label))
        self.renderer = renderer
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handler: Callable[..., None] | None = None
        # Stage id -> (completed, total): finished stages stay counted in the totals.
        self._stages: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    # classic Spark: poll the status tracker
    def _poll(self) -> None:
        # A session stopped under us (or a renderer failing) ends the display, never the job.
        with contextlib.suppress(Exception):
            tracker = self.spark.sparkContext.statusTracker()
            while not self._stop.wait(POLL_SECONDS):
                self._sample(tracker)

    def _sample(self, tracker: Any) -> None:
        seen, names = [], []
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                seen.append((stage_id, info.numCompletedTasks, info.numTasks))
                names.append(info.name)
        if seen:
            self._record(seen, names[-1])
        else:
            self._tick()

    def _tick(self) -> None:
        """No stage running: the clock and the step still move on the display."""
        with self._lock:
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    def step(self, name: str) -> None:
        """The command is now in step `name`: shown at once."""
        with self._lock:
            self.progress.step = mask_secrets(name)
            self.progress.detail = ""
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    # Spark Connect: a progress handler, called with keywords (pyspark.sql.connect.shell.progress)
    def _on_connect_progress(
        self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool
    ) -> None:
        seen = [(s.stage_id, s.num_completed_tasks, s.num_tasks) for s in stages or []]
        if seen:
            self._record(seen, "")

    def _record(self, seen: list[tuple[int, int, int]], name: str) -> None:
        """Take in (stage id, completed, total) of the stages just seen and show the sum."""
        with self._lock:
            for stage_id, completed, total in seen:
                self._stages[stage_id] = (completed, total)
            self.progress.done = sum(c for c, _ in self._stages.values())
            self.progress.total = sum(t for _, t in self._stages.values())
            self.progress.stages = len(self._stages)
            # "count at NativeMethodAccessorImpl.java:0": the operation, not the call site; names
            # of Scala closures ("$anonfun$...") say nothing to a reader.
            operation = name.split(" at ")[0]
            self.progress.detail = "" if operation.startswith("$") else mask_secrets(operation)
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    def start(self) -> SparkWatcher:
        if hasattr(self.spark, "registerProgressHandler") and _is_connect(self.spark):
            self._handler = self._on_connect_progress
            self.spark.registerProgressHandler(self._handler)
        else:
            self._thread = threading.Thread(target=self._poll, name="mqf-progress", daemon=True)
            self._thread.start()
        return self

    def stop(self, failed: bool = False) -> None:
        """Stop following the session and close the display (always, even when this fails);
        a block that failed is not shown as complete."""
        self._stop.set()
        try:
            if self._thread is not None:
                self._thread.join(timeout=5)
                with contextlib.suppress(Exception):
                    self._sample(self.spark.sparkContext.statusTracker())
            if self._handler is not None:
                with contextlib.suppress(Exception):
                    self.spark.removeProgressHandler(self._handler)
            with self._lock:
                if not failed:
                    self.progress.done = self.progress.total
                self.progress.elapsed = time.monotonic() - self.started
            if self.progress.total:
                self.renderer.update(self.progress)
        finally:
            self.renderer.close(self.summary(failed))

    def summary(self, failed: bool = False) -> str:
        """One line for the end of the block: tasks, stages, seconds ("" when no job ran)."""
        p = self.progress
        if not p.total:
            return ""
        end = " (stopped)" if failed else ""
        done = f"{p.done}/{p.total} Spark tasks" if failed else plural(p.total, "Spark task")
        return f"{p.label}: {done} in {plural(p.stages, 'stage')}, {p.elapsed:.1f}s{end}"


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextlib.contextmanager
def spark_progress(
    spark: Any, label: str, *, renderer: Renderer | None = None
) -> Iterator[SparkWatcher | None]:
    """Show the progress of the Spark jobs run inside the block (nothing when progress is off
    or there is nowhere to show it). The watcher always stops; exceptions propagate."""
    chosen = renderer or default_renderer(label)
    if chosen is None:
        yield None
        return
    watcher = SparkWatcher(spark, label, chosen).start()
    _WATCHERS.append(watcher)
    failed = True
    try:
        yield watcher
        failed = False
    finally:
        _WATCHERS.remove(watcher)
        watcher.stop(failed)


# The watchers of the `spark_progress` blocks running, innermost last.
_WATCHERS: list[SparkWatcher] = []


def step(name: str) -> None:
    """Say which step the command is in (``reading the view``, ``checks``): the innermost
    `spark_progress` block's display names it; nothing when no progress is shown."""
    if _WATCHERS:
        _WATCHERS[-1].step(name)


def enable_notebook_progress(spark: Any) -> None:
    """In a notebook, show a progress bar for the Spark jobs of every cell run from now on."""
    if setting() is False or not in_notebook():
        return
    from IPython import get_ipython

    shell = get_ipython()
    state: dict[str, SparkWatcher | None] = {"watcher": None}

    def before(*_args: Any) -> None:
        state["watcher"] = SparkWatcher(spark, "Spark", WidgetRenderer("Spark")).start()

    def after(result: Any = None) -> None:
        watcher, state["watcher"] = state["watcher"], None
        if watcher is not None:
            watcher.stop(failed=not getattr(result, "success", True))

    for event, callback in (("pre_run_cell", before), ("post_run_cell", after)):
        for registered in list(shell.events.callbacks[event]):
            if getattr(registered, "__qualname__", "").startswith("enable_notebook_progress"):
                shell.events.unregister(event, registered)
        shell.events.register(event, callback)


class PurgeProgress:
    """The purge CLI's bar: one step per plan action, bytes freed as its postfix."""

    def __init__(self, total: int, file: IO[str] | None = None) -> None:
        self.renderer = TqdmRenderer("purge", file=file, unit="action")
        self.progress = Progress("purge", total=total)

    def __call__(self, done: int, total: int, freed_bytes: int) -> None:
        self.progress.done, self.progress.total = done, total
        self.progress.detail = f"{freed_bytes:,} bytes"
        self.renderer.update(self.progress)

    def close(self) -> None:
        self.renderer.close("")


def purge_progress(total: int) -> PurgeProgress | None:
    """A purge bar on stderr when progress is to be shown in this terminal, else None."""
    chosen = setting()
    if chosen is False or (chosen is None and not sys.stderr.isatty()):
        return None
    return PurgeProgress(total)
