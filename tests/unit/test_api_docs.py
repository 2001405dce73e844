"""docs/api.md runs as written: every Python block, in order, in one namespace, from the
checkout (the examples name the bundled samples by their paths)."""

from __future__ import annotations

import os
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_example_of_the_api_page_runs(spark, tmp_path, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    here = os.getcwd()
    os.chdir(DOC.parents[1])
    try:
        namespace: dict[str, object] = {}
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        os.chdir(here)
    shown = capsys.readouterr().out
    assert "postfix takes no option 'queue_dirs'" in shown
    assert "nan" not in shown.split() and "None" not in shown.split()
