"""A private RabbitMQ 3.10 (Debian 12's ``rabbitmq-server``) on 127.0.0.1, with its management API.

Apache James keeps its mail queues in RabbitMQ; the tests need a real broker holding messages
ready, unacknowledged and dead-lettered. `ensure_installed` installs the Debian package when
``/usr/lib/rabbitmq/bin/rabbitmq-server`` is missing (root only) without letting the package's
system service start (a temporary ``policy-rc.d``). Its init script is then only disabled, never
run: its ``stop`` runs ``rabbitmqctl``, whose Erlang distribution started a system-wide
``epmd -daemon`` on 0.0.0.0:4369 as ``rabbitmq`` that nothing would stop (seen on 3.10.8 after
``apt.ensure_packages(..., system_service="rabbitmq-server")``: ``service ... stop``).

`start` keeps everything of one instance in its server directory: ``rabbitmq.conf``,
``enabled_plugins`` (``rabbitmq_management``), an empty ``rabbitmq-env.conf`` (so
``/etc/rabbitmq/rabbitmq-env.conf`` is never read), ``.erlang.cookie`` (HOME is the server
directory: a cookie of its own), the Mnesia/quorum data and ``identity.json`` (node name, login,
cookie: kept by `Harness.start_again`) under ``data/``, and the node's log ``logs/rabbit.log``.
Every listener is on 127.0.0.1 and a free port: AMQP, the management API, Erlang distribution,
and a private ``epmd`` (``ERL_EPMD_PORT``), started first, in the foreground, as a companion
(``pid.epmd``; its argv[0] is a symlink in the server directory, so its command line names the
directory). epmd always adds the loopback addresses to ``-address``, so it listens on ``::1``
too. Every ``erl`` runs with ``-start_epmd false`` (``ERL_FLAGS``), so no ``epmd -daemon``
ever escapes the harness's process groups. The node is ``/usr/lib/rabbitmq/bin/rabbitmq-server``
run directly as root (Debian's ``/usr/sbin/rabbitmq-server`` switches to the ``rabbitmq``
user); its extra argument ``-mqforensics_server <dir>`` is passed on to ``erl`` (an init flag
nothing reads), so the script's shell and ``beam.smp`` both name the directory.

Stopping: a graceful shutdown took 6 s (3.10.8: most of it after the management plugin stops
its statistics), longer than `process.stop`'s grace. The data is throwaway, so once
``-s rabbit boot`` has returned, ``-eval os:set_signal(sigterm,default)`` gives SIGTERM its
default action and the VM ends at once (`start` waits for that too); ``erl_child_setup`` and
``inet_gethost``, in sessions of their own, exit when the VM's pipes close.

There is no ``guest``: ``default_user``/``default_pass`` make a generated administrator the only
user. The management API's counts (messages ready/unacknowledged, consumers) are statistics:
each queue emits them every ``collect_statistics_interval`` (`STATS_INTERVAL_MS`, default 5000)
and the management agent's collectors aggregate them every finest sample interval of the
retention policies (`SAMPLE_INTERVAL_SECONDS`, default 5 s; whole seconds only). `queue_info`
reads them until unchanged for `STATS_SETTLE_SECONDS` (one collection and one emission), so an
action a moment ago is counted: about 1.2 to 2.2 s per call.

Test helpers (`Management`, `declare_james_queue`, `publish`, `queue_info`, `dead_letter`,
`drain`) use the management HTTP API through urllib; `holding_consumer` is a real AMQP 0-9-1
consumer (pika, a dev dependency) that holds its messages unacknowledged.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqforensics.errors import ServiceStartError
from mqforensics.services import apt
from mqforensics.services.process import (
    LOOPBACK,
    ServerDir,
    free_ports,
    launch,
    pids_of_instance,
    port_open,
)

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
EPMD = Path("/usr/lib/erlang/bin/epmd")
PACKAGES = ("rabbitmq-server",)
SYSTEM_SERVICE = "rabbitmq-server"
VHOST = "/"
# How often each queue emits its statistics (ms; RabbitMQ's default is 5000).
STATS_INTERVAL_MS = 100
# How often the management agent's collectors aggregate them (s): the finest sample interval
# of every retention policy (RabbitMQ's default is 5; whole seconds only).
SAMPLE_INTERVAL_SECONDS = 1
# `queue_info` returns counts once unchanged this long: one collection, and a queue's emission.
STATS_SETTLE_SECONDS = SAMPLE_INTERVAL_SECONDS + 0.2
# James's names for the RabbitMQ objects of one mail queue (RabbitMQMailQueueFactory).
JAMES_PREFIX = "JamesMailQueue"


def _installed() -> bool:
    return SERVER.exists() and EPMD.exists()


def ensure_installed() -> float:
    """Install RabbitMQ from Debian if it is missing; the seconds that took (0 if present)."""
    seconds = apt.ensure_packages(
        PACKAGES,
        what="RabbitMQ",
        probe=SERVER,
        installed=_installed,
        system_service=None,  # not `service ... stop`: see the module docstring
    )
    if seconds:
        _disable_system_service()
    return seconds


def _disable_system_service() -> None:
    """Keep the package's service from starting at boot, without running its init script."""
    if Path("/run/systemd/system").exists():
        apt.disable_system_service(SYSTEM_SERVICE)  # systemctl disable --now: no rabbitmqctl
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["update-rc.d", SYSTEM_SERVICE, "disable"],
            capture_output=True,
            check=False,
            timeout=120,
        )


def version() -> str:
    """The installed Debian version of rabbitmq-server, e.g. ``3.10.8-1.1+deb12u1``."""
    return apt.installed_version("rabbitmq-server")


def _conf(amqp_port: int, management_port: int, dist_port: int, user: str, password: str) -> str:
    return f"""\
# mqforensics private RabbitMQ node: throwaway data, 127.0.0.1 only
listeners.tcp.default = {LOOPBACK}:{amqp_port}
listeners.ssl = none
management.tcp.ip = {LOOPBACK}
management.tcp.port = {management_port}
distribution.listener.interface = {LOOPBACK}
distribution.listener.port_range.min = {dist_port}
distribution.listener.port_range.max = {dist_port}
# The only user: no guest.
default_user = {user}
default_pass = {password}
default_vhost = {VHOST}
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
loopback_users = none
collect_statistics_interval = {STATS_INTERVAL_MS}
management.sample_retention_policies.global.minute = {SAMPLE_INTERVAL_SECONDS}
management.sample_retention_policies.basic.minute = {SAMPLE_INTERVAL_SECONDS}
management.sample_retention_policies.detailed.10 = {SAMPLE_INTERVAL_SECONDS}
disk_free_limit.absolute = 10MB
log.file = rabbit.log
log.file.level = info
log.console = false
"""


def _env(
    server: ServerDir, nodename: str, amqp_port: int, dist_port: int, epmd_port: int
) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TZ")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env.update(
        {
            "HOME": str(server.path),
            "RABBITMQ_NODENAME": nodename,
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(amqp_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_CONF_ENV_FILE": str(server.path / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(server.path / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(server.path / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(server.path / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(server.data / "mnesia"),
            "RABBITMQ_LOG_BASE": str(server.logs),
            "RABBITMQ_PID_FILE": str(server.data / "rabbit.pid"),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            # Every erl (the node, and the "epmd-starter" its prelaunch spawns) uses our epmd
            # and never starts one of its own.
            "ERL_FLAGS": "-start_epmd false",
            "ERL_CRASH_DUMP": str(server.logs / "erl_crash.dump"),
            # Once booted (``-s rabbit boot`` has returned), SIGTERM ends the VM at once.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-eval os:set_signal(sigterm,default)",
        }
    )
    return env


def _write_private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


def start(server: ServerDir, *, timeout: float = 90.0) -> dict:
    """Start a private RabbitMQ node in `server` (after `reap`/`reset`); its connection info.

    A start on the data of a stopped node (`Harness.start_again`) keeps its node name, cookie
    and login, so its durable queues come back.
    """
    install_seconds = ensure_installed()
    if os.geteuid() != 0:
        raise ServiceStartError(
            "the RabbitMQ test server must be started as root (its files and data are root's)"
        )
    identity_file = server.data / "identity.json"
    try:
        identity = json.loads(identity_file.read_text())
    except (OSError, ValueError):
        identity = {
            "nodename": f"mqf-{secrets.token_hex(4)}@localhost",
            "username": f"mqf-admin-{secrets.token_hex(3)}",
            "password": secrets.token_urlsafe(18),
            "cookie": secrets.token_hex(20).upper(),
        }
        server.data.mkdir(parents=True, exist_ok=True)
        _write_private(identity_file, json.dumps(identity))
    nodename, username, password = identity["nodename"], identity["username"], identity["password"]
    amqp_port, management_port, dist_port, epmd_port = free_ports(4)

    cookie = server.path / ".erlang.cookie"
    with contextlib.suppress(FileNotFoundError):
        cookie.chmod(0o600)
    cookie.write_text(identity["cookie"])
    cookie.chmod(0o400)  # Erlang refuses a cookie file others can read
    _write_private(
        server.path / "rabbitmq.conf",
        _conf(amqp_port, management_port, dist_port, username, password),
    )
    (server.path / "enabled_plugins").write_text("[rabbitmq_management].\n")
    (server.path / "rabbitmq-env.conf").write_text("# mqforensics: nothing from /etc/rabbitmq\n")
    env = _env(server, nodename, amqp_port, dist_port, epmd_port)

    # epmd in the foreground, as a companion whose command line names the server directory.
    epmd_link = server.path / "epmd"
    with contextlib.suppress(FileNotFoundError):
        epmd_link.unlink()
    epmd_link.symlink_to(EPMD.resolve())
    started = time.monotonic()
    launch(
        server,
        [str(epmd_link), "-port", str(epmd_port), "-address", LOOPBACK],
        env=env,
        ready=lambda: port_open(epmd_port),
        timeout=15,
        log_name="epmd.log",
        companion="epmd",
    )
    url = f"http://{LOOPBACK}:{management_port}"
    rabbit_log = server.logs / "rabbit.log"
    try:
        pid = launch(
            server,
            ["/bin/sh", str(SERVER), "-mqforensics_server", str(server.path)],
            env=env,
            ready=lambda: (
                port_open(amqp_port)
                and management_ready(url, username, password)
                and _booted(server)
            ),
            timeout=timeout,
            log_name="rabbitmq-server.log",
        )
    except ServiceStartError as exc:
        raise ServiceStartError(
            f"{exc.message}\nnode log {rabbit_log}:\n{server.last_log_lines(rabbit_log)}"
        ) from None
    return {
        "service": "rabbitmq",
        "version": version(),
        "pid": pid,
        "host": LOOPBACK,
        "port": amqp_port,
        "amqp_port": amqp_port,
        "management_port": management_port,
        "management_url": url,
        "username": username,
        "password": password,
        "vhost": VHOST,
        "nodename": nodename,
        "dist_port": dist_port,
        "epmd_port": epmd_port,
        "directory": str(server.path),
        "config": str(server.path / "rabbitmq.conf"),
        "startup_seconds": round(time.monotonic() - started, 1),
        "install_seconds": install_seconds,
        "log": str(rabbit_log),
    }


CTL = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")


def stop_app(info: dict, *, timeout: float = 60.0) -> None:
    """Stop the node's RabbitMQ application gracefully (``rabbitmqctl stop_app``): every queue
    writes its messages to disk. A harness stop ends the VM at once (SIGTERM), which may lose
    messages not yet written (a just dead-lettered one): call this first when the node's data
    is copied, as an operator stops a node before copying it."""
    server = ServerDir(Path(info["directory"]), "rabbitmq")
    env = _env(server, info["nodename"], int(info["amqp_port"]), int(info["dist_port"]),
               int(info["epmd_port"]))  # fmt: skip
    done = subprocess.run(
        ["/bin/sh", str(CTL), "-n", info["nodename"], "stop_app"],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        output = apt.tail(done.stdout + done.stderr)
        raise ServiceStartError(f"rabbitmqctl stop_app failed:\n{output}")


def _booted(server: ServerDir) -> bool:
    """True once the node's ``beam.smp`` no longer catches SIGTERM: ``-s rabbit boot`` has
    returned and the ``-eval`` after it reset the signal (a moment after the management API
    answers), so that `process.stop` ends it at once."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "beam.smp":
                continue
            if str(server.path).encode() not in (entry / "cmdline").read_bytes():
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        return not int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1))
    return False


def management_ready(url: str, username: str, password: str) -> bool:
    """True once the management API at `url` answers ``/api/whoami`` for this login."""
    try:
        whoami = Management(url, username, password).get("/api/whoami", timeout=3)
    except (ManagementError, OSError, ValueError, http.client.HTTPException):
        return False
    return isinstance(whoami, dict) and whoami.get("name") == username


# --- The management HTTP API -------------------------------------------------------------------


class ManagementError(Exception):
    """A management API request failed: its method, path and HTTP status (never the login)."""

    def __init__(self, method: str, path: str, status: int, detail: str) -> None:
        super().__init__(f"RabbitMQ management API {method} {path}: HTTP {status} {detail}")
        self.method = method
        self.path = path
        self.status = status


class Management:
    """A minimal client of the management API at `url` (``http://127.0.0.1:PORT``)."""

    def __init__(self, url: str, username: str, password: str, vhost: str = VHOST) -> None:
        self.url = url.rstrip("/")
        self.vhost = vhost
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"

    def __repr__(self) -> str:
        return f"Management({self.url!r}, vhost={self.vhost!r})"

    def path(self, kind: str, *names: str) -> str:
        """``/api/<kind>/<vhost>/<name>...`` with every part URL-quoted (``/`` is ``%2F``)."""
        parts = [urllib.parse.quote(part, safe="") for part in (self.vhost, *names)]
        return f"/api/{kind}/" + "/".join(parts)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", self._authorization)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise ManagementError(method, path, exc.code, detail) from None
        return json.loads(raw) if raw.strip() else None

    def get(self, path: str, *, timeout: float = 10) -> Any:
        return self.request("GET", path, timeout=timeout)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


def management(info: dict) -> Management:
    """A `Management` client for the server of `info` (as `start` returned it)."""
    return Management(
        str(info["management_url"]), str(info["username"]), str(info["password"]), VHOST
    )


# --- James's topology and traffic, for tests ---------------------------------------------------


def james_names(queue_name: str) -> dict[str, str]:
    """The RabbitMQ names James gives mail queue `queue_name`'s exchanges and queues."""
    return {
        "exchange": f"{JAMES_PREFIX}-exchange-{queue_name}",
        "dead_letter_exchange": f"{JAMES_PREFIX}-dead-letter-exchange-{queue_name}",
        "workqueue": f"{JAMES_PREFIX}-workqueue-{queue_name}",
        "dead_letter_queue": f"{JAMES_PREFIX}-dead-letter-queue-{queue_name}",
    }


def declare_james_queue(mgmt: Management, queue_name: str, *, quorum: bool = False) -> dict:
    """Declare James's RabbitMQ objects of mail queue `queue_name`; their names (`james_names`).

    Two direct durable exchanges (the queue's and its dead-letter one), the durable work queue
    dead-lettering to the latter (a classic queue of version 2, or a quorum queue), the durable
    dead-letter queue, and the two bindings with routing key ``""``.
    """
    names = james_names(queue_name)
    for exchange in (names["exchange"], names["dead_letter_exchange"]):
        mgmt.put(
            mgmt.path("exchanges", exchange),
            {"type": "direct", "durable": True, "auto_delete": False, "internal": False},
        )
    arguments: dict[str, Any] = {"x-dead-letter-exchange": names["dead_letter_exchange"]}
    if quorum:
        arguments["x-queue-type"] = "quorum"
    else:
        arguments["x-queue-version"] = 2
    mgmt.put(
        mgmt.path("queues", names["workqueue"]),
        {"durable": True, "auto_delete": False, "arguments": arguments},
    )
    mgmt.put(
        mgmt.path("queues", names["dead_letter_queue"]),
        {"durable": True, "auto_delete": False, "arguments": {}},
    )
    for exchange, queue in (
        (names["exchange"], names["workqueue"]),
        (names["dead_letter_exchange"], names["dead_letter_queue"]),
    ):
        mgmt.post(
            mgmt.path("bindings", "e", exchange, "q", queue), {"routing_key": "", "arguments": {}}
        )
    return names


def publish(mgmt: Management, exchange: str, body: bytes) -> None:
    """Publish `body` to `exchange` as James does (persistent, text/plain, routing key ``""``)."""
    result = mgmt.post(
        mgmt.path("exchanges", exchange, "publish"),
        {
            "routing_key": "",
            "properties": {
                "delivery_mode": 2,
                "priority": 0,
                "content_type": "text/plain",
                "headers": {"x-dead-letter-routing-key": ""},
            },
            "payload": base64.b64encode(body).decode(),
            "payload_encoding": "base64",
        },
    )
    if not (isinstance(result, dict) and result.get("routed") is True):
        raise AssertionError(f"the message published to {exchange} was not routed: {result}")


def queue_info(mgmt: Management, queue: str, *, timeout: float = 20.0) -> dict:
    """``messages_ready``, ``messages_unacknowledged`` and ``consumers`` of `queue`, current.

    The management API's counts are statistics refreshed every `STATS_INTERVAL_MS`; they are
    read until they have not changed for `STATS_SETTLE_SECONDS` (several intervals), so a
    publish, get or consumer a moment ago is counted. The queue's whole record is returned.
    """
    keys = ("messages_ready", "messages_unacknowledged", "consumers")
    deadline = time.monotonic() + timeout
    last: tuple = ()
    since = time.monotonic()
    while True:
        record = mgmt.get(mgmt.path("queues", queue))
        # A queue declared a moment ago has no statistics yet: no counts at all.
        counts = tuple(record.get(key) for key in keys)
        now = time.monotonic()
        if counts != last or None in counts:
            last, since = counts, now
        elif now - since >= STATS_SETTLE_SECONDS:
            return record
        if now > deadline:
            raise TimeoutError(
                f"the counts of queue {queue} did not settle: {dict(zip(keys, last, strict=True))}"
            )
        time.sleep(STATS_INTERVAL_MS / 1000)


def instance_pids(info: dict) -> list[int]:
    """The live processes of the node of `info`: epmd, the start script and ``beam.smp``
    (their command lines name the server directory), ``erl_child_setup`` and ``inet_gethost``
    (their own sessions, command lines naming nothing; they inherit the node's environment,
    whose ``HOME`` is the server directory)."""
    directory = str(info["directory"])
    return pids_of_instance(directory, f"HOME={directory}")


def _get(mgmt: Management, queue: str, count: int, ackmode: str) -> list[dict]:
    return mgmt.post(
        mgmt.path("queues", queue, "get"),
        {"count": count, "ackmode": ackmode, "encoding": "base64"},
    )


def dead_letter(mgmt: Management, queue: str, count: int) -> int:
    """Dead-letter the first `count` ready messages of work queue `queue` (basic.get, then
    basic.reject without requeue: they go to its ``x-dead-letter-exchange``); how many were."""
    return len(_get(mgmt, queue, count, "reject_requeue_false"))


def drain(mgmt: Management, queue: str) -> list[bytes]:
    """Every ready message body of `queue`, in order, acknowledged (the queue ends empty)."""
    bodies: list[bytes] = []
    while True:
        batch = _get(mgmt, queue, 500, "ack_requeue_false")
        if not batch:
            return bodies
        bodies.extend(base64.b64decode(message["payload"]) for message in batch)


# --- A consumer that holds messages unacknowledged ---------------------------------------------


class HeldMessages:
    """What a `holding_consumer` has received (bodies, in delivery order)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.error: BaseException | None = None
        self._changed = threading.Condition()

    def _add(self, body: bytes) -> None:
        with self._changed:
            self.bodies.append(body)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[bytes]:
        """The bodies once at least `count` have arrived (TimeoutError after `timeout`)."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: len(self.bodies) >= count or self.error is not None, timeout
            ):
                raise TimeoutError(f"{len(self.bodies)} of {count} messages arrived")
        if self.error is not None:
            raise self.error
        return list(self.bodies)


@contextlib.contextmanager
def holding_consumer(info: dict, queue: str, prefetch: int) -> Iterator[HeldMessages]:
    """A consumer of `queue` (manual ack, prefetch `prefetch`) that never acknowledges.

    While the block runs, the queue has this consumer and up to `prefetch` messages delivered to
    it and unacknowledged; at the end its channel closes and they are ready again. The AMQP
    connection (pika's BlockingConnection) lives in a background thread.
    """
    import pika

    held = HeldMessages()
    consuming = threading.Event()
    stop = threading.Event()

    def run() -> None:
        try:
            params = pika.ConnectionParameters(
                host=str(info["host"]),
                port=int(info["amqp_port"]),
                virtual_host=str(info.get("vhost", VHOST)),
                credentials=pika.PlainCredentials(str(info["username"]), str(info["password"])),
                connection_attempts=1,
                socket_timeout=5,
                blocked_connection_timeout=30,
            )
            connection = pika.BlockingConnection(params)
            try:
                channel = connection.channel()
                channel.basic_qos(prefetch_count=prefetch)
                channel.basic_consume(
                    queue, lambda _ch, _method, _props, body: held._add(body), auto_ack=False
                )
                consuming.set()
                while not stop.is_set():
                    connection.process_data_events(time_limit=0.05)
                channel.close()  # the unacknowledged messages go back to ready
            finally:
                if connection.is_open:
                    connection.close()
        except BaseException as exc:
            with held._changed:
                held.error = exc
                held._changed.notify_all()
        finally:
            consuming.set()

    thread = threading.Thread(target=run, name=f"holding-consumer-{queue}", daemon=True)
    thread.start()
    try:
        consuming.wait(30)
        if held.error is not None:
            raise held.error
        yield held
    finally:
        stop.set()
        thread.join(30)
    if held.error is not None:
        raise held.error
