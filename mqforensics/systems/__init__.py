"""The system registry: one line per mail system; everything specific lives in its package.

Each ``mqforensics/systems/<name>/spec.py`` defines ``SPEC``, a `mqforensics.spec.System`. The
shared layers find systems here and nowhere else; no module outside ``systems/<name>/`` imports
``mqforensics.systems.<name>`` (tests/unit/test_architecture.py walks the imports). A test or a
plugin may `register` a system of its own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mqforensics.errors import ConfigError

if TYPE_CHECKING:
    from mqforensics.spec import Check, System

SYSTEMS: dict[str, str] = {
    "james": "mqforensics.systems.james.spec",
    "logqueue": "mqforensics.systems.logqueue.spec",
    "cyrus": "mqforensics.systems.cyrus.spec",
    "slimta": "mqforensics.systems.slimta.spec",
    "postfix": "mqforensics.systems.postfix.spec",
}

_loaded: dict[str, System] = {}


def register(spec: System) -> None:
    """Add (or replace) a system at run time: what a test's own system, or a plugin, uses."""
    _loaded[spec.name] = spec
    SYSTEMS.setdefault(spec.name, "")


def unregister(name: str) -> None:
    _loaded.pop(name, None)
    if not SYSTEMS.get(name):
        SYSTEMS.pop(name, None)


def names() -> list[str]:
    return list(SYSTEMS)


def get(name: str) -> System:
    """The spec of system `name`; a ConfigError naming the known ones otherwise."""
    if name not in _loaded:
        module = SYSTEMS.get(name)
        if not module:
            raise ConfigError(f"unknown system {name!r} (known: {', '.join(SYSTEMS)})")
        _loaded[name] = importlib.import_module(module).SPEC
    return _loaded[name]


def all_systems() -> list[System]:
    return [get(name) for name in SYSTEMS]


def find_check(system: str, name: str) -> Check | None:
    """The check `name` of `system`, or None (a findings file from another version)."""
    try:
        return get(system).check(name)
    except (ConfigError, KeyError):
        return None
