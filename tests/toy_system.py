"""A minimal mail system defined in the tests and registered at run time: ``toy``.

Its store is a directory of ``*.msg`` files, each a JSON object ``{"from": ADDRESS, "to":
[ADDRESS...], "arrived": ISO-8601}``. It has two checks (``old_message``, ``personal_data``), one
rule kind of its own (``toy_retention``, with ``older_than``), an executor that deletes a planned
file after checking its size and SHA-256 on the held inode, and nothing else: a test proves
that it goes through audit, plan, approve, purge and report with no change to a shared module.

It keeps the system template (docs/architecture.md) in one file, one section per role: options,
read, frames (one DataFrame), checks, plan, purge, spec.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqforensics import subjects
from mqforensics.credentials import Login
from mqforensics.errors import InputError
from mqforensics.file_digest import file_digest
from mqforensics.findings import SCHEMA, Finding
from mqforensics.options import Options, option
from mqforensics.purge.contract import Operations, Verdict
from mqforensics.purge.held_unlink import PlannedFile, mismatch, unlink_checked
from mqforensics.retention.manifest import Action
from mqforensics.spec import AuditArgs, Check, Loaded, PlanParts, RuleKind, System
from mqforensics.units import parse_duration, parse_instant, utc_now

NAME = "toy"
DELETE = "toy.delete_message"
TOY_LOGIN = ("MQF_TOY_USERNAME", "MQF_TOY_PASSWORD")
FRAME = "file string, size bigint, sha256 string, arrived timestamp, addresses array<string>"


# --- options.py ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToyOptions(Options):
    """The toy queue to read and its one threshold."""

    directory: Path = option(parse=Path, metavar="DIR", positional=True,
                             help="the toy queue directory")  # fmt: skip
    max_age: dt.timedelta = option(
        dt.timedelta(days=7), parse=parse_duration,
        help="a message older than this is old (default 7d)",
    )  # fmt: skip
    # A server the toy names but never reads: its login comes from TOY_LOGIN alone.
    mirror: str | None = option(
        None, metavar="HOST[:PORT]", help="(not read)", login=Login(TOY_LOGIN, host=True)
    )

    def check(self) -> None:
        if not Path(self.directory).is_dir():
            raise InputError(f"{self.directory}: no such directory")


@dataclass(frozen=True, kw_only=True)
class ToyPurgeOptions(Options):
    toy_server: str | None = option(
        None, metavar="HOST[:PORT]", help="(not read)", login=Login(TOY_LOGIN, host=True),
        group="toy plans",
    )  # fmt: skip


# --- read.py ------------------------------------------------------------------------------------


def load(spark: Any, options: ToyOptions, common: AuditArgs) -> Loaded[Any]:
    rows = []
    directory = Path(options.directory)
    for path in sorted(directory.glob("*.msg")):
        try:
            document = json.loads(path.read_text())
        except ValueError:
            raise InputError(f"{path}: not a JSON message") from None
        size, sha256 = file_digest(path)
        arrived = parse_instant(document["arrived"])
        rows.append((str(path), size, sha256, arrived, [document["from"], *document["to"]]))
    frame = spark.createDataFrame(rows, FRAME) if rows else spark.createDataFrame([], FRAME)
    return Loaded(
        frames=frame,
        source=f"toy queue {directory}",
        as_of=common.as_of or utc_now(),
        objects=len(rows),
        inputs=[{"kind": "directory", "location": str(directory)}],
        plan_inputs={"directory": str(directory.resolve())},
    )


def settings(options: ToyOptions, common: AuditArgs, loaded: Loaded[Any]) -> dict[str, Any]:
    return {"as_of": loaded.as_of, "max_age": options.max_age, "common": common}


# --- checks.py ----------------------------------------------------------------------------------


def _finding(check: str, severity: str, row: Any, as_of: dt.datetime, **detail: Any) -> Finding:
    detail = {"size": row.size, "sha256": row.sha256, "arrived": row.arrived.isoformat(), **detail}
    return Finding(check, severity, NAME, None, "message", row.file, as_of, row.size, detail)


def old_message(frame: Any, settings: dict[str, Any]) -> Any:
    from mqforensics.findings import to_frame

    cutoff = settings["as_of"] - settings["max_age"]
    rows = [r for r in frame.collect() if r.arrived.astimezone(dt.UTC) < cutoff]
    spark = frame.sparkSession
    return to_frame(spark, [_finding("old_message", "warning", r, settings["as_of"]) for r in rows])


def personal_data(frame: Any, settings: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F

    from mqforensics.findings import to_frame

    common: AuditArgs = settings["common"]
    spark = frame.sparkSession
    if not common.subjects:
        return spark.createDataFrame([], SCHEMA)
    keyed = frame.withColumn(
        "keys", subjects.keyed_addresses(F.col("addresses"), common.subject_key)
    )
    found = []
    for row in keyed.collect():
        held = sorted(set(row["keys"]) & common.subjects)
        if held:
            found.append(_finding("personal_data", "info", row, settings["as_of"], subjects=held))
    return to_frame(spark, found)


# --- spec.py: the checks' table -----------------------------------------------------------------

CHECKS = (
    Check(
        "old_message",
        "warning",
        old_message,
        "A message older than --max-age.",
        "It holds personal data past its retention.",
        "Plan its deletion.",
    ),
    Check(
        "personal_data",
        "info",
        personal_data,
        "A message holding a searched data subject.",
        "An erasure request covers it.",
        "Plan an erasure.",
    ),
)


# --- plan.py ------------------------------------------------------------------------------------


def plan(findings: list[dict[str, Any]], policy: Any, manifest: Any) -> PlanParts:
    actions: dict[str, Action] = {}
    for row in findings:
        rules: list[str] = []
        if row["check"] == "old_message":
            rules = [r.id for r in policy.rules_of("toy_retention", NAME)]
        elif row["check"] == "personal_data":
            held = set(row["detail"]["subjects"])
            rules = [r.id for r in policy.rules_of("erase_subject", NAME) if held & set(r.subjects)]
        if not rules:
            continue
        target = {"path": row["subject"]}
        previous = actions.get(row["subject"])
        actions[row["subject"]] = Action(
            kind=DELETE,
            target=target,
            precondition={"size": row["detail"]["size"], "sha256": row["detail"]["sha256"]},
            rules=tuple(sorted({*rules, *(previous.rules if previous else ())})),
            bytes=row["bytes"],
            tombstones=0,
            reason="old message" if row["check"] == "old_message" else "erased subject",
            findings=tuple(sorted({row["id"], *(previous.findings if previous else ())})),
        )
    return PlanParts(actions=[actions[k] for k in sorted(actions)])


# --- purge.py -----------------------------------------------------------------------------------


class ToyExecutor:
    kinds = (DELETE,)

    def __init__(self, plan: Any) -> None:
        self.directory = Path(plan.header["inputs"]["directory"])
        self.named = {a.target["path"] for a in plan.actions()}

    def classify(self, exc: BaseException) -> str | None:
        return None

    def _planned(self, action: Action) -> PlannedFile:
        pre = action.precondition
        return PlannedFile(Path(action.target["path"]), pre["size"], pre["sha256"])

    def verify(self, action: Action) -> Verdict:
        planned = self._planned(action)
        try:
            why = mismatch(planned.path, planned)
        except FileNotFoundError:
            return Verdict(ok=False, already_done=True)
        return Verdict(ok=why is None, reason=why or "")

    def apply(self, action: Action, ops: Operations) -> dict[str, Any]:
        if ops.destructive("unlink", functools.partial(self.verify, action)):
            count, size = unlink_checked([self._planned(action)])
            ops.completed("unlink")
            return {"files": count, "bytes": size}
        return {"files": 0, "bytes": 0}

    def census(self) -> dict[str, Any]:
        others = sorted(str(p) for p in self.directory.glob("*.msg") if str(p) not in self.named)
        return {"files": len(others), "names": others}

    def verify_done(self, action: Action) -> str | None:
        return (
            f"{action.target['path']} still present"
            if Path(action.target["path"]).exists()
            else None
        )

    def close(self) -> None:
        pass


# --- spec.py ------------------------------------------------------------------------------------

SPEC = System(
    name=NAME,
    title="toy queue (tests only)",
    options=ToyOptions,
    load=load,
    settings=settings,
    checks=CHECKS,
    plan=plan,
    rule_kinds=(RuleKind("toy_retention", ("older_than",), needs_older_than=True),),
    executors=lambda plan, options: [ToyExecutor(plan)],
    purge_options=ToyPurgeOptions,
)
