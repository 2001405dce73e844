"""The session's real Postfix, started once like the servers of ``tests/conftest.py``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"


def _root_conftest(config: pytest.Config) -> ModuleType:
    """``tests/conftest.py`` as pytest loaded it. ``tests/`` has no ``__init__.py``, so pytest
    imports it as the module ``conftest``; ``import tests.conftest`` would load a second copy,
    whose own harness (a second session root) the session's end never stops."""
    for plugin in config.pluginmanager.get_plugins():
        where = getattr(plugin, "__file__", None)
        if isinstance(plugin, ModuleType) and where and Path(where).resolve() == ROOT_CONFTEST:
            return plugin
    raise RuntimeError(f"pytest has not loaded {ROOT_CONFTEST}")


@pytest.fixture(scope="session")
def postfix(pytestconfig: pytest.Config) -> dict:
    """A real Postfix 3.7 (Debian) on 127.0.0.1 whose mail all defers (relayhost on a closed
    port): host, port, config_directory, queue_directory, maillog (mqforensics.services.postfix
    submits, lists and holds with them)."""
    return _root_conftest(pytestconfig)._server("postfix")
