"""How the purger carries out a slimta plan: re-verify each named file, hash, entry or object
against the live queue storage, then delete exactly that, idempotently.

One executor per backend (python-slimta 5.0.5 layouts, see `disk`, `redis_store`, `cloud`):

* `DiskExecutor` (``slimta.delete_files``): a DiskStorage message is ``<id>.env`` then
  ``<id>.meta``, or one leftover file. The ``.env`` goes first: an interruption then leaves a
  ``.meta`` without ``.env``, which slimta's ``load`` never lists, rather than an ``.env``
  without ``.meta``, which it fails to load on every restart. slimta rewrites the ``.meta`` on
  every delivery attempt, so a ``.meta`` that changed since the plan means the queue is working
  on the message: the action is skipped. A message's files are one destructive operation: after
  the rate wait every file is checked (size, SHA-256), then held and checked again on the held
  inode before any is unlinked (`held_unlink`), so a rewrite between the check and the unlink
  puts both files back and skips the action; the remaining window is a write through a file
  descriptor opened before the hold, between the held file's check and its unlink. The plan
  names the store, the id and every file as escaped text (docs/filenames.md): each is
  checked and deleted by exactly the bytes it stands for (`filenames.fs_path`).
* `RedisExecutor` (``slimta.delete_redis_hash``, ``slimta.remove_queue_entry``): after the rate
  wait, the last check ``WATCH``es what it reads (the hash; the list and the message key), then
  reads it on that connection (TYPE and HGETALL against the planned digest; the entry still in
  the list and its message still absent), and ``MULTI``/``DEL`` (``LREM``)/``EXEC`` follows at
  once. Redis aborts the ``EXEC`` on any write to a watched key after the ``WATCH``, so there is
  no window: a write by slimta between the check and the delete deletes nothing, and the next
  attempt (after its own rate slot) checks again. A hash that really changed, or a message
  written again for its queue entry, is skipped; a hash rewritten with the same content is
  deleted; a key still being written after `WATCH_ATTEMPTS` (`QUEUE_WATCH_ATTEMPTS` for the
  busy notification list) is skipped as changing. Keys are only ever named, never matched (no
  ``KEYS``, no scan-and-delete).
* `S3Executor` (``slimta.delete_object``): after the rate wait, the last check is a HEAD (size
  and ETag, and the ``metadata`` and ``last_modified`` when the plan gives them), then at once a
  DeleteObject conditional on that ETag (``If-Match``, which SeaweedFS and AWS S3 honour): a
  new body stored between the HEAD and the delete makes it fail (412), and the object is
  skipped. The remaining window, between the HEAD's answer and the delete (nothing waits there),
  is a rewrite that keeps the ETag: slimta counts attempts by rewriting an object's metadata (a
  copy onto itself: same body, same ETag), and ``If-Match`` lets the delete of an object so
  rewritten (or stored again with the same bytes) go ahead. A store that does not implement
  conditional deletes (``NotImplemented``) gets a plain delete after the HEAD: there any write in
  that window is deleted.

Endpoints and logins never come from the plan: Redis from ``--redis`` (else the plan's
``HOST:PORT/DB``) with ``MQF_REDIS_USERNAME`` / ``MQF_REDIS_PASSWORD``; S3 from
``--s3-endpoint`` / ``MQF_S3_ENDPOINT`` and the ``AWS_*`` variables, as for James.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import fs_path, shown
from mqforensics.purge.contract import Operations, TargetChanged, Verdict
from mqforensics.purge.held_unlink import (
    NOT_REGULAR,
    PlannedFile,
    live_copy,
    mismatch,
    unlink_checked,
)
from mqforensics.purge.s3_delete import delete_if_match, error_code
from mqforensics.retention.manifest import Action, Plan
from mqforensics.sources.s3_endpoint import S3Endpoint, classify_s3_error
from mqforensics.systems.slimta.digests import hash_fields_digest
from mqforensics.systems.slimta.disk import ENV_SUFFIX, META_SUFFIX
from mqforensics.systems.slimta.options import PurgeOptions
from mqforensics.systems.slimta.plan import (
    DELETE_FILES,
    DELETE_OBJECT,
    DELETE_REDIS_HASH,
    REMOVE_QUEUE_ENTRY,
)
from mqforensics.systems.slimta.redis_server import RedisServer
from mqforensics.systems.slimta.redis_store import QUEUE_SUFFIX, glob_escape

SCAN_COUNT = 1000
PIPELINE_BATCH = 1000
WATCH_ATTEMPTS = 2  # a hash: re-verify once after slimta touched it, then give up
QUEUE_WATCH_ATTEMPTS = 5  # the notification list is pushed and popped all the time

# slimta writes a message in steps (the .env, then the .meta; HSETNX envelope, then HMSET
# timestamp): a census that catches a message half-written re-checks it after this long, so that
# only what stays half-written counts.
CENSUS_SETTLE_SECONDS = 1.0

CHANGED_HASH = "changed since the plan (attempts/timestamp updated by slimta)"
CHANGED_OBJECT = "object changed since the plan (size or ETag differs)"
CHANGED_OBJECT_METADATA = (
    "object metadata changed since the plan (attempts/timestamp updated by slimta)"
)


def _bad(action: Action, what: str) -> ConfigError:
    return ConfigError(f"action {action.seq} ({action.kind}): {what}")


def _text(value: Any, action: Action, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(action, f"{name} must be a non-empty string")
    return value


def _check_backend(action: Action, backend: str) -> None:
    if action.target.get("backend") != backend:
        raise _bad(action, f"target backend {action.target.get('backend')!r} is not {backend!r}")


def _settled(candidates: set[Any], recheck: Any) -> set[Any]:
    """The candidates still found by `recheck` after `CENSUS_SETTLE_SECONDS`."""
    if not candidates:
        return candidates
    if CENSUS_SETTLE_SECONDS > 0:
        time.sleep(CENSUS_SETTLE_SECONDS)
    return set(recheck(candidates))


# -- disk ------------------------------------------------------------------------------------


class DiskExecutor:
    """Deletes the ``.env``/``.meta`` files and leftovers a plan names, each still as planned."""

    kinds = (DELETE_FILES,)

    def __init__(self, plan: Plan) -> None:
        self._named: dict[str, set[str]] = defaultdict(set)  # store -> ids the plan names
        self._meta_dirs: dict[str, set[str]] = defaultdict(set)
        for action in plan.actions():
            if action.kind not in self.kinds:
                continue
            store, message_id, files = self._target(action)
            self._named[store].add(message_id)
            for path in files:
                if os.path.basename(path) == message_id + META_SUFFIX:
                    self._meta_dirs[store].add(os.path.dirname(path))
        declared = dict(_declared_meta_dirs(plan.header.get("inputs")))
        for store in self._named:
            if not self._meta_dirs[store] and store in declared:
                self._meta_dirs[store].add(declared[store])

    @staticmethod
    def _target(action: Action) -> tuple[str, str, list[str]]:
        _check_backend(action, "disk")
        target = action.target
        store = _text(target.get("store"), action, "store")
        message_id = _text(target.get("id"), action, "id")
        files = target.get("files")
        if not isinstance(files, list) or not 1 <= len(files) <= 2:
            raise _bad(action, "files must list one or two paths")
        for path in files:
            if not isinstance(path, str) or not os.path.isabs(path):
                raise _bad(action, "every file must be an absolute path")
            names = (message_id, message_id + ENV_SUFFIX, message_id + META_SUFFIX)
            if os.path.basename(path) not in names:
                raise _bad(action, f"{os.path.basename(path)} is not a file of {message_id}")
        if len(files) == 2 and not (
            files[0].endswith(ENV_SUFFIX) and files[1].endswith(META_SUFFIX)
        ):
            raise _bad(action, "a message's files must be its .env, then its .meta")
        planned = action.precondition.get("files")
        if not isinstance(planned, dict) or not set(planned) <= set(files):
            raise _bad(action, "precondition files must be a subset of the target files")
        for path, expected in planned.items():
            if not isinstance(expected, dict) or not (
                isinstance(expected.get("size"), int) and isinstance(expected.get("sha256"), str)
            ):
                raise _bad(action, f"precondition of {path} must give its size and sha256")
        return store, message_id, files

    def classify(self, exc: BaseException) -> str | None:
        return None  # local files: nothing transient to wait for

    def verify(self, action: Action) -> Verdict:
        planned: dict[str, Any] = action.precondition["files"]
        present = 0
        for path in action.target["files"]:
            current = live_copy(Path(fs_path(path)))
            if current is None:
                continue
            drift = _file_drift(str(current), planned.get(path), os.path.basename(path))
            if drift is _GONE:
                continue
            if drift is not None:
                return Verdict(False, drift)
            present += 1
        if not present:
            return Verdict(True, already_done=True)
        return Verdict(True, detail={"files_present": present})

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        planned: dict[str, Any] = action.precondition["files"]
        names = ", ".join(os.path.basename(path) for path in action.target["files"])
        label = f"unlink {names}"
        if not ops.destructive(label, partial(self.verify, action)):
            return {"files": 0, "bytes": 0}
        # Target order: the .env before the .meta (see the module docstring).
        files = [
            PlannedFile(Path(fs_path(path)), planned[path]["size"], planned[path]["sha256"])
            for path in action.target["files"]
            if path in planned
        ]
        count, removed = unlink_checked(files)
        ops.completed(label)
        return {"files": count, "bytes": removed}

    def verify_done(self, action: Action) -> str | None:
        left = [os.path.basename(p) for p in action.target["files"] if live_copy(Path(fs_path(p)))]
        return f"{', '.join(left)} still present" if left else None

    def census(self) -> dict[str, Any]:
        """Per store: messages outside the plan with an ``.env`` but no ``.meta`` or the reverse.

        A running queue adds and removes whole messages all the time, but leaves none
        half-deleted; the purger deleting one file of an unnamed message would show up here.
        """
        out: dict[str, Any] = {}
        for store in sorted(self._named):
            if not self._meta_dirs[store]:
                # Only tmp_dir files planned, and no layout in the plan's inputs: guessing the
                # meta_dir wrong would count every message as torn, so nothing is counted.
                out[store] = {"not_counted": "the plan does not say where its .meta files are"}
            for meta_dir in sorted(self._meta_dirs[store]):
                torn = _settled(
                    _torn_ids(store, meta_dir) - self._named[store],
                    lambda ids, s=store, m=meta_dir: (i for i in ids if _is_torn(s, m, i)),
                )
                key = store if meta_dir == store else f"{store} (meta {meta_dir})"
                out[key] = {"torn_messages_outside_the_plan": len(torn)}
        return out

    def close(self) -> None:
        return None


_GONE = "gone"


def _file_drift(path: str, planned: dict[str, Any] | None, name: str) -> str | None:
    """`_GONE`, why `path` (the file `name`, or its held copy) no longer matches its plan-time
    `planned` size and SHA-256, or None."""
    if not os.path.lexists(path):
        return _GONE
    if planned is None:
        return f"{name} appeared since the plan"
    try:
        why = mismatch(Path(path), PlannedFile(Path(path), planned["size"], planned["sha256"]))
    except (FileNotFoundError, NotADirectoryError):
        return _GONE
    if why == NOT_REGULAR:
        return f"{name} is {NOT_REGULAR}"
    return None if why is None else f"{name} changed since the plan"


def _listing(directory: str, suffix: str) -> set[str]:
    """The ids (escaped text) of the files ending in `suffix` in `directory` (escaped text)."""
    try:
        names = os.listdir(fs_path(directory))
    except OSError as exc:
        raise InputError(f"{directory}: {exc.strerror or exc}") from None
    return {shown(n[: -len(suffix)]) for n in names if n.endswith(suffix)}


def _torn_ids(env_dir: str, meta_dir: str) -> set[str]:
    return _listing(env_dir, ENV_SUFFIX) ^ _listing(meta_dir, META_SUFFIX)


def _is_torn(env_dir: str, meta_dir: str, message_id: str) -> bool:
    """Whether `message_id` has one file of two (every argument escaped text)."""
    env = os.path.lexists(fs_path(os.path.join(env_dir, message_id + ENV_SUFFIX)))
    return env != os.path.lexists(fs_path(os.path.join(meta_dir, message_id + META_SUFFIX)))


def _declared_meta_dirs(value: Any) -> Iterator[tuple[str, str]]:
    """(env_dir, meta_dir) of every layout a plan's inputs describe, at any depth."""
    if isinstance(value, dict):
        env_dir, meta_dir = value.get("env_dir"), value.get("meta_dir")
        if isinstance(env_dir, str) and isinstance(meta_dir, str):
            yield env_dir, meta_dir
        for item in value.values():
            yield from _declared_meta_dirs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _declared_meta_dirs(item)


# -- Redis -----------------------------------------------------------------------------------

ENTRY_MESSAGE_EXISTS = "the message exists"


def _type_name(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _hash_size(fields: dict[bytes, bytes]) -> int:
    return sum(len(k) + len(v) for k, v in fields.items())


class RedisExecutor:
    """Deletes the message hashes and notification entries of a RedisStorage a plan names."""

    kinds = (DELETE_REDIS_HASH, REMOVE_QUEUE_ENTRY)

    def __init__(self, plan: Plan, override: RedisServer | None = None) -> None:
        self._override = override
        self._servers: dict[str, RedisServer] = {}
        self._clients: dict[str, Any] = {}
        # (plan server, prefix) -> hash keys the plan names, for the census of the others.
        self._named: dict[tuple[str, str], set[bytes]] = defaultdict(set)
        # (plan server, hash key) -> (seq, digest) of the action deleting it.
        self._hash_actions: dict[tuple[str, str], tuple[int, str]] = {}
        for action in plan.actions():
            if action.kind == DELETE_REDIS_HASH:
                server, prefix, key = self._hash_target(action)
                self._named[(server, prefix)].add(key.encode())
                digest = _text(action.precondition.get("fields_sha256"), action, "fields_sha256")
                self._hash_actions[(server, key)] = (action.seq, digest)
            elif action.kind == REMOVE_QUEUE_ENTRY:
                # No hash named, but the census covers this prefix too.
                self._named.setdefault(self._entry_target(action), set())
        servers = sorted({server for server, _ in self._named})
        if override is not None and len(servers) > 1:
            raise ConfigError(
                f"the plan names {len(servers)} Redis servers ({', '.join(servers)}): --redis "
                "can only stand for one; purge without --redis"
            )
        for server in servers:
            self._server(server)  # a malformed server is refused before anything happens

    # -- the plan ----------------------------------------------------------------------------

    @staticmethod
    def _hash_target(action: Action) -> tuple[str, str, str]:
        _check_backend(action, "redis")
        server = _text(action.target.get("server"), action, "server")
        key = _text(action.target.get("key"), action, "key")
        message_id = action.target.get("id")
        if not isinstance(message_id, str) or not key.endswith(message_id):
            raise _bad(action, f"key {key!r} does not end with its id")
        return server, key[: len(key) - len(message_id)], key

    @staticmethod
    def _entry_target(action: Action) -> tuple[str, str]:
        _check_backend(action, "redis")
        server = _text(action.target.get("server"), action, "server")
        queue = _text(action.target.get("list"), action, "list")
        message_id = action.target.get("id")  # None: an entry that does not decode
        if message_id is not None and not isinstance(message_id, str):
            raise _bad(action, "id must be a string or null")
        entry = _text(action.target.get("entry_hex"), action, "entry_hex")
        try:
            bytes.fromhex(entry)
        except ValueError:
            raise _bad(action, "entry_hex is not hexadecimal") from None
        if not queue.endswith(QUEUE_SUFFIX):
            raise _bad(action, f"list {queue!r} is not a <prefix>{QUEUE_SUFFIX} key")
        prefix = queue[: -len(QUEUE_SUFFIX)]
        pre = action.precondition
        if (
            pre.get("message_key") != prefix + (message_id or "")
            or pre.get("message_key_absent") is not True
        ):
            raise _bad(action, "precondition must be the absent message key <prefix><id>")
        return server, prefix

    def _server(self, text: str) -> RedisServer:
        if text not in self._servers:
            if self._override is not None:
                self._servers[text] = self._override
            else:
                if "@" in text or "://" in text:
                    raise ConfigError("a plan names a Redis server as HOST:PORT/DB, nothing more")
                self._servers[text] = RedisServer.parse(text)
        return self._servers[text]

    def _client(self, text: str) -> Any:
        if text not in self._clients:
            self._clients[text] = self._server(text).client()
        return self._clients[text]

    # -- Executor protocol -------------------------------------------------------------------

    def classify(self, exc: BaseException) -> str | None:
        return classify_redis_error(exc)

    def verify(self, action: Action) -> Verdict:
        if action.kind == DELETE_REDIS_HASH:
            return self._verify_hash(action)
        return self._verify_entry(action)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        if action.kind == DELETE_REDIS_HASH:
            return self._apply_hash(action, ops)
        return self._apply_entry(action, ops)

    def verify_done(self, action: Action) -> str | None:
        target = action.target
        client = self._client(target["server"])
        if action.kind == DELETE_REDIS_HASH:
            return f"key {target['key']} still exists" if client.exists(target["key"]) else None
        if _type_name(client.type(target["list"])) != "list":
            return None
        if client.lpos(target["list"], bytes.fromhex(target["entry_hex"])) is not None:
            return f"{_entry_name(target)} is still in {target['list']}"
        return None

    def census(self) -> dict[str, Any]:
        """Per server and prefix: hashes outside the plan lacking ``envelope`` or ``timestamp``.

        slimta creates a message hash with both (HSETNX, then HMSET in one pipeline) and removes
        it whole (DEL), so a running queue keeps this count; a purger that deleted fields or
        half of something it did not name would change it.
        """
        out: dict[str, Any] = {}
        for (text, prefix), named in sorted(self._named.items()):
            client = self._client(text)
            keys = {
                key
                for key in client.scan_iter(
                    match=glob_escape(prefix) + "*", count=SCAN_COUNT, _type="hash"
                )
                if key not in named
            }
            lacking = _settled(_lacking(client, keys), lambda ks, c=client: _lacking(c, ks))
            out[f"{self._server(text).where} {prefix}*"] = {
                "hashes_without_envelope_or_timestamp": len(lacking)
            }
        return out

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # -- delete_redis_hash -------------------------------------------------------------------

    def _verify_hash(self, action: Action) -> Verdict:
        return self._check_hash(action, self._client(action.target["server"]), {})

    @staticmethod
    def _check_hash(action: Action, conn: Any, seen: dict[str, int]) -> Verdict:
        """The hash as planned (its fields' digest), through `conn` (a client, or a pipeline
        watching the key); its size goes to ``seen["bytes"]``."""
        key = action.target["key"]
        kind = _type_name(conn.type(key))
        if kind == "none":
            return Verdict(True, already_done=True)
        if kind != "hash":
            return Verdict(False, f"{key} is a Redis {kind} now, not a hash")
        fields = conn.hgetall(key)
        if not fields:  # deleted between TYPE and HGETALL
            return Verdict(True, already_done=True)
        if hash_fields_digest(fields) != action.precondition["fields_sha256"]:
            return Verdict(False, CHANGED_HASH)
        seen["bytes"] = _hash_size(fields)
        return Verdict(True)

    def _watch_hash(self, action: Action, pipe: Any, seen: dict[str, int]) -> Verdict:
        """The last check of a hash delete: WATCH the key, then check it on that connection, so
        that any write to it from now on makes the EXEC of the delete fail."""
        pipe.watch(action.target["key"])
        return self._check_hash(action, pipe, seen)

    def _apply_hash(self, action: Action, ops: Operations) -> dict[str, Any]:
        import redis

        target = action.target
        key = target["key"]
        client = self._client(target["server"])
        label = f"delete hash {key}"
        for _ in range(WATCH_ATTEMPTS):
            seen: dict[str, int] = {}
            with client.pipeline(transaction=True) as pipe:
                # The rate slot, then WATCH and the check, then at once MULTI/DEL/EXEC.
                if not ops.destructive(label, partial(self._watch_hash, action, pipe, seen)):
                    return {"keys": 0, "bytes": 0}
                pipe.multi()
                pipe.delete(key)
                try:
                    pipe.execute()
                except redis.WatchError:
                    # slimta wrote the key between the check and the EXEC: nothing was
                    # deleted; the next attempt waits for its slot and checks it again.
                    continue
                ops.completed(label)
                return {"keys": 1, "bytes": seen["bytes"]}
        raise TargetChanged(
            f"Redis key {key} kept changing between the check and the delete "
            f"(WATCH aborted {WATCH_ATTEMPTS} attempts)"
        )

    # -- remove_queue_entry ------------------------------------------------------------------

    def _verify_entry(self, action: Action) -> Verdict:
        target = action.target
        text, message_key = target["server"], action.precondition["message_key"]
        client = self._client(text)
        verdict = self._check_entry(action, client)
        if verdict.ok or verdict.reason != ENTRY_MESSAGE_EXISTS:
            return verdict
        # In a dry run the hash an earlier action deletes is still there: the entry would go
        # when that action does. (When applying, that action has run: the key is gone, or it
        # changed and was skipped, and then so is this entry.)
        earlier = self._hash_actions.get((text, message_key))
        if (
            earlier is not None
            and earlier[0] < action.seq
            and _type_name(client.type(message_key)) == "hash"
            and hash_fields_digest(client.hgetall(message_key)) == earlier[1]
        ):
            return Verdict(True, detail={"message_deleted_first_by_action": earlier[0]})
        return verdict

    @staticmethod
    def _check_entry(action: Action, conn: Any) -> Verdict:
        """The entry still in its list and still dangling (no message key), through `conn` (a
        client, or a pipeline watching the list and the message key)."""
        target = action.target
        queue = target["list"]
        kind = _type_name(conn.type(queue))
        if kind == "none":
            return Verdict(True, already_done=True)
        if kind != "list":
            return Verdict(False, f"{queue} is a Redis {kind} now, not a list")
        if conn.lpos(queue, bytes.fromhex(target["entry_hex"])) is None:
            return Verdict(True, already_done=True)
        if conn.exists(action.precondition["message_key"]):
            return Verdict(False, ENTRY_MESSAGE_EXISTS)
        return Verdict(True)

    def _watch_entry(self, action: Action, pipe: Any) -> Verdict:
        """The last check of an entry removal: WATCH the list and the message key, then check
        on that connection (a push, a pop or the message written again aborts the EXEC)."""
        pipe.watch(action.target["list"], action.precondition["message_key"])
        return self._check_entry(action, pipe)

    def _apply_entry(self, action: Action, ops: Operations) -> dict[str, Any]:
        import redis

        target = action.target
        queue, value = target["list"], bytes.fromhex(target["entry_hex"])
        client = self._client(target["server"])
        label = f"remove {_entry_name(target)} from {queue}"
        for _ in range(QUEUE_WATCH_ATTEMPTS):
            with client.pipeline(transaction=True) as pipe:
                if not ops.destructive(label, partial(self._watch_entry, action, pipe)):
                    return {"entries": 0, "bytes": 0}
                pipe.multi()
                pipe.lrem(queue, 0, value)
                try:
                    (count,) = pipe.execute()
                except redis.WatchError:
                    # slimta pushed or popped (or wrote the message) between the check and the
                    # EXEC: nothing was removed; the next attempt checks again after its slot.
                    continue
                ops.completed(label)
                return {"entries": int(count), "bytes": int(count) * len(value)}
        raise TargetChanged(
            f"{queue} kept changing between the check and the removal of {_entry_name(target)} "
            f"(WATCH aborted {QUEUE_WATCH_ATTEMPTS} attempts)"
        )


def _entry_name(target: dict[str, Any]) -> str:
    message_id = target.get("id")
    return f"the entry naming {message_id}" if message_id else "the undecodable entry"


def _lacking(client: Any, keys: Iterable[bytes]) -> set[bytes]:
    """The `keys` that are hashes without an ``envelope`` or a ``timestamp`` field."""
    lacking: set[bytes] = set()
    ordered = sorted(keys)
    for start in range(0, len(ordered), PIPELINE_BATCH):
        batch = ordered[start : start + PIPELINE_BATCH]
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.type(key)
            pipe.hexists(key, "envelope")
            pipe.hexists(key, "timestamp")
        replies = pipe.execute(raise_on_error=False)
        for index, key in enumerate(batch):
            kind, envelope, timestamp = replies[3 * index : 3 * index + 3]
            if any(isinstance(r, Exception) for r in (kind, envelope, timestamp)):
                continue  # replaced by another type since the scan: not a message hash
            if _type_name(kind) != "hash":
                continue  # removed since the scan: slimta finished with it
            if not envelope or not timestamp:
                lacking.add(key)
    return lacking


def classify_redis_error(exc: BaseException) -> str | None:
    """ "auth" for a refused login, "retry" for a server away or slow, else None."""
    import redis

    text = str(exc)
    if isinstance(exc, redis.AuthenticationError) or any(
        word in text for word in ("NOAUTH", "WRONGPASS", "NOPERM")
    ):
        return "auth"
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | redis.BusyLoadingError):
        return "retry"
    if isinstance(exc, ConnectionError | TimeoutError):
        return "retry"
    return None


# -- S3 --------------------------------------------------------------------------------------


def _second(value: Any) -> str | None:
    """An instant as ``YYYY-MM-DDTHH:MM:SSZ``: HEAD's Last-Modified has whole seconds only."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


OVERWRITTEN_AT_DELETE = "object overwritten between the check and the delete (If-Match refused)"


class S3Executor:
    """Deletes the objects of slimta's cloud storage a plan names, each still as planned."""

    kinds = (DELETE_OBJECT,)

    def __init__(self, plan: Plan, endpoint: S3Endpoint) -> None:
        for action in plan.actions():
            if action.kind in self.kinds:
                _check_backend(action, "s3")
                for name in ("bucket", "key", "id"):
                    _text(action.target.get(name), action, name)
                pre = action.precondition
                if not isinstance(pre.get("etag"), str) or not isinstance(pre.get("size"), int):
                    raise _bad(action, "precondition must give the object's etag and size")
                if not isinstance(pre.get("metadata", {}), dict) or not isinstance(
                    pre.get("last_modified", ""), str
                ):
                    raise _bad(
                        action, "precondition metadata must be an object, last_modified text"
                    )
        self.endpoint = endpoint
        self._s3: Any = None

    def _client(self) -> Any:
        if self._s3 is None:
            self._s3 = self.endpoint.client()
        return self._s3

    def _head(self, target: dict[str, Any]) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return dict(self._client().head_object(Bucket=target["bucket"], Key=target["key"]))
        except ClientError as exc:
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    @staticmethod
    def _drift(head: dict[str, Any], pre: dict[str, Any]) -> str | None:
        etag = str(head.get("ETag") or "").strip('"')
        if int(head.get("ContentLength", -1)) != pre["size"] or etag != pre["etag"].strip('"'):
            return CHANGED_OBJECT
        # slimta counts attempts by rewriting the user metadata (a copy onto itself), which
        # keeps the ETag, the MD5 of the unchanged body: only these optional keys can see it.
        if "metadata" in pre and dict(head.get("Metadata") or {}) != pre["metadata"]:
            return CHANGED_OBJECT_METADATA
        if "last_modified" in pre and _second(head.get("LastModified")) != _second(
            pre["last_modified"]
        ):
            return CHANGED_OBJECT_METADATA
        return None

    def classify(self, exc: BaseException) -> str | None:
        return classify_s3_error(exc)

    def verify(self, action: Action) -> Verdict:
        head = self._head(action.target)
        if head is None:
            return Verdict(True, already_done=True)
        drift = self._drift(head, action.precondition)
        return Verdict(False, drift) if drift else Verdict(True)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        target, pre = action.target, action.precondition
        label = f"delete object s3://{target['bucket']}/{target['key']}"
        # The rate slot, then HEAD (size, ETag, metadata, Last-Modified as planned), then at
        # once the delete.
        if not ops.destructive(label, partial(self.verify, action)):
            return {"objects": 0, "bytes": 0}
        # If-Match the ETag the check just saw (the planned one): an overwrite since the HEAD
        # makes it fail (412). A rewrite that keeps the ETag (slimta's metadata) is not seen.
        etag = '"' + pre["etag"].strip('"') + '"'
        if not delete_if_match(
            self._client(), target["bucket"], target["key"], etag, OVERWRITTEN_AT_DELETE
        ):
            return {"objects": 0, "bytes": 0}  # deleted by someone else since the HEAD
        ops.completed(label)
        return {"objects": 1, "bytes": int(pre["size"])}

    def verify_done(self, action: Action) -> str | None:
        target = action.target
        if self._head(target) is not None:
            return f"object s3://{target['bucket']}/{target['key']} still exists"
        return None

    def census(self) -> dict[str, Any]:
        # Nothing: a DeleteObject of one key cannot touch another object, and every delete is
        # conditional on the named object's ETag; a full listing of a live queue bucket would
        # also never be stable while slimta writes and removes messages.
        return {}

    def close(self) -> None:
        return None


# -- factory ---------------------------------------------------------------------------------


def build_executors(plan: Plan, options: PurgeOptions | None = None) -> list[Any]:
    """The executors of the kinds the plan holds: endpoints from the purge options (``redis``,
    ``s3_endpoint``) or the plan, logins only from the environment."""
    options = options or PurgeOptions()
    kinds = {action.kind for action in plan.actions()}
    executors: list[Any] = []
    if DELETE_FILES in kinds:
        executors.append(DiskExecutor(plan))
    if kinds & {DELETE_REDIS_HASH, REMOVE_QUEUE_ENTRY}:
        executors.append(RedisExecutor(plan, redis_override(options.redis)))
    if DELETE_OBJECT in kinds:
        s3 = S3Endpoint.from_env()
        if options.s3_endpoint:
            s3 = S3Endpoint(options.s3_endpoint, s3.region, s3.access_key, s3.secret_key)
        executors.append(S3Executor(plan, s3))
    return executors


def redis_override(url: str | None) -> RedisServer | None:
    """The server of ``--redis`` (its login only from the environment: `RedisServer.parse`)."""
    return RedisServer.parse(url) if url else None
