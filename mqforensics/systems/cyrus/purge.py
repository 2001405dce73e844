"""The purger's executors for Cyrus plans (`plan`): DELETEACL actions over IMAP, RACL keys
through ``cyr_dbtool``. Both census what the plan does not name (every other ACL entry; every
other RACL key) so the engine can prove nothing else changed. Credentials come from the
environment only.

`AclExecutor`, a grant's rights removed as an admin over IMAP. Last check, after the rate wait:
a GETACL of the mailbox; the grant must still hold exactly the planned rights (else skipped:
changed since the plan), an absent identifier is already done, a mailbox that is gone (renamed
or deleted) is skipped. IMAP has no conditional DELETEACL, so the delete is
``SETACL mailbox identifier -<planned rights>`` (RFC 4314): Cyrus applies it atomically and drops
the entry, and its RACL key, when no right is left (3.6.1, verified). Rights granted between the
check and that command survive it; a GETACL right after it finds them and the action is skipped
("... were kept: <rights>"). Remaining window: one IMAP round trip (check, then SETACL) in which
a change that only *takes* planned rights away is not told apart (the entry goes, as planned);
nothing granted in it is lost. Cyrus refuses SETACL with rights for an identifier it cannot
canonify (a ``group:`` that no longer exists, over 80 bytes, ``&``, ``/``, non-ASCII: legacy
entries); for those the executor checks again (a new rate slot, a new GETACL) and removes the
entry with DELETEACL, which removes whatever it holds then: rights granted in that round trip are
lost with it (its ``removed`` record says ``"method": "DELETEACL"``).

`RaclExecutor`, RACL keys added or removed in the live `mailboxes.db`. Last check, after the
rate wait: the key, its mailbox's record and the RACL marker read by ``cyr_dbtool`` inside one
transaction (`dbtool.Transaction`), which takes the database's write lock; the key's write and
``COMMIT`` follow in the same process, so the lock is held from the check to the write. Cyrus
writes a mailbox's ACL and its RACL keys under that same lock, so no grant can change between
the check and the write: remaining window none (a grant changed meanwhile waits for the commit,
then Cyrus updates the keys for it as usual). The lock is held for milliseconds (no wait comes
between the read and the commit); a server without the marker (RACLs off) is skipped.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mqforensics.errors import ConfigError
from mqforensics.purge.contract import Operations, TargetChanged, Verdict
from mqforensics.retention.manifest import Action, Plan
from mqforensics.systems.cyrus import records
from mqforensics.systems.cyrus.dbtool import DEFAULT_TOOLS, DEFAULT_USER, DbTool, Transaction
from mqforensics.systems.cyrus.imap_acl import (
    ImapAdmin,
    InvalidIdentifier,
    NoSuchMailbox,
    classify_error,
)
from mqforensics.systems.cyrus.options import PurgeOptions
from mqforensics.systems.cyrus.plan import DELETE_ACL, RACL_ADD, RACL_REMOVE

NO_MARKER = (
    "reverse ACLs are off on the server (no RACL marker key): Cyrus neither uses nor keeps these "
    "keys; fix reverseacls and restart (ctl_cyrusdb -r rebuilds them)"
)


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
        ident, planned = action.target["identifier"], action.precondition["rights"]
        check = partial(self.verify, action)
        if not ops.destructive("remove rights", check):
            return {"removed_rights": ""}
        try:
            self.admin.remove_rights(name, ident, planned)
        except InvalidIdentifier:
            return self._deleteacl(action, ops, name)
        except NoSuchMailbox:
            raise TargetChanged(
                f"mailbox {name} was renamed or deleted between the check and the delete"
            ) from None
        ops.completed("remove rights")
        acl = self._acl(action)
        if acl is not None and ident in acl:
            kept = acl[ident]
            if set(planned) <= set(kept):
                raise TargetChanged(
                    f"{ident} on {name} still holds {kept} after SETACL -{planned}: granted "
                    "again between the check and the delete, or Cyrus applied the removal to "
                    "another spelling of the identifier (it lowercases and canonicalises names)"
                )
            raise TargetChanged(
                f"rights granted to {ident} on {name} between the check and the delete "
                f"were kept: {kept}"
            )
        return {"removed_rights": planned}

    def _deleteacl(self, action: Action, ops: Operations, name: str) -> dict[str, Any]:
        """For an identifier Cyrus will not take in a SETACL with rights: a new check, then
        DELETEACL, which removes the whole entry (rights granted since the check included)."""
        if not ops.destructive("deleteacl", partial(self.verify, action)):
            return {"removed_rights": ""}
        try:
            self.admin.deleteacl(name, action.target["identifier"])
        except NoSuchMailbox:
            raise TargetChanged(
                f"mailbox {name} was renamed or deleted between the check and the delete"
            ) from None
        ops.completed("deleteacl")
        return {"removed_rights": action.precondition["rights"], "method": "DELETEACL"}

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

    def _record_key(self, intname: str) -> bytes:
        """The key of a mailbox's record: ``N`` + dbname (3.6+), the intname before."""
        if records.parse_version(self.version) >= (3, 6, 0):
            dbname = records.intname_to_dbname(intname)
            return b"N" + dbname.encode("utf-8", "surrogateescape")
        return intname.encode("utf-8", "surrogateescape")

    def _reads(self, action: Action) -> list[bytes]:
        """What a check reads: the key and its mailbox's record (and the marker, apart)."""
        key = bytes.fromhex(action.target["key_hex"])
        return [key, self._record_key(action.precondition["mailbox"])]

    def _needed(self, action: Action, values: dict[bytes, bytes]) -> bool:
        """Whether the mailbox record in `values` (key -> value of those of `_reads` that are
        present) needs the key under the version's rule."""
        key, record_key = self._reads(action)
        record = values.get(record_key)
        mailbox = action.precondition["mailbox"]
        return record is not None and key in records.expected_racls(
            [records.decode_value(mailbox, record)], self.version, self.admins
        )

    def _verdict(self, action: Action, values: dict[bytes, bytes]) -> Verdict:
        """The key must still be needed (add) or unneeded (remove) by the live mailbox record;
        `values` also holds the marker when it is present."""
        if self._marker not in values:
            return Verdict(False, NO_MARKER)
        needed = self._needed(action, values)
        present = self._reads(action)[0] in values
        if action.kind == RACL_ADD:
            if not needed:
                return Verdict(False, "the grant that needs this key is gone or changed")
            return Verdict(True, already_done=present)
        if needed:
            return Verdict(False, "a grant now needs this key")
        return Verdict(True, already_done=not present)

    def verify(self, action: Action) -> Verdict:
        return self._verdict(action, self.tool.get_many([*self._reads(action), self._marker]))

    def _locked_check(self, action: Action, txn: Transaction) -> Verdict:
        """The last check: the same reads in `txn`, whose lock stays held until its commit."""
        return self._verdict(action, txn.read(self._reads(action), sentinel=self._marker))

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        key = bytes.fromhex(action.target["key_hex"])
        adding = action.kind == RACL_ADD
        label, what = ("racl add", "added") if adding else ("racl remove", "removed")
        with self.tool.transaction() as txn:
            if not ops.destructive(label, partial(self._locked_check, action, txn)):
                return {what: False}
            if adding:
                txn.commit(sets=[(key, b"")])
            else:
                txn.commit(deletes=[key])
            ops.completed(label)
        return {what: True}

    def verify_done(self, action: Action) -> str | None:
        """None when the key agrees with the live rule: a grant changed after the action (Cyrus
        then added or removed the key itself) is no problem of the purge."""
        values = self.tool.get_many([*self._reads(action), self._marker])
        if self._marker not in values:
            return NO_MARKER
        present, needed = self._reads(action)[0] in values, self._needed(action, values)
        if present and not needed:
            return "key still present, and no grant needs it"
        if needed and not present:
            return "key absent, and a grant needs it"
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


def _imap_admin(options: PurgeOptions) -> ImapAdmin:
    where = options.imap
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
    return ImapAdmin(host, int(port), username, password, use_ssl=options.imap_ssl)


def build_executors(plan: Plan, options: PurgeOptions | None = None) -> list[Any]:
    """The executors a Cyrus plan's action kinds need, from the purge command line and the
    plan header's inputs (the version and admins the rules were applied with). RACL actions
    change one server's database (``--cyrus-config``): a plan repairing the keys of several
    audited databases is refused."""
    options = options or PurgeOptions()
    kinds = _kinds(plan)
    inputs = plan.header.get("inputs") or {}
    executors: list[Any] = []
    if kinds & {RACL_ADD, RACL_REMOVE}:
        files = sorted({str(a.target.get("file")) for a in _planned(plan, (RACL_ADD, RACL_REMOVE))})
        if len(files) > 1:
            raise ConfigError(
                f"the plan changes the RACL keys of {len(files)} databases ({', '.join(files)}): "
                "--cyrus-config names one server's mailboxes.db; plan each backend from an "
                "audit of its own database"
            )
        config = options.cyrus_config
        if not config:
            raise ConfigError(
                "the plan changes RACL keys: give the server's imapd.conf with --cyrus-config"
            )
        tools = Path(options.cyrus_tools or DEFAULT_TOOLS)
        user = options.cyrus_user or DEFAULT_USER
        tool = DbTool.for_mailboxes(Path(config), tools, user)
        executors.append(RaclExecutor(plan, tool, inputs["version"], inputs["admins"]))
    if DELETE_ACL in kinds:
        executors.append(AclExecutor(plan, _imap_admin(options)))
    return executors
