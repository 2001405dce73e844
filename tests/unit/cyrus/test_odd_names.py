"""Names that are not valid UTF-8 in a Cyrus fleet (docs/filenames.md): the bundled sample copied
with backend1's database renamed ``backend1-\\xfe/mailboxes-\\xff.db`` (and backend2's directory
holding a backslash, escaped but not odd) is audited like the sample (the findings of its
ANOMALIES.md), every file subject, detail and input names the file by its escaped text, the audit
says so in one note, and an error about such a file names it escaped too."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

import mqforensics
from mqforensics.cli import main
from mqforensics.errors import InputError
from mqforensics.filenames import odd_names_note, shown

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "cyrus" / "sample"
ODD_DB = b"backend1-\xfe/mailboxes-\xff.db"
SLASHED_DUMP = b"backend2\\x/mailboxes.show"
# datasets/cyrus/sample/ANOMALIES.md: (check, severity, backend) -> findings.
EXPECTED = {
    ("racl_missing", "error", 2): 1,
    ("racl_stale", "warning", 2): 1,
    ("anyone_share", "info", 1): 2,
    ("anyone_share", "info", 2): 2,
    ("cross_domain_share", "info", 1): 1,
    ("cross_domain_share", "info", 2): 1,
    ("dangling_acl_identifier", "warning", 1): 3,
    ("dangling_acl_identifier", "warning", 2): 3,
    ("unreclaimed_history", "info", 1): 1,
    ("personal_data", "info", 1): 1,
    ("personal_data", "info", 2): 1,
}


def _odd_copy(tmp_path: Path) -> tuple[bytes, bytes]:
    """The sample copied under `tmp_path` with the odd names; (database, dump) as bytes paths."""
    root = os.fsencode(tmp_path / "fleet")
    database, dump = os.path.join(root, ODD_DB), os.path.join(root, SLASHED_DUMP)
    for source, target in ((b"backend1/mailboxes.db", database),
                           (b"backend2/mailboxes.show", dump)):  # fmt: skip
        os.makedirs(os.path.dirname(target))
        shutil.copyfile(os.path.join(os.fsencode(SAMPLE), source), target)
    return database, dump


def test_odd_names_audited_like_the_sample(spark, tmp_path: Path) -> None:
    database, dump = _odd_copy(tmp_path)
    audit = mqforensics.audit(
        "cyrus", inputs=[os.fsdecode(database), os.fsdecode(dump)],
        default_domain="example.org", erasure_policy=SAMPLE / "policy.toml",
        out=tmp_path / "audit", spark=spark,
    )  # fmt: skip

    odd, slashed = shown(database), shown(dump)
    assert odd.endswith("/backend1-\\xfe/mailboxes-\\xff.db")
    assert slashed.endswith("/backend2\\\\x/mailboxes.show")
    backend = {odd: 1, slashed: 2}
    assert (
        Counter((r["check"], r["severity"], backend[r["detail"]["file"]]) for r in audit.rows)
        == EXPECTED
    )
    history = [r for r in audit.rows if r["check"] == "unreclaimed_history"]
    assert [r["subject"] for r in history] == [odd]
    manifest = json.loads((tmp_path / "audit" / "manifest.json").read_bytes())
    assert [(i["location"], i["format"], i["records"]) for i in manifest["inputs"]] == [
        (odd, "twoskip", 25), (slashed, "show", 25),
    ]  # fmt: skip
    assert manifest["plan_inputs"]["sources"] == [odd, slashed]
    sharing = json.loads((tmp_path / "audit" / "sharing.json").read_bytes())
    assert {r["file"] for r in sharing} == {odd, slashed}
    note = odd_names_note([odd])
    assert note is not None and note in audit.notes and note in manifest["notes"]


def test_errors_name_an_odd_file_escaped(tmp_path: Path, capsys) -> None:
    root = os.fsencode(tmp_path)
    missing = os.path.join(root, b"mailboxes-\xff.db")
    with pytest.raises(InputError) as raised:
        mqforensics.audit("cyrus", inputs=[os.fsdecode(missing)], out=tmp_path / "a")
    assert raised.value.message == f"{shown(missing)}: no such file"
    binary = os.path.join(root, b"random-\xff.db")
    with open(binary, "wb") as stream:
        stream.write(bytes(range(256)))
    # As the command line gets it (argv holds the odd byte as a surrogate), before Spark.
    assert main(["audit", "cyrus", os.fsdecode(binary), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert f"{shown(binary)}: not a twoskip or skiplist database" in err
    assert len(err.strip().splitlines()) == 1 and "\\udc" not in err
