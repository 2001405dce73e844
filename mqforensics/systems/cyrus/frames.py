"""The canonical frames of a Cyrus audit (`CyrusFrames`) and the schemas of the Spark readers
that make them (`fleet`).

- ``records`` (`RECORDS`): one row per live key/value record of each file: ``seq`` is the
  record's 0-based position in its file (key order for twoskip/skiplist, file order for a dump);
  ``kind``, ``user`` and ``namespace`` (``U``/``S`` for RACL keys of either generation) come from
  `records.classify_key`; ``name`` is the intname (a 3.6+ dbname converted).
- ``read`` (`READ`): one row per file, what was read and nothing judged: ``format`` (twoskip,
  skiplist, show, batchshow, flat, ctl_mboxlist), ``size`` and ``sha256`` of its bytes,
  ``records`` (live key/value records, or a ``ctl_mboxlist -d`` dump's entries), the reader's
  integrity problems (``read_problems``: kind, file offset, what), the live records in order
  (``items``; null for a ``ctl_mboxlist -d`` dump, which has none), every physical record a
  twoskip file still holds (``history``, file order: offset, type, level, key, length, whether
  committed; the values and pointers no check reads are left out), and a ``ctl_mboxlist -d``
  dump's mailbox entries (``given_entries``: `database.entries_json`, null otherwise).
- ``judged`` (`JUDGED`, `perfile`): one row per file, computed from ``read`` for the server
  settings (version, admins, default domain): `FILES`, the per-file checks' findings (`FINDING`
  structs, with neither system, queue nor instant, which are the same for all) and the ACL
  entries (`ACL_FIELDS`, `dbchecks.acl_report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqforensics.systems.cyrus import dbchecks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RECORDS = (
    "file string, seq int, key binary, value binary, kind string, name string, user string, "
    "namespace string"
)
READ = (
    "file string, format string, size bigint, sha256 string, records bigint, "
    "read_problems array<struct<kind: string, offset: bigint, detail: string>>, "
    "items array<struct<key: binary, value: binary>>, "
    "history array<struct<offset: bigint, type: string, level: int, key: binary, length: bigint, "
    "committed: boolean>>, "
    "given_entries string"
)
FILES = (
    "file string, format string, size bigint, sha256 string, records bigint, mailboxes bigint, "
    "problems int, undecodable int, complete boolean, bare_userids bigint"
)
FINDING = (
    "`check`: string, severity: string, scope: string, subject: string, bytes: bigint, "
    "detail: string"
)
ACL_FIELDS = (
    ("mailbox", "string"),
    ("owner", "string"),
    ("identifier", "string"),
    ("userid", "string"),
    ("rights", "string"),
    ("negative", "boolean"),
    ("tombstone", "boolean"),
    ("intermediate", "boolean"),
    ("own_rights", "boolean"),
    ("admin", "boolean"),
    ("shown", "boolean"),
    ("effective", "boolean"),
    ("grantee_address", "string"),
    ("owner_address", "string"),
)
ACL = ", ".join(f"{name}: {kind}" for name, kind in ACL_FIELDS)
JUDGED = f"{FILES}, findings array<struct<{FINDING}>>, acl array<struct<{ACL}>>"
SHARING = (
    "file string, owner string, mailbox string, grantee string, rights string, negative boolean, "
    "effective boolean"
)


@dataclass
class CyrusFrames:
    """The canonical frames of an audited fleet:

    - `read`: what each file holds (`READ`), computed at once by the reader (`fleet`);
    - `records`: every live key/value record (`RECORDS`: `fleet.read_records`, a second, lazy
      read);
    - `judged(version, admins, default_domain)`: the per-file checks run on `read` (`JUDGED`,
      `perfile`), computed once per server settings and kept;

    and, from `judged` with the server settings of the frames (`version`, `admins`,
    `default_domain`: the audit's options, the same its checks receive in `Settings`):

    - `files`: one row per input (`FILES`);
    - `acl`: every ACL entry of every mailbox record, with ``file`` (`dbchecks.acl_report`);
    - `sharing`: who can see whose mailbox (`SHARING`), not pseudonymised.
    """

    spark: SparkSession
    read: DataFrame
    paths: list[str]
    records: DataFrame
    version: str = dbchecks.DEFAULT_VERSION
    admins: list[str] = field(default_factory=lambda: list(dbchecks.DEFAULT_ADMINS))
    default_domain: str | None = None
    _judged: dict[tuple, DataFrame] = field(default_factory=dict, repr=False, compare=False)

    def judged(self, version: str, admins: Sequence[str], default_domain: str | None) -> DataFrame:
        """The per-file checks and ACL entries of every file judged with these server settings
        (`perfile.judge`): computed by the first call, kept for the next ones."""
        from mqforensics.systems.cyrus import perfile

        key = (version, tuple(admins), default_domain or None)
        if key not in self._judged:
            self._judged[key] = perfile.judge(self.read, JUDGED, *key)
        return self._judged[key]

    @property
    def own(self) -> DataFrame:
        """`judged` with the frames' own server settings."""
        return self.judged(self.version, self.admins, self.default_domain)

    @property
    def files(self) -> DataFrame:
        return self.own.select(*(column.split()[0] for column in FILES.split(", ")))

    @property
    def acl(self) -> DataFrame:
        return acl_of(self.own)

    @property
    def sharing(self) -> DataFrame:
        from pyspark.sql import functions as F

        return self.acl.where(F.col("shown")).select(
            "file",
            "owner",
            "mailbox",
            F.col("userid").alias("grantee"),
            "rights",
            "negative",
            "effective",
        )

    def close(self) -> None:
        for frame in self._judged.values():
            frame.unpersist()
        self._judged.clear()
        self.read.unpersist()


def acl_of(judged: DataFrame) -> DataFrame:
    """The ACL entries of a `JUDGED` frame, one row each, with ``file``."""
    from pyspark.sql import functions as F

    return judged.select("file", F.explode("acl").alias("a")).select("file", "a.*")


def findings_of(judged: DataFrame) -> DataFrame:
    """The per-file findings of a `JUDGED` frame, one row each (`FINDING`)."""
    from pyspark.sql import functions as F

    return judged.select(F.explode("findings").alias("f")).select("f.*")
