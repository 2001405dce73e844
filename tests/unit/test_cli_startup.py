"""What the command line loads before it knows the command: no data library.

Every ``mqforensics`` run builds the whole parser first. Importing pandas there (as the report
module once did) cost each command about a second, two or three on a busy machine: a purge
that is resumed, a cron job's ``approve``, each ``--help``. The libraries are loaded by the
commands that use them.
"""

import subprocess
import sys

HEAVY = ("pandas", "numpy", "pyarrow", "pyspark", "great_expectations", "matplotlib")

PROBE = """
import sys
from mqforensics.cli import build_parser
build_parser().parse_args(["approve", "plan", "--by", "ops"])
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_building_the_parser_imports_no_data_library():
    # A fresh interpreter: this test process has them all loaded already.
    loaded = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "mqforensics" in loaded
    assert [name for name in HEAVY if name in loaded] == []
