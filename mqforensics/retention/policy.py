"""Retention policy files: the only place a plan's *why* comes from.

A policy is validated strictly when it is loaded, because a typo that silently widened or
narrowed a rule (an unknown key ignored, a misspelt kind, a missing ``older_than``) would only be
noticed after data was deleted. Every error names the file and the rule. Plain addresses of
erasure rules are hashed here and kept nowhere else, so no plan, report or error message can
repeat them: errors say ``addresses[2]``, never the address.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mqforensics.addresses import address_forms
from mqforensics.errors import ConfigError, InputError
from mqforensics.privacy import pseudonymize_text
from mqforensics.units import duration_text, parse_duration

# The one rule kind every system plans: its subjects are parsed here (and hashed at once).
ERASE_SUBJECT = "erase_subject"
DEFAULT_TOMBSTONE_BUDGET = 100

_TOP_KEYS = ("version", "tombstone_budget_per_partition", "rules")
_COMMON_RULE_KEYS = ("id", "kind", "legal_basis", "systems", "queues")
_ERASE_KEYS = ("addresses", "address_sha256", "search")
# How deep an erase_subject rule searches content (`Rule.search`).
SEARCH_HEADERS, SEARCH_FULL = "headers", "full"


@dataclass(frozen=True)
class RuleKind:
    """A policy rule kind a system plans: the keys it takes beyond the common ones, whether
    ``older_than`` is required, and whether its objects belong to no queue (`queueless`: a
    rule of it restricted to some ``queues`` still selects them, as orphaned blobs are by
    definition referenced by no queue; any other rule so restricted never does)."""

    name: str
    keys: tuple[str, ...] = ()
    needs_older_than: bool = False
    queueless: bool = False


def merged_rule_kinds(kinds: Iterable[RuleKind]) -> dict[str, RuleKind]:
    """Every rule kind a policy may use, by name: `kinds` (every system's, which the caller
    names) and the shared ``erase_subject``.

    Keys that only mean something for one kind are refused on the others: an ``older_than`` on
    an erasure or ``addresses`` on a consumed_mail rule is a misunderstanding, not something to
    ignore. A kind two systems share takes the keys of both, and needs ``older_than`` or is
    queueless when one of them says so.
    """
    merged = {ERASE_SUBJECT: RuleKind(ERASE_SUBJECT, _ERASE_KEYS)}
    for kind in kinds:
        known = merged.get(kind.name, RuleKind(kind.name))
        merged[kind.name] = RuleKind(
            kind.name,
            tuple(dict.fromkeys((*known.keys, *kind.keys))),
            known.needs_older_than or kind.needs_older_than,
            known.queueless or kind.queueless,
        )
    return merged


_ID = re.compile(r"[A-Za-z0-9._-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Rule:
    """One rule; `subjects` holds sha256 hex of each lower-cased trimmed address (one per form
    of its domain, `addresses.address_forms`), never an address."""

    id: str
    kind: str
    legal_basis: str
    older_than: dt.timedelta | None = None
    systems: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    # erase_subject: "headers" (envelopes and message headers) or "full" (also decoded bodies
    # and attachments).
    search: str = SEARCH_HEADERS
    references_complete: bool = False
    # Its kind's objects belong to no queue (`RuleKind.queueless`).
    queueless: bool = False

    def applies_to_system(self, system: str) -> bool:
        return not self.systems or system in self.systems

    def applies_to(self, system: str, queue: str | None = None) -> bool:
        """Whether the rule selects objects of `queue` (None: objects of no queue, e.g. blobs).

        A rule restricted to some queues cannot vouch for an object no queue owns, except one
        of a `queueless` kind, whose objects are by definition referenced by no queue.
        """
        if not self.applies_to_system(system):
            return False
        if queue is None:
            return self.queueless or not self.queues
        return not self.queues or queue in self.queues


@dataclass(frozen=True)
class Policy:
    path: str
    sha256: str
    rules: tuple[Rule, ...]
    tombstone_budget_per_partition: int = DEFAULT_TOMBSTONE_BUDGET

    def rules_of(self, kind: str, system: str) -> list[Rule]:
        """Rules of `kind` for `system`, in file order (queue restrictions are the caller's)."""
        return [r for r in self.rules if r.kind == kind and r.applies_to_system(system)]

    def describe(self) -> dict[str, Any]:
        """The plan header's `policy` object: enough to review the plan, no subject at all."""
        return {
            "path": self.path,
            "sha256": self.sha256,
            "tombstone_budget_per_partition": self.tombstone_budget_per_partition,
            "rules": [
                {
                    "id": r.id,
                    "kind": r.kind,
                    "legal_basis": r.legal_basis,
                    "older_than": None if r.older_than is None else duration_text(r.older_than),
                    "systems": list(r.systems),
                    "queues": list(r.queues),
                    "subject_count": len(r.subjects),
                    **({"search": r.search} if r.kind == ERASE_SUBJECT else {}),
                    "references_complete": r.references_complete,
                }
                for r in self.rules
            ],
        }


def subject_hash(address: str) -> str:
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()


def load_policy(path: str | Path, kinds: Iterable[RuleKind]) -> Policy:
    """Read and validate a policy file (TOML or YAML by its extension); `kinds` are the rule
    kinds the systems plan (the registry's `systems.rule_kinds()`), ``erase_subject`` besides."""
    name = str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigError(
            f"policy {name}: unknown format {suffix or '(no extension)'!r}, "
            "use .toml, .yaml or .yml"
        )
    data = _read(Path(path), name)
    document = _parse_toml(data, name) if suffix == ".toml" else _parse_yaml(data, name)
    return _validate(document, name, hashlib.sha256(data).hexdigest(), merged_rule_kinds(kinds))


def _read(path: Path, name: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"policy {name} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"policy {name} is a directory, not a policy file") from None
    except OSError as exc:
        raise InputError(f"policy {name} cannot be read: {exc.strerror}") from None


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"policy {name}: not UTF-8 text (byte {exc.start})") from None


def _parse_toml(data: bytes, name: str) -> Any:
    try:
        return tomllib.loads(_decode(data, name))
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message carries "(at line L, column C)" and never quotes the document.
        raise InputError(f"policy {name}: not valid TOML: {exc}") from None


def _parse_yaml(data: bytes, name: str) -> Any:
    try:
        return yaml.safe_load(_decode(data, name))
    except yaml.YAMLError as exc:
        # str(exc) quotes the offending line, which may hold an address: build our own text.
        problem = getattr(exc, "problem", None) or type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" (at line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"policy {name}: not valid YAML: {_safe(problem)}{where}") from None


def _safe(value: object) -> str:
    """A value shown in an error, with any address in it pseudonymised."""
    return pseudonymize_text(str(value))


def _quoted(value: object) -> str:
    # Quote after pseudonymising: a quote is a valid address character and would be swallowed.
    return f"'{_safe(value)}'" if isinstance(value, str) else _safe(repr(value))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_keys(table: dict[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {_quoted(key)} (known: {', '.join(allowed)})")


def _validate(document: Any, name: str, sha256: str, kinds: Mapping[str, RuleKind]) -> Policy:
    where = f"policy {name}"
    if not isinstance(document, dict):
        raise ConfigError(
            f"{where}: the top level must be a table of keys, not {type(document).__name__}"
        )
    _check_keys(document, _TOP_KEYS, where)
    version = document.get("version")
    if not _is_int(version) or version != 1:
        shown = "missing" if version is None else _quoted(version)
        raise ConfigError(f"{where}: version must be 1 (got {shown})")
    budget = document.get("tombstone_budget_per_partition", DEFAULT_TOMBSTONE_BUDGET)
    if not _is_int(budget) or budget < 0:
        raise ConfigError(
            f"{where}: tombstone_budget_per_partition must be an integer >= 0 "
            f"(got {_quoted(budget)})"
        )
    tables = document.get("rules")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{where}: rules must be a non-empty list of rule tables")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        rule = _rule(table, f"{where} rules[{index}]", where, kinds)
        if rule.id in seen:
            raise ConfigError(f"{where} rule {rule.id!r}: id is used by more than one rule")
        seen.add(rule.id)
        rules.append(rule)
    return Policy(name, sha256, tuple(rules), budget)


def _rule(table: Any, position: str, where: str, kinds: Mapping[str, RuleKind]) -> Rule:
    if not isinstance(table, dict):
        raise ConfigError(f"{position}: a rule must be a table of keys")
    rule_id = table.get("id")
    if not isinstance(rule_id, str) or not _ID.fullmatch(rule_id):
        shown = "missing" if rule_id is None else _quoted(rule_id)
        raise ConfigError(f"{position}: id must match [A-Za-z0-9._-]+ (got {shown})")
    here = f"{where} rule {rule_id!r}"
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in kinds:
        shown = "missing" if kind is None else _quoted(kind)
        raise ConfigError(f"{here}: kind must be one of {', '.join(kinds)} (got {shown})")
    _check_keys(table, _COMMON_RULE_KEYS + kinds[kind].keys, f"{here} ({kind})")
    legal_basis = table.get("legal_basis")
    if not isinstance(legal_basis, str) or not legal_basis.strip():
        raise ConfigError(f"{here}: legal_basis is required (a non-empty text)")
    references_complete = table.get("references_complete", False)
    if not isinstance(references_complete, bool):
        raise ConfigError(f"{here}: references_complete must be true or false")
    return Rule(
        id=rule_id,
        kind=kind,
        legal_basis=legal_basis.strip(),
        older_than=_older_than(table, kind, kinds[kind].needs_older_than, here),
        systems=_names(table, "systems", here),
        queues=_names(table, "queues", here),
        subjects=_subjects(table, here) if kind == ERASE_SUBJECT else (),
        search=_search(table, here),
        references_complete=references_complete,
        queueless=kinds[kind].queueless,
    )


def _older_than(table: dict[str, Any], kind: str, required: bool, here: str) -> dt.timedelta | None:
    value = table.get("older_than")
    if value is None:
        if required:
            raise ConfigError(f"{here}: older_than is required for {kind}")
        return None
    if not isinstance(value, str) and not _is_int(value):
        raise ConfigError(f"{here}: older_than must be a duration like 30d, 12h or 2w")
    try:
        return parse_duration(str(value))
    except ConfigError as exc:
        raise ConfigError(f"{here}: older_than: {_safe(exc.message)}") from None


def _names(table: dict[str, Any], key: str, here: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"{here}: {key} must be a list of names")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{here}: {key}[{index}] must be a non-empty text")
    return tuple(item.strip() for item in value)


def _search(table: dict[str, Any], here: str) -> str:
    value = table.get("search", SEARCH_HEADERS)
    if value not in (SEARCH_HEADERS, SEARCH_FULL):
        raise ConfigError(
            f"{here}: search must be {SEARCH_HEADERS!r} (envelopes and headers, the default) or "
            f"{SEARCH_FULL!r} (also bodies and attachments), not {_quoted(value)}"
        )
    return str(value)


def _subjects(table: dict[str, Any], here: str) -> tuple[str, ...]:
    addresses = table.get("addresses", [])
    hashes = table.get("address_sha256", [])
    for key, value in (("addresses", addresses), ("address_sha256", hashes)):
        if not isinstance(value, list):
            raise ConfigError(f"{here}: {key} must be a list")
    subjects: list[str] = []
    for index, address in enumerate(addresses):
        if not isinstance(address, str) or "@" not in address or not address.strip():
            raise ConfigError(f"{here}: addresses[{index}] is not a mail address (a text with '@')")
        # Every IDNA form of the domain (`addresses.address_forms`): an envelope or header
        # writes the one its sender used.
        subjects.extend(subject_hash(form) for form in address_forms(address))
    for index, digest in enumerate(hashes):
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ConfigError(
                f"{here}: address_sha256[{index}] is not 64 lower-case hex digits "
                "(sha256 of the lower-cased, trimmed address)"
            )
        subjects.append(digest)
    if not subjects:
        raise ConfigError(f"{here}: erase_subject needs at least one of addresses, address_sha256")
    return tuple(sorted(set(subjects)))
