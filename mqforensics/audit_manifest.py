"""An audit directory's ``manifest.json``: what every later step (plans, receipts) reads of an
audit, and how it is checked against the findings it describes. The runner writes it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from mqforensics.errors import InputError
from mqforensics.findings import FINDINGS_JSON, FINDINGS_RAW, read_json

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "mqforensics-audit/1"


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of an audit directory, checked against its findings.json and
    findings.raw.json (an InputError naming the file that is missing or changed)."""
    path = Path(directory) / MANIFEST
    manifest = read_json(path, "an audit manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise InputError(f"{path}: not an audit manifest (format {MANIFEST_FORMAT})")
    for name, key in ((FINDINGS_JSON, "sha256"), (FINDINGS_RAW, "raw_sha256")):
        path = Path(directory) / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{path} does not exist") from None
        if hashlib.sha256(data).hexdigest() != (manifest.get("findings") or {}).get(key):
            raise InputError(f"{path} does not match its manifest (changed since the audit)")
    return manifest
