"""`file_digest.listing_fingerprint`: what a directory store held, for manifests and receipts."""

from __future__ import annotations

import os
from pathlib import Path

from mqforensics.file_digest import listing_fingerprint


def test_a_listing_fingerprint_changes_with_any_file_and_only_then(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "sub").mkdir(parents=True)
    (store / "a.env").write_bytes(b"one")
    (store / "sub" / b"\xff odd".decode("utf-8", "surrogateescape")).write_bytes(b"x")
    first = listing_fingerprint([store])
    assert first.startswith("sha256:") and len(first) == 7 + 64
    assert listing_fingerprint([store]) == first  # nothing changed: the same
    (store / "a.env").write_bytes(b"two")  # same size, rewritten: its mtime moved
    os.utime(store / "a.env", ns=(1, 1))
    rewritten = listing_fingerprint([store])
    assert rewritten != first
    (store / "b.env").write_bytes(b"")
    added = listing_fingerprint([store])
    assert added != rewritten
    (store / "b.env").unlink()
    assert listing_fingerprint([store]) == rewritten
    assert listing_fingerprint([store, tmp_path / "missing"]) != rewritten  # said, not skipped
