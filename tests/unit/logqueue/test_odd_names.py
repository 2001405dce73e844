"""File names that are not valid UTF-8 in a log queue (docs/filenames.md). The bundled ``outbound``
queue is copied twice, as ``outbound-XY`` and as ``outbound`` + bytes ``ff fe``; in each a spool
file is renamed and one added, with ``XY`` or ``ff fe`` in their names (no envelope can name
such a spool file: its message loses its content). One audit of both gives the same findings
for each, the odd copy's under their escaped names, says so in one note, and its reclamation
plan re-checks and deletes exactly the planned segments of both directories."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import mqforensics
from mqforensics.filenames import odd_names_note, shown, unescaped
from mqforensics.systems.logqueue.sample import SAMPLE

AS_OF = json.loads((SAMPLE / "sample.json").read_text())["as_of"]
ORDINARY, ODD = b"-XY", b"\xff\xfe"
SPOOLED = sorted(os.listdir(SAMPLE / "outbound" / "spool"))[0].encode()


def _copy(tmp_path: Path, suffix: bytes) -> bytes:
    """The sample's outbound queue copied to ``outbound<suffix>``, its first spool file renamed
    to ``<name><suffix>`` and a spool file ``msg<suffix>`` added; the copy's path."""
    queue = os.path.join(os.fsencode(tmp_path), b"outbound" + suffix)
    shutil.copytree(SAMPLE / "outbound", os.fsdecode(queue))
    spool = os.path.join(queue, b"spool")
    os.rename(os.path.join(spool, SPOOLED), os.path.join(spool, SPOOLED + suffix))
    with open(os.path.join(spool, b"msg" + suffix), "wb") as handle:
        handle.write(b"Subject: no envelope names me\r\n\r\n")
    return queue


def _files(*roots: bytes) -> dict[bytes, bytes]:
    found = {}
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                with open(os.path.join(directory, name), "rb") as handle:
                    found[os.path.join(directory, name)] = handle.read()
    return found


def test_odd_names_audited_planned_and_purged_by_their_bytes(spark, tmp_path: Path) -> None:
    ordinary, odd = _copy(tmp_path, ORDINARY), _copy(tmp_path, ODD)
    audit = mqforensics.audit(
        "logqueue", dirs=[os.fsdecode(ordinary), os.fsdecode(odd)], as_of=AS_OF,
        out=tmp_path / "audit", spark=spark,
    )  # fmt: skip

    # The same findings in both queues; the odd one's queue and spool subjects escaped.
    queue = shown(odd)
    assert queue.endswith("/outbound\\xff\\xfe")
    mine = {q: [r for r in audit.rows if r["queue"] == q] for q in (shown(ordinary), queue)}
    assert len(mine[queue]) + len(mine[shown(ordinary)]) == len(audit.rows)
    counts = [Counter((r["check"], r["severity"]) for r in rows) for rows in mine.values()]
    assert counts[0] == counts[1]
    assert counts[1][("lost_envelope", "error")] == 3  # the renamed one, its envelope, msg*
    assert counts[1][("stuck_message", "warning")] == 27

    def escaped(subject: str) -> str:
        return subject.replace("-XY", "\\xff\\xfe") if subject.startswith("spool/") else subject

    assert {(r["check"], r["subject"]) for r in mine[queue]} == {
        (r["check"], escaped(r["subject"])) for r in mine[shown(ordinary)]
    }
    lost = {
        r["subject"]
        for r in mine[queue]
        if r["check"] == "lost_envelope" and r["detail"]["direction"] == "spool_without_envelope"
    }
    assert lost == {f"spool/{SPOOLED.decode()}\\xff\\xfe", "spool/msg\\xff\\xfe"}
    named = [queue, f"{queue}/spool/{SPOOLED.decode()}\\xff\\xfe", f"{queue}/spool/msg\\xff\\xfe"]
    assert odd_names_note(named) in audit.notes
    manifest = json.loads((tmp_path / "audit" / "manifest.json").read_bytes())
    assert odd_names_note(named) in manifest["notes"]
    assert [i["location"] for i in manifest["inputs"]] == [shown(ordinary), queue]

    # The garbage segments of both are planned; a dry run changes nothing; applied, exactly
    # those files (the odd directory's by its bytes) are deleted.
    plan = audit.plan(policy=SAMPLE / "policy.toml", out=tmp_path / "plan")
    planned = {os.path.join(unescaped(a.target["queue"]), a.target["file"].encode())
               for a in plan.actions()}  # fmt: skip
    assert {os.path.dirname(p) for p in planned} == {ordinary, odd} and len(planned) == 4
    before = _files(ordinary, odd)
    dry = mqforensics.purge_plan(plan.directory, apply=False)
    assert dry.skipped == 0 and _files(ordinary, odd) == before
    mqforensics.approve(plan.directory, by="tests")
    applied = mqforensics.purge_plan(plan.directory, apply=True)
    assert (applied.done, applied.skipped) == (4, 0)
    after = _files(ordinary, odd)
    assert set(before) - set(after) == planned
    assert all(after[path] == before[path] for path in after)
