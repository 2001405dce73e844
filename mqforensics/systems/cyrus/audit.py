"""`mqforensics audit cyrus DB_OR_DUMP...`: check Cyrus `mailboxes.db` files or their dumps.

Each input's type is found from its content: twoskip or skiplist magic, else a text dump —
``ctl_mboxlist -d`` JSON (starts with ``{``, or a ``.json`` name), ``cvt_cyrusdb`` flat (``.flat``
name), ``cyr_dbtool ... batch`` SHOW (``.batchshow``), otherwise ``cyr_dbtool ... show``. Findings
are written as by `audit james` (findings.json and findings.parquet, atomically) and
``sharing.json`` (who can see whose mailbox). Identifiers and the user part of mailbox names are
pseudonymised in both (`pseudonyms`) unless ``--reveal-addresses``. Exit status: 0, 1 when any
finding is ``error`` or worse, 2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import InputError
from mqforensics.findings import Finding, exit_status
from mqforensics.systems.cyrus import checks, dumps, pseudonyms, skiplist, twoskip
from mqforensics.systems.cyrus.checks import Database
from mqforensics.systems.james.audit import parse_instant, summarise, write_findings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--admin``, ``--default-domain``: the server settings the checks need."""
    parser.add_argument(
        "--version", dest="cyrus_version", default=checks.DEFAULT_VERSION,
        help="Cyrus version whose RACL rule applies (default 3.6)",
    )  # fmt: skip
    parser.add_argument(
        "--admin", action="append", default=None,
        help="an `admins:` userid (repeat; default cyrus)",
    )  # fmt: skip
    parser.add_argument(
        "--default-domain", metavar="DOMAIN",
        help="`defaultdomain:` of imapd.conf: bob@DOMAIN is the user bob (user.bob)",
    )  # fmt: skip


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("cyrus", help="Cyrus IMAP mailboxes.db (file or dump)")
    parser.add_argument("inputs", nargs="+", type=Path, metavar="DB_OR_DUMP")
    parser.add_argument("--out", type=Path, required=True, help="directory for the findings")
    add_server_arguments(parser)
    parser.add_argument("--as-of", type=parse_instant, help="observed_at of the findings")
    parser.add_argument(
        "--reveal-addresses", action="store_true",
        help="show identifiers and mailbox names as they are (default: pseudonymised)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def load(path: Path) -> Database:
    """Read one input, its type found from its content (see the module docstring)."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    data = path.read_bytes()
    label = str(path)
    if data.startswith(twoskip.MAGIC):
        return Database.from_file(twoskip.read(data, name=label, history=True))
    if data.startswith(twoskip.SKIPLIST_MAGIC):
        return Database.from_file(skiplist.read(data, name=label))
    name = path.name.lower()
    if data.lstrip().startswith(b"{") or name.endswith(".json"):
        return Database(label, None, (), dumps.read_ctl_mboxlist(data, name=label))
    if name.endswith(".flat"):
        return Database(label, dumps.read_flat(data, name=label))
    if name.endswith(".batchshow"):
        return Database(label, dumps.read_batch_show(data, name=label))
    if b"\t" in data:
        return Database(label, dumps.read_show(data, name=label))
    raise InputError(
        f"{label}: neither a twoskip/skiplist file nor a show, flat or ctl_mboxlist dump"
    )


def sharing_rows(
    dbs: list[Database], admins: list[str], reveal: bool, default_domain: str | None = None
) -> list[dict[str, Any]]:
    """`checks.sharing_report` of each database with its ``file``, pseudonymised unless
    `reveal`."""
    rows = [
        {"file": db.source, **row}
        for db in dbs
        for row in checks.sharing_report(db.entries, admins, default_domain)
    ]
    return rows if reveal else [hide_sharing_row(row, admins) for row in rows]


def hide_sharing_row(row: dict[str, Any], admins: Sequence[str]) -> dict[str, Any]:
    return {
        **row,
        "owner": pseudonyms.identifier(row["owner"], admins),
        "grantee": pseudonyms.identifier(row["grantee"], admins),
        "mailbox": pseudonyms.mailbox(row["mailbox"]),
    }


def _finding_of(row: Any) -> Finding:
    values = row.asDict()
    values["detail"] = json.loads(values["detail"]) if values["detail"] else {}
    return Finding(**values)


def audit(
    spark: SparkSession, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every input is read and checked by Spark, one task per file (`fleet`); the findings and
    the sharing report (both pseudonymised unless ``--reveal-addresses``) are written to
    ``args.out`` and returned."""
    from mqforensics.findings import to_frame
    from mqforensics.systems.cyrus import fleet

    admins = args.admin if args.admin is not None else list(checks.DEFAULT_ADMINS)
    as_of = args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0)
    frame = fleet.fleet_findings(
        spark, args.inputs, args.cyrus_version, admins, as_of, args.default_domain
    )
    if not args.reveal_addresses:
        hidden = [pseudonyms.finding(_finding_of(row), admins) for row in frame.toLocalIterator()]
        frame = to_frame(spark, hidden)
    rows = write_findings(frame, args.out)
    sharing = [
        row.asDict()
        for row in fleet.fleet_sharing(spark, args.inputs, admins, args.default_domain).collect()
    ]
    if not args.reveal_addresses:
        sharing = [hide_sharing_row(row, admins) for row in sharing]
    sharing.sort(key=lambda r: (r["file"], r["owner"] or "", r["mailbox"], r["grantee"]))
    tmp = args.out / ".sharing.json.tmp"
    tmp.write_text(json.dumps(sharing, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out / "sharing.json")
    return rows, sharing


def run(args: argparse.Namespace) -> int:
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spark = session("mqforensics-audit-cyrus")
    with spark_progress(spark, "audit cyrus"):
        rows, _ = audit(spark, args)
    print(f"Cyrus {args.cyrus_version}: {len(args.inputs)} input(s), one Spark task each")
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'}, findings.parquet and sharing.json")
    return exit_status(rows)
