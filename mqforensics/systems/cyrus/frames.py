"""The canonical frames of a Cyrus audit (`CyrusFrames`) and the schemas of the Spark readers
that make them (`fleet`).

- ``records`` (`RECORDS`): one row per live key/value record of each file: ``seq`` is the
  record's 0-based position in its file (key order for twoskip/skiplist, file order for a dump);
  ``kind``, ``user`` and ``namespace`` (``U``/``S`` for RACL keys of either generation) come from
  `records.classify_key`; ``name`` is the intname (a 3.6+ dbname converted).
- ``fleet`` (`FLEET`): one row per file: `FILES` (format, size, SHA-256, record, mailbox and
  problem counts), its per-file findings (`findings.SCHEMA` structs) and its ACL entries
  (`ACL_FIELDS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqforensics.systems.cyrus import dbchecks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RECORDS = (
    "file string, seq int, key binary, value binary, kind string, name string, user string, "
    "namespace string"
)
FILES = (
    "file string, format string, size bigint, sha256 string, records bigint, mailboxes bigint, "
    "problems int, undecodable int, complete boolean, bare_userids bigint"
)
FINDING = (
    "`check`: string, severity: string, system: string, queue: string, scope: string, "
    "subject: string, observed_at: timestamp, bytes: bigint, detail: string"
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
FLEET = f"{FILES}, findings array<struct<{FINDING}>>, acl array<struct<{ACL}>>"
SHARING = (
    "file string, owner string, mailbox string, grantee string, rights string, negative boolean, "
    "effective boolean"
)


@dataclass
class CyrusFrames:
    """The canonical frames of an audited fleet, views of the one computed read (`fleet`):

    - `files`: one row per input (`FILES`);
    - `findings`: every per-file check's findings (`findings.SCHEMA`), which each `Check`
      selects by name;
    - `acl`: every ACL entry of every mailbox record, with ``file`` (`dbchecks.acl_report`);
    - `sharing`: who can see whose mailbox (`SHARING`), not pseudonymised;
    - `records`: every live key/value record (`RECORDS`: `fleet.read_records`, a second, lazy
      read).
    """

    spark: SparkSession
    fleet: DataFrame
    paths: list[str]
    records: DataFrame
    version: str = dbchecks.DEFAULT_VERSION
    admins: list[str] = field(default_factory=lambda: list(dbchecks.DEFAULT_ADMINS))
    default_domain: str | None = None

    @property
    def files(self) -> DataFrame:
        return self.fleet.select(*(column.split()[0] for column in FILES.split(", ")))

    @property
    def findings(self) -> DataFrame:
        from pyspark.sql import functions as F

        return self.fleet.select(F.explode("findings").alias("f")).select("f.*")

    @property
    def acl(self) -> DataFrame:
        from pyspark.sql import functions as F

        return self.fleet.select("file", F.explode("acl").alias("a")).select("file", "a.*")

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
        self.fleet.unpersist()
