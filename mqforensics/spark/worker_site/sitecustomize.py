"""Run at start-up by every Python process a local Spark driver JVM starts, through the
``PYTHONPATH`` that JVM inherits (`mqforensics.spark.daemon.worker_site_on_path`): Spark's
archived copies of PySpark leave the import path when the same PySpark is installed
(`mqforensics.spark.daemon.drop_spark_archives`, loaded from its file: importing the package
here would import PySpark from the archives). Then the ``sitecustomize`` this one shadows, if
the path holds another, runs as it would have.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types


def _load(name: str, path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    daemon = _load("_mqforensics_worker_path", os.path.join(os.path.dirname(here), "daemon.py"))
    daemon.drop_spark_archives()
    rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    shadowed = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if shadowed is not None and shadowed.loader is not None:
        shadowed.loader.exec_module(importlib.util.module_from_spec(shadowed))


_start()
