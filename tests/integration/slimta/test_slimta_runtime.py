"""The separate python-slimta 5.0.5 runtime: real slimta there, and none in the product's venv."""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mqforensics.services.slimta_runtime import (
    MODULES,
    SLIMTA_VERSION,
    SlimtaScriptFailed,
    run_slimta,
)

pytestmark = pytest.mark.integration

PROBE = f"""\
import json, os, sys
import {", ".join(MODULES)}
from importlib.metadata import version
print(json.dumps({{"version": version("python-slimta"), "prefix": sys.prefix,
                  "cwd": os.listdir("."), "args": sys.argv[1:]}}))
"""


def test_the_runtime_imports_slimta_5_0_5(slimta_python, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    result = run_slimta(script, "one", tmp_path / "two")
    seen = json.loads(result.stdout)
    assert seen["version"] == SLIMTA_VERSION
    assert seen["prefix"] == str(slimta_python.parent.parent)
    assert seen["cwd"] == []  # an empty working directory
    assert seen["args"] == ["one", str(tmp_path / "two")]


def test_the_product_venv_has_no_slimta(slimta_python):
    """The product reads slimta's queues without slimta: it is not importable here."""
    assert importlib.util.find_spec("slimta") is None
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("python-slimta")
    assert Path(sys.prefix).resolve() != slimta_python.parent.parent.resolve()


def test_a_failing_script_is_a_clear_error(slimta_python, tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('about to fail', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(SlimtaScriptFailed) as caught:
        run_slimta(script)
    assert "fails.py exited with status 3" in caught.value.message
    assert "about to fail" in caught.value.message
