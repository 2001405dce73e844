"""Reads and writes on a live `mailboxes.db` through Cyrus's own ``cyr_dbtool``.

Cyrus's tool takes the database's lock for each command, so the running server sees every
write whole; its ``batch`` mode is the only exact interface (keys hold control bytes, values may
hold newlines): commands are sent as non-synchronising literals (``{n+}``; plain ``{n}``
literals crash 3.6.1, cyrus.md §10) and ``SHOW``/``GET`` answer in astrings and literals
(`dumps.read_batch_show`). A command that fails ends the batch with a ``FAILED: ...`` line on
stderr and exit status 0 (3.6.1), so that line is an error here too.

`Transaction` keeps one ``batch`` process open inside ``BEGIN``: its reads take the database's
write lock and hold it until its ``COMMIT``, so a check and the write it allows see and change
the database with no other writer in between, Cyrus's own ACL updates (which write a mailbox's
ACL and its RACL keys in one transaction of their own) included.

The database path and backend come from ``imapd.conf`` (``configdirectory``, ``mboxlist_db``,
``mboxlist_db_path``). Run as root, the tool runs as the ``cyrus`` user (``runuser``), which
must own every file it writes.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mqforensics.errors import ConfigError, InputError, ServerUnavailable
from mqforensics.systems.cyrus import dumps

DEFAULT_TOOLS = Path("/usr/lib/cyrus/bin")
DEFAULT_USER = "cyrus"
# How long a `Transaction` waits for its answer (the lock included) and for its commit.
LOCK_TIMEOUT = 10.0


def read_imapd_conf(path: Path) -> dict[str, str]:
    """``key: value`` lines of an ``imapd.conf`` (comments and blank lines skipped)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the Cyrus configuration ({exc.strerror})") from None
    options: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        options[key.strip().lower()] = value.strip()
    return options


def _literal(data: bytes) -> bytes:
    return b"{%d+}\r\n" % len(data) + data


def _failed(stderr: bytes) -> str | None:
    """The ``FAILED: line N at cmd X with error Y`` line a failed batch command leaves."""
    for line in stderr.decode(errors="replace").splitlines():
        if line.startswith("FAILED:"):
            return line.strip()
    return None


def _commands(verb: bytes, keys: Iterable[bytes]) -> bytes:
    return b"".join(verb + b" " + _literal(k) + b"\r\n" for k in keys)


@dataclass(frozen=True)
class DbTool:
    """`cyr_dbtool` on one database: `config` is the ``imapd.conf`` the server runs with."""

    config: Path
    database: Path
    backend: str = "twoskip"
    tools: Path = DEFAULT_TOOLS
    user: str | None = DEFAULT_USER

    @classmethod
    def for_mailboxes(
        cls, config: Path, tools: Path = DEFAULT_TOOLS, user: str | None = DEFAULT_USER
    ) -> DbTool:
        """The `mailboxes.db` that ``imapd.conf`` at `config` names."""
        options = read_imapd_conf(config)
        database = options.get("mboxlist_db_path")
        if not database:
            directory = options.get("configdirectory")
            if not directory:
                raise ConfigError(f"{config}: no configdirectory (nor mboxlist_db_path)")
            database = str(Path(directory) / "mailboxes.db")
        return cls(config, Path(database), options.get("mboxlist_db", "twoskip"), tools, user)

    @property
    def where(self) -> str:
        """``<cyr_dbtool> on <database>``, for messages."""
        return f"{self.tools / 'cyr_dbtool'} on {self.database}"

    def batch_argv(self) -> list[str]:
        argv = [str(self.tools / "cyr_dbtool"), "-C", str(self.config), str(self.database)]
        argv += [self.backend, "batch"]
        if os.geteuid() == 0 and self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return argv

    def not_found(self) -> ConfigError:
        return ConfigError(
            f"{self.tools / 'cyr_dbtool'}: not found (give the Cyrus tools directory)"
        )

    def check_exit(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        """A batch that exited non-zero, or left a ``FAILED:`` line, is `ServerUnavailable`."""
        if returncode != 0:
            error = (stderr or stdout).decode(errors="replace").strip()
            raise ServerUnavailable(f"{self.where} failed (exit {returncode}): {error[-300:]}")
        failed = _failed(stderr)
        if failed:
            raise ServerUnavailable(f"{self.where}: {failed[-300:]}")

    def _run(self, commands: bytes) -> bytes:
        argv = self.batch_argv()
        try:
            result = subprocess.run(argv, input=commands, capture_output=True, timeout=300)
        except FileNotFoundError:
            raise self.not_found() from None
        except subprocess.TimeoutExpired:
            raise ServerUnavailable(f"{self.where}: no answer in 300 s") from None
        self.check_exit(result.returncode, result.stdout, result.stderr)
        return result.stdout

    def _parse(self, out: bytes) -> list[tuple[bytes, bytes]]:
        try:
            return dumps.read_batch_show(out, name=f"cyr_dbtool output on {self.database}")
        except InputError as exc:
            raise ServerUnavailable(f"unexpected cyr_dbtool output: {exc.message}") from None

    def show(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every (key, value) whose key starts with `prefix`, in key order."""
        command = b"SHOW " + _literal(prefix) + b"\r\n" if prefix else b"SHOW\r\n"
        return self._parse(self._run(command))

    def get(self, key: bytes) -> bytes | None:
        """The value of `key`, None when it is absent (unlike ``get``, which prints an empty
        line either way)."""
        return dict(self.show(key)).get(key)

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """The values of those of `keys` that are present (one process, one ``GET`` each; each
        read under the lock on its own, not one snapshot: see `Transaction`)."""
        return dict(self._parse(self._run(_commands(b"GET", keys))))

    def set_keys(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        self._run(b"".join(b"SET " + _literal(k) + b" " + _literal(v) + b"\r\n" for k, v in pairs))

    def delete_keys(self, keys: Iterable[bytes]) -> None:
        self._run(_commands(b"DELETE", keys))

    def transaction(self, timeout: float = LOCK_TIMEOUT) -> Transaction:
        """A `Transaction` on the database; its process starts at its first read."""
        return Transaction(self, timeout)


class Transaction:
    """One ``cyr_dbtool batch`` process with a transaction open: ``BEGIN``, one `read`, then
    `commit` (writes and ``COMMIT``) or `abort`. Use it as a context manager: leaving it
    without a commit aborts.

    The read takes the database's write lock (``BEGIN`` alone takes none: the first ``GET``
    inside it does) and the lock is held until ``COMMIT`` or ``ABORT``, or until the process
    ends, which discards the transaction (nothing is written before ``COMMIT`` is sent, with the
    writes, in one piece). Every other writer and reader of the database waits meanwhile, the
    running Cyrus included: hold it for milliseconds, never across a wait.

    A ``GET`` of an absent key prints nothing, so `read` asks last for `sentinel`, a key the
    caller has just seen present (the RACL marker), whose answer ends the reply. If it is gone,
    or the lock stays held elsewhere, no answer comes: after `timeout` seconds the process is
    killed (which releases the lock) and `ServerUnavailable` says so.
    """

    def __init__(self, tool: DbTool, timeout: float = LOCK_TIMEOUT) -> None:
        self.tool = tool
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._locked = False  # a read answered: the transaction exists and holds the lock
        self._finished = False

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()

    def _kill(self) -> None:
        proc, self._finished = self._proc, True
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # runuser and cyr_dbtool: its own group
            proc.wait()

    def read(self, keys: Sequence[bytes], sentinel: bytes) -> dict[bytes, bytes]:
        """``BEGIN`` and a ``GET`` of each key, then of `sentinel`, under the lock: the present
        ones with their values (`sentinel` included)."""
        if self._proc is not None:
            raise RuntimeError("a Transaction reads once")
        wanted = [k for k in keys if k != sentinel] + [sentinel]
        try:
            self._proc = subprocess.Popen(
                self.tool.batch_argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise self.tool.not_found() from None
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(b"BEGIN\r\n" + _commands(b"GET", wanted))
            self._proc.stdin.flush()
            pairs = self._answer(self._proc.stdout.fileno(), sentinel)
        except OSError as exc:  # it died at once (a broken pipe)
            self._kill()
            raise ServerUnavailable(f"{self.tool.where}: {exc}") from None
        except BaseException:
            self._kill()
            raise
        unexpected = [k for k, _ in pairs if k not in wanted]
        if unexpected:
            self._kill()
            raise ServerUnavailable(f"{self.tool.where}: answered for a key it was not asked about")
        self._locked = True
        return dict(pairs)

    def _answer(self, fd: int, sentinel: bytes) -> list[tuple[bytes, bytes]]:
        deadline = time.monotonic() + self.timeout
        data = b""
        while True:
            if data.endswith(b"\n"):
                try:
                    pairs = dumps.read_batch_show(data, name="cyr_dbtool answer")
                except InputError:
                    pairs = []  # a literal not all there yet
                if pairs and pairs[-1][0] == sentinel:
                    return pairs
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerUnavailable(
                    f"{self.tool.where}: no answer in {self.timeout:g} s (the database stayed "
                    f"locked, or its key {sentinel!r} is gone)"
                )
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                assert self._proc is not None
                stderr = self._proc.stderr.read() if self._proc.stderr else b""
                self._proc.wait()
                error = (_failed(stderr) or stderr.decode(errors="replace").strip())[-300:]
                raise ServerUnavailable(f"{self.tool.where} ended before answering: {error}")
            data += chunk

    def _finish(self, commands: bytes) -> None:
        proc, self._finished = self._proc, True
        assert proc is not None
        try:
            out, err = proc.communicate(commands, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise ServerUnavailable(
                f"{self.tool.where}: no answer in {self.timeout:g} s after {commands[-8:]!r} "
                "(whether it was applied is unknown: the next read says)"
            ) from None
        self.tool.check_exit(proc.returncode, out, err)

    def commit(
        self, sets: Iterable[tuple[bytes, bytes]] = (), deletes: Iterable[bytes] = ()
    ) -> None:
        """Write `sets` and `deletes` and commit, at once: the lock taken by `read` is held
        until the commit is on disk."""
        if not self._locked or self._finished:
            raise RuntimeError("commit needs a Transaction that has read and not finished")
        commands = b"".join(b"SET " + _literal(k) + b" " + _literal(v) + b"\r\n" for k, v in sets)
        self._finish(commands + _commands(b"DELETE", deletes) + b"COMMIT\r\n")

    def abort(self) -> None:
        """Discard the transaction (nothing was written) and end the process; idempotent."""
        if self._proc is None or self._finished:
            return
        if not self._locked:
            self._kill()
            return
        try:
            self._finish(b"ABORT\r\n")
        except (ServerUnavailable, OSError):
            self._kill()
