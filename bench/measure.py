"""One measurement = one fresh process: its wall time, its peak memory, what it produced.

Every measured subject (our code or a baseline) runs in its own Python process started by
`run_subject`, so one subject's caches, JIT warm-up and memory high-water mark never leak into
another's. The child prints one JSON line (`report`) that the parent reads back.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = "MQF-BENCH-RESULT "


@dataclass
class Measurement:
    benchmark: str  # e.g. "james_audit"
    subject: str  # e.g. "mqforensics audit james", "bare Spark scan", "pandas"
    role: str  # "ours" or "baseline"
    size: str  # e.g. "1M entries"
    seconds: float
    python_peak_rss: int  # bytes, VmHWM of the measuring process
    jvm_peak_rss: int | None = None  # bytes, VmHWM of the Spark JVM when one ran
    output: dict[str, Any] = field(default_factory=dict)  # counts that prove the work was done
    command: str = ""


def _jvm_pid() -> int | None:
    try:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        return int(proc.pid) if proc is not None else None
    except Exception:
        return None


def peak_rss_of(pid: int) -> int | None:
    """The high-water mark of `pid`'s resident memory (Linux VmHWM), in bytes."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def report(output: dict[str, Any], seconds: float, *, jvm_pid: int | None = None) -> None:
    """Called by a child: print the result line the parent parses."""
    pid = jvm_pid if jvm_pid is not None else _jvm_pid()
    line = {
        "seconds": round(seconds, 3),
        # VmHWM, not ru_maxrss: Linux carries a parent's high-water mark into ru_maxrss of a
        # forked-then-exec'd child, so a bench runner's own size would show in every subject.
        "python_peak_rss": peak_rss_of(os.getpid())
        or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak_rss": peak_rss_of(pid) if pid else None,
        "output": output,
    }
    print(MARKER + json.dumps(line), flush=True)


def timed(work: Callable[[], dict[str, Any]]) -> None:
    """Run `work` (returning its output counts), time it, and `report`."""
    started = time.perf_counter()
    output = work()
    report(output, time.perf_counter() - started)


class SubjectFailed(RuntimeError):
    pass


def median_of(runs: list[Measurement]) -> Measurement:
    """One measurement of repeated runs of a subject: the median seconds (each run's in
    ``output["seconds_each"]``), the highest peaks, the first run's other output."""
    if not runs:
        raise ValueError("no runs to summarise")
    seconds = sorted(r.seconds for r in runs)
    middle = len(seconds) // 2
    median = seconds[middle] if len(seconds) % 2 else (seconds[middle - 1] + seconds[middle]) / 2
    jvm = [r.jvm_peak_rss for r in runs if r.jvm_peak_rss is not None]
    first = runs[0]
    output = dict(first.output)
    if len(runs) > 1:
        output["seconds_each"] = [r.seconds for r in runs]
    return Measurement(
        benchmark=first.benchmark,
        subject=first.subject,
        role=first.role,
        size=first.size,
        seconds=round(median, 3),
        python_peak_rss=max(r.python_peak_rss for r in runs),
        jvm_peak_rss=max(jvm) if jvm else None,
        output=output,
        command=first.command,
    )


def run_subject(
    benchmark: str,
    subject: str,
    role: str,
    size: str,
    argv: list[str],
    *,
    timeout: float = 7200,
    env: dict[str, str] | None = None,
    tree: Path = ROOT,
) -> Measurement:
    """Run `argv` (a Python module and its arguments) in a fresh interpreter and collect its
    result line; `env` adds to the environment (e.g. the Spark driver's memory); `tree` is the
    checkout whose code runs (another revision's worktree: `bench.versus`)."""
    environment = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "MQF_PROGRESS": "0",
        "PYTHONPATH": str(tree),  # the tree's own package, ahead of the editable install
        **(env or {}),
    }
    command = [sys.executable, *argv]
    done = subprocess.run(
        command, cwd=tree, env=environment, capture_output=True, text=True, timeout=timeout
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stderr or done.stdout).splitlines()[-15:])
        raise SubjectFailed(f"{benchmark}/{subject} exited {done.returncode}:\n{tail}")
    result = json.loads(lines[-1][len(MARKER) :])
    shown = " ".join(a if " " not in a else repr(a) for a in ["python", *argv])
    return Measurement(
        benchmark=benchmark,
        subject=subject,
        role=role,
        size=size,
        seconds=result["seconds"],
        python_peak_rss=result["python_peak_rss"],
        jvm_peak_rss=result["jvm_peak_rss"],
        output=result["output"],
        command=shown,
    )


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    import pyspark

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else "unknown",
        "pyspark": pyspark.__version__,
        "kernel": platform.release(),
    }


def as_dict(m: Measurement) -> dict[str, Any]:
    return asdict(m)


def command_line(
    module: str, doc: str | None, subjects: Iterable[str], data: str
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command line of a benchmark module: ``measure SUBJECT`` (one subject, run in a fresh
    process by `run_subject`) and ``run [--workdir DIR]`` (the data generated or reused, every
    subject measured); (the parser, ``measure``'s and ``run``'s, for each module's own options).
    `data` says what ``run`` generates or reuses."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{module}", description=doc)
    commands = parser.add_subparsers(dest="command", required=True)
    child = commands.add_parser("measure", help="one subject (run in a fresh process)")
    child.add_argument("subject", choices=sorted(subjects))
    parent = commands.add_parser("run", help=f"generate/reuse {data} and measure all")
    parent.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    return parser, child, parent


def print_all(results: Iterable[Measurement]) -> int:
    """Each measurement of a ``run`` as one JSON line (what `bench.run` reads back); 0."""
    for m in results:
        print(json.dumps(as_dict(m)))
    return 0
