"""Alert rules as data: a TOML file of ``[[rule]]`` tables over the history's series.

A series is one figure of one store followed over its runs, in the order of the instants they
judged (``as_of``, then ``run_at``): ``system``, ``scope``, ``metric``, ``queue``, ``check``,
``item`` (`schema.SERIES`). A rule picks series by ``metric`` and the optional patterns
``system``, ``scope``, ``queue``, ``check`` and ``item`` (shell-style: ``*`` any text, ``?``
one character; default ``*``), and says when one of them alerts (``kind``):

- ``threshold``: the value is above ``above`` (or below ``below``);
- ``change``: over the last ``runs`` runs the value changed by at least ``absolute`` (in the
  metric's unit) or ``relative`` (a fraction of the earlier value: 1.0 is doubled; a change from
  0 has no relative size, and never alerts on ``relative``), ``direction`` ``up`` (default),
  ``down`` or ``either``;
- ``unchanged``: the value was the same in each of the last ``runs`` runs (a browseStart that
  does not move);
- ``growing``: the value rose in each of the last ``runs`` runs (``runs`` + 1 values, each above
  the one before);
- ``new``: the value is above 0 and was never above 0 in an earlier run of the store, which has
  had at least ``runs`` earlier runs (default 1): a check that never found anything before;
- ``outlier``: the value is more than ``sigmas`` (default 3) sample standard deviations from the
  mean of the ``runs`` runs before it (at least 3); when those were all equal, any other value
  is one.

Each rule has an ``id`` (unique), a ``severity`` (``warning``, default, or ``error``) and a
``why``: what it means for the mail and what to look at. `load_rules` refuses a bad file in one
line naming the file, the rule and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError

DEFAULT_RULES = Path(__file__).resolve().parent / "default_rules.toml"
KINDS = ("threshold", "change", "unchanged", "growing", "new", "outlier")
SEVERITIES = ("warning", "error")
DIRECTIONS = ("up", "down", "either")
PATTERNS = ("system", "scope", "queue", "check", "item")
_KEYS = {
    "id", "kind", "metric", "severity", "why", "runs", "above", "below", "absolute",
    "relative", "direction", "sigmas", *PATTERNS,
}  # fmt: skip
_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True)
class Rule:
    """One alert rule (the module's docstring says what each field means)."""

    id: str
    kind: str
    metric: str
    why: str
    severity: str = "warning"
    runs: int = 1
    above: float | None = None
    below: float | None = None
    absolute: float | None = None
    relative: float | None = None
    direction: str = "up"
    sigmas: float = 3.0
    system: str = "*"
    scope: str = "*"
    queue: str = "*"
    check: str = "*"
    item: str = "*"

    def describe(self, unit: str = "count") -> str:
        """What the rule alerts on, in words (``grew in each of the last 5 runs``), its
        numbers in `unit` (`metrics.UNITS`)."""
        from mqforensics.metrics import value_text

        def shown(value: float) -> str:
            return value_text(value, "count" if unit in ("instant", "success") else unit)

        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.kind == "threshold":
            bounds = [f"above {shown(self.above)}" if self.above is not None else "",
                      f"below {shown(self.below)}" if self.below is not None else ""]  # fmt: skip
            return " or ".join(b for b in bounds if b)
        if self.kind == "change":
            by = [shown(self.absolute) if self.absolute is not None else "",
                  f"{self.relative:.0%}" if self.relative is not None else ""]  # fmt: skip
            way = {"up": "rose", "down": "fell", "either": "changed"}[self.direction]
            return f"{way} by {' or '.join(b for b in by if b)} over the last {runs}"
        if self.kind == "unchanged":
            return f"unchanged in each of the last {runs}"
        if self.kind == "growing":
            return f"grew in each of the last {runs}"
        if self.kind == "new":
            return "above 0 for the first time"
        return f"more than {self.sigmas:g} standard deviations from the {runs} before"


def load_rules(path: str | Path | None = None) -> list[Rule]:
    """The rules of a TOML file (default: the bundled `DEFAULT_RULES`)."""
    path = Path(path) if path is not None else DEFAULT_RULES
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"rules {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"rules {path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"rules {path}: not TOML ({exc})") from None
    unknown = set(document) - {"rule"}
    if unknown:
        raise ConfigError(f"rules {path}: unknown table {sorted(unknown)[0]!r} (rules: [[rule]])")
    tables = document.get("rule", [])
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"rules {path}: no [[rule]]")
    rules: list[Rule] = []
    for number, table in enumerate(tables, 1):
        rule = _rule(table, f"rules {path}, rule {number}")
        if any(r.id == rule.id for r in rules):
            raise ConfigError(f"rules {path}, rule {number}: id {rule.id!r} is given twice")
        rules.append(rule)
    return rules


def _rule(table: dict[str, Any], where: str) -> Rule:
    rule_id = table.get("id")
    if isinstance(rule_id, str):
        where = f"{where} ({rule_id})"
    unknown = set(table) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    for key in ("id", "kind", "metric", "why"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise ConfigError(f"{where}: {key} is required (text)")
    if not _ID.fullmatch(table["id"]):
        raise ConfigError(f"{where}: id must be lower-case letters, digits, - and _")
    _choice(table, "kind", KINDS, where)
    _choice(table, "severity", SEVERITIES, where)
    _choice(table, "direction", DIRECTIONS, where)
    for key in PATTERNS:
        if key in table and (not isinstance(table[key], str) or not table[key]):
            raise ConfigError(f"{where}: {key} must be a pattern (text)")
    numbers = {key: _number(table, key, where) for key in
               ("above", "below", "absolute", "relative", "sigmas")}  # fmt: skip
    kind = table["kind"]
    runs = table.get("runs", 3 if kind == "outlier" else 1)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ConfigError(f"{where}: runs must be a whole number of at least 1")
    least = {"unchanged": 2, "outlier": 3}.get(kind, 1)
    if runs < least:
        raise ConfigError(f"{where}: a {kind} rule needs runs of at least {least}")
    wants = {
        "threshold": ("above", "below"), "change": ("absolute", "relative"),
    }.get(kind, ())  # fmt: skip
    if wants and all(numbers[key] is None for key in wants):
        raise ConfigError(f"{where}: a {kind} rule needs {' or '.join(wants)}")
    extra = {"above", "below", "absolute", "relative", "sigmas", "direction", "runs"} - {
        *wants, "runs", *({"direction"} if kind == "change" else ()),
        *({"sigmas"} if kind == "outlier" else ()),
    }  # fmt: skip
    if kind == "threshold":
        extra.add("runs")
    given = sorted(extra & set(table))
    if given:
        raise ConfigError(f"{where}: {given[0]} has no meaning in a {kind} rule")
    for key in ("relative", "sigmas"):
        number = numbers[key]
        if number is not None and number <= 0:
            raise ConfigError(f"{where}: {key} must be above 0")
    kept: dict[str, Any] = {k: v for k, v in numbers.items() if v is not None}
    return Rule(
        id=table["id"], kind=kind, metric=table["metric"], why=" ".join(table["why"].split()),
        severity=table.get("severity", "warning"), runs=runs,
        direction=table.get("direction", "up"), **kept,
        **{key: table[key] for key in PATTERNS if key in table},
    )  # fmt: skip


def _choice(table: dict[str, Any], key: str, allowed: tuple[str, ...], where: str) -> None:
    if key in table and table[key] not in allowed:
        raise ConfigError(f"{where}: {key} {table[key]!r} is not one of {', '.join(allowed)}")


def _number(table: dict[str, Any], key: str, where: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ConfigError(f"{where}: {key} must be a number")
    return float(value)


def pattern_regex(pattern: str) -> str:
    """A shell-style pattern (``*``, ``?``) as an anchored Java regular expression."""
    parts = []
    for char in pattern:
        parts.append({"*": ".*", "?": "."}.get(char) or re.escape(char))
    return "^" + "".join(parts) + "$"
