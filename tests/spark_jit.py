"""The JIT of the test suite's Spark driver JVMs (this process's, the CLI subprocesses' and the
notebook kernels' under ``pytest --nbmake``, which inherit the environment), and of the executor
JVMs their applications start on the harness's standalone cluster.

Each runs many small jobs over tiny frames and lives minutes at most: C2 compilations cost more
CPU on two cores than the code they optimise saves there (tests/unit/james/test_james_checks.py
ran 28% faster with C1 alone). Results do not depend on the JIT. A ``PYSPARK_SUBMIT_ARGS``
already set (bench/ sets its own, and measures with the default JIT) is left alone.
"""

from __future__ import annotations

import os

from mqforensics.services.process import QUICK_JIT

# Spark options for both; an executor is only started by a cluster master (tests/integration/
# test_spark_standalone.py).
QUICK_JIT_CONFS = " ".join(
    f"--conf spark.{jvm}.defaultJavaOptions={QUICK_JIT}" for jvm in ("driver", "executor")
)
QUICK_JIT_SUBMIT_ARGS = f"{QUICK_JIT_CONFS} pyspark-shell"


def use_quick_jit() -> None:
    """Start Spark driver and executor JVMs from here on with C1 alone, unless Spark options are
    set."""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", QUICK_JIT_SUBMIT_ARGS)
