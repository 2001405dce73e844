"""A purge talks to the stores only: the James and slimta executors (each `mqforensics purge`
process, SIGKILLed and resumed many times by the purge tests) import no pyspark."""

from __future__ import annotations

import subprocess
import sys


def test_the_purge_executors_import_no_pyspark() -> None:
    code = (
        "import sys\n"
        "import mqforensics.cli, mqforensics.purge.engine\n"
        "import mqforensics.systems.james.purge, mqforensics.systems.slimta.purge\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]", result.stdout
