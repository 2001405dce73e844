"""How the purger carries out a Postfix plan: re-check each named file against the live queue,
then have Postfix delete exactly that message, or (an orphan log) delete the file itself.

* `PostsuperExecutor` (``postfix.postsuper_delete``): a queue file is never unlinked by us. After
  the rate wait, the last check reads the file at its planned path (still a regular file with
  the planned inode, size, modification time and SHA-256), and at once the purger runs
  ``postsuper -c CONFIG -d QUEUE_ID QUEUE``: Postfix's own deleter, which removes the message's
  defer, bounce and trace logs first and then the queue file, and only in that queue. The
  remaining window is postsuper's start-up (milliseconds, nothing waits there): if the queue
  manager moves the file to another queue meanwhile, postsuper deletes nothing and the action
  is reported as not done; if a delivery agent marks a recipient done in place (``R`` to ``D``,
  same file), the message is deleted with that change. Before anything, the executor requires
  ``postconf -c CONFIG -h queue_directory`` to be the plan's queue directory, so a plan can
  never make postsuper delete in another instance's queue.
* `OrphanLogExecutor` (``postfix.delete_orphan_log``): the only files removed directly. The last
  check is the file as planned and still no queue file of its id in any message queue; then
  the file is held (renamed beside itself), checked again on the held inode and unlinked
  (`held_unlink`): a log rewritten after the hold is kept. The remaining window is a writer
  with the log already open appending between the held check and the unlink.

A plan names every file, queue directory and queue id as escaped text (`filenames.shown`,
docs/filenames.md); each is turned back into its bytes (`filenames.fs_path`) for every check and
deletion, and every path said in a verdict is escaped text again.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import stat
import subprocess
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.file_digest import file_digest
from mqforensics.filenames import fs_path, shown
from mqforensics.purge.contract import Operations, TargetChanged, Verdict
from mqforensics.purge.held_unlink import PlannedFile, live_copy, unlink_checked
from mqforensics.retention.manifest import Action, Plan
from mqforensics.systems.postfix.options import PurgeOptions
from mqforensics.systems.postfix.plan import DELETE_ORPHAN_LOG, POSTSUPER_DELETE
from mqforensics.systems.postfix.queue_dir import (
    LISTED_QUEUES,
    LOG_QUEUES,
    MESSAGE_QUEUES,
    QueueDir,
    id_kind,
    list_queue_dir,
    possible_paths,
)
from mqforensics.units import parse_instant

POSTSUPER_TIMEOUT = 120
_DELETED = re.compile(r"Deleted: (\d+) messages?")


def _bad(action: Action, what: str) -> ConfigError:
    return ConfigError(f"action {action.seq} ({action.kind}): {what}")


def _micros(instant: dt.datetime) -> int:
    delta = instant - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def file_drift(path: str, precondition: dict[str, Any]) -> str | None:
    """Why the file at `path` is not the planned one (inode, size, mtime, SHA-256), or None;
    FileNotFoundError when it is gone."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return "no longer a regular file"
    if info.st_ino != precondition["inode"]:
        return f"another file (inode {precondition['inode']} -> {info.st_ino})"
    if info.st_size != precondition["size"]:
        return f"size {precondition['size']} -> {info.st_size}"
    planned = _micros(parse_instant(precondition["modified"]))
    if info.st_mtime_ns // 1000 != planned:
        return "modified since the plan (mtime differs)"
    size, sha256 = file_digest(Path(path))
    if size != precondition["size"] or sha256 != precondition["sha256"]:
        return "content differs (SHA-256)"
    return None


def _checked_target(action: Action) -> tuple[str, str, str, str]:
    """(queue_dir, queue, queue_id, path) of an action, refused when they do not agree."""
    target, pre = action.target, action.precondition
    values = [target.get(k) for k in ("queue_dir", "queue", "queue_id", "path")]
    texts = [v for v in values if isinstance(v, str) and v]
    if len(texts) != len(values):
        raise _bad(action, "target needs queue_dir, queue, queue_id and path")
    queue_dir, queue, queue_id, path = texts
    if not (os.path.isabs(queue_dir) and os.path.isabs(path)):
        raise _bad(action, "queue_dir and path must be absolute")
    relative = os.path.relpath(path, queue_dir)
    if relative.startswith("..") or relative.split(os.sep)[0] != queue:
        raise _bad(action, f"{path} is not in the {queue} queue of {queue_dir}")
    if os.path.basename(path) != queue_id:
        raise _bad(action, f"{path} is not the file of queue id {queue_id}")
    for key, kind in (("size", int), ("inode", int), ("sha256", str), ("modified", str)):
        if not isinstance(pre.get(key), kind):
            raise _bad(action, f"precondition needs {key}")
    return queue_dir, queue, queue_id, path


def _verdict(path: str, precondition: dict[str, Any]) -> Verdict:
    """Whether the file the escaped `path` names is still as planned."""
    current = live_copy(Path(fs_path(path)))
    if current is None:
        return Verdict(True, already_done=True)
    try:
        drift = file_drift(str(current), precondition)
    except FileNotFoundError:
        return Verdict(True, already_done=True)
    return Verdict(False, drift) if drift else Verdict(True)


def _message_files(queue_dir: str, queue_id: str) -> list[str]:
    """Where a queue file of `queue_id` is now, in any message queue of `queue_dir` (both
    escaped text), looked up where Postfix itself would keep it (`possible_paths`), not by
    listing the queues; escaped text."""
    root, name = fs_path(queue_dir), fs_path(queue_id)
    return [shown(path) for queue in MESSAGE_QUEUES
            for path in possible_paths(root, queue, name)
            if os.path.lexists(path)]  # fmt: skip


def _orphan_logs(queue_dir: str) -> set[str]:
    """The log files of `queue_dir` whose queue id has no queue file (escaped text)."""
    root = fs_path(queue_dir)
    listing = list_queue_dir(QueueDir(root, root))
    ids = {f.name for f in listing if f.kind == "message"}
    return {shown(os.path.join(root, f.relative)) for f in listing
            if f.kind == "log" and f.name not in ids}  # fmt: skip


def _census(named: dict[str, set[str]]) -> dict[str, Any]:
    """Per queue directory: logs with no queue file that the plan does not name. postsuper
    removes a message's logs before its file, so a deletion gone wrong shows up here."""
    return {
        queue_dir: {"orphan_logs_outside_the_plan": len(_orphan_logs(queue_dir) - paths)}
        for queue_dir, paths in sorted(named.items())
    }


def postsuper_program() -> str:
    found = shutil.which("postsuper") or next(
        (p for p in ("/usr/sbin/postsuper", "/usr/local/sbin/postsuper") if os.path.exists(p)),
        None,
    )
    if found is None:
        raise ConfigError("postsuper is not installed: a Postfix plan is purged through it")
    return found


def queue_directory_of(config_dir: str) -> str:
    """``postconf -c CONFIG -h queue_directory``, resolved; a ConfigError when it fails."""
    postconf = shutil.which("postconf") or "/usr/sbin/postconf"
    try:
        result = subprocess.run(
            [postconf, "-c", config_dir, "-h", "queue_directory"],
            capture_output=True, text=True, errors="surrogateescape", timeout=60, check=False,
        )  # fmt: skip
    except OSError as exc:
        raise ConfigError(f"postconf: {exc.strerror or exc}") from None
    if result.returncode != 0 or not result.stdout.strip():
        first = (result.stderr.strip().splitlines() or ["no output"])[0]
        raise ConfigError(f"postconf -c {shown(config_dir)} failed: {shown(first)}")
    return os.path.realpath(result.stdout.strip())


class PostsuperExecutor:
    """Deletes the messages a plan names with ``postsuper -d``, each still as planned."""

    kinds = (POSTSUPER_DELETE,)

    def __init__(self, plan: Plan, config_dir: str | None) -> None:
        self._named: dict[str, set[str]] = defaultdict(set)
        for action in plan.actions():
            if action.kind not in self.kinds:
                continue
            queue_dir, queue, queue_id, path = _checked_target(action)
            if queue not in LISTED_QUEUES:
                raise _bad(action, f"postsuper deletes from message queues, not {queue!r}")
            if id_kind(queue_id) == "not_an_id":
                raise _bad(action, f"'{queue_id}' is not a queue id")
            self._named[queue_dir].add(path)
        if not self._named:
            self.config_dir = ""
            return
        if config_dir is None:
            raise ConfigError(
                "the plan names no Postfix config directory (audit with --config-dir, or purge "
                "with --postfix-config DIR): postsuper needs one"
            )
        self.config_dir = os.path.realpath(config_dir)
        if not os.path.isdir(self.config_dir):
            raise InputError(f"{shown(config_dir)}: no such Postfix config directory")
        live = queue_directory_of(self.config_dir)
        for queue_dir in self._named:
            if os.path.realpath(fs_path(queue_dir)) != live:
                raise ConfigError(
                    f"the plan deletes in {queue_dir}, but postsuper -c "
                    f"{shown(self.config_dir)} works on {shown(live)}: purge with the "
                    "config directory of that queue"
                )
        self.program = postsuper_program()

    def classify(self, exc: BaseException) -> str | None:
        return None

    def verify(self, action: Action) -> Verdict:
        """The file as planned; gone from its path, the message is done unless the queue
        manager or an operator moved it to another queue (then it changed: skipped)."""
        target = action.target
        verdict = _verdict(target["path"], action.precondition)
        if verdict.already_done:
            moved = _message_files(target["queue_dir"], target["queue_id"])
            if moved:
                where = os.path.relpath(moved[0], target["queue_dir"])
                return Verdict(False, f"moved to {where} since the plan")
        return verdict

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        target = action.target
        queue_id, queue = target["queue_id"], target["queue"]
        label = f"postsuper -d {queue_id} {queue}"
        if not ops.destructive(label, partial(self.verify, action)):
            return {"messages": 0, "bytes": 0}
        result = subprocess.run(
            [self.program, "-c", self.config_dir, "-d", queue_id, queue],
            capture_output=True, text=True, timeout=POSTSUPER_TIMEOUT, check=False,
        )  # fmt: skip
        ops.completed(label)
        deleted = _DELETED.search(result.stderr)
        count = int(deleted.group(1)) if deleted else 0
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no output"])[0]
            raise ConfigError(f"{label} failed (exit {result.returncode}): {first}")
        if count == 0 and os.path.lexists(fs_path(target["path"])):
            raise TargetChanged(f"postsuper deleted nothing: {queue_id} is still in {queue}")
        if count == 0:
            moved = _message_files(target["queue_dir"], queue_id)
            if moved:
                raise TargetChanged(f"moved to {os.path.relpath(moved[0], target['queue_dir'])} "
                                    "before postsuper ran: not deleted")  # fmt: skip
        return {"messages": count, "bytes": action.precondition["size"] if count else 0}

    def verify_done(self, action: Action) -> str | None:
        target = action.target
        left = _message_files(target["queue_dir"], target["queue_id"])
        return f"{', '.join(left)} still present" if left else None

    def census(self) -> dict[str, Any]:
        return _census(self._named)

    def close(self) -> None:
        return None


class OrphanLogExecutor:
    """Deletes the defer, bounce and trace logs a plan names, each still as planned and still
    without a queue file."""

    kinds = (DELETE_ORPHAN_LOG,)

    def __init__(self, plan: Plan) -> None:
        self._named: dict[str, set[str]] = defaultdict(set)
        for action in plan.actions():
            if action.kind not in self.kinds:
                continue
            queue_dir, queue, _, path = _checked_target(action)
            if queue not in LOG_QUEUES:
                raise _bad(action, f"only logs ({', '.join(LOG_QUEUES)}) are deleted directly")
            self._named[queue_dir].add(path)

    def classify(self, exc: BaseException) -> str | None:
        return None

    def verify(self, action: Action) -> Verdict:
        verdict = _verdict(action.target["path"], action.precondition)
        if verdict.ok and not verdict.already_done:
            owners = _message_files(action.target["queue_dir"], action.target["queue_id"])
            if owners:
                return Verdict(False, f"no longer an orphan: {owners[0]} exists")
        return verdict

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        path = action.target["path"]
        label = f"unlink {os.path.relpath(path, action.target['queue_dir'])}"
        if not ops.destructive(label, partial(self.verify, action)):
            return {"files": 0, "bytes": 0}
        planned = PlannedFile(
            Path(fs_path(path)), action.precondition["size"], action.precondition["sha256"]
        )
        count, removed = unlink_checked([planned])
        ops.completed(label)
        return {"files": count, "bytes": removed}

    def verify_done(self, action: Action) -> str | None:
        left = live_copy(Path(fs_path(action.target["path"])))
        return f"{shown(left)} still present" if left else None

    def census(self) -> dict[str, Any]:
        return _census(self._named)

    def close(self) -> None:
        return None


def _config_dir(plan: Plan, override: Path | None) -> str | None:
    """The config directory to give postsuper (a file-system path): `override`, else the one
    the plan names (escaped text)."""
    if override is not None:
        return str(override)
    inputs = plan.header.get("inputs") or {}
    value = inputs.get("config_dir") if isinstance(inputs, dict) else None
    return fs_path(value) if isinstance(value, str) and value else None


def build_executors(plan: Plan, options: PurgeOptions | None = None) -> list[Any]:
    """The executors of the kinds the plan holds; postsuper's config directory from
    ``postfix_config`` or the plan."""
    kinds = {action.kind for action in plan.actions()}
    executors: list[Any] = []
    if POSTSUPER_DELETE in kinds:
        override = options.postfix_config if options is not None else None
        executors.append(PostsuperExecutor(plan, _config_dir(plan, override)))
    if DELETE_ORPHAN_LOG in kinds:
        executors.append(OrphanLogExecutor(plan))
    return executors
