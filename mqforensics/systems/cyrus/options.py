"""Cyrus's options (the mailboxes.db files or dumps, the server's settings), its purge options,
and the settings every check receives; no Spark here (the spec imports this)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path

from mqforensics.credentials import Login
from mqforensics.errors import ConfigError, InputError
from mqforensics.options import Options, option
from mqforensics.spec import AuditArgs
from mqforensics.systems.cyrus.database import (
    BINARY_MAGICS,
    SNIFF_BYTES,
    checked_paths,
    dump_format,
    sniff,
)
from mqforensics.systems.cyrus.dbchecks import DEFAULT_ADMINS, DEFAULT_VERSION

# The Cyrus series whose RACL rule (records.expected_racls) and key format the checks know,
# from the first with reverse ACLs (3.0) to the newest release; a patch level may follow
# (3.4.2 changed the rule within 3.4).
KNOWN_VERSIONS = tuple(f"3.{minor}" for minor in range(13))
_VERSION = re.compile(r"(3\.\d+)(\.\d+)?")
SERVER = "the Cyrus server (imapd.conf)"

# Where the IMAP admin login of a purge comes from (`purge`).
IMAP_LOGIN = ("MQF_IMAP_USERNAME", "MQF_IMAP_PASSWORD")


def cyrus_version(text: str) -> str:
    """``--version``: a Cyrus version whose RACL rule the checks know (`KNOWN_VERSIONS`, with
    an optional patch level); a ConfigError listing them otherwise."""
    match = _VERSION.fullmatch(text.strip())
    if match is None or match.group(1) not in KNOWN_VERSIONS:
        raise ConfigError(
            f"--version {text!r}: not a Cyrus version whose RACL rule the checks know (known: "
            f"{', '.join(KNOWN_VERSIONS)}, with an optional patch level such as 3.4.2)"
        )
    return text.strip()


@dataclass(frozen=True, kw_only=True)
class CyrusOptions(Options):
    """Which mailboxes.db files (or dumps) to read and the server settings the checks need
    (``mqforensics audit cyrus DB_OR_DUMP... [--version X.Y] [--admin U]...
    [--default-domain D]``; the same for `validate` and `plan cyrus`)."""

    inputs: list[Path] = option(
        parse=Path, metavar="DB_OR_DUMP", positional=True, many=True,
        help="a copy of a mailboxes.db (twoskip or skiplist) or a dump of one (cyr_dbtool show "
        "or batch SHOW, cvt_cyrusdb flat, ctl_mboxlist -d); several for a fleet of backends, "
        "each read by one Spark task",
    )  # fmt: skip
    cyrus_version: str = option(
        DEFAULT_VERSION, flag="--version", parse=cyrus_version, metavar="X.Y[.Z]", group=SERVER,
        help="Cyrus version whose RACL rule and key format apply, 3.0 to 3.12 (default "
        f"{DEFAULT_VERSION})",
    )  # fmt: skip
    admin: list[str] | None = option(
        None, repeat=True, metavar="USERID", group=SERVER,
        help="an `admins:` userid of imapd.conf (repeat for several; default "
        f"{', '.join(DEFAULT_ADMINS)}): admins get no RACL key and keep their rights",
    )  # fmt: skip
    default_domain: str | None = option(
        None, metavar="DOMAIN", group=SERVER,
        help="`defaultdomain:` of imapd.conf: bob@DOMAIN is the user bob (user.bob), and an "
        "erasure request for bob@DOMAIN matches the bare userid bob",
    )  # fmt: skip

    def admins(self) -> list[str]:
        """The ``admins:`` userids the checks apply: `admin`, else `DEFAULT_ADMINS`."""
        return list(self.admin) if self.admin is not None else list(DEFAULT_ADMINS)

    def check(self) -> None:
        """Every input is a readable file, named once, whose first bytes are a database's
        magic or text (`database.sniff`), and a text one a dump of a format the reader knows
        (`database.dump_format`); inputs that are all empty files (0 bytes: no
        database, a dump of none) are nothing to audit, said before Spark starts."""
        paths = checked_paths(self.inputs)
        for path in paths:
            with open(path, "rb") as stream:
                head = stream.read(SNIFF_BYTES)
                sniff(path, head)
                if not head.startswith(BINARY_MAGICS):
                    dump_format(path, chain([head], iter(partial(stream.read, 1 << 20), b"")))
        if all(path.stat().st_size == 0 for path in paths):
            # The words of the runner's own refusal (`runner.load`), which the read would give.
            names = ", ".join(str(path.absolute()) for path in paths)
            raise InputError(f"nothing to audit: {names} holds nothing cyrus keeps")


@dataclass(frozen=True, kw_only=True)
class PurgeOptions(Options):
    """What the purge of a Cyrus plan takes beyond the plan: the IMAP server for DELETEACL
    actions, the server's imapd.conf and tools for RACL key repairs."""

    imap: str | None = option(
        None, metavar="HOST:PORT", group="Cyrus plans", login=Login(IMAP_LOGIN, host=True),
        help="Cyrus IMAP server for DELETEACL; admin login from MQF_IMAP_USERNAME/_PASSWORD",
    )  # fmt: skip
    imap_ssl: bool = option(False, group="Cyrus plans", help="IMAP over TLS (IMAPS)")
    cyrus_config: str | None = option(
        None, metavar="FILE", group="Cyrus plans",
        help="the server's imapd.conf (RACL key repairs)",
    )  # fmt: skip
    cyrus_tools: str | None = option(
        None, metavar="DIR", group="Cyrus plans",
        help="directory of cyr_dbtool (default /usr/lib/cyrus/bin)",
    )  # fmt: skip
    cyrus_user: str | None = option(
        None, metavar="NAME", group="Cyrus plans",
        help="run cyr_dbtool as this user when root (default cyrus)",
    )  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """What every Cyrus check receives next to the frames: the audit's instant and common
    options (the data subjects searched), and the server settings the files were judged with."""

    as_of: dt.datetime
    version: str
    admins: tuple[str, ...]
    default_domain: str | None
    common: AuditArgs
