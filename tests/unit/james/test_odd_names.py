"""File names that are not valid UTF-8 in a James snapshot (docs/filenames.md): the bundled sample
copied into a directory ``export-\\xff`` with a part file of the view renamed
``part-00001-\\xfe.parquet`` (which Spark cannot open: it is read through Python) is audited
like the sample (exactly its ground truth), its inputs are named by their escaped text, the
audit says so in one note, and an error about such a file names it escaped."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import mqforensics
from mqforensics.cli import main
from mqforensics.filenames import odd_names_note, shown
from mqforensics.sample_demo import compare_with_ground_truth
from mqforensics.systems.james.options import JamesOptions
from mqforensics.systems.james.read import odd_names
from mqforensics.systems.james.sample import BUNDLED

ODD_DIR = b"export-\xff"
PART = b"enqueuedmailsv4.parquet/part-00001.parquet"
ODD_PART = b"enqueuedmailsv4.parquet/part-00001-\xfe.parquet"


def _odd_copy(tmp_path: Path, directory: bytes = ODD_DIR) -> bytes:
    """The bundled sample copied to `tmp_path`/`directory`, a part file renamed; its path."""
    export = os.path.join(os.fsencode(tmp_path), directory)
    shutil.copytree(BUNDLED, os.fsdecode(export), ignore=shutil.ignore_patterns("blobs"))
    os.rename(os.path.join(export, PART), os.path.join(export, ODD_PART))
    return export


def test_odd_names_audited_like_the_sample(spark, tmp_path: Path) -> None:
    export = _odd_copy(tmp_path)
    snapshot = Path(os.fsdecode(export))
    audit = mqforensics.audit(
        "james", snapshot=snapshot, blob_listing=snapshot / "blob_inventory.parquet",
        broker_export=snapshot / "broker", erasure_policy=BUNDLED / "policy.toml",
        out=tmp_path / "audit", spark=spark,
    )  # fmt: skip

    expected, missing, unexpected = compare_with_ground_truth(
        audit.rows, BUNDLED / "ground_truth.json"
    )
    assert (len(audit.rows), missing, unexpected) == (expected, [], [])
    odd = shown(export)
    assert odd.endswith("/export-\\xff")
    manifest = json.loads((tmp_path / "audit" / "manifest.json").read_bytes())
    assert [(i["kind"], i["location"]) for i in manifest["inputs"]] == [
        ("snapshot", odd),
        ("blob listing", shown(os.path.join(export, b"blob_inventory.parquet"))),
        ("broker export", shown(os.path.join(export, b"broker"))),
    ]
    assert manifest["objects"] == 320 + 3  # view rows (the renamed part file too) and queues
    assert audit.source == f"snapshot {odd} (enqueuedmailsv4)"
    note = odd_names_note([odd])
    assert note is not None and note in audit.notes and note in manifest["notes"]

    # Under an ordinary directory, the part file itself is the odd name the note lists.
    os.rename(export, os.path.join(os.fsencode(tmp_path), b"export"))
    plain = tmp_path / "export"
    assert odd_names(JamesOptions(snapshot=plain, broker_export=plain / "broker")) == [
        shown(os.path.join(os.fsencode(plain), ODD_PART))
    ]


def test_errors_name_an_odd_file_escaped(tmp_path: Path, capsys) -> None:
    export = _odd_copy(tmp_path)
    damaged = os.path.join(export, ODD_PART)
    with open(damaged, "r+b") as stream:
        stream.seek(-12, os.SEEK_END)
        stream.write(b"\x00" * 8)  # the footer's length and bytes before the magic
    # As the command line gets it (argv holds the odd bytes as surrogates), before Spark.
    snapshot = os.fsdecode(export)
    assert main(["audit", "james", "--snapshot", snapshot, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert f"{shown(damaged)}: a damaged Parquet footer" in err
    assert len(err.strip().splitlines()) == 1 and "\\udc" not in err
