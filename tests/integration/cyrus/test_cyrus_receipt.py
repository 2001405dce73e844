"""An erasure from audit to signed receipt on the bundled Cyrus sample rebuilt in the real Cyrus
3.6 of the test session: every live mailbox of the sample's ``backend1/mailboxes.db`` created
over IMAP with its ACL (user names tagged per run, so runs on one server stay apart), then the
sample's erasure request (frank@example.com, tagged the same way): audit a copy of the live
``mailboxes.db``, plan, approve, purge --apply (DELETEACL over IMAP), audit a new copy at the
same path, ``receipt make``, ``receipt verify`` (exit 0), one byte changed (exit 1). The
subject's grants are read from the sample's database, not from the audit."""

from __future__ import annotations

import re
import tomllib
import uuid
from pathlib import Path

import pytest

from mqforensics.retention.policy import subject_hash
from mqforensics.subjects import keyed, read_key
from mqforensics.systems.cyrus import records, twoskip
from mqforensics.systems.cyrus.database import Database
from mqforensics.systems.cyrus.dbtool import DbTool
from mqforensics.systems.cyrus.imap_acl import quote
from tests import receipt_support as receipts
from tests.integration.cyrus import cyrus_support as support
from tests.integration.cyrus.cyrus_support import DOMAIN

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "cyrus" / "sample"
SHARED = ("anyone", "cyrus")  # identifiers that are no user of the sample


def _sample_mailboxes() -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """(internal name, ACL) of every live mailbox of the sample (not deleted, not DELETED.)."""
    path = SAMPLE / "backend1" / "mailboxes.db"
    db = Database.from_file(twoskip.read(path.read_bytes(), name=str(path)))
    return [(e.name, e.acl) for e in db.entries
            if "d" not in e.mbtype and not e.name.startswith("DELETED.")]  # fmt: skip


def _tagged(tag: str):
    """The sample's names with this run's tag: users ``alice`` -> ``alice<tag>``,
    ``eve@example.com`` -> ``eve<tag>@example.com``, ``shared.team`` -> ``shared<tag>.team``."""

    def ident(identifier: str) -> str:
        if identifier in SHARED or identifier.startswith("group:"):
            return identifier
        return re.sub(r"^-?[^@]+", lambda m: m.group(0) + tag, identifier)

    def internal(name: str) -> str:
        domain, bang, rest = name.rpartition("!")
        parts = rest.split(".")
        parts[1 if parts[0] == "user" else 0] += tag
        return domain + bang + ".".join(parts)

    def mailbox(name: str) -> str:
        """The admin-visible name of an internal one (``example.com!user.eve`` ->
        ``user/eve<tag>@example.com``)."""
        domain, _, rest = internal(name).rpartition("!")
        parts = rest.split(".")
        if parts[0] == "user" and domain:
            parts[1] += f"@{domain}"
        return "/".join(parts)

    return ident, internal, mailbox


def _grant(cyrus: dict, internal: str, mailbox: str, identifier: str, rights: str) -> None:
    """SETACL as the admin; an identifier Cyrus 3.6 refuses over IMAP (``group:team co``, which
    the sample's tools wrote) goes into the record with the RACL key Cyrus would keep."""
    imap = support.login(cyrus, cyrus["username"], cyrus["password"])
    try:
        status, data = imap._simple_command("SETACL", quote(mailbox), quote(identifier),
                                            quote(rights))  # fmt: skip
    finally:
        imap.logout()
    if status != "OK":
        assert data == [b"Invalid identifier"], data
        # As `cyrus_support.legacy_grant`, the identifier quoted as the sample's record has it.
        tool = DbTool.for_mailboxes(Path(cyrus["config"]))
        key = b"N" + records.intname_to_dbname(internal).encode()
        value = tool.get(key)
        assert value is not None and value.count(b" A %(") == 1, value
        entry = f'"{identifier}" {rights} '.encode()
        racl = records.racl_key((3, 6, 1), records.owner_of(internal) is None, identifier,
                                internal)  # fmt: skip
        tool.set_keys([(key, value.replace(b" A %(", b" A %(" + entry)), (racl, b"")])


def _policy(path: Path, tag: str) -> tuple[Path, str, str, str]:
    """The sample's erasure rule alone (its racl_repair rule would act on the whole shared
    server), its address tagged; (policy, rule id, the sample's address, the tagged one)."""
    (rule,) = [r for r in tomllib.loads((SAMPLE / "policy.toml").read_text())["rules"]
               if r["kind"] == "erase_subject"]  # fmt: skip
    (address,) = rule["addresses"]
    ident, _, _ = _tagged(tag)
    tagged = ident(address)
    path.write_text(
        f'version = 1\n\n[[rules]]\nid = "{rule["id"]}"\nkind = "erase_subject"\n'
        f'legal_basis = "{rule["legal_basis"]}"\naddresses = ["{tagged}"]\nsystems = ["cyrus"]\n'
    )
    return path, rule["id"], address, tagged


def test_cyrus_sample_erasure_receipt(spark, cyrus, tmp_path: Path, monkeypatch, capsys) -> None:
    tag = uuid.uuid4().hex[:6]
    ident, internal, mailbox = _tagged(tag)
    mailboxes = _sample_mailboxes()
    root = support.login(cyrus, cyrus["username"], cyrus["password"])
    try:
        for name, acl in sorted(mailboxes):
            support.ok(root.create(mailbox(name)))
            for identifier, rights in acl:
                _grant(cyrus, internal(name), mailbox(name), ident(identifier), rights)
    finally:
        root.logout()
    policy, rule, sample_subject, subject_address = _policy(tmp_path / "policy.toml", tag)
    # The subject's grants in the sample: what the erasure must find and delete.
    grants = {(mailbox(n), ident(i), r) for n, acl in mailboxes for i, r in acl
              if i == sample_subject}  # fmt: skip
    assert grants == {(f"user/eve{tag}@example.com", subject_address, "lrs")}

    snapshot = tmp_path / "mailboxes.db"
    argv = ["audit", "cyrus", str(snapshot), "--default-domain", DOMAIN,
            "--erasure-policy", str(policy)]  # fmt: skip
    monkeypatch.setenv("MQF_IMAP_USERNAME", cyrus["username"])
    monkeypatch.setenv("MQF_IMAP_PASSWORD", cyrus["password"])
    imap = f"{cyrus['host']}:{cyrus['port']}"
    # Each audit reads a fresh snapshot of the server's mailboxes.db (the same store, after).
    erasure = receipts.erase(argv, policy, tmp_path, capsys, purge=["--imap", imap],
                             refresh=lambda: support.snapshot(cyrus, snapshot))  # fmt: skip
    assert support.rights(cyrus, f"user/eve{tag}@example.com", subject_address) is None
    printed = erasure.printed

    request = receipts.request(erasure.document, rule)
    subject = keyed(subject_hash(subject_address), read_key(erasure.audit))
    assert request["subjects"] == [subject] and request["search"] == "headers"
    assert [(s["kind"], s["location"]) for s in request["stores"]] == [("file", str(snapshot))]
    assert [(f["subjects"], [w["where"] for w in f["where"]]) for f in request["found"]] == [
        ([subject], ["acl:grantee"])
    ]
    assert [(d["kind"], d["outcome"], d["precondition"]["rights"]) for d in request["deleted"]] == [
        ("cyrus.delete_acl", "deleted", "lrs")
    ]
    assert request["deleted"][0]["findings"] == [request["found"][0]["finding"]]
    assert (request["deferred"], request["skipped"], request["unreadable"]) == ([], [], [])
    assert request["after"] == {
        "clean": True, "remaining": [], "unreadable": [],
        "result": "subject found in none of the stores (searched at depth headers)",
    }  # fmt: skip
    store = request["stores"][0]
    assert "" != store["fingerprint_before"] != store["fingerprint_after"] != ""
    assert f"request {rule}" in printed and "subject found in none" in printed
    receipts.no_address(erasure.out, printed, [subject_address])
    for text in (printed, (erasure.out / "RECEIPT.json").read_text()):
        assert f"eve{tag}" not in text and f"frank{tag}" not in text
    receipts.one_byte_changed_fails(erasure.out, capsys, b'"outcome": "d')
