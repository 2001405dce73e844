"""An erasure from audit to signed receipt on copies of the bundled logqueue and slimta (disk)
samples, through the command line: audit with an erasure policy, plan, approve, purge --apply,
audit again, ``receipt make``, ``receipt verify`` (exit 0), one byte changed (exit 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mqforensics.systems.slimta.sample import materialize
from mqforensics.units import utc_text
from tests import receipt_support as receipts

REPO = Path(__file__).resolve().parents[2]


def _policy(tmp_path: Path, requests: dict[str, str]) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text("version = 1\n" + "".join(
        f'[[rules]]\nid = "{rule}"\nkind = "erase_subject"\n'
        f'legal_basis = "GDPR Art. 17, {rule}"\naddresses = ["{address}"]\n'
        for rule, address in requests.items()
    ))  # fmt: skip
    return path


def _erase(tmp_path: Path, system: str, source: list[str], policy: Path, audit_status: int,
           capsys: pytest.CaptureFixture[str]) -> receipts.Erasure:  # fmt: skip
    """The erasure with its receipt (`receipt_support.erase`); each request found exactly the
    audit's personal_data findings of its subjects."""
    argv = ["audit", system, *source, "--erasure-policy", str(policy)]
    erasure = receipts.erase(argv, policy, tmp_path, capsys, statuses=(audit_status,))
    findings = json.loads((erasure.audit / "findings.json").read_text())
    for request in erasure.document["requests"]:
        found = {f["id"] for f in findings if f["check"] == "personal_data"
                 and set(f["detail"]["subjects"]) & set(request["subjects"])}  # fmt: skip
        assert {f["finding"] for f in request["found"]} == found and found
    return erasure


def test_logqueue_sample_erasure_receipt(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "sample"
    shutil.copytree(REPO / "datasets" / "logqueue" / "sample", copy)
    # user0-1@d1.example is a recipient whose records are only in outbound's first segment,
    # garbage below the saved suffix (the queue's ground_truth.json, segments by grep).
    policy = _policy(tmp_path, {"erasure-2027-001": "User0-1@d1.example"})
    source = [str(copy / "outbound"), str(copy / "inbound"), "--as-of", "2027-01-21T08:00:00Z"]
    erasure = _erase(tmp_path, "logqueue", source, policy, 0, capsys)
    (request,) = erasure.document["requests"]
    printed = erasure.printed
    assert [(f["object"], [w["where"] for w in f["where"]]) for f in request["found"]] == [
        ("seg-00000001.lq", ["envelope"])
    ]
    assert [(d["target"]["file"], d["outcome"], d["precondition"]["size"])
            for d in request["deleted"]] == [("seg-00000001.lq", "deleted", 1941)]  # fmt: skip
    assert not (copy / "outbound" / "seg-00000001.lq").exists()
    assert (request["deferred"], request["skipped"], request["unreadable"]) == ([], [], [])
    assert request["after"] == {"clean": True, "remaining": [], "unreadable": [],
                                "result": "subject found in none of the stores (searched at "
                                "depth headers)"}  # fmt: skip
    stores = {s["location"]: s for s in request["stores"]}
    assert set(stores) == {str(copy / "outbound"), str(copy / "inbound")}
    assert (
        stores[str(copy / "outbound")]["fingerprint_before"]
        != (stores[str(copy / "outbound")]["fingerprint_after"])
    )
    inbound = stores[str(copy / "inbound")]
    assert inbound["fingerprint_before"] == inbound["fingerprint_after"] != ""
    assert "request erasure-2027-001" in printed and "subject found in none" in printed
    receipts.no_address(erasure.out, printed, ["user0-1@d1.example"])
    receipts.one_byte_changed_fails(erasure.out, capsys, b'"outcome": "d')


def test_slimta_sample_erasure_receipt(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = materialize(tmp_path / "sample")
    layout, roles = copy.layout, copy.truth["roles"]
    source = ["--disk", layout.env_dir, "--meta-dir", layout.meta_dir,
              "--tmp-dir", str(layout.tmp_dir), "--as-of", utc_text(copy.as_of)]  # fmt: skip
    # rose@example.com sent the two tmp-dir envelopes (datasets/slimta/slimta_writer.py); pat
    # the hostile .meta's message, which is never loaded and so deferred: still there after.
    policy = _policy(tmp_path, {"erase-rose": "rose@example.com", "erase-pat": "pat@example.com"})
    erasure = _erase(tmp_path, "slimta", source, policy, 1, capsys)
    by_rule = {r["rule"]: r for r in erasure.document["requests"]}
    printed = erasure.printed
    rose, pat = by_rule["erase-rose"], by_rule["erase-pat"]
    tmp_files = sorted(str(Path(layout.tmp_dir) / roles[r]) for r in ("stale_tmp", "fresh_tmp"))
    assert sorted(f["object"] for f in rose["found"]) == tmp_files
    assert sorted(f for d in rose["deleted"] for f in d["target"]["files"]) == tmp_files
    assert all(d["outcome"] == "deleted" for d in rose["deleted"])
    assert rose["after"]["clean"] and rose["after"]["remaining"] == []
    assert rose["after"]["result"].startswith("subject found in none of the stores")
    hostile = str(Path(layout.env_dir) / (roles["hostile_meta"] + ".env"))
    assert [f["object"] for f in pat["found"]] == [hostile] and pat["deleted"] == []
    for request in (rose, pat):
        # Deferred besides the hostile .meta's message: only objects that could not be
        # searched (the contract of issue 48), each citing its unreadable_content finding,
        # which the receipt lists as unreadable.
        unreadable = {u["finding"] for u in request["unreadable"]}
        others = [d for d in request["deferred"] if d["target"]["id"] != roles["hostile_meta"]]
        assert all(set(d["findings"]) & unreadable for d in others)
    assert roles["hostile_meta"] in {d["target"]["id"] for d in pat["deferred"]}
    assert [f["object"] for f in pat["after"]["remaining"]] == [hostile]
    assert pat["after"]["remaining"][0]["subjects"] == pat["subjects"]
    assert pat["after"]["result"] == "subject still found in 1 object(s) of the stores (listed)"
    assert "request erase-pat" in printed and "still found in 1 object" in printed
    receipts.no_address(erasure.out, printed, ["rose@example.com", "pat@example.com"])
    receipts.one_byte_changed_fails(erasure.out, capsys, b'"outcome": "d')
