"""The spool files of a log queue searched for data subjects (issue 48): a queue written by the
format's own writer, messages holding a subject in their header fields and bodies, decoys, an
encrypted message; the plan deletes only the spool file no unfinished message names, the purger
re-checks that live, and an audit afterwards finds the subject nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datasets.logqueue.writer import QueueWriter
from mqforensics import cli, subjects
from mqforensics.retention.manifest import read_plan
from mqforensics.systems.logqueue.plan import DELETE_SPOOL, LIVE_SPOOL
from mqforensics.systems.logqueue.purge import SpoolExecutor, unfinished_spool_names

AS_OF = "2027-01-16T00:00:00Z"
SUBJECT = "Dana.Subject@Example.org"
LEFTOVER = "0badc0de0badc0de0badc0de0badc0de"

IN_HEADERS = (
    b"Return-Path: <list-bounces@lists.example.net>\r\n"
    b"From: =?utf-8?q?Dana_S=C3=BCbject?= <dana.subject@example.org>\r\n"
    b"To: team@lists.example.net\r\nSubject: minutes\r\n\r\nno address here\r\n"
)
IN_BODY = (
    b"From: someone@example.net\r\nTo: x@example.net\r\nSubject: hi\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n"
    b"\r\nplease write to dana.sub=\r\nject@example.org soon\r\n"
)
DECOYS = (
    b"From: edana.subject@example.org\r\nReply-To: dana.subject@example.org.evil.net\r\n"
    b"Message-ID: <dana.subject@example.org>\r\nSubject: decoys\r\n\r\n"
    b"cc dana.subject+news@example.org\r\n"
)
ENCRYPTED = (
    b"From: x@example.net\r\nTo: y@example.net\r\nSubject: sealed\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"\r\n'
    b"Content-Transfer-Encoding: base64\r\n\r\nMIAGCSqGSIb3DQEHA6CAMIACAQAxggE=\r\n"
)


def _policy(tmp_path: Path, search: str) -> Path:
    path = tmp_path / f"erase-{search}.toml"
    path.write_text(
        'version = 1\n[[rules]]\nid = "req-1"\nkind = "erase_subject"\nlegal_basis = "Art. 17"\n'
        f'addresses = ["{SUBJECT}"]\nsearch = "{search}"\n'
    )
    return path


def _queue(directory: Path) -> dict[str, str]:
    """Messages written by the queue's own writer; the spool name of each."""
    writer = QueueWriter.open(directory)
    names = {}
    for label, content in (("headers", IN_HEADERS), ("body", IN_BODY), ("decoys", DECOYS),
                           ("encrypted", ENCRYPTED)):  # fmt: skip
        mid = writer.enqueue("sender@example.net", ["rcpt@example.net"], content)
        names[label] = mid.hex
    writer.save_positions()
    writer.close()
    # A crash between a FINISH and its spool file's removal leaves the content behind.
    (directory / "spool" / LEFTOVER).write_bytes(IN_HEADERS)
    names["leftover"] = LEFTOVER
    return names


def _found(audit: Path) -> dict[tuple[str, str], dict]:
    rows = json.loads((audit / "findings.raw.json").read_text())
    return {
        (r["check"], r["subject"]): r["detail"]
        for r in rows
        if r["check"] in ("personal_data", "unreadable_content")
    }


@pytest.fixture(scope="module")
def searched(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("spool")
    queue = root / "q"
    names = _queue(queue)
    audits = {}
    for depth in ("headers", "full"):
        out = root / f"audit-{depth}"
        argv = ["audit", "logqueue", str(queue), "--as-of", AS_OF, "--out", str(out),
                "--erasure-policy", str(_policy(root, depth))]  # fmt: skip
        assert cli.main(argv) in (0, 1)
        key = subjects.read_key(out)
        audits[depth] = (_found(out), key)
    return root, queue, names, audits


def _keyed(key: bytes) -> str:
    from mqforensics.retention.policy import subject_hash

    return subjects.keyed(subject_hash(SUBJECT), key)


def test_each_spool_file_is_found_where_the_subject_is_at_each_depth(searched) -> None:
    _, _, names, audits = searched
    expected = {
        "headers": {
            "headers": [("header:from", "waiting")],
            "leftover": [("header:from", None)],
        },
        "full": {
            "headers": [("header:from", "waiting")],
            "body": [("body", "waiting")],
            "leftover": [("header:from", None)],
        },
    }
    for depth, (found, key) in audits.items():
        spool = {
            d["spool"]: d for (check, _), d in found.items() if check == "personal_data"
            and "spool" in d
        }  # fmt: skip
        label = {v: k for k, v in names.items()}
        got = {
            label[name]: [(f["where"], d["state"]) for f in d["found"]] for name, d in spool.items()
        }
        assert got == expected[depth], depth
        for d in spool.values():
            assert d["subjects"] == [_keyed(key)]
            assert d["depth"] == depth
        text = json.dumps(list(found.values())).lower()
        assert "dana" not in text  # keyed hashes only


def test_the_encrypted_message_is_unreadable_at_full_depth_only(searched) -> None:
    _, _, names, audits = searched
    unreadable = {
        depth: {d["spool"]: d["unreadable"] for (check, _), d in found.items()
                if check == "unreadable_content"}
        for depth, (found, _) in audits.items()
    }  # fmt: skip
    assert unreadable["headers"] == {}
    assert unreadable["full"] == {
        names["encrypted"]: [{"where": "body", "reason": "encrypted (S/MIME enveloped-data)"}]
    }


def test_plan_deletes_the_leftover_defers_waiting_mail_and_the_unreadable(searched) -> None:
    root, queue, names, _ = searched
    plan_dir = root / "plan"
    argv = ["plan", "logqueue", str(queue), "--policy", str(_policy(root, "full")),
            "--as-of", AS_OF, "--out", str(plan_dir)]  # fmt: skip
    assert cli.main(argv) == 0
    plan = read_plan(plan_dir)
    spool_actions = [a for a in plan.actions() if a.kind == DELETE_SPOOL]
    assert [(a.target["spool"], a.bytes) for a in spool_actions] == [(LEFTOVER, len(IN_HEADERS))]
    deferred = [json.loads(line) for line in (plan_dir / "deferred.jsonl").open()]
    reasons = {d["target"]["spool"]: d["reason"] for d in deferred if d["kind"] == DELETE_SPOOL}
    assert reasons == {
        names["headers"]: LIVE_SPOOL.format(state="waiting"),
        names["body"]: LIVE_SPOOL.format(state="waiting"),
        names["encrypted"]: "content could not be searched: body: encrypted (S/MIME "
        "enveloped-data)",
    }
    assert unfinished_spool_names(queue) == {
        names[k] for k in ("headers", "body", "decoys", "encrypted")
    }
    # The purger re-checks live: a message naming the file now keeps it.
    (action,) = spool_actions
    assert SpoolExecutor(plan).verify(action).ok
    assert cli.main(["approve", str(plan_dir), "--by", "dpo@example.net"]) == 0
    assert cli.main(["purge", str(plan_dir), "--apply"]) == 0
    assert not (queue / "spool" / LEFTOVER).exists()
    kept = sorted(p.name for p in (queue / "spool").iterdir())
    assert kept == sorted(names[k] for k in ("headers", "body", "decoys", "encrypted"))
    # After the purge, the subject is only where the plan deferred it (waiting mail).
    after = root / "after"
    argv = ["audit", "logqueue", str(queue), "--as-of", AS_OF, "--out", str(after),
            "--erasure-policy", str(_policy(root, "full"))]  # fmt: skip
    assert cli.main(argv) in (0, 1)
    left = {d["spool"] for (c, _), d in _found(after).items() if c == "personal_data"}
    assert left == {names["headers"], names["body"]}
