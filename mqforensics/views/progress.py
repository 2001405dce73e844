"""Progress of audits, validations and purges, in the user's words: a widget in notebooks, a
status line on the CLI's stderr.

A command first says what it is about to do (`spark_progress`'s `about`: the system, its
inputs, where it writes), at once, before Spark starts; then which step it is in (`step`:
"starting Spark", "reading the store", "running check 3 of 17: stuck_mail", "writing the
findings"), each shown as it begins, with a clock that runs from the start of the block also
while no Spark job runs (the JVM starting, the driver planning a query, files being written).
Spark's own vocabulary (job descriptions, tasks of stages whose totals grow as stages appear)
is not shown for a command with steps; a block without steps (a notebook cell's Spark jobs,
`enable_notebook_progress`) shows the tasks done of the stages seen.

Spark progress comes from the session itself, once the block is given it (`attach`, or the
session `spark_progress` was opened with): classic Spark (local or a cluster) is polled through
``sparkContext.statusTracker()`` by a daemon thread; a Spark Connect session has no
SparkContext and reports progress to a handler registered with ``registerProgressHandler``
(pyspark >= 4.0).

Where it shows: in a notebook, an ipywidgets bar and label, which leave a line of text
(text/plain) in the saved or exported notebook, never a widget's repr; on a terminal, one
status line on stderr redrawn in place (on the terminal itself, so it keeps running while the
JVM's launch points file descriptor 2 at Spark's log), then a summary line; with stderr not a
terminal, nothing, unless ``MQF_PROGRESS=1`` asks for it: then plain lines, one per step, no
bar. ``MQF_PROGRESS=0`` (the CLI's ``--quiet``) turns every display off. Progress never goes
to stdout (a command's output is parsed), and a failed block prints no summary (the error
line follows).
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

from mqforensics.credentials import MaskedStream, mask_secrets
from mqforensics.units import plural

POLL_SECONDS = 0.5


@dataclass
class Progress:
    """What is running: the command's step (and its place, `of`: check 3 of 17), the tasks of
    the Spark stages seen, a label."""

    label: str
    step: str = ""
    done: int = 0
    total: int = 0
    stages: int = 0
    detail: str = ""
    elapsed: float = 0.0
    of: tuple[int, int] | None = None

    @property
    def title(self) -> str:
        """The label with the current step: ``audit james: reading the store``."""
        return f"{self.label}: {self.step}" if self.step else self.label

    @property
    def text(self) -> str:
        """One line for a display: the step and its clock, or (no step) the Spark tasks."""
        if self.step:
            return f"{self.title} ({self.elapsed:.0f}s)"
        stages = f", {plural(self.stages, 'stage')}" if self.stages else ""
        detail = f", {self.detail}" if self.detail else ""
        elapsed = f", {self.elapsed:.0f}s" if self.elapsed else ""
        return f"{self.title}: {self.done}/{self.total} tasks{stages}{detail}{elapsed}"


class Renderer(Protocol):
    def announce(self, text: str) -> None: ...

    def update(self, progress: Progress) -> None: ...

    def close(self, summary: str, failed: bool = False) -> None: ...


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
    """A tqdm bar of a count (the purge's actions), on stderr unless told otherwise."""

    def __init__(self, label: str, file: IO[str] | None = None, unit: str = "task") -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=0, desc=label, unit=unit, file=file or sys.stderr, leave=False,
                         dynamic_ncols=True, mininterval=0.2)  # fmt: skip
        self._file = file or sys.stderr

    def announce(self, text: str) -> None:
        self._bar.write(text, file=self._file)

    def update(self, progress: Progress) -> None:
        if self._bar.total != progress.total:
            self._bar.total = progress.total
        self._bar.n = progress.done
        self._bar.set_description_str(progress.title, refresh=False)
        self._bar.set_postfix_str(progress.detail, refresh=False)
        self._bar.refresh()

    def close(self, summary: str, failed: bool = False) -> None:
        self._bar.close()
        if summary and not failed:
            print(summary, file=self._file)


def terminal_stream() -> tuple[IO[str], bool]:
    """A text stream on the terminal stderr is now, masked (`credentials.MaskedStream`), that
    stays there while file descriptor 2 is pointed elsewhere (the JVM's launch points it at
    Spark's log: `mqforensics.spark`), and whether it is a new one the caller closes;
    `sys.stderr` itself where it has no file descriptor (a test's capture)."""
    try:
        fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return sys.stderr, False
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    stream = os.fdopen(fd, "w", encoding=encoding, errors="replace", buffering=1)
    return MaskedStream(stream), True  # type: ignore[return-value]


class StatusRenderer:
    """A command's progress on a terminal: the announcement, then one status line redrawn in
    place (``audit james: running check 3 of 17: stuck_mail [00:12]``), erased at the end and
    followed by the summary (none when the command failed: its error line follows)."""

    def __init__(self, label: str, file: IO[str] | None = None) -> None:
        self.label = label
        if file is None:
            self._file, self._own = terminal_stream()
        else:
            self._file, self._own = file, False
        self._bar: Any = None

    def announce(self, text: str) -> None:
        print(text, file=self._file, flush=True)

    def update(self, progress: Progress) -> None:
        if self._bar is None:
            from tqdm import tqdm

            # Cut to the terminal's width as it changes (a terminal that says it has no
            # columns, as some pseudo-terminals do, would get nothing: its line is not cut).
            self._bar = tqdm(total=None, desc=progress.title, file=self._file, leave=False,
                             dynamic_ncols=_has_columns(self._file), mininterval=0.2,
                             bar_format="{desc} [{elapsed}]")  # fmt: skip
        text = progress.title if progress.step else progress.text
        self._bar.set_description_str(text, refresh=False)
        self._bar.refresh()

    def close(self, summary: str, failed: bool = False) -> None:
        try:
            if self._bar is not None:
                self._bar.close()
            if summary and not failed:
                print(summary, file=self._file, flush=True)
        finally:
            if self._own:
                with contextlib.suppress(OSError, ValueError):
                    self._file.close()


def _has_columns(stream: IO[str]) -> bool:
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):
        return False


class LineRenderer:
    """Progress where stderr is no terminal but progress was asked for (``MQF_PROGRESS=1``: a
    scheduler's log): plain lines, one per step as it begins, no bar, no redrawing."""

    def __init__(self, label: str, file: IO[str] | None = None) -> None:
        self.label = label
        self._file = file
        self._last = ""

    def _print(self, text: str) -> None:
        print(text, file=self._file or sys.stderr, flush=True)

    def announce(self, text: str) -> None:
        self._print(text)

    def update(self, progress: Progress) -> None:
        if progress.step and progress.title != self._last:
            self._last = progress.title
            self._print(progress.title)

    def close(self, summary: str, failed: bool = False) -> None:
        if summary and not failed:
            self._print(summary)


class _Shown:
    """What a notebook displays for a widget: the widget, and as text/plain (what a saved or
    exported notebook shows where the widget is not rendered) a readable line, never the
    widget's repr (``HBox(children=(IntProgress(...``)."""

    def __init__(self, widget: Any, text: str) -> None:
        self.widget = widget
        self.text = text

    def _repr_mimebundle_(self, **_: Any) -> dict[str, Any]:
        return {**(self.widget._repr_mimebundle_() or {}), "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


class WidgetRenderer:
    """An ipywidgets progress bar with a label, displayed once and updated in place; at the end
    the bar is hidden, the label keeps a one-line summary, and the output becomes that line as
    text (the notebook as saved or exported shows it, not a widget that is no longer there).

    The widgets are made on the first update with a step or a Spark task: a cell that runs no
    Spark job opens no widget (each widget is a comm channel to the browser)."""

    def __init__(self, label: str) -> None:
        self.text = label
        self.bar: Any = None
        self.label: Any = None
        self.handle: Any = None

    def announce(self, text: str) -> None:
        self.text = mask_secrets(text)
        if self.label is not None:
            self.label.value = self.text

    def _show(self) -> None:
        if self.bar is None:
            import ipywidgets
            from IPython.display import display

            self.bar = ipywidgets.IntProgress(value=0, min=0, max=1, description="Spark")
            self.label = ipywidgets.Label(self.text)
            box = ipywidgets.HBox([self.bar, self.label])
            self.handle = display(_Shown(box, self.text), display_id=True)

    def update(self, progress: Progress) -> None:
        if progress.total <= 0 and not progress.step:
            return
        self._show()
        # A command's bar measures its place among its checks (never Spark's task totals, which
        # grow as stages appear); a block without steps, the Spark tasks of the stages seen.
        if progress.of is not None:
            self.bar.max, self.bar.value = max(progress.of[1], 1), min(*progress.of)
        elif not progress.step:
            self.bar.max = max(progress.total, 1)
            self.bar.value = min(progress.done, progress.total)
        self.label.value = progress.text

    def close(self, summary: str, failed: bool = False) -> None:
        if self.bar is None:  # nothing was shown
            return
        if failed:
            self.bar.bar_style = "danger"
        else:
            self.bar.value = self.bar.max
            self.bar.bar_style = "success"
        self.bar.layout.display = "none"
        if summary:
            self.label.value = summary
        if self.handle is not None:
            # The output becomes its last line, as text: what the saved notebook keeps.
            self.handle.update({"text/plain": self.label.value}, raw=True)


def default_renderer(label: str) -> Renderer | None:
    """The renderer for where we run, or None when progress is not to be shown: a widget in a
    notebook, a status line on a terminal, plain lines when asked for elsewhere."""
    chosen = setting()
    if chosen is False:
        return None
    if in_notebook():
        return WidgetRenderer(label)
    if sys.stderr.isatty():
        return StatusRenderer(label)
    if chosen:
        return LineRenderer(label)
    return None


class SparkWatcher:
    """Feeds a renderer with a command's steps and the progress of the Spark jobs running on a
    session (None until `attach` gives it one: the clock runs meanwhile)."""

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
        self._stepped = False

    # classic Spark: poll the status tracker (once there is a session), else tick the clock
    def _poll(self) -> None:
        # A session stopped under us (or a renderer failing) ends the display, never the job.
        with contextlib.suppress(Exception):
            tracker = None
            while not self._stop.wait(POLL_SECONDS):
                if tracker is None and self.spark is not None and self._handler is None:
                    tracker = self.spark.sparkContext.statusTracker()
                if tracker is not None:
                    self._sample(tracker)
                else:
                    self._tick()

    def _sample(self, tracker: Any) -> None:
        seen = []
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                seen.append((stage_id, info.numCompletedTasks, info.numTasks))
        if seen:
            self._record(seen)
        else:
            self._tick()

    def _tick(self) -> None:
        """No stage running: the clock and the step still move on the display."""
        with self._lock:
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    def step(self, name: str, of: tuple[int, int] | None = None) -> None:
        """The command is now in step `name` (`of`: its place, (3, 17)): shown at once."""
        with self._lock:
            self._stepped = True
            self.progress.step = mask_secrets(name)
            self.progress.of = of
            self.progress.detail = ""
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    # Spark Connect: a progress handler, called with keywords (pyspark.sql.connect.shell.progress)
    def _on_connect_progress(
        self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool
    ) -> None:
        seen = [(s.stage_id, s.num_completed_tasks, s.num_tasks) for s in stages or []]
        if seen:
            self._record(seen)

    def _record(self, seen: list[tuple[int, int, int]]) -> None:
        """Take in (stage id, completed, total) of the stages just seen and show the sum (Spark's
        job descriptions, ``toArrow`` or ``localCheckpoint``, say nothing to a reader)."""
        with self._lock:
            for stage_id, completed, total in seen:
                self._stages[stage_id] = (completed, total)
            self.progress.done = sum(c for c, _ in self._stages.values())
            self.progress.total = sum(t for _, t in self._stages.values())
            self.progress.stages = len(self._stages)
            self.progress.elapsed = time.monotonic() - self.started
            self.renderer.update(self.progress)

    def attach(self, spark: Any) -> None:
        """Follow the jobs of `spark` from now on (the block was opened before it started)."""
        if spark is None or spark is self.spark:
            return
        self.spark = spark
        if hasattr(spark, "registerProgressHandler") and _is_connect(spark):
            self._handler = self._on_connect_progress
            spark.registerProgressHandler(self._handler)

    def start(self) -> SparkWatcher:
        """The display's clock started; the session's jobs followed when there is one."""
        spark, self.spark = self.spark, None
        self.attach(spark)
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
                if self.spark is not None and self._handler is None:
                    with contextlib.suppress(Exception):
                        self._sample(self.spark.sparkContext.statusTracker())
            if self._handler is not None:
                with contextlib.suppress(Exception):
                    self.spark.removeProgressHandler(self._handler)
            with self._lock:
                if not failed:
                    self.progress.done = self.progress.total
                    if self.progress.of is not None:
                        self.progress.of = (self.progress.of[1], self.progress.of[1])
                self.progress.elapsed = time.monotonic() - self.started
            if self.progress.total or self._stepped:
                self.renderer.update(self.progress)
        finally:
            self.renderer.close(self.summary(failed), failed)

    def summary(self, failed: bool = False) -> str:
        """One line for the end of the block: a command's (with steps) time, or the Spark
        tasks, stages and seconds of a block without steps ("" when nothing was shown)."""
        p = self.progress
        if self._stepped:
            if failed:
                return f"{p.title}: stopped after {p.elapsed:.1f}s"
            return f"{p.label}: done in {p.elapsed:.1f}s"
        if not p.total:
            return ""
        end = " (stopped)" if failed else ""
        done = f"{p.done}/{p.total} Spark tasks" if failed else plural(p.total, "Spark task")
        return f"{p.label}: {done} in {plural(p.stages, 'stage')}, {p.elapsed:.1f}s{end}"


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextlib.contextmanager
def spark_progress(
    spark: Any, label: str, *, about: str = "", renderer: Renderer | None = None
) -> Iterator[SparkWatcher | None]:
    """Show the progress of the block: `about` (what the command does: its system, inputs,
    output) at once, then its steps (`step`) and the Spark jobs run on `spark` (None: a
    session the block starts, given with `attach`). Nothing is shown when progress is off or
    there is nowhere to show it. The watcher always stops; exceptions propagate."""
    chosen = renderer or default_renderer(label)
    if chosen is None:
        yield None
        return
    if about:
        chosen.announce(mask_secrets(about))
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


def step(name: str, of: tuple[int, int] | None = None) -> None:
    """Say which step the command is in, in the user's words (``reading the store``, with `of`
    ``running check 3 of 17: stuck_mail`` and (3, 17)): the innermost `spark_progress` block's
    display names it; nothing when no progress is shown."""
    if _WATCHERS:
        _WATCHERS[-1].step(name, of)


def attach(spark: Any) -> None:
    """The innermost `spark_progress` block follows the jobs of `spark` (a session started
    inside the block); nothing when no progress is shown."""
    if _WATCHERS:
        _WATCHERS[-1].attach(spark)


# The watcher of the notebook cell running now. One for every registration of
# `enable_notebook_progress`: a cell that enables it again (a setup cell run a second time, or
# the next notebook run in the same kernel) replaces the callbacks while the watcher the old
# ones started for that very cell runs, and the new callbacks stop it when the cell ends.
_CELL_WATCHER: dict[str, SparkWatcher | None] = {"watcher": None}


def _stop_cell_watcher(failed: bool = False) -> None:
    watcher, _CELL_WATCHER["watcher"] = _CELL_WATCHER["watcher"], None
    if watcher is not None:
        watcher.stop(failed=failed)


def enable_notebook_progress(spark: Any) -> None:
    """In a notebook, show a progress bar for the Spark jobs of every cell run from now on
    (once per kernel however often it is called: the last call's session is followed)."""
    if setting() is False or not in_notebook():
        return
    from IPython import get_ipython

    shell = get_ipython()

    def before(*_args: Any) -> None:
        _stop_cell_watcher()
        _CELL_WATCHER["watcher"] = SparkWatcher(spark, "Spark", WidgetRenderer("Spark")).start()

    def after(result: Any = None) -> None:
        _stop_cell_watcher(failed=not getattr(result, "success", True))

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
