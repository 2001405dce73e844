"""Make the real Cyrus `mailboxes.db` fixtures in tests/data/cyrus/ with Cyrus's own tools.

How the committed fixtures were made (Debian 12, cyrus-imapd 3.6.1-4+deb12u5):

    apt-get install -y cyrus-imapd cyrus-admin cyrus-clients sasl2-bin
    python datasets/cyrus/make_fixtures.py            # as root; writes tests/data/cyrus/

This script installs nothing and starts no server. It needs the Debian binaries under
/usr/lib/cyrus/bin/ and root (to run them as the `cyrus` user with `runuser`). Steps:

1. A scratch directory (owned by cyrus:mail) with a private `imapd.conf` (`reverseacls: yes`,
   `admins: cyrus`, `virtdomains: userid`, `defaultdomain: example.org`, `unixhierarchysep: 1`,
   `mboxlist_db: twoskip`); every tool gets `-C <that file>`, so /etc/imapd.conf and the system's
   databases are never touched.
2. `ctl_cyrusdb -r` creates `mailboxes.db` (twoskip) and writes the RACL marker `AS\\x1E`.
3. `ctl_mboxlist -u` undumps FIRST (JSON, the 3.6 dump format): users alice, bob, eve@example.com
   (cross-domain share to bob and frank@example.com), a shared folder with `anyone` and a quoted
   group identifier, a negative right `-dave lr`, an `anyone p` / `charlie p` entry (no RACL),
   a tombstone (`T ed`) and a delayed-delete `DELETED.user.bob.Trash.<hex>` mailbox. Cyrus writes
   the `N`, `I` and `A` (RACL) keys itself.
4. `ctl_mboxlist -u` undumps SECOND: bob's rights on user.alice.Shared become `s` and
   user.alice.Dot^ted turns into a tombstone, so Cyrus overwrites records and deletes RACL keys
   (superseded records and DELETE records stay in the file: `mailboxes_twoskip.db` has history).
5. Dumps of that file: `cyr_dbtool ... twoskip show` (`.show`), `cvt_cyrusdb ... flat` (`.flat`),
   `ctl_mboxlist -d` (`.ctl_mboxlist_d.json`) and `cyr_dbtool ... dump 3` (`.dump`).
6. `cvt_cyrusdb ... skiplist` converts it to `mailboxes_skiplist.db`, then `cyr_dbtool batch` adds
   one key and deletes another, so the skiplist file has INORDER, ADD, DELETE and COMMIT records;
   its `show` output is `mailboxes_skiplist.show`.
7. `evil_twoskip.db`: a fresh twoskip file written with `cyr_dbtool batch` SET/DELETE using
   non-synchronising literals (`{n+}`), with keys and values holding TAB, NUL, CR, LF and 0xFF;
   plus its `show`, `flat` and batch `SHOW` (`.batchshow`) outputs.

Every tool works on the scratch copy; the fixtures are copied out at the end. The `M` fields are
the time the undump ran and twoskip picks record levels at random, so a re-run gives different
bytes and offsets. The tests compare with the dumps of the same run, but the corruption tests
name byte offsets of the committed `mailboxes_twoskip.db` / `mailboxes_skiplist.db`: after a
re-run, update those offsets (from the new `.dump`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path("/usr/lib/cyrus/bin")
OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "cyrus"

ALL_RIGHTS = "lrswipkxtecdan"


def _entry(name: str, uid: str, n: int, acl: dict[str, str], mbtype: str = "e") -> dict:
    return {
        "name": name,
        "mtime": "1700000100",
        "uidvalidity": str(1700000000 + n),
        "createdmodseq": str(n),
        "foldermodseq": str(n + 4),
        "mbtype": mbtype,
        "partition": "default",
        "acl": acl,
        "uniqueid": uid,
        "name_history": [],
    }


def _uid(n: int) -> str:
    d = str(n)
    return f"{d * 8}-{d * 4}-4{d * 3}-8{d * 3}-{d * 12}"


FIRST = {
    "user.alice": _entry(
        "user.alice",
        _uid(1),
        1,
        {"alice": ALL_RIGHTS, "bob": "lr", "cyrus": ALL_RIGHTS, "anyone": "p"},
    ),
    "user.alice.Shared": _entry(
        "user.alice.Shared",
        _uid(2),
        2,
        {"alice": ALL_RIGHTS, "bob": "lrs", "-dave": "lr", "charlie": "p", "group:staff": "lr"},
    ),
    "user.alice.Dot^ted": _entry(
        "user.alice.Dot^ted", _uid(3), 3, {"alice": ALL_RIGHTS, "bob": "r"}
    ),
    "user.bob": _entry("user.bob", _uid(4), 4, {"bob": ALL_RIGHTS}),
    "example.com!user.eve": _entry(
        "example.com!user.eve",
        _uid(5),
        5,
        {"eve@example.com": ALL_RIGHTS, "bob": "lr", "frank@example.com": "lrs"},
    ),
    "shared.team": _entry(
        "shared.team",
        _uid(6),
        6,
        {"anyone": "lrs", "group:team co": "lrswi", "cyrus": "lrswipkxtecda"},
    ),
    "user.bob.Old": _entry(
        "user.bob.Old", _uid(7), 7, {"bob": ALL_RIGHTS, "alice": "lr"}, mbtype="ed"
    ),
    "DELETED.user.bob.Trash.65A0B1C2": _entry(
        "DELETED.user.bob.Trash.65A0B1C2", _uid(8), 8, {"bob": ALL_RIGHTS, "alice": "lr"}
    ),
}

SECOND = {
    "user.alice.Shared": _entry(
        "user.alice.Shared",
        _uid(2),
        2,
        {"alice": ALL_RIGHTS, "bob": "s", "-dave": "lr", "charlie": "p", "group:staff": "lr"},
    ),
    "user.alice.Dot^ted": _entry(
        "user.alice.Dot^ted", _uid(3), 3, {"alice": ALL_RIGHTS, "bob": "r"}, mbtype="ed"
    ),
}

EVIL = [
    (b"key\twith\x00nul", b"line1\nline2\r\xff end"),
    (b"plain", b"hello"),
    (b"tab\tvalue", b"a\tb\tc"),
    (b"gone", b"soon deleted"),
    (b"\xff\xfe", b"\r\n"),
]

CONF = """\
configdirectory: {d}/config
partition-default: {d}/spool
proc_path: {d}/proc
mboxname_lockpath: {d}/lock
idlesocket: {d}/socket/idle
notifysocket: {d}/socket/notify
lmtpsocket: {d}/socket/lmtp
reverseacls: yes
admins: cyrus
virtdomains: userid
defaultdomain: example.org
unixhierarchysep: 1
mboxlist_db: twoskip
syslog_prefix: mqf-fixture
"""


def _literal(data: bytes) -> bytes:
    return b"{%d+}\r\n" % len(data) + data


class Cyrus:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "imapd.conf"
        root.mkdir()
        for sub in ("config", "spool", "proc", "lock", "socket"):
            (root / sub).mkdir()
        self.conf.write_text(CONF.format(d=root))
        subprocess.run(["chown", "-R", "cyrus:mail", str(root)], check=True)
        root.chmod(0o755)

    def run(self, tool: str, *args: str, stdin: bytes = b"") -> bytes:
        cmd = ["runuser", "-u", "cyrus", "--", str(BIN / tool), "-C", str(self.conf), *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace')}")
        return done.stdout

    def file(self, name: str) -> Path:
        return self.root / "config" / name

    def give(self, path: Path) -> None:
        subprocess.run(["chown", "cyrus:mail", str(path)], check=True)


def make(out: Path) -> None:
    for tool in ("cyr_dbtool", "cvt_cyrusdb", "ctl_mboxlist", "ctl_cyrusdb"):
        if not (BIN / tool).exists():
            raise SystemExit(f"{BIN / tool} not found: apt-get install -y cyrus-imapd")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mqf-cyrus-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        cy = Cyrus(root / "cyrus")
        db = cy.file("mailboxes.db")
        cy.run("ctl_cyrusdb", "-r")
        cy.run("ctl_mboxlist", "-u", stdin=json.dumps(FIRST).encode())
        cy.run("ctl_mboxlist", "-u", stdin=json.dumps(SECOND).encode())
        shutil.copyfile(db, out / "mailboxes_twoskip.db")
        (out / "mailboxes_twoskip.show").write_bytes(
            cy.run("cyr_dbtool", str(db), "twoskip", "show")
        )
        (out / "mailboxes_twoskip.dump").write_bytes(
            cy.run("cyr_dbtool", str(db), "twoskip", "dump", "3")
        )
        (out / "mailboxes_twoskip.ctl_mboxlist_d.json").write_bytes(cy.run("ctl_mboxlist", "-d"))
        flat = cy.file("mailboxes.flat")
        cy.run("cvt_cyrusdb", str(db), "twoskip", str(flat), "flat")
        shutil.copyfile(flat, out / "mailboxes_twoskip.flat")

        skip = cy.file("mailboxes.skiplist")
        cy.run("cvt_cyrusdb", str(db), "twoskip", str(skip), "skiplist")
        batch = (
            b"SET "
            + _literal(b"Nuser\x1fbob\x1fNew")
            + b" "
            + _literal(b"%(T e P default)")
            + b"\r\n"
            + b"DELETE "
            + _literal(b"AU\x1ebob\x1euser\x1falice")
            + b"\r\n"
        )
        cy.run("cyr_dbtool", str(skip), "skiplist", "batch", stdin=batch)
        shutil.copyfile(skip, out / "mailboxes_skiplist.db")
        (out / "mailboxes_skiplist.show").write_bytes(
            cy.run("cyr_dbtool", str(skip), "skiplist", "show")
        )

        evil = cy.file("evil.db")
        lines = [b"SET " + _literal(k) + b" " + _literal(v) + b"\r\n" for k, v in EVIL]
        lines.append(b"DELETE " + _literal(b"gone") + b"\r\n")
        cy.run("cyr_dbtool", "-n", str(evil), "twoskip", "batch", stdin=b"".join(lines))
        shutil.copyfile(evil, out / "evil_twoskip.db")
        (out / "evil_twoskip.show").write_bytes(cy.run("cyr_dbtool", str(evil), "twoskip", "show"))
        (out / "evil_twoskip.batchshow").write_bytes(
            cy.run("cyr_dbtool", str(evil), "twoskip", "batch", stdin=b"SHOW\r\n")
        )
        eflat = cy.file("evil.flat")
        cy.run("cvt_cyrusdb", str(evil), "twoskip", str(eflat), "flat")
        shutil.copyfile(eflat, out / "evil_twoskip.flat")
    for path in sorted(out.iterdir()):
        print(f"{path.stat().st_size:6d} {path}")


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
