"""Smoke test of the James content search benchmark (bench/james_content.py) at a tiny size:
every subject runs in its own process, the searches find the subject exactly in the mails it
was planted in, and each search reads the bytes of its raw read."""

from __future__ import annotations

from pathlib import Path

from bench import james_content

MAILS = 100


def test_james_content_smoke(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    results = james_content.run(MAILS, tmp_path / "work")
    assert [m.role for m in results] == ["ours", "ours", "baseline", "baseline"]
    headers, full, raw_headers, raw = (m.output for m in results)
    planted = len(range(0, MAILS, james_content.PLANTED_EVERY))
    assert headers["found"] == {"header:reply-to": planted}
    assert full["found"] == {"header:reply-to": planted, "body": planted}
    assert (headers["blobs"], raw_headers["blobs"]) == (MAILS, MAILS)
    assert (full["blobs"], raw["blobs"]) == (2 * MAILS, 2 * MAILS)
    assert full["bytes"] == raw["bytes"] == headers["data"]["blob_bytes"]
    assert headers["unreadable"] == full["unreadable"] == 0
    assert all(m.seconds > 0 and m.output["blobs_per_second"] > 0 for m in results)
