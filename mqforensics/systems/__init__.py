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
    from pathlib import Path

    from mqforensics.retention.policy import Policy, RuleKind
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


def rule_kinds() -> list[RuleKind]:
    """The rule kinds every registered system plans (a policy is read against them)."""
    return [kind for spec in all_systems() for kind in spec.rule_kinds]


def load_policy(path: str | Path) -> Policy:
    """The policy file `path`, read against every registered system's rule kinds."""
    from mqforensics.retention.policy import load_policy as load

    return load(path, rule_kinds())


def data_sources() -> list[type]:
    """Every registered system's Spark Python data sources (the session registers them)."""
    found: list[type] = []
    for spec in all_systems():
        if spec.data_sources is not None:
            found.extend(spec.data_sources())
    return found
