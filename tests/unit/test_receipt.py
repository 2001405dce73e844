"""Erasure receipts from files alone (no Spark): a plan applied and audited again, laid out as
the planner, the purger and the runner write them; exactly what the receipt says, signing with
keys from every accepted place, and verification failing on any one-byte change."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from mqforensics import api_receipt, subjects, systems
from mqforensics.errors import ConfigError, InputError, MqfError
from mqforensics.findings import finding_id
from mqforensics.retention import receipt as receipts
from mqforensics.retention.manifest import (
    Action,
    Deferred,
    canonical_json,
    read_plan,
    record_approval,
    write_plan,
)
from mqforensics.retention.policy import subject_hash

REPO = Path(__file__).resolve().parents[2]
ALICE = "alice@example.org"  # the subject of the request
BOB = "bob@example.org"  # someone else, found in the same store
POLICY = f"""version = 1
[[rules]]
id = "erasure-1"
kind = "erase_subject"
legal_basis = "GDPR Art. 17, request 1"
addresses = ["{ALICE}"]
"""
QUEUE = "/srv/q"
STORES = [
    {"kind": "directory", "location": "/srv/q", "fingerprint": "f" * 64},
    {"kind": "blob listing", "location": "s3://mail"},  # a store without a fingerprint
]
KEY_HEX = "11" * 32


def _row(check: str, subject: str, detail: dict[str, Any], size: int = 100) -> dict[str, Any]:
    return {
        "id": finding_id("logqueue", check, QUEUE, "segment", subject),
        "check": check, "severity": "info", "system": "logqueue", "queue": QUEUE,
        "scope": "segment", "subject": subject, "observed_at": "2027-01-01T00:00:00Z",
        "bytes": size, "detail": detail,
    }  # fmt: skip


def _audit(
    directory: Path, key: bytes, rows: list[dict[str, Any]], policy: Path, searched: list[str],
    created_at: str, stores: list[dict] | None = None,
) -> None:  # fmt: skip
    directory.mkdir()
    (directory / "subject.key").write_text(key.hex() + "\n")
    data = json.dumps(rows).encode()
    for name in ("findings.json", "findings.raw.json"):
        (directory / name).write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    manifest = {
        "format": "mqforensics-audit/1", "tool": {"name": "mqforensics", "version": "0.1.0"},
        "system": "logqueue", "created_at": created_at, "as_of": "2027-01-02T00:00:00Z",
        "source": f"log queue(s) {QUEUE}", "objects": 10, "inputs": stores or STORES,
        "plan_inputs": {"queues": [QUEUE]}, "options": {"erasure_policy": str(policy)},
        "subjects_searched": sorted(searched),
        "findings": {"count": len(rows), "sha256": sha, "raw_sha256": sha},
    }  # fmt: skip
    (directory / "manifest.json").write_text(json.dumps(manifest))


class Setup:
    """A plan of one erasure: 3 actions (done, skipped, never run), 1 deferral; its audit, and
    an after-purge audit (`after_rows` chooses what it still finds)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.policy_path = root / "policy.toml"
        self.policy_path.write_text(POLICY)
        self.policy = systems.load_policy(self.policy_path)
        (rule,) = self.policy.rules
        self.rule = rule
        self.key1, self.key2 = b"\x01" * 32, b"\x02" * 32
        alice1 = subjects.keyed_all(rule.subjects, self.key1)
        self.alice1 = alice1
        self.alice2 = subjects.keyed_all(rule.subjects, self.key2)
        bob1 = subjects.keyed(subject_hash(BOB), self.key1)
        self.found = [
            _row("personal_data", "seg-1.lq", {"subjects": [alice1[0], bob1], "depth": "headers",
                 "found": [{"subject": alice1[0], "where": "envelope"},
                           {"subject": alice1[0], "where": "header:reply-to"},
                           {"subject": bob1, "where": "header:from"}]}),
            _row("personal_data", "seg-2.lq", {"subjects": [alice1[0]], "depth": "headers"}),
            _row("personal_data", "seg-3.lq", {"subjects": [alice1[0]], "depth": "headers",
                 "found": [{"subject": alice1[0], "where": "envelope"}]}),
            _row("personal_data", "seg-4.lq", {"subjects": [alice1[0]], "depth": "headers",
                 "found": [{"subject": alice1[0], "where": "header:sender"}]}),
            _row("personal_data", "seg-9.lq", {"subjects": [bob1], "depth": "headers"}),
        ]  # fmt: skip
        places = [{"where": "body", "reason": "S/MIME enveloped"}]
        self.locked = _row("unreadable_content", "spool/x",
                           {"depth": "headers", "unreadable": places})  # fmt: skip
        self.before = root / "audit"
        _audit(self.before, self.key1, [*self.found, self.locked], self.policy_path,
               [*alice1, bob1], "2027-01-02T00:00:00Z")  # fmt: skip
        manifest = json.loads((self.before / "manifest.json").read_text())
        ids = [r["id"] for r in self.found]
        actions = [
            Action("logqueue.delete_segment", {"queue": QUEUE, "segment": n, "file": f"seg-{n}.lq"},
                   {"sha256": f"{n}" * 64, "size": 100 * n}, ("erasure-1",), 100 * n, 0,
                   "holds a data subject to erase", findings=(ids[n - 1],))
            for n in (1, 2, 3)
        ]  # fmt: skip
        deferred = [
            Deferred("logqueue.delete_segment", {"queue": QUEUE, "segment": 4, "file": "seg-4.lq"},
                     ("erasure-1",), "restart still reads it", (ids[3],)),
            Deferred("logqueue.delete_segment", {"queue": QUEUE, "file": "spool/x"},
                     ("erasure-1",), "content could not be searched: body: S/MIME enveloped",
                     (self.locked["id"],)),
        ]  # fmt: skip
        inputs = {"queues": [QUEUE], "audit": {"directory": str(self.before),
                  "created_at": manifest["created_at"],
                  "findings_sha256": manifest["findings"]["sha256"], "source": "q"}}  # fmt: skip
        written = write_plan(root / "plan", system="logqueue", as_of=dt.datetime(2027, 1, 2),
                             policy=self.policy, inputs=inputs, actions=actions,
                             deferred=deferred, notes=[])  # fmt: skip
        self.plan = read_plan(written.directory)
        record_approval(self.plan, f"Dana <{'dpo'}@corp.example>", "ticket 17")
        self.actions = list(self.plan.actions())
        a = self.actions
        records = [
            {"event": "begin", "plan_sha256": self.plan.sha256, "at": "2027-01-03T00:00:00.000Z"},
            {"event": "started", "seq": 0, "id": a[0].id, "kind": a[0].kind, "at": "t"},
            {"event": "done", "seq": 0, "id": a[0].id, "kind": a[0].kind,
             "removed": {"bytes": 100}, "at": "2027-01-03T00:00:01.000Z"},
            {"event": "skipped", "seq": 1, "id": a[1].id, "kind": a[1].kind,
             "reason": "segment appended to since planning", "at": "2027-01-03T00:00:02.000Z"},
            {"event": "verified", "ok": True, "checked": 1, "problem_count": 0, "problems": [],
             "at": "2027-01-03T00:00:03.500Z"},
        ]  # fmt: skip
        (self.plan.directory / "journal.jsonl").write_text(
            "".join(canonical_json(r) + "\n" for r in records)
        )
        self.after = root / "after"

    def after_audit(self, rows: list[dict[str, Any]] | None = None, **changes: Any) -> Path:
        args = {"searched": self.alice2, "created_at": "2027-01-03T00:00:03Z", **changes}
        _audit(self.after, self.key2, rows or [], self.policy_path, args.pop("searched"),
               args.pop("created_at"), **args)  # fmt: skip
        return self.after

    def make(self) -> dict[str, Any]:
        return receipts.make_receipt(self.plan.directory, self.after, policy=self.policy,
                                     now=dt.datetime(2027, 1, 4, tzinfo=dt.UTC))  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_the_receipt_says_what_was_found_deleted_deferred_skipped_and_left(setup: Setup) -> None:
    setup.after_audit()
    body = setup.make()
    (request,) = body["requests"]
    alice = setup.alice1[0]
    assert (request["rule"], request["legal_basis"], request["search"], request["subjects"]) == (
        "erasure-1", "GDPR Art. 17, request 1", "headers", setup.alice1,
    )  # fmt: skip
    assert request["stores"] == [
        {"kind": "blob listing", "location": "s3://mail", "fingerprint_before": "",
         "fingerprint_after": "", "depth": "headers"},
        {"kind": "directory", "location": "/srv/q", "fingerprint_before": "f" * 64,
         "fingerprint_after": "f" * 64, "depth": "headers"},
    ]  # fmt: skip
    # Bob is found in seg-1 and seg-9: neither is his request, so he is not in the receipt.
    ids = {r["subject"]: r["id"] for r in setup.found}
    assert [(f["object"], f["subjects"], [w["where"] for w in f["where"]]) for f in
            request["found"]] == [
        ("seg-1.lq", [alice], ["envelope", "header:reply-to"]),
        ("seg-2.lq", [alice], []),
        ("seg-3.lq", [alice], ["envelope"]),
        ("seg-4.lq", [alice], ["header:sender"]),
    ]  # fmt: skip
    a = setup.actions
    assert [(d["seq"], d["outcome"], d["target"]["file"], d["precondition"], d["removed"],
             d["findings"]) for d in request["deleted"]] == [
        (0, "deleted", "seg-1.lq", {"sha256": "1" * 64, "size": 100}, {"bytes": 100},
         [ids["seg-1.lq"]]),
    ]  # fmt: skip
    assert [(s["action"], s["outcome"], s["reason"]) for s in request["skipped"]] == [
        (a[1].id, "skipped", "segment appended to since planning"),
        (a[2].id, "not run", "no outcome in the journal"),
    ]
    assert [(d["target"]["file"], d["reason"]) for d in request["deferred"]] == [
        ("seg-4.lq", "restart still reads it"),
        ("spool/x", "content could not be searched: body: S/MIME enveloped"),
    ]
    assert request["unreadable"] == [
        {"finding": setup.locked["id"], "queue": QUEUE, "object": "spool/x", "bytes": 100,
         "depth": "headers", "unreadable": [{"where": "body", "reason": "S/MIME enveloped"}]}
    ]  # fmt: skip
    assert request["after"] == {
        "clean": True, "remaining": [], "unreadable": [],
        "result": "subject found in none of the stores (searched at depth headers)",
    }  # fmt: skip
    assert request["counts"] == {"found": 4, "deleted": 1, "deferred": 2, "skipped": 2,
                                 "unreadable": 1, "remaining": 0}  # fmt: skip
    assert body["approval"] == {
        "approved_by": "Dana <u-" + body["approval"]["approved_by"][8:16] + "@corp.example>",
        "approved_at": body["approval"]["approved_at"], "note": "ticket 17",
        "plan_sha256": setup.plan.sha256,
    }  # fmt: skip
    assert "dpo@" not in json.dumps(body)
    assert body["purge"]["completed_at"] == body["completed_at"] == "2027-01-03T00:00:03.500Z"
    assert body["purge"]["verified"] is True and body["made_at"] == "2027-01-04T00:00:00Z"
    assert body["audits"]["before"]["policy_sha256"] == setup.policy.sha256
    assert body["audits"]["after"]["policy_sha256"] == setup.policy.sha256
    assert body["audits"]["before"]["subject_key_id"] != body["audits"]["after"]["subject_key_id"]


def test_what_the_after_audit_still_finds_is_listed_with_the_plans_keyed_hashes(
    setup: Setup,
) -> None:
    still = _row("personal_data", "seg-4.lq", {"subjects": setup.alice2, "depth": "headers",
                 "found": [{"subject": setup.alice2[0], "where": "header:sender"}]})  # fmt: skip
    setup.after_audit([still])
    (request,) = setup.make()["requests"]
    assert request["after"]["clean"] is False
    assert request["after"]["result"] == "subject still found in 1 object(s) of the stores (listed)"
    (left,) = request["after"]["remaining"]
    assert (left["object"], left["subjects"], left["where"]) == (
        "seg-4.lq",
        setup.alice1,
        [{"subject": setup.alice1[0], "where": "header:sender"}],
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stores": STORES[:1]}, "does not name the plan's audit's stores (missing: blob "
         "listing s3://mail; others: none)"),
        ({"searched": []}, "did not look for the data subjects of rule 'erasure-1'"),
        ({"created_at": "2027-01-03T00:00:02Z"}, "before the purge finished"),
    ],
)  # fmt: skip
def test_an_after_audit_that_proves_nothing_is_refused(
    setup: Setup, change: dict[str, Any], message: str
) -> None:
    setup.after_audit(**change)
    with pytest.raises(ConfigError, match="after-purge audit .*" + message.replace("(", r"\(")
                       .replace(")", r"\)")):  # fmt: skip
        setup.make()


def test_inputs_that_do_not_fit_are_refused(setup: Setup, tmp_path: Path) -> None:
    setup.after_audit()
    other = dataclasses.replace(setup.policy, sha256="0" * 64)
    with pytest.raises(ConfigError, match="is not the plan's"):
        receipts.make_receipt(setup.plan.directory, setup.after, policy=other)
    journal = setup.plan.directory / "journal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ConfigError, match="the purge has not finished"):
        setup.make()
    journal.unlink()
    with pytest.raises(ConfigError, match="has no journal"):
        setup.make()


# --- signing and verifying ------------------------------------------------------------------------


def _key() -> Any:
    return receipts.private_key_from(KEY_HEX.encode(), "test")


def _write(tmp_path: Path, document: dict[str, Any], name: str = "r") -> Path:
    out = tmp_path / name
    receipts.write_receipt(out, document, "<p>page</p>")
    return out / receipts.RECEIPT_JSON


def test_a_signed_receipt_verifies_and_every_one_byte_change_fails(
    setup: Setup, tmp_path: Path
) -> None:
    setup.after_audit()
    body = setup.make()
    request = body["requests"][0]  # a small receipt: one object found and deleted
    for name in ("found", "deferred", "skipped", "unreadable"):
        request[name] = request[name][:1] if name in ("found",) else []
        request["counts"][name] = len(request[name])
    path = _write(tmp_path, receipts.sign(body, _key()))
    assert receipts.verify(path).ok
    data = path.read_bytes()
    problems = set()
    for at in range(len(data)):
        changed = bytearray(data)
        changed[at] ^= 0x01 if at % 2 else 0x20
        result = receipts.verify_bytes(bytes(changed), path)
        assert not result.ok, at
        problems.add(result.problem.split(" at byte")[0].split(" (")[0])
    path.write_bytes(data + b"x")
    assert receipts.verify(path).problem == f"not JSON at byte {len(data)} (Extra data)"
    for layout in (data + b" ", data[:-1], data.replace(b"\n", b"\r\n", 1)):
        path.write_bytes(layout)
        assert receipts.verify(path).problem.startswith("not in the layout it was written in")
    # What fails is said: the signature, a field, the JSON, the layout.
    assert "signature does not verify" in problems and "not JSON" in problems
    assert any(p.startswith("field ") for p in problems)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d["requests"][0].pop("deleted"), "field requests[0].deleted missing"),
        (lambda d: d["requests"][0]["counts"].update(deleted=5),
         "field requests[0].counts.deleted is 5 but 1 are listed"),
        (lambda d: d["plan"].update(action_count="3"), "field plan.action_count is not an integer"),
        (lambda d: d.update(extra=1), "field extra is not a field of a receipt"),
        (lambda d: d["requests"][0]["deleted"][0]["target"].update(file="seg-7.lq"),
         "signature does not verify"),
    ],
)  # fmt: skip
def test_what_does_not_verify_is_named(setup: Setup, tmp_path: Path, edit: Any, problem: str
                                       ) -> None:  # fmt: skip
    setup.after_audit()
    document = receipts.sign(setup.make(), _key())
    edit(document)
    path = tmp_path / "RECEIPT.json"
    path.write_bytes(receipts.serialise(document))
    result = receipts.verify(path)
    assert not result.ok and result.problem.startswith(problem), result.problem


def test_keys_from_the_environment_or_a_file_and_a_pinned_key(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup.after_audit()
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                            serialization.NoEncryption())  # fmt: skip
    fingerprint = receipts.key_fingerprint(key.public_key())
    (tmp_path / "k.pem").write_bytes(pem)
    (tmp_path / "k.raw").write_bytes(raw)
    for env, file in (({receipts.KEY_VARIABLE: pem.decode()}, None),
                      ({receipts.KEY_VARIABLE: raw.hex()}, None),
                      ({receipts.KEY_FILE_VARIABLE: str(tmp_path / "k.raw")}, None),
                      ({}, tmp_path / "k.pem")):  # fmt: skip
        assert receipts.key_fingerprint(receipts.signing_key(file, env).public_key()) == fingerprint
    both = {receipts.KEY_VARIABLE: raw.hex(), receipts.KEY_FILE_VARIABLE: "k"}
    with pytest.raises(ConfigError, match="both MQF_RECEIPT_KEY and MQF_RECEIPT_KEY_FILE"):
        receipts.signing_key(None, both)
    with pytest.raises(ConfigError) as bad:
        receipts.signing_key(None, {receipts.KEY_VARIABLE: "ab" * 31})
    assert "ab" * 31 not in str(bad.value)

    monkeypatch.setenv(receipts.KEY_VARIABLE, raw.hex())
    made = api_receipt.receipt(setup.plan.directory, after=setup.after, out=tmp_path / "out",
                               policy=setup.policy_path)  # fmt: skip
    assert made.key_fingerprint == fingerprint and made.clean
    other = tmp_path / "other"
    other_fp = api_receipt.receipt_keygen(other)
    assert stat.S_IMODE(other.stat().st_mode) == 0o600
    assert (tmp_path / "other.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY")
    (tmp_path / "mine.pub").write_text(key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex())  # fmt: skip
    assert api_receipt.verify_receipt(made.directory, public_key=tmp_path / "mine.pub").ok
    wrong = api_receipt.verify_receipt(made.json_path, public_key=tmp_path / "other.pub")
    assert not wrong and wrong.problem == (
        f"signed by key {fingerprint}, not by the pinned key {other_fp}"
    )
    assert "does not verify" in repr(wrong)
    # Re-signed by another key after an edit: verifies on its own, not against the pinned key.
    document = json.loads(made.json_path.read_bytes())
    document.pop("signature")
    document["requests"][0]["after"]["result"] = "forged"
    forged = receipts.sign(document, receipts.signing_key(other, {}))
    path = _write(tmp_path, forged, "forged")
    assert receipts.verify(path).ok
    assert not receipts.verify(path, tmp_path / "mine.pub").ok


def test_a_key_that_is_not_an_ed25519_one_is_named_never_shown() -> None:
    """Private keys come from configuration (ConfigError), public keys from what is verified
    (InputError); each error names where the key came from and what it is not."""
    rfc8410_pem = (  # the public key of RFC 8410 section 10.1
        b"-----BEGIN PUBLIC KEY-----\n"
        b"MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n"
        b"-----END PUBLIC KEY-----\n"
    )
    key = Ed25519PrivateKey.generate()
    x25519 = X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())  # fmt: skip
    cases: list[tuple[Any, bytes, type[MqfError], str]] = [
        (receipts.private_key_from, b"-----BEGIN PRIVATE KEY-----\nnot base64\n", ConfigError,
         "k: not an unencrypted PEM private key"),
        (receipts.private_key_from, x25519, ConfigError,
         "k: a PEM private key, but not an Ed25519 one"),
        (receipts.private_key_from, b"ab" * 20, ConfigError,
         "k: not an Ed25519 private key (PEM, 32 bytes or 64 hex digits)"),
        (receipts.public_key_from, b"-----BEGIN PUBLIC KEY-----\nxx\n", InputError,
         "k: not a PEM public key"),
        (receipts.public_key_from, X25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
         InputError, "k: a PEM public key, but not an Ed25519 one"),
        (receipts.public_key_from, b"cd" * 31, InputError,
         "k: not an Ed25519 public key (PEM, 32 bytes or 64 hex digits)"),
    ]  # fmt: skip
    for read, data, error, message in cases:
        with pytest.raises(error) as raised:
            read(data, "k")
        assert raised.value.message == message
    assert receipts.public_key_from(rfc8410_pem, "k") is not None
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    assert receipts.key_fingerprint(receipts.public_key_from(pem, "k")) == (
        receipts.key_fingerprint(key.public_key())
    )


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MQF_RECEIPT")}
    return subprocess.run(
        [sys.executable, "-m", "mqforensics", *argv], capture_output=True, text=True,
        env={**environ, **(env or {})}, cwd=REPO, timeout=120,
    )  # fmt: skip


def test_the_command_line_refuses_without_a_key_and_writes_no_address(
    setup: Setup, tmp_path: Path
) -> None:
    setup.after_audit()
    args = ["receipt", "make", str(setup.plan.directory), "--after", str(setup.after),
            "--policy", str(setup.policy_path), "--out", str(tmp_path / "out")]  # fmt: skip
    refused = _cli(*args)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "MQF_RECEIPT_KEY" in refused.stderr and "--signing-key-file" in refused.stderr
    assert not (tmp_path / "out").exists()

    made = _cli(*args, env={receipts.KEY_VARIABLE: KEY_HEX})
    assert made.returncode == 0, made.stderr
    assert "request erasure-1 (GDPR Art. 17, request 1; search headers): 2 stores searched, " \
           "4 objects found, 1 deleted, 2 deferred, 2 skipped, 1 unreadable; after the purge: " \
           "subject found in none of the stores" in made.stdout  # fmt: skip
    out = tmp_path / "out"
    texts = [made.stdout, (out / "RECEIPT.json").read_text(), (out / "RECEIPT.html").read_text()]
    for text in texts:
        for address in (ALICE, BOB, "dpo@corp.example"):
            assert address not in text.lower()
        assert subject_hash(ALICE) not in text  # only keyed hashes
        assert "None" not in text and "nan" not in text.replace("nano", "")
    assert "Could not be searched" in texts[2] and "S/MIME enveloped" in texts[2]

    ok = _cli("receipt", "verify", str(out / "RECEIPT.json"))
    assert ok.returncode == 0 and ok.stdout.count("\n") == 1 and ": verified:" in ok.stdout
    data = (out / "RECEIPT.json").read_bytes()
    at = data.index(b'"legal_basis": "GDPR Art. 17, request 1"') + 20
    (out / "RECEIPT.json").write_bytes(data[:at] + b"H" + data[at + 1 :])
    bad = _cli("receipt", "verify", str(out / "RECEIPT.json"))
    assert bad.returncode == 1 and "signature does not verify" in bad.stdout


def test_the_receipt_layer_imports_no_system_registry_or_cli() -> None:
    probe = ("import sys, mqforensics.retention.receipt, mqforensics.views.receipt_page; "
             "print(sorted(m for m in sys.modules if m.startswith(('mqforensics.systems', "
             "'mqforensics.cli', 'mqforensics.runner', 'pyspark'))))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=REPO, check=True)  # fmt: skip
    assert result.stdout.strip() == "[]"
