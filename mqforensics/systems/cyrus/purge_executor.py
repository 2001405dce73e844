"""The purger's executors for Cyrus plans (`planner`): DELETEACL over IMAP, RACL keys by
``cyr_dbtool``.

`AclExecutor` re-reads the mailbox's ACL with GETACL right before each DELETEACL: the grant
must still hold exactly the planned rights (else the action is skipped: someone changed it since
the plan), an absent identifier is already done, a mailbox that is gone (renamed or deleted) is
skipped. `RaclExecutor` re-reads the key and its mailbox record through ``cyr_dbtool`` (under
the database lock) and adds or removes the key only while the version's rule still says so.
Both census what the plan does not name (every other ACL entry; every other RACL key) so the
engine can prove nothing else changed. Credentials come from the environment only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError
from mqforensics.purge.engine import Operations, Verdict
from mqforensics.retention.manifest import Action, Plan
from mqforensics.systems.cyrus import records
from mqforensics.systems.cyrus.dbtool import DEFAULT_TOOLS, DEFAULT_USER, DbTool
from mqforensics.systems.cyrus.imap_acl import ImapAdmin, NoSuchMailbox, classify_error
from mqforensics.systems.cyrus.planner import DELETE_ACL, RACL_ADD, RACL_REMOVE


def _digest(values: Iterable[str]) -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0
    for value in sorted(values):
        digest.update(value.encode("utf-8", "surrogateescape") + b"\n")
        count += 1
    return count, digest.hexdigest()


def _planned(plan: Plan, kinds: Sequence[str]) -> list[Action]:
    return [a for a in plan.actions() if a.kind in kinds]


class AclExecutor:
    """DELETEACL actions against a live Cyrus, as an admin over IMAP."""

    kinds = (DELETE_ACL,)

    def __init__(self, plan: Plan, admin: ImapAdmin) -> None:
        self.admin = admin
        self._planned = {
            (a.target["mailbox"], a.target["identifier"]) for a in _planned(plan, self.kinds)
        }

    def classify(self, exc: BaseException) -> str | None:
        return classify_error(exc)

    def _acl(self, action: Action) -> dict[str, str] | None:
        try:
            return self.admin.getacl(self.admin.name_of(action.target["mailbox"]))
        except NoSuchMailbox:
            return None

    def verify(self, action: Action) -> Verdict:
        acl = self._acl(action)
        ident, planned = action.target["identifier"], action.precondition["rights"]
        if acl is None:
            return Verdict(False, "mailbox no longer exists (renamed or deleted): plan again")
        if ident not in acl:
            return Verdict(True, already_done=True)
        if acl[ident] != planned:
            return Verdict(False, f"rights changed since the plan ({planned} -> {acl[ident]})")
        return Verdict(True, detail={"rights": acl[ident]})

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        name = self.admin.name_of(action.target["mailbox"])
        ops.destructive("deleteacl")
        self.admin.deleteacl(name, action.target["identifier"])
        ops.completed("deleteacl")
        return {"removed_rights": action.precondition["rights"]}

    def verify_done(self, action: Action) -> str | None:
        acl = self._acl(action)
        ident = action.target["identifier"]
        if acl is not None and ident in acl:
            return f"still granted {acl[ident]}"
        return None

    def census(self) -> dict[str, Any]:
        """Every ACL entry of every mailbox the admin can LIST, except the planned ones."""
        entries = []
        inverse = {(self.admin.name_of(m), i) for m, i in self._planned}
        for mailbox in self.admin.mailboxes():
            try:
                acl = self.admin.getacl(mailbox)
            except NoSuchMailbox:  # deleted between LIST and GETACL
                continue
            entries += [
                f"{mailbox}\t{ident}\t{rights}"
                for ident, rights in acl.items()
                if (mailbox, ident) not in inverse
            ]
        count, digest = _digest(entries)
        return {"acl_entries": count, "acl_sha256": digest}

    def close(self) -> None:
        self.admin.close()


class RaclExecutor:
    """RACL key additions and removals on the live `mailboxes.db`, through ``cyr_dbtool``."""

    kinds = (RACL_ADD, RACL_REMOVE)

    def __init__(self, plan: Plan, tool: DbTool, version: str, admins: Sequence[str]) -> None:
        self.tool = tool
        self.version = version
        self.admins = tuple(admins)
        ver = records.parse_version(version)
        self._prefix = b"A" if ver >= (3, 6, 0) else b"$RACL"
        self._marker = records.racl_marker(version)
        excluded = {bytes.fromhex(a.target["key_hex"]) for a in _planned(plan, self.kinds)}
        # DELETEACL actions of the same plan take their grants' keys with them (Cyrus does).
        for action in _planned(plan, (DELETE_ACL,)):
            name = action.target["mailbox"]
            shared = records.owner_of(name) is None
            excluded.add(records.racl_key(ver, shared, action.target["identifier"], name))
        self._excluded = excluded

    def classify(self, exc: BaseException) -> str | None:
        return None  # cyr_dbtool failures are not transient: they stop the run

    def _entry(self, intname: str) -> records.MailboxEntry | None:
        ver = records.parse_version(self.version)
        key = (
            b"N" + records.intname_to_dbname(intname).encode("utf-8", "surrogateescape")
            if ver >= (3, 6, 0)
            else intname.encode("utf-8", "surrogateescape")
        )
        value = self.tool.get(key)
        return None if value is None else records.decode_value(intname, value)

    def _needed(self, action: Action) -> bool:
        """Whether the live mailbox record's ACL needs the key under the version's rule."""
        key = bytes.fromhex(action.target["key_hex"])
        entry = self._entry(action.precondition["mailbox"])
        return entry is not None and key in records.expected_racls(
            [entry], self.version, self.admins
        )

    def verify(self, action: Action) -> Verdict:
        key = bytes.fromhex(action.target["key_hex"])
        present = self.tool.get(key) is not None
        needed = self._needed(action)
        if action.kind == RACL_ADD:
            if not needed:
                return Verdict(False, "the grant that needs this key is gone or changed")
            return Verdict(True, already_done=present)
        if needed:
            return Verdict(False, "a grant now needs this key")
        return Verdict(True, already_done=not present)

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        key = bytes.fromhex(action.target["key_hex"])
        if action.kind == RACL_ADD:
            ops.destructive("racl add")
            self.tool.set_keys([(key, b"")])
            ops.completed("racl add")
            return {"added": True}
        ops.destructive("racl remove")
        self.tool.delete_keys([key])
        ops.completed("racl remove")
        return {"removed": True}

    def verify_done(self, action: Action) -> str | None:
        present = self.tool.get(bytes.fromhex(action.target["key_hex"])) is not None
        if action.kind == RACL_ADD and not present:
            return "key absent"
        if action.kind == RACL_REMOVE and present:
            return "key still present"
        return None

    def census(self) -> dict[str, Any]:
        """Every RACL key (and the marker) the plan does not name."""
        keys = [
            key.hex()
            for key, _ in self.tool.show(self._prefix)
            if key not in self._excluded
            and (key == self._marker or records.classify_key(key).kind in ("racl", "legacy_racl"))
        ]
        count, digest = _digest(keys)
        return {"racl_keys": count, "racl_sha256": digest}

    def close(self) -> None:
        return None


def _is_racl(key: bytes) -> bool:
    return records.classify_key(key).kind in ("racl", "legacy_racl")


def _kinds(plan: Plan) -> set[str]:
    totals = plan.header.get("totals") or {}
    return {kind for kind, t in totals.items() if isinstance(t, dict) and t.get("actions")}


def _imap_admin(args: argparse.Namespace) -> ImapAdmin:
    where = getattr(args, "imap", None)
    if not where:
        raise ConfigError("the plan has DELETEACL actions: give the server with --imap HOST:PORT")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--imap {where!r}: expected HOST:PORT")
    username = os.environ.get("MQF_IMAP_USERNAME")
    password = os.environ.get("MQF_IMAP_PASSWORD")
    if not username or not password:
        raise ConfigError(
            "the Cyrus admin login comes from MQF_IMAP_USERNAME and MQF_IMAP_PASSWORD (unset)"
        )
    return ImapAdmin(
        host, int(port), username, password, use_ssl=bool(getattr(args, "imap_ssl", False))
    )


def build_executors(plan: Plan, args: argparse.Namespace) -> list[Any]:
    """The executors a Cyrus plan's action kinds need, from the purge command line."""
    kinds = _kinds(plan)
    inputs = plan.header.get("inputs") or {}
    executors: list[Any] = []
    if kinds & {RACL_ADD, RACL_REMOVE}:
        config = getattr(args, "cyrus_config", None)
        if not config:
            raise ConfigError(
                "the plan changes RACL keys: give the server's imapd.conf with --cyrus-config"
            )
        tools = Path(getattr(args, "cyrus_tools", None) or DEFAULT_TOOLS)
        user = getattr(args, "cyrus_user", None) or DEFAULT_USER
        tool = DbTool.for_mailboxes(Path(config), tools, user)
        executors.append(RaclExecutor(plan, tool, inputs["version"], inputs["admins"]))
    if DELETE_ACL in kinds:
        executors.append(AclExecutor(plan, _imap_admin(args)))
    return executors
