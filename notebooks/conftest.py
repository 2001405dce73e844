"""`pytest --nbmake notebooks -n 2`, and `make test`, which runs the validation notebooks with
the tests (`pytest tests notebooks/validation --nbmake -n 2`): each xdist worker writes its
notebooks' findings and plans under its own ``out/notebooks-<worker>/`` (``MQF_NOTEBOOK_OUT``,
which the kernels inherit), so two notebooks auditing the same system at once never share a
directory. Run without workers, or with ``MQF_NOTEBOOK_OUT`` set, nothing changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.spark_options import use_test_spark_options


def pytest_configure(config: pytest.Config) -> None:
    use_test_spark_options()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and not os.environ.get("MQF_NOTEBOOK_OUT"):
        out = Path(__file__).resolve().parent.parent / "out" / f"notebooks-{worker}"
        os.environ["MQF_NOTEBOOK_OUT"] = str(out)
