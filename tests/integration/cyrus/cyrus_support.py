"""A tagged scenario of users, folders, shares, renames and deletes made over IMAP on the real
Cyrus 3.6 of the test session, and ways to read what it left in `mailboxes.db`."""

from __future__ import annotations

import imaplib
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from mqforensics.services import cyrus as cyrus_service
from mqforensics.systems.cyrus import dbchecks, records, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.dbtool import DbTool
from mqforensics.systems.cyrus.imap_acl import ImapAdmin, quote

PASSWORD = "scenario-pw"
DOMAIN = "example.org"  # the server's defaultdomain
OTHER = "other.test"


def ok(result: tuple[str, list]) -> list:
    status, data = result
    assert status == "OK", data
    return data


def login(info: dict, user: str, password: str = PASSWORD) -> imaplib.IMAP4:
    imap = imaplib.IMAP4(info["host"], info["port"], timeout=10)
    imap.login(user, password)
    return imap


def admin(info: dict) -> ImapAdmin:
    return ImapAdmin(info["host"], info["port"], info["username"], info["password"])


def setacl(info: dict, mailbox: str, identifier: str, rights: str) -> None:
    """SETACL as the admin on an admin-visible name (``+w`` adds a right, ``""`` deletes)."""
    imap = login(info, info["username"], info["password"])
    try:
        if rights:
            ok(imap._simple_command("SETACL", quote(mailbox), quote(identifier), quote(rights)))
        else:
            ok(imap._simple_command("DELETEACL", quote(mailbox), quote(identifier)))
    finally:
        imap.logout()


def rights(info: dict, mailbox: str, identifier: str) -> str | None:
    """The identifier's rights on an admin-visible name, None without an entry."""
    session = admin(info)
    try:
        return session.getacl(mailbox).get(identifier)
    finally:
        session.close()


def legacy_grant(info: dict, intname: str, identifier: str, granted: str) -> None:
    """Put a grant Cyrus 3.6 refuses to make over IMAP (an identifier its auth module cannot
    canonify, as older versions or ``ctl_mboxlist -u`` leave them) into the mailbox's record,
    with the RACL key Cyrus would keep for it."""
    tool = DbTool.for_mailboxes(Path(info["config"]))
    key = b"N" + records.intname_to_dbname(intname).encode()
    value = tool.get(key)
    assert value is not None and value.count(b" A %(") == 1, value
    entry = f"{identifier} {granted} ".encode()
    shared = records.owner_of(intname) is None
    racl = records.racl_key((3, 6, 1), shared, identifier, intname)
    tool.set_keys([(key, value.replace(b" A %(", b" A %(" + entry)), (racl, b"")])


@dataclass
class Scenario:
    """Userids (local parts) of one run; `tag` keeps runs on one server apart."""

    tag: str
    users: dict[str, str] = field(default_factory=dict)  # role -> login (local@domain)

    def local(self, role: str) -> str:
        return self.users[role].partition("@")[0]


def build(info: dict) -> Scenario:
    """ann shares folders with ben (``ben@example.org``, negative, and bare ``ben``), cat of
    another domain, anyone, eve (``p`` only, and ``lr`` on Private) and dan; renames one shared
    folder, deletes another (delayed delete keeps it as a ``DELETED.`` mailbox); ben shares his
    Notes with ``ann@example.org`` and ``eve@example.org``; the admin makes a shared folder and
    deletes dan's account, whose grants stay behind.

    Grants written ``user@example.org`` (the default domain) give that user no access at all on
    3.6.1: Cyrus compares identifiers verbatim with the bare login userid."""
    tag = uuid.uuid4().hex[:6]
    s = Scenario(tag)
    for role in ("ann", "ben", "dan", "eve"):
        s.users[role] = f"{role}{tag}@{DOMAIN}"
    s.users["cat"] = f"cat{tag}@{OTHER}"
    for user in s.users.values():
        cyrus_service.add_user(info, user, PASSWORD)
    root = login(info, info["username"], info["password"])
    for user in s.users.values():
        local, _, domain = user.partition("@")
        ok(root.create(f"user/{local}@{domain}" if domain != DOMAIN else f"user/{local}"))
    ann = login(info, s.users["ann"])
    for folder in ("Projects", "Projects/Q1", "Dot.ted", "Private"):
        ok(ann.create(folder))
    ben, cat, eve, dan = (s.users[r] for r in ("ben", "cat", "eve", "dan"))
    ok(ann.setacl("Projects", ben, "lr"))
    ok(ann.setacl("Projects", f"-{ben}", "w"))
    ok(ann.setacl("Projects", cat, "lrs"))
    ok(ann.setacl("Projects", "anyone", "lr"))
    ok(ann.setacl("Projects", s.local("eve"), "p"))  # bare userid, rights that make no RACL
    ok(ann.setacl("Projects", dan, "lr"))
    ok(ann.setacl("Projects/Q1", s.local("ben"), "r"))  # bare userid in the default domain
    ok(ann.setacl("Dot.ted", s.local("ben"), "lrs"))
    ok(ann.setacl("Private", s.local("eve"), "lr"))  # the one grant eve can LIST (bare userid)
    ok(ann.rename("Projects", "Archive"))  # the children and every grant move with it
    ok(ann.delete("Dot.ted"))  # delayed delete: DELETED/user/ann/Dot.ted/<hex>, ACL kept
    ann.logout()
    with_ben = login(info, ben)
    ok(with_ben.create("Notes"))
    ok(with_ben.setacl("Notes", s.users["ann"], "lrsw"))
    ok(with_ben.setacl("Notes", eve, "lr"))
    with_ben.logout()
    ok(root.create(f"shared{tag}/board"))
    ok(root.setacl(f"shared{tag}/board", ben, "lrs"))
    ok(root.setacl(f"shared{tag}/board", "group:staff", "lr"))
    ok(root.setacl(f"shared{tag}/board", f"ghost{tag}", "lr"))  # no such user, ever
    ok(root.setacl(f"user/{s.local('dan')}", info["username"], "x"))
    ok(root.delete(f"user/{s.local('dan')}"))  # dan's grant on ann's Archive stays
    root.logout()
    return s


def snapshot(info: dict, target: Path) -> Path:
    """A copy of the live mailboxes.db (nothing writes it while a test reads)."""
    shutil.copyfile(info["mailboxes_db"], target)
    return target


def read_db(path: Path) -> Database:
    parsed = twoskip.read(path.read_bytes(), name=str(path))
    assert parsed.complete, parsed.problems
    return Database.from_file(parsed)


def racl_findings(db: Database) -> list:
    return [f for f in dbchecks.run_checks(db, default_domain=DOMAIN) if f.scope == "racl"]
