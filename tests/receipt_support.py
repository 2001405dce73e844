"""The erasure steps every sample receipt test shares (logqueue, slimta, James, Cyrus, Postfix):
audit -> plan -> approve -> purge --apply -> audit again, `receipt make` and `receipt verify`
through the command line, a changed byte that must not verify, and no address in anything the
receipt steps wrote or printed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqforensics.cli import main
from mqforensics.retention.policy import subject_hash

KEY = "5a" * 32
APPROVER = "dpo@corp.example"


def approve(plan: Path) -> None:
    assert main(["approve", str(plan), "--by", APPROVER]) == 0


def make_and_verify(
    plan: Path, after: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str]:
    """`receipt make PLAN --after AFTER --out OUT` (the key from MQF_RECEIPT_KEY), then
    `receipt verify` (exit 0); the receipt and what `receipt make` printed."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MQF_RECEIPT_KEY", KEY)
        env.delenv("MQF_RECEIPT_KEY_FILE", raising=False)
        assert main(["receipt", "make", str(plan), "--after", str(after), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert main(["receipt", "verify", str(out / "RECEIPT.json")]) == 0
    assert ": verified:" in capsys.readouterr().out
    return json.loads((out / "RECEIPT.json").read_text()), printed


@dataclass(frozen=True)
class Erasure:
    """What `erase` made: the audit, the plan, the audit after the purge, the receipt's
    directory, the receipt, and what `receipt make` printed."""

    audit: Path
    plan: Path
    after: Path
    out: Path
    document: dict[str, Any]
    printed: str


def erase(
    argv: Sequence[str],
    policy: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    statuses: Sequence[int] = (0, 1),
    purge: Sequence[str] = (),
    refresh: Callable[[], None] = lambda: None,
) -> Erasure:
    """`argv` (an audit without --out) run with `policy`'s erasure rules, planned, approved,
    purged (`purge`: the purge's further arguments), audited again into `after`, and its
    receipt made and verified. Each audit exits with one of `statuses`; `refresh` runs before
    each (a snapshot taken again, say)."""
    audit, after, plan = tmp_path / "audit", tmp_path / "after", tmp_path / "plan"
    refresh()
    assert main([*argv, "--out", str(audit)]) in statuses
    assert main(["plan", "--findings", str(audit), "--policy", str(policy),
                 "--out", str(plan)]) == 0  # fmt: skip
    approve(plan)
    assert main(["purge", str(plan), *purge, "--apply"]) == 0
    refresh()
    assert main([*argv, "--out", str(after)]) in statuses
    document, printed = make_and_verify(plan, after, tmp_path / "receipt", capsys)
    return Erasure(audit, plan, after, tmp_path / "receipt", document, printed)


def _verify_fails(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["receipt", "verify", str(path)]) == 1
    return capsys.readouterr().out


def one_byte_changed_fails(out: Path, capsys: pytest.CaptureFixture[str], signed: bytes) -> None:
    """One byte of the signed content changed (the byte after `signed`, the first occurrence)
    fails the signature; one byte of the layout (an indenting space made a tab) fails the
    layout check at that byte; the file put back verifies again."""
    path = out / "RECEIPT.json"
    data = path.read_bytes()
    at = data.index(signed) + len(signed)
    flipped = bytes([data[at] ^ 0x01])
    path.write_bytes(data[:at] + flipped + data[at + 1 :])
    printed = _verify_fails(path, capsys)
    assert f"{path}: does not verify: signature does not verify (key sha256:" in printed
    space = data.index(b"\n  ") + 1
    path.write_bytes(data[:space] + b"\t" + data[space + 1 :])
    printed = _verify_fails(path, capsys)
    assert printed.strip() == (
        f"{path}: does not verify: not in the layout it was written in at byte {space} "
        "(changed after signing)"
    )
    path.write_bytes(data)
    capsys.readouterr()
    assert main(["receipt", "verify", str(path)]) == 0


def no_address(out: Path, printed: str, addresses: list[str]) -> None:
    """No address (nor its plain SHA-256) in RECEIPT.json, RECEIPT.html or what `receipt make`
    printed; the approver's name only pseudonymised."""
    texts = [printed, (out / "RECEIPT.json").read_text(), (out / "RECEIPT.html").read_text()]
    for text in texts:
        for address in [*addresses, APPROVER]:
            assert address.lower() not in text.lower()
            assert subject_hash(address) not in text
        assert re.search(r"u-[0-9a-f]{8}@corp\.example", text) or text is printed
        assert "None" not in text


def request(document: dict[str, Any], rule: str) -> dict[str, Any]:
    (found,) = [r for r in document["requests"] if r["rule"] == rule]
    return found
