"""What an audit of Cyrus reads (`options.CyrusOptions`: ``DB_OR_DUMP...``): the loader of
Cyrus `mailboxes.db` files or their dumps into canonical frames, and the settings every check
receives.

Each input's type is found from its content (`database.read_database`). Every input is read by
Spark, one task per file (`fleet`), into the frames (`frames.CyrusFrames`); the runner writes the
findings, and ``sharing.json`` (who can see whose mailbox) is written next to them,
pseudonymised (`pseudonyms`) unless ``--reveal-addresses``.

Every file is named by its escaped text (docs/filenames.md) in the frames, findings,
inputs and notes; a name that is not valid UTF-8 (or holds a control character) is read like any
other, and the audit says so in one note (`filenames.odd_names_note`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqforensics.filenames import is_odd, odd_names_note, shown
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.cyrus import pseudonyms, skiplist_fast, twoskip_fast
from mqforensics.systems.cyrus.database import checked_paths
from mqforensics.systems.cyrus.frames import CyrusFrames
from mqforensics.systems.cyrus.options import CyrusOptions, Settings
from mqforensics.units import utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHARING_JSON = "sharing.json"


def load(spark: SparkSession, options: CyrusOptions, common: AuditArgs) -> Loaded[CyrusFrames]:
    """Every input read by Spark, one task per file (`fleet.read_fleet`), as the canonical
    frames (`frames.CyrusFrames`); the files and ``sharing.json`` (pseudonymised unless
    ``--reveal-addresses``) from the frames judged with the options' server settings, the
    ones the checks receive (`settings`). `objects` counts the records read (a dump's
    entries)."""
    from mqforensics.systems.cyrus import fleet

    given = [path.absolute() for path in checked_paths(options.inputs)]
    paths = [shown(path) for path in given]
    admins = options.admins()
    as_of = common.as_of or utc_now()
    frames = fleet.read_fleet(spark, given, options.cyrus_version, admins, options.default_domain)
    files = sorted((row.asDict() for row in frames.files.collect()), key=lambda r: r["file"])
    sharing = [row.asDict() for row in frames.sharing.collect()]
    if not common.reveal_addresses:
        sharing = [pseudonyms.sharing_row(row, admins) for row in sharing]
    sharing.sort(key=lambda r: (r["file"], r["owner"] or "", r["mailbox"], r["grantee"]))
    notes = [
        f"judged by the RACL rule of Cyrus {options.cyrus_version}, admins "
        f"{', '.join(admins) or '(none)'}, default domain {options.default_domain or '(none)'}"
    ]
    notes += [
        f"{f['file']}: {f['problems']} integrity problem(s): a partial read, no plan is made "
        "from it"
        for f in files
        if f["problems"]
    ]
    odd = odd_names_note([shown(path) for path in given if is_odd(path)])
    if odd is not None:
        notes.append(odd)
    formats = {f["format"] for f in files}
    for kind, reader in (("twoskip", twoskip_fast), ("skiplist", skiplist_fast)):
        slower = reader.kernel_note() if kind in formats else None  # same answers, slower
        if slower is not None:
            notes.append(slower)
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
            "version": options.cyrus_version,
            "admins": admins,
            "default_domain": options.default_domain,
        },
        outputs={SHARING_JSON: sharing},
        notes=notes,
        close=frames.close,
    )


def settings(options: CyrusOptions, common: AuditArgs, loaded: Loaded[CyrusFrames]) -> Settings:
    """What every check judges against."""
    return Settings(
        as_of=loaded.as_of,
        version=options.cyrus_version,
        admins=tuple(options.admins()),
        default_domain=options.default_domain,
        common=common,
    )
