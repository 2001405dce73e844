"""A minimal mail system defined in the tests and registered at run time: ``toy``.

Its store is a directory of ``*.msg`` files, each a JSON object ``{"from": ADDRESS, "to":
[ADDRESS...], "arrived": ISO-8601}``. It has two checks (``old_message``, ``personal_data``), one
rule kind of its own (``toy_retention``, with ``older_than``), an executor that deletes a planned
file after checking its size and SHA-256 on the held inode, and nothing else: a test proves
that it goes through audit, plan, approve, purge and report with no change to a shared module.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
from pathlib import Path
from typing import Any

from mqforensics import subjects
from mqforensics.credentials import Login, declare_login
from mqforensics.errors import InputError
from mqforensics.file_digest import file_digest
from mqforensics.findings import SCHEMA, Finding
from mqforensics.purge.engine import Operations, Verdict
from mqforensics.purge.held_unlink import PlannedFile, mismatch, unlink_checked
from mqforensics.retention.manifest import Action
from mqforensics.spec import AuditArgs, Check, Loaded, Option, PlanParts, RuleKind, System
from mqforensics.units import parse_duration, parse_instant, utc_now

NAME = "toy"
DELETE = "toy.delete_message"
TOY_LOGIN = ("MQF_TOY_USERNAME", "MQF_TOY_PASSWORD")
FRAME = "file string, size bigint, sha256 string, arrived timestamp, addresses array<string>"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, metavar="DIR", help="the toy queue directory")
    parser.add_argument(
        "--max-age", type=parse_duration, default=dt.timedelta(days=7),
        help="a message older than this is old (default 7d)",
    )  # fmt: skip
    # A server the toy names but never reads: its login comes from TOY_LOGIN alone.
    mirror = parser.add_argument("--mirror", metavar="HOST[:PORT]", help="(not read)")
    declare_login(mirror, TOY_LOGIN, host=True)


def check_inputs(args: argparse.Namespace) -> None:
    if not args.directory.is_dir():
        raise InputError(f"{args.directory}: no such directory")


def load(spark: Any, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    rows = []
    for path in sorted(args.directory.glob("*.msg")):
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
        source=f"toy queue {args.directory}",
        as_of=common.as_of or utc_now(),
        objects=len(rows),
        inputs=[{"kind": "directory", "location": str(args.directory)}],
        plan_inputs={"directory": str(args.directory.resolve())},
    )


def settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> dict[str, Any]:
    return {"as_of": loaded.as_of, "max_age": args.max_age, "common": common}


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


SPEC = System(
    name=NAME,
    title="toy queue (tests only)",
    add_source_options=add_source_options,
    check_inputs=check_inputs,
    load=load,
    settings=settings,
    checks=CHECKS,
    plan=plan,
    rule_kinds=(RuleKind("toy_retention", ("older_than",), needs_older_than=True),),
    executors=lambda plan, args: [ToyExecutor(plan)],
    purge_options=(
        Option(("--toy-server",), {"metavar": "HOST[:PORT]"}, login=Login(TOY_LOGIN, host=True)),
    ),
)
