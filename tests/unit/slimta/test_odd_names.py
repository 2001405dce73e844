"""Names that are not valid UTF-8 in a slimta DiskStorage (docs/filenames.md): the bundled sample,
copied under a directory whose name ends in the byte ``fe``, with messages and a tmp file
renamed to ids holding bytes like ``ff`` (an ``.env``/``.meta`` pair, a lone ``.env``, a tmp
file, a fresh message), is audited like the sample (its planted findings, none ignored), each
renamed file's subject is its escaped text, the audit says so in one note, and the sample's
policy plans, re-checks and deletes them by exactly their bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mqforensics
from mqforensics.filenames import odd_names_note, shown, unescaped
from mqforensics.systems.slimta.plan import DELETE_FILES
from mqforensics.systems.slimta.sample import BUNDLED, expected_findings, materialize
from tests.renamed_files import assert_planted_findings, renamed_subjects

ROLES = json.loads((BUNDLED / "truth.json").read_text())["roles"]


def _id(role: str) -> bytes:
    return ROLES[role].encode()


OLD, TORN, STALE, FRESH = _id("old"), _id("torn_env"), _id("stale_tmp"), _id("fresh")
# Renamed (relative to the copy, as bytes): the id part of a message's pair, of a lone .env, and
# a fresh message (the id ``0483\xff...``). A tmp file slimta never names so (mkstemp's names are
# ASCII) is left alone: ``FOREIGN``, a control character and an odd byte in its name.
FOREIGN = b"tmp/.keep\x01\xfe"
RENAMED = {
    b"env/" + OLD + b".env": b"env/" + OLD + b"\xff\xfe.env",
    b"meta/" + OLD + b".meta": b"meta/" + OLD + b"\xff\xfe.meta",
    b"env/" + TORN + b".env": b"env/" + TORN[:8] + b"\xff" + TORN[8:] + b".env",
    b"env/" + FRESH + b".env": b"env/" + FRESH[:4] + b"\xff" + FRESH[4:] + b".env",
    b"meta/" + FRESH + b".meta": b"meta/" + FRESH[:4] + b"\xff" + FRESH[4:] + b".meta",
}


def _files(root: bytes) -> dict[bytes, bytes]:
    """Every file under `root` (bytes path) and its content."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[path] = handle.read()
    return found


def test_odd_names_audited_planned_and_purged_by_their_bytes(spark, tmp_path: Path) -> None:
    root = os.path.join(os.fsencode(tmp_path), b"store\xfe")
    copy = materialize(os.fsdecode(root))
    layout = copy.layout
    truth = expected_findings(copy)
    for old, new in RENAMED.items():
        os.rename(os.path.join(root, old), os.path.join(root, new))
    with open(os.path.join(root, FOREIGN), "wb") as handle:
        handle.write(b"not slimta's")
    audit = mqforensics.audit(
        "slimta", disk=layout.env_dir, meta_dir=layout.meta_dir, tmp_dir=layout.tmp_dir,
        as_of=copy.as_of, out=tmp_path / "audit", spark=spark,
    )  # fmt: skip

    # The sample's planted findings, each renamed file's under its escaped name; nothing ignored.
    renamed = renamed_subjects(root, RENAMED)
    assert_planted_findings(audit.rows, truth, renamed)
    subjects = {r["check"]: r["subject"] for r in audit.rows}
    assert subjects["retention_exceeded"].endswith("\\xff\\xfe.env")
    assert subjects["stale_tmp"] == shown(os.path.join(root, b"tmp/" + STALE))
    manifest = json.loads((tmp_path / "audit" / "manifest.json").read_bytes())
    assert manifest["objects"] == 13  # 11 messages, 2 tmp files: none left out
    odd = [shown(os.path.join(root, d)) for d in (b"env", b"meta", b"tmp")]  # its directories
    odd += renamed.values()
    assert odd_names_note(odd) in audit.notes and odd_names_note(odd) in manifest["notes"]
    assert (
        f"{shown(os.path.join(root, b'tmp'))} holds 1 file slimta never writes (not named "
        "tmpXXXXXXXX as mkstemp names its files), neither judged nor planned: .keep\\x01\\xfe"
    ) in audit.notes

    # Planned by their escaped names; a dry run changes nothing; applied, exactly the planned
    # files' bytes are deleted, every other file kept as it was.
    plan = audit.plan(policy=BUNDLED / "policy.toml", out=tmp_path / "plan")
    planned = {  # the files present when planned (a torn message's target names both)
        path for a in plan.actions() if a.kind == DELETE_FILES for path in a.precondition["files"]
    }
    assert {renamed[shown(os.path.join(root, b"env/" + OLD + b".env"))],
            renamed[shown(os.path.join(root, b"meta/" + OLD + b".meta"))],
            shown(os.path.join(root, b"tmp/" + STALE))} <= planned  # fmt: skip
    before = _files(root)
    dry = mqforensics.purge_plan(plan.directory, apply=False)
    assert dry.skipped == 0 and _files(root) == before
    mqforensics.approve(plan.directory, by="tests")
    applied = mqforensics.purge_plan(plan.directory, apply=True)
    assert applied.skipped == 0 and applied.done == len(plan.actions())
    after = _files(root)
    assert set(before) - set(after) == {unescaped(path) for path in planned}
    assert all(after[path] == before[path] for path in after)


def test_only_mkstemp_names_in_tmp_dir_are_slimtas() -> None:
    """The checkout's tmp/ holds git's ``.keep`` beside the two mkstemp files the real slimta
    left: only those two are judged."""
    from mqforensics.systems.slimta.disk import DiskLayout, foreign_tmp_files, list_store

    layout = DiskLayout.checked(BUNDLED / "env", BUNDLED / "meta", BUNDLED / "tmp")
    assert list_store(layout).tmp_files == sorted([ROLES["fresh_tmp"], ROLES["stale_tmp"]])
    assert foreign_tmp_files(layout) == [".keep"]
