"""Make the bundled slimta sample: a DiskStorage written by the real python-slimta 5.0.5.

    .venv/bin/python datasets/slimta/make_sample.py

writes ``datasets/slimta/sample/``: ``env/``, ``meta/`` and ``tmp/`` exactly as
`slimta_writer.py` (under the slimta runtime) left them, ``truth.json`` (the writer's report:
each role's id, when it ran, what real slimta itself did) and ``mtimes.json`` (every file's
modification time, which git does not keep and the checks read;
`mqforensics.systems.slimta.sample.materialize` puts them back). Two of its pickles are hostile
on purpose (they would ``touch`` a marker file in /tmp if anything unpickled them naively).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from mqforensics.services.slimta_runtime import run_slimta  # noqa: E402

SAMPLE = HERE / "sample"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mqf-slimta-sample-") as scratch:
        root = Path(scratch)
        dirs = [root / name for name in ("env", "meta", "tmp")]
        for directory in dirs:
            directory.mkdir()
        result = run_slimta(HERE / "slimta_writer.py", "disk", *dirs)
        truth = json.loads(result.stdout)
        mtimes = {
            f"{d.name}/{name}": os.stat(d / name).st_mtime for d in dirs for name in os.listdir(d)
        }
        shutil.rmtree(SAMPLE, ignore_errors=True)
        SAMPLE.mkdir()
        for directory in dirs:
            shutil.copytree(directory, SAMPLE / directory.name)
            (SAMPLE / directory.name / ".keep").touch()  # git keeps no empty directory
    (SAMPLE / "truth.json").write_text(json.dumps(truth, indent=2, sort_keys=True) + "\n")
    (SAMPLE / "mtimes.json").write_text(json.dumps(mtimes, indent=2, sort_keys=True) + "\n")
    print(f"wrote {SAMPLE}: {len(mtimes)} files")


if __name__ == "__main__":
    main()
