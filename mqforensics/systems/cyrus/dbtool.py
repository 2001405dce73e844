"""Reads and single-key writes on a live `mailboxes.db` through Cyrus's own ``cyr_dbtool``.

Cyrus's tool takes the database's lock for each command, so the running server sees every
write whole; its ``batch`` mode is the only exact interface (keys hold control bytes, values may
hold newlines): commands are sent as non-synchronising literals (``{n+}``; plain ``{n}``
literals crash 3.6.1, cyrus.md §10) and ``SHOW`` answers in astrings and literals
(`dumps.read_batch_show`). The database path and backend come from ``imapd.conf``
(``configdirectory``, ``mboxlist_db``, ``mboxlist_db_path``). Run as root, the tool runs as the
``cyrus`` user (``runuser``), which must own every file it writes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import ConfigError, InputError, ServerUnavailable
from mqforensics.systems.cyrus import dumps

DEFAULT_TOOLS = Path("/usr/lib/cyrus/bin")
DEFAULT_USER = "cyrus"


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

    def _run(self, commands: bytes) -> bytes:
        tool = self.tools / "cyr_dbtool"
        argv = [str(tool), "-C", str(self.config), str(self.database), self.backend, "batch"]
        if os.geteuid() == 0 and self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        try:
            result = subprocess.run(argv, input=commands, capture_output=True, timeout=300)
        except FileNotFoundError:
            raise ConfigError(f"{tool}: not found (give the Cyrus tools directory)") from None
        except subprocess.TimeoutExpired:
            raise ServerUnavailable(f"{tool} on {self.database}: no answer in 300 s") from None
        if result.returncode != 0:
            error = (result.stderr or result.stdout).decode(errors="replace").strip()
            raise ServerUnavailable(
                f"{tool} on {self.database} failed (exit {result.returncode}): {error[-300:]}"
            )
        return result.stdout

    def show(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every (key, value) whose key starts with `prefix`, in key order."""
        command = b"SHOW " + _literal(prefix) + b"\r\n" if prefix else b"SHOW\r\n"
        out = self._run(command)
        try:
            return dumps.read_batch_show(out, name=f"cyr_dbtool show of {self.database}")
        except InputError as exc:
            raise ServerUnavailable(f"unexpected cyr_dbtool output: {exc.message}") from None

    def get(self, key: bytes) -> bytes | None:
        """The value of `key`, None when it is absent (unlike ``get``, which prints an empty
        line either way)."""
        return dict(self.show(key)).get(key)

    def set_keys(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        self._run(b"".join(b"SET " + _literal(k) + b" " + _literal(v) + b"\r\n" for k, v in pairs))

    def delete_keys(self, keys: Iterable[bytes]) -> None:
        self._run(b"".join(b"DELETE " + _literal(k) + b"\r\n" for k in keys))
