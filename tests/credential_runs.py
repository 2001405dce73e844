"""Run mqforensics commands and notebook audits in one process (one Spark session), each with
its own environment, recording what each printed: ``python tests/credential_runs.py STEPS OUT``
(`run_in_one_spark` runs it with Spark event logs on).

STEPS is a JSON list of ``{"argv": [...]}`` (`mqforensics.cli.main`) or ``{"notebook":
"james", "out": DIR}`` (a notebook's audit: ``mqforensics.audit(system,
**mqforensics.notebook_keywords(system, out=DIR))``), each with an optional ``"env"``
set for that step only; OUT gets a JSON list of ``{"rc", "out", "err", "error"}``. The tests
that plant a secret in credential variables run this in a subprocess whose Spark writes event
logs (``PYSPARK_SUBMIT_ARGS``), then search everything it printed and wrote for the secret.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path


def run_step(step: dict) -> dict:
    saved = dict(os.environ)
    os.environ.update(step.get("env", {}))
    out, err = io.StringIO(), io.StringIO()
    result: dict = {"rc": None, "error": None}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if "argv" in step:
                from mqforensics.cli import main

                result["rc"] = main(step["argv"])
            else:
                import mqforensics

                system = step["notebook"]
                try:
                    keywords = mqforensics.notebook_keywords(system, out=Path(step["out"]))
                    audit = mqforensics.audit(system, **keywords)
                    print(audit.summary())
                except Exception as exc:  # what the notebook cell would show
                    result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        os.environ.clear()
        os.environ.update(saved)
    result["out"], result["err"] = out.getvalue(), err.getvalue()
    return result


def main(steps_file: str, out_file: str) -> None:
    steps = json.loads(Path(steps_file).read_text())
    results = [run_step(step) for step in steps]
    Path(out_file).write_text(json.dumps(results, indent=1))
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()  # completes the event log


def run_in_one_spark(steps: list[dict], work: Path, env: dict[str, str]) -> tuple[list, str]:
    """Run `steps` in a subprocess with `env` whose Spark writes uncompressed event logs to
    ``work/eventlog``; (the steps' results, everything the subprocess itself printed)."""
    from tests.spark_options import TEST_SPARK_CONFS  # here: this file also runs as a script

    events = work / "eventlog"
    events.mkdir(parents=True)
    (work / "steps.json").write_text(json.dumps(steps))
    submit = (
        f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events.as_uri()} "
        "--conf spark.eventLog.compress=false --conf spark.ui.enabled=false "
        # The options of every Spark driver of the suite (tests/spark_options.py).
        f"{TEST_SPARK_CONFS} pyspark-shell"
    )
    full_env = {**os.environ, **env, "PYSPARK_SUBMIT_ARGS": submit,
                "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    for name in ("SPARK_REMOTE", "MQF_SPARK_MASTER"):
        full_env.pop(name, None)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(work / "steps.json"),
         str(work / "results.json")],
        env=full_env, capture_output=True, text=True, timeout=1800, cwd=work,
    )  # fmt: skip
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-3000:]
    return json.loads((work / "results.json").read_text()), printed


def files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


def assert_nowhere(secret: str, texts: list[str], directory: Path | None = None) -> None:
    """`secret` is in none of `texts` and in no file under `directory` (outputs, plans,
    journals, reports, Spark event logs)."""
    for text in texts:
        assert secret not in text
    for path in files_under(directory) if directory else []:
        assert secret.encode() not in path.read_bytes(), path


if __name__ == "__main__":
    main(*sys.argv[1:3])
