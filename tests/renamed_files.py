"""What the odd-names tests of the file-based systems assert alike: an audit of a sample copy
whose files were renamed gives the sample's planted findings, each renamed file's under its new
name, escaped (docs/filenames.md)."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from mqforensics.filenames import shown


def renamed_subjects(root: bytes, renamed: dict[bytes, bytes]) -> dict[str, str]:
    """Each renamed file's escaped path before -> after (`renamed`: relative to `root`)."""
    return {shown(os.path.join(root, old)): shown(os.path.join(root, new))
            for old, new in renamed.items()}  # fmt: skip


def assert_planted_findings(
    rows: list[dict[str, Any]], truth: list[dict[str, Any]], renamed: dict[str, str]
) -> None:
    """`rows` are the planted findings `truth` (check, severity, subject), a renamed file's
    subject its new escaped name."""
    assert Counter((r["check"], r["severity"]) for r in rows) == Counter(
        (f["check"], f["severity"]) for f in truth
    )
    assert {(r["check"], r["subject"]) for r in rows} == {
        (f["check"], renamed.get(shown(f["subject"]), shown(f["subject"]))) for f in truth
    }
