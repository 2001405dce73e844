"""`mqforensics audit cyrus DB_OR_DUMP...`: the source options, what is checked before Spark
starts, and the loader of Cyrus `mailboxes.db` files or their dumps into canonical frames.

Each input's type is found from its content (`load`): twoskip or skiplist magic, else a text
dump — ``ctl_mboxlist -d`` JSON (starts with ``{``, or a ``.json`` name), ``cvt_cyrusdb`` flat
(``.flat`` name), ``cyr_dbtool ... batch`` SHOW (``.batchshow``), otherwise ``cyr_dbtool ...
show``. Bytes that are neither (no magic, and binary rather than text: `looks_binary`) are
refused before Spark starts, saying what the file starts with (`sniff`). Every input is read
and checked by Spark, one task per file (`fleet`); the runner writes the findings, and
``sharing.json`` (who can see whose mailbox) is written next to them, pseudonymised
(`pseudonyms`) unless ``--reveal-addresses``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError, InputError
from mqforensics.systems.cyrus import checks, dumps, pseudonyms, skiplist, twoskip
from mqforensics.systems.cyrus.checks import Database

if TYPE_CHECKING:
    import datetime as dt

    from pyspark.sql import SparkSession

    from mqforensics.spec import AuditArgs, Loaded

# The Cyrus series whose RACL rule (records.expected_racls) and key format the checks know,
# from the first with reverse ACLs (3.0) to the newest release; a patch level may follow
# (3.4.2 changed the rule within 3.4).
KNOWN_VERSIONS = tuple(f"3.{minor}" for minor in range(13))
_VERSION = re.compile(r"(3\.\d+)(\.\d+)?")
SHARING_JSON = "sharing.json"


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


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """The inputs and the server settings the checks need (the same for `audit`, `validate`
    and `plan cyrus`)."""
    parser.add_argument(
        "inputs", nargs="+", type=Path, metavar="DB_OR_DUMP",
        help="a copy of a mailboxes.db (twoskip or skiplist) or a dump of one (cyr_dbtool show "
        "or batch SHOW, cvt_cyrusdb flat, ctl_mboxlist -d); several for a fleet of backends, "
        "each read by one Spark task",
    )  # fmt: skip
    server = parser.add_argument_group("the Cyrus server (imapd.conf)")
    server.add_argument(
        "--version", dest="cyrus_version", type=cyrus_version, default=checks.DEFAULT_VERSION,
        metavar="X.Y[.Z]",
        help="Cyrus version whose RACL rule and key format apply, 3.0 to 3.12 (default "
        f"{checks.DEFAULT_VERSION})",
    )  # fmt: skip
    server.add_argument(
        "--admin", action="append", default=None, metavar="USERID",
        help="an `admins:` userid of imapd.conf (repeat for several; default "
        f"{', '.join(checks.DEFAULT_ADMINS)}): admins get no RACL key and keep their rights",
    )  # fmt: skip
    server.add_argument(
        "--default-domain", metavar="DOMAIN",
        help="`defaultdomain:` of imapd.conf: bob@DOMAIN is the user bob (user.bob), and an "
        "erasure request for bob@DOMAIN matches the bare userid bob",
    )  # fmt: skip


def admins_of(args: argparse.Namespace) -> list[str]:
    return list(args.admin) if args.admin is not None else list(checks.DEFAULT_ADMINS)


# How much of a file `sniff` reads, and the share of control bytes (other than the TAB, line
# breaks and the separators 0x1d-0x1f that mailbox names and dlists hold) beyond which it is
# binary: random bytes hold about 11% (29 of 256 values), dumps next to none (a key may hold
# a NUL).
SNIFF_BYTES = 4096
_BINARY_SHARE = 1 / 16
_TEXT_CONTROLS = frozenset(b"\t\n\r\x1d\x1e\x1f")


def looks_binary(head: bytes) -> bool:
    """`head` (a file's first bytes) is binary, not a text dump: more than a sixteenth of its
    bytes are control bytes no dump holds."""
    controls = sum(1 for byte in head if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return bool(head) and controls > len(head) * _BINARY_SHARE


def sniff(path: Path, head: bytes) -> None:
    """An InputError saying what `path` looks like when its first bytes, `head`, are neither
    a twoskip or skiplist database nor text (`looks_binary`)."""
    if head.startswith((twoskip.MAGIC, twoskip.SKIPLIST_MAGIC)) or not looks_binary(head):
        return
    raise InputError(
        f"{path}: not a twoskip or skiplist database, nor a text dump "
        f"(first bytes {head[:8].hex(' ')})"
    )


def _check_file(path: Path) -> None:
    """`path` is a readable regular file; an InputError saying what it is otherwise."""
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a mailboxes.db or a dump")
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: not readable")


def checked_paths(paths: Sequence[str | Path]) -> list[Path]:
    """`paths`, each an existing readable file named once; InputError or ConfigError naming the
    path otherwise (before any Spark work)."""
    out: list[Path] = []
    seen: set[str] = set()
    for given in paths:
        path = Path(given)
        _check_file(path)
        absolute = str(path.absolute())
        if absolute in seen:
            raise ConfigError(f"{path} is given twice")
        seen.add(absolute)
        out.append(path)
    if not out:
        raise ConfigError("no mailboxes.db file given")
    return out


def check_inputs(args: argparse.Namespace) -> None:
    """Every input is a readable file, named once, whose first bytes are a database's magic
    or text (`sniff`): checked before Spark starts."""
    for path in checked_paths(args.inputs):
        with open(path, "rb") as stream:
            sniff(path, stream.read(SNIFF_BYTES))


def load(path: Path) -> Database:
    """Read one input, its type found from its content (see the module docstring)."""
    _check_file(path)
    data = path.read_bytes()
    sniff(path, data[:SNIFF_BYTES])
    label = str(path)
    fingerprint: dict[str, Any] = {
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    if data.startswith(twoskip.MAGIC):
        parsed = twoskip.read(data, name=label, history=True)
        return _with(Database.from_file(parsed), "twoskip", fingerprint)
    if data.startswith(twoskip.SKIPLIST_MAGIC):
        return _with(Database.from_file(skiplist.read(data, name=label)), "skiplist", fingerprint)
    name = path.name.lower()
    if data.lstrip().startswith(b"{") or name.endswith(".json"):
        entries = dumps.read_ctl_mboxlist(data, name=label)
        return Database(label, None, (), entries, format="ctl_mboxlist", **fingerprint)
    if name.endswith(".flat"):
        return Database(label, dumps.read_flat(data, name=label), format="flat", **fingerprint)
    if name.endswith(".batchshow"):
        items = dumps.read_batch_show(data, name=label)
        return Database(label, items, format="batchshow", **fingerprint)
    if b"\t" in data or not data:
        return Database(label, dumps.read_show(data, name=label), format="show", **fingerprint)
    raise InputError(
        f"{label}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist dump"
    )


def _with(db: Database, kind: str, fingerprint: dict[str, Any]) -> Database:
    import dataclasses

    return dataclasses.replace(db, format=kind, **fingerprint)


@dataclass(frozen=True)
class Settings:
    """What every Cyrus check receives next to the frames: the audit's instant and common
    options (the data subjects searched), and the server settings the files were judged with."""

    as_of: dt.datetime
    version: str
    admins: tuple[str, ...]
    default_domain: str | None
    common: AuditArgs


def load_fleet(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """Every input read and checked by Spark, one task per file (`fleet.read_fleet`), as the
    canonical frames (`fleet.CyrusFrames`); ``sharing.json`` pseudonymised unless
    ``--reveal-addresses``. `objects` counts the records read (a dump's entries)."""
    from mqforensics.spec import Loaded
    from mqforensics.systems.cyrus import fleet
    from mqforensics.units import utc_now

    paths = [str(path.absolute()) for path in checked_paths(args.inputs)]
    admins = admins_of(args)
    as_of = common.as_of or utc_now()
    frames = fleet.read_fleet(spark, paths, args.cyrus_version, admins, as_of, args.default_domain)
    files = sorted((row.asDict() for row in frames.files.collect()), key=lambda r: r["file"])
    sharing = [row.asDict() for row in frames.sharing.collect()]
    if not common.reveal_addresses:
        sharing = [pseudonyms.sharing_row(row, admins) for row in sharing]
    sharing.sort(key=lambda r: (r["file"], r["owner"] or "", r["mailbox"], r["grantee"]))
    notes = [
        f"judged by the RACL rule of Cyrus {args.cyrus_version}, admins "
        f"{', '.join(admins) or '(none)'}, default domain {args.default_domain or '(none)'}"
    ]
    notes += [
        f"{f['file']}: {f['problems']} integrity problem(s): a partial read, no plan is made "
        "from it"
        for f in files
        if f["problems"]
    ]
    return Loaded(
        frames=frames,
        source=", ".join(paths),
        as_of=as_of,
        objects=sum(f["records"] for f in files),
        inputs=[
            {
                "kind": "file",
                "location": f["file"],
                "format": f["format"],
                "fingerprint": f"sha256:{f['sha256']}",
                "size": f["size"],
                "records": f["records"],
                "mailboxes": f["mailboxes"],
                "complete": f["complete"],
                "bare_userids": f["bare_userids"],
            }
            for f in files
        ],
        plan_inputs={
            "sources": paths,
            "version": args.cyrus_version,
            "admins": admins,
            "default_domain": args.default_domain,
        },
        outputs={SHARING_JSON: sharing},
        notes=notes,
        close=frames.close,
    )


def settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> Settings:
    return Settings(
        as_of=loaded.as_of,
        version=args.cyrus_version,
        admins=tuple(admins_of(args)),
        default_domain=args.default_domain,
        common=common,
    )
