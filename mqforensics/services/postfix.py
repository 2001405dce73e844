"""A private Postfix 3.7 (Debian 12's ``postfix``) on 127.0.0.1 whose mail never leaves the queue.

`ensure_installed` installs the Debian package when ``/usr/sbin/postfix`` is missing (root only),
answering its debconf question with "No configuration" (no ``/etc/postfix/main.cf``: the machine
gets no system mailer) and without letting the package's own service start or stay enabled.

`start` keeps everything of one instance in its server directory: ``conf/`` (``main.cf``, and
``master.cf`` from ``/usr/share/postfix/master.cf.dist`` with the ``smtp inet`` line on
127.0.0.1 and a free port) beside ``data/queue/`` (the queue directory) and ``data/lib/`` (the
data directory, owned by ``postfix``); the mail log is ``logs/maillog``. Every recipient domain
is remote (``mydestination`` is empty) and ``relayhost`` is a loopback port nothing listens on,
so the queue manager's first delivery attempt fails ("Connection refused") and every message
stays in ``deferred`` with a ``defer/`` log. Retries are an hour apart, so a test sees the queue
as it left it.

The master runs in the foreground as root and drops to ``postfix`` for its children. It is
launched directly (``master -c CONF -s``), not through ``postfix start-fg``: postfix-script runs
``master -s`` as a child and master then calls ``setsid()`` (master.c: unless ``-i``, which only
PID 1 may use), so master left the launched process group and outlived `process.stop` (seen on
3.7.11: SIGTERM to the group of ``postfix start-fg`` ended the shell, master kept running).
Started by `process.launch` in a session of its own, master is already the session leader (its
``setsid()`` fails and ``getsid(0) == getpid()`` lets it go on), its children stay in its process
group, and its command line names the server directory. SIGTERM to the group ends master and
every child (master_sig.c ``master_sigdeath`` also passes it on to the group).
``postfix -c CONF check`` runs first: that is what ``start-fg`` does before master
(postfix-script ``check-fatal``: ``post-install create-missing`` makes the queue directories
with their owners and modes from ``postfix-files``; ``postsuper`` checks the queue structure).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import smtplib
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from mqforensics.errors import ServiceStartError
from mqforensics.services import apt
from mqforensics.services.process import (
    LOOPBACK,
    ServerDir,
    free_ports,
    launch,
    pid_alive,
    pids_of_instance,
)

SBIN = Path("/usr/sbin")
POSTFIX = SBIN / "postfix"
SENDMAIL = SBIN / "sendmail"
POSTQUEUE = SBIN / "postqueue"
POSTSUPER = SBIN / "postsuper"
POSTCAT = SBIN / "postcat"
POSTCONF = SBIN / "postconf"
MASTER_CF_DIST = Path("/usr/share/postfix/master.cf.dist")
PACKAGES = ("postfix",)
SYSTEM_SERVICE = "postfix"
# Debian's postfix asks which kind of mail system to configure; "No configuration" leaves
# /etc/postfix/main.cf unwritten (the package's templates: postfix/main_mailer_type).
DEBCONF = ("postfix postfix/main_mailer_type select No configuration",)
MAIL_OWNER = "postfix"
SETGID_GROUP = "postdrop"
# Every header, queue file and log line names this host, never the machine's own name.
MYHOSTNAME = "mqforensics-postfix.test"

# The queues that hold message files, and those that hold per-message logs (mail_queue.h).
MESSAGE_QUEUES = ("maildrop", "incoming", "active", "deferred", "hold", "corrupt", "saved")
LOG_QUEUES = ("defer", "bounce", "trace")

T = TypeVar("T")


def _installed() -> bool:
    return all(path.exists() for path in (POSTFIX, SENDMAIL, POSTQUEUE, MASTER_CF_DIST))


def ensure_installed() -> float:
    """Install Postfix from Debian if it is missing; the seconds that took (0 if present)."""
    return apt.ensure_packages(
        PACKAGES,
        what="Postfix",
        probe=POSTFIX,
        installed=_installed,
        system_service=SYSTEM_SERVICE,
        debconf=DEBCONF,
    )


def version() -> str:
    """The installed Debian version of postfix, e.g. ``3.7.11-0+deb12u1``."""
    return apt.installed_version("postfix")


def _run(argv: list[str], *, input: bytes | None = None, timeout: float = 60) -> bytes:
    """Run a Postfix command; its stdout. A failure is a ServiceStartError with its output."""
    result = subprocess.run(argv, input=input, capture_output=True, timeout=timeout)
    if result.returncode != 0:
        raise ServiceStartError(
            f"{' '.join(argv)} failed (exit {result.returncode}):\n"
            + apt.tail(
                result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
            )
        )
    return result.stdout


def _daemon_directory() -> Path:
    """Where ``master`` lives (``postconf -dh daemon_directory``: /usr/lib/postfix/sbin)."""
    return Path(_run([str(POSTCONF), "-dh", "daemon_directory"]).decode().strip())


# The chroot column (the fifth) of a service line in master.cf (master(5)): "y" for most
# services in Debian's master.cf.dist. A chrooted service would need copies of /etc files under
# the queue directory (Debian's init script makes them for the system instance only).
_CHROOT_YES = re.compile(r"^(\S+\s+\S+\s+\S+\s+\S+\s+)y(?=\s)")


def _master_cf(dist: str, port: int) -> str:
    """Debian's master.cf with smtpd on 127.0.0.1:`port` and no service chrooted."""
    lines = []
    replaced = False
    for line in dist.splitlines():
        fields = line.split()
        if line[:1] not in ("", "#", " ", "\t"):
            if fields[:2] == ["smtp", "inet"]:
                line = f"{LOOPBACK}:{port} inet n - n - - smtpd"
                replaced = True
            else:
                line = _CHROOT_YES.sub(r"\1n", line)
        lines.append(line)
    if not replaced:
        raise ServiceStartError(f"no `smtp inet` service line in {MASTER_CF_DIST}")
    return "\n".join(lines) + "\n"


def _main_cf(data: Path, logs: Path, relay_port: int) -> str:
    return f"""\
# mqforensics private Postfix instance: everything lives under {data.parent}
compatibility_level = 3.6
queue_directory = {data}/queue
data_directory = {data}/lib
mail_owner = {MAIL_OWNER}
setgid_group = {SETGID_GROUP}
myhostname = {MYHOSTNAME}
# No local domain: every recipient is remote and goes to the relayhost, where nothing listens.
mydestination =
inet_interfaces = {LOOPBACK}
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
relayhost = [{LOOPBACK}]:{relay_port}
# Not Debian's hash:/etc/aliases: the instance reads nothing of the machine's mail setup.
alias_maps =
alias_database =
# The mail log in a file of ours (postlogd, Postfix 3.4+): a container has no syslog.
maillog_file = {logs}/maillog
maillog_file_prefixes = {logs}
# A deferred message waits an hour for its next attempt, so a test sees the queue as it left
# it (qmgr sets the deferred file's mtime to that time; postconf(5) for the three values).
queue_run_delay = 1h
minimal_backoff_time = 1h
maximal_backoff_time = 2h
"""


def smtp_ready(port: int, host: str = LOOPBACK) -> bool:
    """True once an SMTP server on `host`:`port` greets with 220."""
    try:
        with smtplib.SMTP(host, port, timeout=5, local_hostname="probe.mqforensics.test") as smtp:
            smtp.quit()
        return True
    except (OSError, smtplib.SMTPException):
        return False


def start(server: ServerDir, *, timeout: float = 60.0) -> dict:
    """Start a private Postfix master in `server` (after `reap` and `reset`); its connection info.

    A start on the data of a stopped instance (`Harness.start_again`) keeps its queue.
    """
    install_seconds = ensure_installed()
    if os.geteuid() != 0:
        raise ServiceStartError(
            "the Postfix test server must be started as root: master runs as root and drops "
            f"to `{MAIL_OWNER}`, and `postfix check` creates the queue directories with their "
            "owners"
        )
    conf = server.path / "conf"
    queue = server.data / "queue"
    conf.mkdir(parents=True, exist_ok=True)
    # The queue directory itself is root's (postfix-files: $queue_directory:d:root:-:755);
    # `postfix check` creates its subdirectories, and the data directory owned by postfix.
    queue.mkdir(parents=True, exist_ok=True)
    queue.chmod(0o755)
    port, relay_port = free_ports(2)
    (conf / "master.cf").write_text(_master_cf(MASTER_CF_DIST.read_text(), port))
    (conf / "main.cf").write_text(_main_cf(server.data, server.logs, relay_port))
    _run([str(POSTFIX), "-c", str(conf), "check"], timeout=120)
    lib = server.data / "lib"
    if lib.owner() != MAIL_OWNER:
        raise ServiceStartError(f"{lib} is not owned by {MAIL_OWNER} after `postfix check`")
    # master opens data_directory/master.lock as `postfix` (seen on 3.7.11: under a 0700 parent
    # it exits 1 on EACCES, and nothing is logged: postlogd is not up yet).
    for directory in (queue, lib):
        check = subprocess.run(["runuser", "-u", MAIL_OWNER, "--", "test", "-x", str(directory)])
        if check.returncode != 0:
            raise ServiceStartError(
                f"user {MAIL_OWNER} cannot reach {directory}: a parent directory is not "
                "searchable by it"
            )
    argv = [str(_daemon_directory() / "master"), "-c", str(conf), "-s"]
    started = time.monotonic()
    try:
        pid = launch(
            server, argv, ready=lambda: smtp_ready(port), timeout=timeout, log_name="master.log"
        )
    except ServiceStartError as exc:
        # master's stderr goes to /dev/null (-s keeps stdout only): what it says is in the maillog.
        maillog = server.logs / "maillog"
        raise ServiceStartError(
            f"{exc.message}\nmaillog {maillog}:\n{server.last_log_lines(maillog)}"
        ) from None
    return {
        "service": "postfix",
        "version": version(),
        "pid": pid,
        "host": LOOPBACK,
        "port": port,
        "myhostname": MYHOSTNAME,
        "config_directory": str(conf),
        "queue_directory": str(queue),
        "relayhost_port": relay_port,
        "maillog": str(server.logs / "maillog"),
        "startup_seconds": round(time.monotonic() - started, 1),
        "install_seconds": install_seconds,
        "log": str(server.logs / "master.log"),
    }


def running(info: dict) -> bool:
    """True while the instance's master lives and its smtpd answers (the harness's probe)."""
    return pid_alive(int(info["pid"])) and smtp_ready(int(info["port"]))


def instance_pids(info: dict) -> list[int]:
    """The live processes of this instance: master (its command line names the configuration
    directory) and its children (they inherit ``MAIL_CONFIG``, which master sets from ``-c``;
    their command lines, e.g. ``qmgr -l -t unix -u``, name nothing)."""
    conf = str(info["config_directory"])
    return pids_of_instance(conf, f"MAIL_CONFIG={conf}")


# --- Using the instance (tests, the bundled sample) ------------------------------------------


def _message_id(message: bytes) -> tuple[bytes, str]:
    """`message` with a Message-ID header (one is added if it has none), and that id."""
    head = re.split(rb"\r?\n\r?\n", message, maxsplit=1)[0]
    match = re.search(rb"^message-id:[ \t]*(.*?)[ \t]*\r?$", head, re.IGNORECASE | re.MULTILINE)
    if match and match.group(1):
        return message, match.group(1).decode(errors="replace")
    message_id = f"<mqf-{uuid.uuid4().hex}@{MYHOSTNAME}>"
    return f"Message-ID: {message_id}\n".encode() + message, message_id


def _log_size(info: dict) -> int:
    try:
        return Path(str(info["maillog"])).stat().st_size
    except FileNotFoundError:
        return 0


def submit(
    info: dict,
    sender: str,
    recipients: Iterable[str],
    message: bytes,
    *,
    fullname: str | None = None,
    timeout: float = 30.0,
) -> str:
    """Submit `message` with Postfix's sendmail; the queue id the cleanup server gave it.

    ``sendmail -C CONF -i -f SENDER [-F FULLNAME] -- RCPT...`` (postdrop leaves the file in
    ``maildrop``; pickup hands it to cleanup, which writes the queue file under a new id). `sender`
    ``""`` is the null sender. sendmail prints no queue id: the message gets a unique Message-ID
    header unless it has one, and the id is read from cleanup's ``ID: message-id=<...>`` line in
    the mail log (cleanup_message.c), after the log's size before the submission. `fullname`
    becomes the ``F`` record (without it, the GECOS name of the submitting user: ``root``).
    """
    message, message_id = _message_id(message)
    offset = _log_size(info)
    argv = [str(SENDMAIL), "-C", str(info["config_directory"]), "-i", "-f", sender]
    if fullname is not None:
        argv += ["-F", fullname]
    _run([*argv, "--", *recipients], input=message, timeout=timeout)
    pattern = re.compile(
        rb"postfix/cleanup\[\d+\]: ([0-9A-Za-z]+): message-id=" + re.escape(message_id.encode())
    )

    def queued() -> str | None:
        with open(str(info["maillog"]), "rb") as log:
            log.seek(offset)
            match = pattern.search(log.read())
        return match.group(1).decode() if match else None

    return wait_until(queued, timeout, what=f"cleanup's log line for {message_id}")


def submit_smtp(
    info: dict,
    sender: str,
    recipients: Iterable[str],
    message: bytes,
    *,
    helo: str = "client.example.net",
) -> str:
    """Submit `message` over SMTP to the instance's smtpd; the queue id of its ``250 ... queued
    as ID`` reply to DATA (smtpd.c). The client says `helo` (never this machine's name), which
    the queue file keeps (``log_helo_name``, and the ``Received:`` header)."""
    with smtplib.SMTP(str(info["host"]), int(info["port"]), local_hostname=helo, timeout=30) as s:
        s.ehlo()
        code, reply = s.mail(sender)
        if code != 250:
            raise smtplib.SMTPSenderRefused(code, reply, sender)
        for recipient in recipients:
            code, reply = s.rcpt(recipient)
            if code not in (250, 251):
                raise smtplib.SMTPRecipientsRefused({recipient: (code, reply)})
        code, reply = s.data(message)
    match = re.search(rb"queued as ([0-9A-Za-z]+)", reply)
    if code != 250 or not match:
        raise smtplib.SMTPDataError(code, reply)
    return match.group(1).decode()


def postqueue_json(info: dict) -> list[dict]:
    """``postqueue -c CONF -j``: one object per queued message (JSON Lines, Postfix 3.1+)."""
    out = _run([str(POSTQUEUE), "-c", str(info["config_directory"]), "-j"])
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def postcat(info: dict, path_or_id: str | Path, *flags: str) -> str:
    """``postcat -c CONF FLAGS...`` of a queue file (a path) or a queued message (a queue id,
    found with ``-q``); its output, undecodable bytes kept as surrogates."""
    argv = [str(POSTCAT), "-c", str(info["config_directory"]), *flags]
    target = str(path_or_id)
    argv += [target] if isinstance(path_or_id, Path) or "/" in target else ["-q", target]
    return _run(argv).decode(errors="surrogateescape")


def postconf(info: dict, *args: str) -> str:
    """``postconf -c CONF ARGS...`` (e.g. ``-n``: the settings main.cf makes)."""
    return _run([str(POSTCONF), "-c", str(info["config_directory"]), *args]).decode()


def postsuper(info: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``postsuper -c CONF ARGS...``; with `check`, a non-zero exit raises. postsuper reports on
    stderr (``Placed on hold: 1 message``) and exits 0 even when no message matched."""
    argv = [str(POSTSUPER), "-c", str(info["config_directory"]), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise ServiceStartError(
            f"{' '.join(argv)} failed (exit {result.returncode}):\n"
            + apt.tail(result.stdout + result.stderr)
        )
    return result


def hold(info: dict, queue_id: str) -> None:
    """Put `queue_id` on hold (``postsuper -h``); raise unless postsuper held exactly it."""
    result = postsuper(info, "-h", queue_id)
    match = re.search(r"Placed on hold: (\d+) message", result.stderr)
    if not match or int(match.group(1)) != 1:
        raise ServiceStartError(f"postsuper -h {queue_id} held nothing:\n{result.stderr}")


def queue_file(info: dict, queue_id: str, queues: Iterable[str] = MESSAGE_QUEUES) -> Path | None:
    """The message file of `queue_id` in one of `queues` (hashed subdirectories included)."""
    root = Path(str(info["queue_directory"]))
    for queue in queues:
        for path in (root / queue / queue_id, *(root / queue).glob(f"*/{queue_id}")):
            if path.is_file():
                return path
    return None


def log_file(info: dict, queue_id: str, kind: str = "defer") -> Path | None:
    """The ``defer``/``bounce``/``trace`` log of `queue_id`, if there is one."""
    return queue_file(info, queue_id, (kind,))


def wait_until(predicate: Callable[[], T | None], timeout: float, *, what: str = "") -> T:
    """Poll `predicate` until it returns something truthy (returned); TimeoutError after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not {what or 'done'} after {timeout:.0f}s")
        time.sleep(0.2)


def wait_deferred(info: dict, queue_ids: Iterable[str], timeout: float = 30.0) -> dict[str, dict]:
    """Wait until the queue manager has tried and deferred every one of `queue_ids`: each is in
    ``deferred`` with a ``delay_reason`` for every recipient, and has its ``defer/`` log.
    Their ``postqueue -j`` objects, by queue id."""
    wanted = set(queue_ids)

    def deferred() -> dict[str, dict] | None:
        listed = {entry["queue_id"]: entry for entry in postqueue_json(info)}
        for queue_id in wanted:
            entry = listed.get(queue_id)
            if (
                entry is None
                or entry["queue_name"] != "deferred"
                or not all("delay_reason" in rcpt for rcpt in entry["recipients"])
                or log_file(info, queue_id, "defer") is None
            ):
                return None
        return {queue_id: listed[queue_id] for queue_id in wanted}

    return wait_until(deferred, timeout, what=f"deferred: {', '.join(sorted(wanted))}")


def copy_queue(info: dict, target: Path) -> list[Path]:
    """Copy the message queues and logs of a stopped instance to `target`, hashed
    subdirectories, modes and times kept (``shutil.copy2``); the files copied, relative."""
    root = Path(str(info["queue_directory"]))
    copied = []
    for queue in (*MESSAGE_QUEUES, *LOG_QUEUES):
        if not (root / queue).is_dir():
            continue
        shutil.copytree(root / queue, target / queue, dirs_exist_ok=True)
        copied += [p.relative_to(target) for p in (target / queue).rglob("*") if p.is_file()]
    return sorted(copied)
