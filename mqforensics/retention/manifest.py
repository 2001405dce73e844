"""The plan directory: what a planner decided, frozen so that what is approved is what is run.

`plan.json` holds the SHA-256 of `actions.jsonl` and `deferred.jsonl`, and the hash of
`plan.json` is the *plan hash* an approval records, so one hash covers every byte a purge acts
on. Actions are streamed to disk while hashing (a plan may hold millions), and the directory is
built under a temporary sibling name and renamed, so a planner that fails half-way leaves
nothing a purger could mistake for a plan. See docs/retention.md for the contract.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mqforensics.errors import ConfigError, InputError, PlanModified, PlanNotApproved
from mqforensics.privacy import ADDRESS
from mqforensics.retention.policy import Policy

FORMAT = "mqforensics-plan/2"
PLAN_JSON = "plan.json"
ACTIONS = "actions.jsonl"
DEFERRED = "deferred.jsonl"
APPROVAL = "approval.json"
JOURNAL = "journal.jsonl"

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_HEADER_KEYS = (
    "format",
    "system",
    "created_at",
    "as_of",
    "policy",
    "inputs",
    "totals",
    "deferred",
    "notes",
    "actions_sha256",
    "deferred_sha256",
    "action_count",
)
_CREDENTIAL_WORDS = ("password", "secret", "key_id", "token")
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")
_CHUNK = 1 << 20


def canonical_json(obj: Any) -> str:
    """The one serialisation hashes are taken over: sorted keys, no spaces, no NaN."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def action_id(kind: str, target: dict[str, Any]) -> str:
    """Names an action by what it touches, so the same deletion has the same id in every plan."""
    return hashlib.sha256(f"{kind}\n{canonical_json(target)}".encode()).hexdigest()[:16]


def utc_text(value: dt.datetime) -> str:
    """``2026-11-22T02:30:00Z``; a naive datetime is taken as UTC, like `parse_instant` does."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime(_TIME_FORMAT)


@dataclass(frozen=True)
class Action:
    kind: str
    target: dict[str, Any]
    precondition: dict[str, Any]
    rules: tuple[str, ...]
    bytes: int
    tombstones: int
    reason: str
    seq: int = -1
    # The ids of the findings (findings.json) that justify the action: every action has one.
    findings: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return action_id(self.kind, self.target)

    def to_json(self) -> str:
        return canonical_json(
            {
                "seq": self.seq,
                "id": self.id,
                "kind": self.kind,
                "target": self.target,
                "precondition": self.precondition,
                "rules": list(self.rules),
                "bytes": self.bytes,
                "tombstones": self.tombstones,
                "reason": self.reason,
                "findings": list(self.findings),
            }
        )

    @classmethod
    def from_json(cls, line: str, where: str) -> Action:
        obj = _load_line(line, where, _ACTION_FIELDS)
        action = cls(
            kind=obj["kind"],
            target=obj["target"],
            precondition=obj["precondition"],
            rules=tuple(obj["rules"]),
            bytes=obj["bytes"],
            tombstones=obj["tombstones"],
            reason=obj["reason"],
            seq=obj["seq"],
            findings=tuple(obj["findings"]),
        )
        # Cheap, and catches a target edited by hand even when hashes are not being checked.
        if obj["id"] != action.id:
            raise InputError(
                f"{where}: id {obj['id']} does not match the action's kind and target ({action.id})"
            )
        return action


@dataclass(frozen=True)
class Deferred:
    """Something a rule selected that the planner would not plan; `reason` says why."""

    kind: str
    target: dict[str, Any]
    rules: tuple[str, ...]
    reason: str
    findings: tuple[str, ...] = ()

    def to_json(self) -> str:
        return canonical_json(
            {
                "kind": self.kind,
                "target": self.target,
                "rules": list(self.rules),
                "reason": self.reason,
                "findings": list(self.findings),
            }
        )

    @classmethod
    def from_json(cls, line: str, where: str) -> Deferred:
        obj = _load_line(line, where, _DEFERRED_FIELDS)
        return cls(
            obj["kind"], obj["target"], tuple(obj["rules"]), obj["reason"], tuple(obj["findings"])
        )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_ACTION_FIELDS: dict[str, Any] = {
    "seq": _is_count,
    "id": lambda v: isinstance(v, str),
    "kind": lambda v: isinstance(v, str) and bool(v),
    "target": lambda v: isinstance(v, dict),
    "precondition": lambda v: isinstance(v, dict),
    "rules": _is_names,
    "bytes": _is_count,
    "tombstones": _is_count,
    "reason": lambda v: isinstance(v, str),
    "findings": _is_names,
}
_DEFERRED_FIELDS: dict[str, Any] = {
    key: _ACTION_FIELDS[key] for key in ("kind", "target", "rules", "reason", "findings")
}


def _load_line(line: str, where: str, fields: dict[str, Any]) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: not a JSON object")
    missing = [key for key in fields if key not in obj]
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise InputError(f"{where}: unknown key {', '.join(unknown)}")
    for key, valid in fields.items():
        if not valid(obj[key]):
            raise InputError(f"{where}: {key} has the wrong type or value")
    return obj


@dataclass(frozen=True)
class Plan:
    """A plan directory as read: `sha256` is the hash of the `plan.json` bytes at that time."""

    directory: Path
    header: dict[str, Any]
    sha256: str

    @property
    def system(self) -> str:
        return str(self.header["system"])

    @property
    def action_count(self) -> int:
        return int(self.header["action_count"])

    def actions(self) -> Iterator[Action]:
        """Every action in `seq` order, read lazily; integrity is `read_plan`'s job."""
        for number, line in _lines(self.directory / ACTIONS):
            yield Action.from_json(line, f"{self.directory / ACTIONS} line {number}")

    def deferred(self) -> Iterator[Deferred]:
        for number, line in _lines(self.directory / DEFERRED):
            yield Deferred.from_json(line, f"{self.directory / DEFERRED} line {number}")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            yield number, line.rstrip("\n")


def write_plan(
    out: Path,
    *,
    system: str,
    as_of: dt.datetime,
    policy: Policy,
    inputs: dict[str, Any],
    actions: Iterable[Action],
    deferred: Iterable[Deferred],
    notes: list[str],
) -> Plan:
    """Write a plan directory at `out`; `actions` are numbered in the order given.

    Raises ValueError for what only a planner bug can cause (a credential in `inputs`, an
    address in a reason or note, an action citing no rule of `policy`): such a plan must not
    exist even for review.
    """
    out = Path(out)
    _check_no_credentials(inputs, "inputs")
    for index, note in enumerate(notes):
        _check_no_address(note, f"notes[{index}]")
    _check_out(out)
    rule_ids = {rule.id for rule in policy.rules}
    with directory_written_whole(out, f"plan {out}") as tmp:
        count, totals, actions_sha256 = _write_actions(tmp / ACTIONS, actions, rule_ids)
        reasons, deferred_sha256 = _write_deferred(tmp / DEFERRED, deferred, rule_ids)
        header = {
            "format": FORMAT,
            "system": system,
            "created_at": utc_text(dt.datetime.now(dt.UTC)),
            "as_of": utc_text(as_of),
            "policy": policy.describe(),
            "inputs": inputs,
            "totals": totals,
            "deferred": dict(reasons),
            "notes": list(notes),
            "actions_sha256": actions_sha256,
            "deferred_sha256": deferred_sha256,
            "action_count": count,
        }
        data = (json.dumps(header, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
        _write_durably(tmp / PLAN_JSON, data)
    return Plan(out, header, hashlib.sha256(data).hexdigest())


def _check_out(out: Path) -> None:
    if out.is_dir():
        if any(out.iterdir()):
            raise ConfigError(
                f"plan {out} already exists and is not empty: choose another --out, or remove it"
            )
    elif out.exists() or out.is_symlink():
        raise ConfigError(f"plan {out} exists and is not a directory")


def _check_no_credentials(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if any(word in str(key).lower() for word in _CREDENTIAL_WORDS):
                raise ValueError(f"{where}.{key}: a plan must not record credentials")
            _check_no_credentials(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_no_credentials(item, f"{where}[{index}]")
    elif isinstance(value, str) and _USERINFO.search(value):
        raise ValueError(
            f"{where}: a URL with user info; a plan records host:port or s3://bucket only"
        )


def _check_no_address(text: str, where: str) -> None:
    if ADDRESS.search(text):
        raise ValueError(f"{where}: contains a mail address; plans never name a subject")


def _write_actions(
    path: Path, actions: Iterable[Action], rule_ids: set[str]
) -> tuple[int, dict[str, dict[str, int]], str]:
    digest = hashlib.sha256()
    totals: dict[str, dict[str, int]] = {}
    count = 0
    with path.open("wb") as handle:
        for count, action in enumerate(actions, 1):
            where = f"action {count - 1} ({action.kind})"
            _check_rules(action.rules, rule_ids, where)
            if not action.findings:
                raise ValueError(f"{where}: cites no finding; every action is made from findings")
            _check_no_address(action.reason, f"{where} reason")
            if not (_is_count(action.bytes) and _is_count(action.tombstones)):
                raise ValueError(f"{where}: bytes and tombstones must be integers >= 0")
            line = (dataclasses.replace(action, seq=count - 1).to_json() + "\n").encode()
            digest.update(line)
            handle.write(line)
            kind = totals.setdefault(action.kind, {"actions": 0, "bytes": 0, "tombstones": 0})
            kind["actions"] += 1
            kind["bytes"] += action.bytes
            kind["tombstones"] += action.tombstones
        _sync(handle)
    return count, totals, digest.hexdigest()


def _write_deferred(
    path: Path, deferred: Iterable[Deferred], rule_ids: set[str]
) -> tuple[Counter[str], str]:
    digest = hashlib.sha256()
    reasons: Counter[str] = Counter()
    with path.open("wb") as handle:
        for index, item in enumerate(deferred):
            where = f"deferred {index} ({item.kind})"
            _check_rules(item.rules, rule_ids, where)
            _check_no_address(item.reason, f"{where} reason")
            line = (item.to_json() + "\n").encode()
            digest.update(line)
            handle.write(line)
            reasons[item.reason] += 1
        _sync(handle)
    return reasons, digest.hexdigest()


def _check_rules(rules: tuple[str, ...], rule_ids: set[str], where: str) -> None:
    if not rules:
        raise ValueError(f"{where}: cites no rule; every action needs a rule of the policy")
    unknown = [rule for rule in rules if rule not in rule_ids]
    if unknown:
        raise ValueError(f"{where}: cites {', '.join(unknown)}, not a rule of the policy")


def _sync(handle: IO[bytes]) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        _sync(handle)


@contextlib.contextmanager
def directory_written_whole(out: Path, what: str) -> Iterator[Path]:
    """A new temporary sibling of `out` to write a directory's files into; when the block
    ends, it is synced and renamed to `out` (which replaces an empty directory and refuses a
    non-empty one: a ConfigError naming `what`), so a reader never sees it half-written. A
    failure in the block removes it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    # os.mkdir (unlike tempfile.mkdtemp) honours the umask, so reviewers can read the files.
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        fsync_directory(tmp)
        try:
            os.rename(tmp, out)
        except OSError as exc:
            raise ConfigError(f"{what}: cannot be created ({exc.strerror})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_directory(out.parent)


def fsync_directory(path: Path) -> None:
    """Make a file's creation or rename durable: its entry lives in the directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` so a reader sees the old or the new content, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        _write_durably(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def _file_digest(path: Path) -> tuple[str, int]:
    """SHA-256 and line count of a file, read in chunks (actions files can be large)."""
    digest = hashlib.sha256()
    lines = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            lines += chunk.count(b"\n")
    return digest.hexdigest(), lines


def read_plan(directory: Path | str) -> Plan:
    """Read a plan's header and check that its actions and deferred files are the planned ones."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"plan {directory} does not exist or is not a directory")
    header_path = directory / PLAN_JSON
    try:
        data = header_path.read_bytes()
    except FileNotFoundError:
        raise InputError(
            f"plan {directory}: {PLAN_JSON} is missing (not a plan directory)"
        ) from None
    except OSError as exc:
        raise InputError(f"plan {directory}: {PLAN_JSON} cannot be read: {exc.strerror}") from None
    header = _parse_header(data, directory)
    for name, key in ((ACTIONS, "actions_sha256"), (DEFERRED, "deferred_sha256")):
        path = directory / name
        if not path.is_file():
            raise InputError(f"plan {directory}: {name} is missing")
        actual, lines = _file_digest(path)
        if actual != header[key]:
            raise PlanModified(
                f"plan {directory}: {name} was modified after planning "
                f"(sha256 {actual} != {header[key]})"
            )
        expected = header["action_count"] if name == ACTIONS else sum(header["deferred"].values())
        if lines != expected:
            raise PlanModified(
                f"plan {directory}: {PLAN_JSON} counts {expected} lines for "
                f"{name}, which has {lines}"
            )
    return Plan(directory, header, hashlib.sha256(data).hexdigest())


def _parse_header(data: bytes, directory: Path) -> dict[str, Any]:
    where = f"plan {directory}: {PLAN_JSON}"
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise InputError(f"{where} is not a JSON object")
    if header.get("format") != FORMAT:
        raise InputError(f"{where}: format {header.get('format')!r} is not {FORMAT!r}")
    missing = [key for key in _HEADER_KEYS if key not in header]
    if missing:
        raise InputError(f"{where} lacks {', '.join(missing)}")
    checks = {
        "system": isinstance(header["system"], str),
        "action_count": _is_count(header["action_count"]),
        "actions_sha256": isinstance(header["actions_sha256"], str),
        "deferred_sha256": isinstance(header["deferred_sha256"], str),
        "deferred": isinstance(header["deferred"], dict)
        and all(_is_count(v) for v in header["deferred"].values()),
        "totals": isinstance(header["totals"], dict),
        "notes": _is_names(header["notes"]),
    }
    wrong = [key for key, ok in checks.items() if not ok]
    if wrong:
        raise InputError(f"{where}: {', '.join(wrong)} has the wrong type")
    return header


def approve(directory: Path | str, by: str, note: str = "") -> dict[str, Any]:
    """Record who approved the plan as it is now (its hash), after checking its integrity."""
    return record_approval(read_plan(directory), by, note)


def record_approval(plan: Plan, by: str, note: str = "") -> dict[str, Any]:
    """`approve` for a plan just read with `read_plan` (whose hashes were checked then)."""
    if not by.strip():
        raise ConfigError("approve: --by must name who approves the plan")
    record = {
        "plan_sha256": plan.sha256,
        "approved_by": by.strip(),
        "approved_at": utc_text(dt.datetime.now(dt.UTC)),
        "note": note,
    }
    data = (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    write_atomically(plan.directory / APPROVAL, data)
    return record


def require_approval(plan: Plan) -> dict[str, Any]:
    """The approval of exactly this plan, or the error that stops a purge."""
    directory = plan.directory
    path = directory / APPROVAL
    if not path.exists():
        raise PlanNotApproved(
            f"plan {directory} is not approved: review it with `mqforensics report plan "
            f"{directory}`, then `mqforensics approve {directory} --by NAME`"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"plan {directory}: {APPROVAL} cannot be read ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("plan_sha256"), str):
        raise InputError(f"plan {directory}: {APPROVAL} has no plan_sha256")
    if record["plan_sha256"] != plan.sha256:
        raise PlanModified(
            f"plan {directory}: {APPROVAL} approves plan hash {record['plan_sha256']} but "
            f"{PLAN_JSON} now hashes to {plan.sha256}: the plan changed after approval; "
            "review it and approve it again"
        )
    return record
