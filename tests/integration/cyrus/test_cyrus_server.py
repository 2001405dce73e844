"""Against the session's real Cyrus IMAP 3.6 (Debian): users, shares, and the RACL keys they leave.

Key formats per /work/shared/reference/cyrus.md §2 and §4.2 (3.6+): ``N`` ‖ dbname for a mailbox,
``A`` ‖ ``U``/``S`` ‖ RS ‖ acluser ‖ RS ‖ dbname for a reverse ACL, ``AS`` RS as the "RACLs on"
marker; dbnames use US (0x1F) between components and drop the default domain.
"""

from __future__ import annotations

import imaplib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from mqforensics.services import cyrus as cyrus_service
from mqforensics.services.harness import SESSIONS_BASE, Harness
from mqforensics.services.process import pid_alive
from tests.server_probes import all_pids, cmdline

pytestmark = pytest.mark.integration

RS, US = "\x1e", "\x1f"


def _imap(info: dict, user: str, password: str) -> imaplib.IMAP4:
    imap = imaplib.IMAP4(info["host"], info["port"], timeout=10)
    imap.login(user, password)
    return imap


def _ok(result: tuple[str, list]) -> list:
    status, data = result
    assert status == "OK", data
    return data


@pytest.fixture(scope="module")
def shared(cyrus):
    """alice shares Shared-<tag> with bob (lrs) and anyone (lr); bob has a folder of his own."""
    tag = uuid.uuid4().hex[:6]
    alice, bob = f"alice{tag}", f"bob{tag}"
    users = {alice: "alice-pw", bob: "bob-pw"}
    for local, password in users.items():
        cyrus_service.add_user(cyrus, f"{local}@example.org", password)
    admin = _imap(cyrus, cyrus["username"], cyrus["password"])
    for local in users:  # no autocreate: the admin makes each INBOX
        _ok(admin.create(f"user/{local}@example.org"))
    admin.logout()
    folder = f"Shared-{tag}"
    with_alice = _imap(cyrus, f"{alice}@example.org", users[alice])
    _ok(with_alice.create(folder))
    _ok(with_alice.create(f"{folder}/Sub"))
    _ok(with_alice.setacl(folder, f"{bob}@example.org", "lrs"))
    _ok(with_alice.setacl(folder, "anyone", "lr"))
    acl = _ok(with_alice.getacl(folder))[0].decode()
    with_alice.logout()
    with_bob = _imap(cyrus, f"{bob}@example.org", users[bob])
    _ok(with_bob.create("Mine"))
    listed = b"\n".join(_ok(with_bob.list()))
    with_bob.logout()
    return {"alice": alice, "bob": bob, "folder": folder, "acl": acl, "bob_list": listed}


def test_users_log_in_create_folders_and_share(shared):
    acl = shared["acl"].split()
    assert acl[0] == shared["folder"]
    entries = dict(zip(acl[1::2], acl[2::2], strict=True))
    # The grantee is stored as SETACL named it (with the default domain, unlike mailbox names);
    # the owner keeps every right.
    assert entries[f"{shared['bob']}@example.org"] == "lrs"
    assert entries["anyone"] == "lr"
    assert entries[shared["alice"]] == "lrswipkxtecdan"
    # bob sees his own folder and alice's share under "Other Users".
    assert b'"Mine"' in shared["bob_list"] or b" Mine" in shared["bob_list"]
    assert f"{shared['alice']}/{shared['folder']}".encode() in shared["bob_list"]


def test_mailboxes_db_copy_has_name_and_racl_keys(cyrus, shared):
    copy = cyrus_service.copy_for_tools(cyrus, cyrus["mailboxes_db"])
    try:
        out = cyrus_service.run_tool(cyrus, "cyr_dbtool", str(copy), "twoskip", "show")
    finally:
        copy.unlink()
    keys = {line.split("\t", 1)[0] for line in out.split("\n") if "\t" in line}
    dbname = f"user{US}{shared['alice']}{US}{shared['folder']}"
    assert f"N{dbname}" in keys  # the default domain is dropped from the dbname
    assert f"N{dbname}{US}Sub" in keys
    assert f"AU{RS}{shared['bob']}@example.org{RS}{dbname}" in keys
    assert f"AU{RS}anyone{RS}{dbname}" in keys
    assert f"AS{RS}" in keys  # reverseacls: yes, written by `ctl_cyrusdb -r` at START
    # No RACL key for the owner, nor for the admin.
    assert not any(key.startswith(f"AU{RS}{shared['alice']}") for key in keys)
    assert not any(key.startswith(f"AU{RS}cyrus{RS}") for key in keys)


def test_stop_leaves_no_cyrus_process():
    """A private instance: SIGTERM to master's group ends master and every imapd."""
    SESSIONS_BASE.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="cyrus-stop-", dir=SESSIONS_BASE))
    root.chmod(0o755)  # master and the tools run as `cyrus`
    harness = Harness(root)
    try:
        info = harness.ensure("cyrus")
        _imap(info, info["username"], info["password"]).logout()  # forks an imapd
        server = harness.server_dir("cyrus")
        members = _group_members(int(info["pid"]))
        assert len(members) >= 2, members  # master and at least one imapd
        assert harness.stop("cyrus")
        assert not [pid for pid in members if pid_alive(pid)]
        assert not any(str(server.path) in cmdline(pid) for pid in all_pids() if pid_alive(pid))
    finally:
        harness.stop_all(["cyrus"])
        shutil.rmtree(root, ignore_errors=True)


def _group_members(pgid: int) -> list[int]:
    members = []
    for pid in all_pids():
        try:
            if os.getpgid(pid) == pgid:
                members.append(pid)
        except ProcessLookupError:
            continue
    return members
