"""File names that are not valid UTF-8 in a Postfix queue directory (docs/filenames.md): the bundled
sample, copied to a directory whose name ends in the byte ``ff``, with a held message and its
defer log, and the orphan defer log, renamed to ids ending in the bytes ``ff fe``, is audited
like the sample (the same findings), each renamed file's subject
is its escaped text, the audit says so in one note, and the orphan log is planned, re-checked and
deleted by exactly its bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mqforensics
from mqforensics.filenames import odd_names_note, shown
from mqforensics.systems.postfix.plan import DELETE_ORPHAN_LOG, NOT_AN_ID, POSTSUPER_DELETE
from mqforensics.systems.postfix.sample import BUNDLED, materialize
from tests.renamed_files import assert_planted_findings, renamed_subjects

ODD = b"\xff\xfe"
# Files renamed (relative to the queue directory, as bytes) and their new names: a message on
# hold and its defer log (still a pair), the orphan log, and a pair whose name holds a backslash
# (escaped, but not odd).
RENAMED = {
    b"hold/4C4B4A0A252": b"hold/4C4B4A0A252" + ODD,
    b"defer/4/4C4B4A0A252": b"defer/4/4C4B4A0A252" + ODD,
    b"defer/D/DA3D3A0A24F": b"defer/D/DA3D3A0A24F" + ODD,
    b"hold/E1AE5A0A254": b"hold/E1AE5A0A254\\x",
    b"defer/E/E1AE5A0A254": b"defer/E/E1AE5A0A254\\x",
}
POLICY = """version = 1

[[rules]]
id = "hold-14d"
kind = "held_mail"
older_than = "14d"
legal_basis = "storage limitation"
systems = ["postfix"]
queues = ["hold"]

[[rules]]
id = "orphan-logs-1d"
kind = "orphan_logs"
older_than = "1d"
legal_basis = "storage hygiene"
systems = ["postfix"]
"""


def _files(root: Path) -> dict[bytes, bytes]:
    """Every file under `root` (bytes path relative to it) and its content."""
    top = os.fsencode(root)
    found = {}
    for directory, _, files in os.walk(top):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, top)] = handle.read()
    return found


def test_odd_names_audited_planned_and_purged_by_their_bytes(spark, tmp_path: Path) -> None:
    target = os.path.join(os.fsencode(tmp_path), b"queue\xff")
    copy = materialize(Path(os.fsdecode(target)), tmp_path / "truth.json")
    root = os.fsencode(copy.queue_dir)
    for old, new in RENAMED.items():
        os.rename(os.path.join(root, old), os.path.join(root, new))
    audit = mqforensics.audit(
        "postfix", queue_dir=[f"sample={copy.queue_dir}"], main_cf=BUNDLED / "postconf.txt",
        as_of=copy.as_of, out=tmp_path / "audit", spark=spark,
    )  # fmt: skip

    # The sample's findings (its ground truth), each renamed file's under its escaped name.
    truth = json.loads(copy.ground_truth.read_text())["findings"]
    renamed = renamed_subjects(root, RENAMED)
    assert_planted_findings(audit.rows, truth, renamed)
    hold = shown(os.path.join(root, b"hold/4C4B4A0A252" + ODD))
    assert hold.endswith("/hold/4C4B4A0A252\\xff\\xfe")
    held = [r for r in audit.rows if r["subject"] == hold]
    assert {r["check"] for r in held} == {"old_hold", "retention_exceeded"}
    assert {r["detail"]["queue_id"] for r in held} == {"4C4B4A0A252\\xff\\xfe"}
    odd = [shown(root)]  # the directory once, then the odd names below it
    odd += [shown(os.path.join(root, new)) for new in RENAMED.values() if ODD in new]
    assert odd_names_note(odd) in audit.notes
    written = json.loads((tmp_path / "audit" / "findings.json").read_bytes())
    assert hold in {r["subject"] for r in written}
    assert (
        odd_names_note(odd)
        in json.loads((tmp_path / "audit" / "manifest.json").read_bytes())["notes"]
    )

    # The orphan log is planned by its escaped name; the held message is deferred (not a queue
    # id: postsuper cannot name it).
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    plan = audit.plan(policy=policy, out=tmp_path / "plan")
    orphan = os.path.join(root, b"defer/D/DA3D3A0A24F" + ODD)
    assert [(a.kind, a.target["path"], a.target["queue_id"]) for a in plan.actions()] == [
        (DELETE_ORPHAN_LOG, shown(orphan), "DA3D3A0A24F\\xff\\xfe")
    ]
    assert [(d.kind, d.target["path"], d.reason) for d in plan.deferred()] == [
        (POSTSUPER_DELETE, hold, NOT_AN_ID)
    ]

    # A dry run re-checks it and changes nothing; applied, exactly those bytes are deleted.
    before = _files(copy.queue_dir)
    dry = mqforensics.purge_plan(plan.directory, apply=False)
    assert (dry.done, dry.skipped) == (0, 0) and _files(copy.queue_dir) == before
    mqforensics.approve(plan.directory, by="tests")
    applied = mqforensics.purge_plan(plan.directory, apply=True)
    assert (applied.done, applied.skipped) == (1, 0)
    after = _files(copy.queue_dir)
    assert set(before) - set(after) == {os.path.relpath(orphan, root)}
    assert all(after[name] == before[name] for name in after)
