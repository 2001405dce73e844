"""The JIT of the test suite's Spark driver JVMs (this process's, the CLI subprocesses' and the
notebook kernels' under ``pytest --nbmake``, which inherit the environment).

Each runs many small jobs over tiny frames and lives minutes at most: C2 compilations cost more
CPU on two cores than the code they optimise saves there (tests/unit/james/test_james_checks.py
ran 28% faster with C1 alone). Results do not depend on the JIT. A ``PYSPARK_SUBMIT_ARGS``
already set (bench/ sets its own, and measures with the default JIT) is left alone.
"""

from __future__ import annotations

import os

QUICK_JIT_OPTION = "-XX:TieredStopAtLevel=1"
QUICK_JIT_SUBMIT_ARGS = f"--conf spark.driver.defaultJavaOptions={QUICK_JIT_OPTION} pyspark-shell"


def use_quick_jit() -> None:
    """Start Spark driver JVMs from here on with C1 alone, unless Spark options are set."""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", QUICK_JIT_SUBMIT_ARGS)
