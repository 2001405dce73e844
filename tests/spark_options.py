"""The Spark options of the test suite's driver JVMs (this process's, the CLI subprocesses' and
the notebook kernels' under ``pytest --nbmake``, which inherit the environment), and of the
executor JVMs their applications start on the harness's standalone cluster.

Each runs many small jobs over tiny frames and lives minutes at most, on two cores:

- **C1 alone.** C2 compilations cost more CPU than the code they optimise saves there
  (tests/unit/james/test_james_checks.py ran 28% faster).
- **Interpreted SQL.** Spark compiles generated Java (Janino) for every new plan; on frames of a
  few hundred rows that compiling is most of a query's work. The suite evaluates expressions
  and operators interpreted (``spark.sql.codegen.factoryMode=NO_CODEGEN``, whole-stage codegen
  off): the James checks' tests took 19% less time. Spark's interpreted evaluation computes the
  same results (it is also Spark's fallback when generated code fails to compile); the
  generated code is still run by ``make demo`` and by ``bench/`` (smoke-tested by
  tests/integration/test_bench_smoke.py), which set their own options.

Results do not depend on either. A ``PYSPARK_SUBMIT_ARGS`` already set (bench/ sets its own) is
left alone.
"""

from __future__ import annotations

import os

from mqforensics.services.process import QUICK_JIT

# Options for both; an executor is only started by a cluster master (tests/integration/
# test_spark_standalone.py).
QUICK_JIT_CONFS = " ".join(
    f"--conf spark.{jvm}.defaultJavaOptions={QUICK_JIT}" for jvm in ("driver", "executor")
)
INTERPRETED_SQL_CONFS = (
    "--conf spark.sql.codegen.wholeStage=false --conf spark.sql.codegen.factoryMode=NO_CODEGEN"
)
TEST_SPARK_CONFS = f"{QUICK_JIT_CONFS} {INTERPRETED_SQL_CONFS}"
TEST_SUBMIT_ARGS = f"{TEST_SPARK_CONFS} pyspark-shell"


def use_test_spark_options() -> None:
    """Start Spark driver and executor JVMs from here on with the suite's options, unless Spark
    options are set."""
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", TEST_SUBMIT_ARGS)
