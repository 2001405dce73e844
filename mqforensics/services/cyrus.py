"""A private Cyrus IMAP 3.6 (Debian 12 packages) on 127.0.0.1, with reverse ACLs on.

`ensure_installed` installs ``cyrus-imapd cyrus-admin cyrus-clients sasl2-bin`` from the Debian
registry when ``/usr/lib/cyrus/bin/master`` is missing (root only), without letting the package's
own system service start or stay enabled. `start` keeps everything of one instance in its server
directory: ``imapd.conf`` and ``cyrus.conf`` beside ``data/`` (``config/``, ``spool/``, ``proc/``,
``lock/``, ``socket/``, ``sieve/``, ``sasldb2``, owned by ``cyrus:mail``). Every ``cmd=`` in
``cyrus.conf`` carries its own ``-C``: master does not pass its ``-C`` on, and a child without it
would silently use ``/etc/imapd.conf`` and the system's databases.

``master`` runs in the foreground (no ``-d``; ``-D`` keeps its stdout/stderr on our log) as root
and drops to ``cyrus`` itself; its children stay in its process group, so `process.stop` (SIGTERM
to the group) ends them all. Cyrus logs to syslog, which a container often does not have: the
``log`` file only holds what master writes to stderr.
"""

from __future__ import annotations

import imaplib
import os
import shutil
import subprocess
import time
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services import apt
from mqforensics.services.process import LOOPBACK, ServerDir, free_ports, launch, port_open

TOOLS = Path("/usr/lib/cyrus/bin")
MASTER = TOOLS / "master"
SASLPASSWD = Path("/usr/sbin/saslpasswd2")
PACKAGES = ("cyrus-imapd", "cyrus-admin", "cyrus-clients", "sasl2-bin")
SYSTEM_SERVICE = "cyrus-imapd"
CYRUS_USER = "cyrus"
CYRUS_GROUP = "mail"

USERNAME = "cyrus"  # the global admin (`admins: cyrus`)
PASSWORD = "mqforensics-cyrus-admin"
DOMAIN = "example.org"  # `defaultdomain`: userids in it are stored without the domain
# `servername`, and the SASL realm of logins in `defaultdomain` or without a domain: imapd strips
# the default domain before SASL sees the name, and sasldb then looks a bare `user` up in the realm
# of the server's name (`user@other.domain` in realm `other.domain`). Verified on 3.6.1.
SERVERNAME = "mqforensics-cyrus"


def _installed() -> bool:
    return MASTER.exists() and SASLPASSWD.exists()


def ensure_installed() -> float:
    """Install Cyrus 3.6 from Debian if it is missing; the seconds that took (0 if present)."""
    # The package's system-wide cyrus-imapd (port 143, /etc/imapd.conf) never starts.
    return apt.ensure_packages(
        PACKAGES,
        what="Cyrus IMAP",
        probe=MASTER,
        installed=_installed,
        system_service=SYSTEM_SERVICE,
    )


def version() -> str:
    """The installed Debian version of cyrus-imapd, e.g. ``3.6.1-4+deb12u5``."""
    return apt.installed_version("cyrus-imapd")


def _imapd_conf(data: Path) -> str:
    return f"""\
# mqforensics private Cyrus instance: everything lives under {data}
configdirectory: {data}/config
partition-default: {data}/spool
proc_path: {data}/proc
mboxname_lockpath: {data}/lock
sievedir: {data}/sieve
temp_path: {data}/tmp
lmtpsocket: {data}/socket/lmtp
idlesocket: {data}/socket/idle
notifysocket: {data}/socket/notify
servername: {SERVERNAME}
syslog_prefix: {SERVERNAME}
admins: {USERNAME}
virtdomains: userid
defaultdomain: {DOMAIN}
unixhierarchysep: yes
altnamespace: yes
reverseacls: yes
delete_mode: delayed
expunge_mode: delayed
defaultacl: {USERNAME} lrswipkxtecdan
allowplaintext: yes
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {data}/sasldb2
sasl_mech_list: PLAIN LOGIN
idlemethod: poll
statuscache: no
"""


def _cyrus_conf(conf: Path, port: int) -> str:
    return f"""\
START {{
  recover cmd="{TOOLS}/ctl_cyrusdb -C {conf} -r"
}}

SERVICES {{
  imap cmd="{TOOLS}/imapd -C {conf}" listen="{LOOPBACK}:{port}" prefork=0
}}

EVENTS {{
}}

DAEMON {{
}}
"""


def _as_cyrus(argv: list[str], *, input: bytes | None = None, timeout: float = 120) -> bytes:
    command = ["runuser", "-u", CYRUS_USER, "--", *argv] if os.geteuid() == 0 else argv
    result = subprocess.run(command, input=input, capture_output=True, timeout=timeout)
    if result.returncode != 0:
        raise ServiceStartError(
            f"{' '.join(argv)} failed (exit {result.returncode}):\n"
            + apt.tail(
                result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
            )
        )
    return result.stdout


def _saslpasswd(sasldb: Path, user: str, password: str) -> None:
    local, _, domain = user.rpartition("@") if "@" in user else (user, "", "")
    realm = SERVERNAME if domain in ("", DOMAIN) else domain
    argv = [str(SASLPASSWD), "-f", str(sasldb), "-c", "-p", "-u", realm, local]
    _as_cyrus(argv, input=password.encode())


def add_user(info: dict, user: str, password: str) -> None:
    """Create (or reset) the SASL login `user` (``local@domain`` or a bare name) in the sasldb.

    A user of the default domain (example.org) logs in as ``local@example.org`` or ``local``.
    """
    _saslpasswd(Path(str(info["sasldb"])), user, password)


def run_tool(info: dict, tool: str, *args: str, input: bytes | None = None) -> str:
    """Run Cyrus's `tool` as ``cyrus`` with this instance's ``-C``; its stdout.

    Output is decoded with ``surrogateescape``: ``cyr_dbtool show`` prints raw key bytes, which
    ``.encode(errors="surrogateescape")`` gives back exactly.
    """
    argv = [str(Path(str(info["tools"])) / tool), "-C", str(info["config"]), *args]
    return _as_cyrus(argv, input=input).decode(errors="surrogateescape")


def copy_for_tools(info: dict, path: str | Path) -> Path:
    """A copy of `path` (e.g. ``info["mailboxes_db"]``) that the tools may open and modify.

    Cyrus's tools can change the file they open, so they get a copy, never the live database.
    The copy goes to the instance's ``tmp/`` (owned by ``cyrus``); its path is returned.
    """
    source = Path(path)
    target_dir = Path(str(info["mailboxes_db"])).parent.parent / "tmp"
    target = target_dir / f"{source.stem}.copy-{time.monotonic_ns()}{source.suffix}"
    shutil.copyfile(source, target)
    if os.geteuid() == 0:
        shutil.chown(target, CYRUS_USER, CYRUS_GROUP)
    return target


def imap_login_works(port: int, username: str = USERNAME, password: str = PASSWORD) -> bool:
    """True once an IMAP LOGIN as `username` succeeds on 127.0.0.1:`port`."""
    if not port_open(port):
        return False
    try:
        with imaplib.IMAP4(LOOPBACK, port, timeout=5) as imap:
            imap.login(username, password)
            imap.logout()
        return True
    except (OSError, imaplib.IMAP4.error):
        return False


def start(server: ServerDir, *, timeout: float = 60.0) -> dict:
    """Start a private Cyrus master in `server` (after `reap` and `reset`); its connection info."""
    install_seconds = ensure_installed()
    if os.geteuid() != 0:
        raise ServiceStartError(
            "the Cyrus test server must be started as root: master binds as root and drops to "
            f"the `{CYRUS_USER}` user, and the tools run through `runuser -u {CYRUS_USER}`"
        )
    data = server.data
    conf = server.path / "imapd.conf"
    cyrus_conf = server.path / "cyrus.conf"
    (port,) = free_ports(1)
    # What Debian's makedirs would create (it only knows /etc/imapd.conf): imapd binds its idle
    # socket in config/socket, ctl_cyrusdb stamps config/db.
    subdirs = ("config/db", "config/socket", "config/ptclient", "config/quota", "config/user")
    for sub in ("spool", "proc", "lock", "socket", "sieve", "tmp", *subdirs):
        (data / sub).mkdir(parents=True, exist_ok=True)
    conf.write_text(_imapd_conf(data))
    cyrus_conf.write_text(_cyrus_conf(conf, port))
    for path in (data, *data.rglob("*"), conf, cyrus_conf):
        shutil.chown(path, CYRUS_USER, CYRUS_GROUP)
    data.chmod(0o750)
    # The cyrus user must reach the configuration through every parent directory.
    check = subprocess.run(["runuser", "-u", CYRUS_USER, "--", "test", "-r", str(conf)])
    if check.returncode != 0:
        raise ServiceStartError(
            f"user {CYRUS_USER} cannot read {conf}: a parent directory is not searchable by it"
        )
    sasldb = data / "sasldb2"
    _saslpasswd(sasldb, USERNAME, PASSWORD)
    argv = [
        str(MASTER),
        "-C",
        str(conf),
        "-M",
        str(cyrus_conf),
        "-p",
        str(server.path / "master.pid"),
        "-D",
    ]
    started = time.monotonic()
    pid = launch(
        server,
        argv,
        ready=lambda: imap_login_works(port),
        timeout=timeout,
        log_name="master.log",
    )
    return {
        "service": "cyrus",
        "version": version(),
        "pid": pid,
        "host": LOOPBACK,
        "port": port,
        "username": USERNAME,
        "password": PASSWORD,
        "domain": DOMAIN,
        "config": str(conf),
        "cyrus_conf": str(cyrus_conf),
        "mailboxes_db": str(data / "config" / "mailboxes.db"),
        "sasldb": str(sasldb),
        "tools": str(TOOLS),
        "startup_seconds": round(time.monotonic() - started, 1),
        "install_seconds": install_seconds,
        "log": str(server.logs / "master.log"),
    }
