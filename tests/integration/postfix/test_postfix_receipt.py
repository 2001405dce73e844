"""An erasure from audit to signed receipt on a copy of the bundled Postfix sample, purged by the
real Postfix's ``postsuper -d``: a Postfix instance (Debian's Postfix 3.7, the session's config
with its ``queue_directory`` the copy; its master never runs, so nothing but postsuper touches
the queue) holds the sample's queue; audit with an erasure policy, plan, approve, purge --apply,
audit again, ``receipt make``, ``receipt verify`` (exit 0), one byte changed (exit 1).

Two requests: victor@example.net, the recipient of the sample's expired message, which goes
whole; frank@example.com, a recipient of a deferred message that goes, and of the planted copy
that cleanup never finished (``incoming/``, mode 0600), which ``postsuper -d`` does not delete:
it is deferred, and the after-purge audit still finds it, as the receipt says. What each
request must find, delete and defer is read from the sample's ground truth (``postqueue.jsonl``,
``postcat/``, ``planted.json``), never from the audit's output."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqforensics.retention.policy import subject_hash
from mqforensics.services import postfix as server
from mqforensics.subjects import keyed, read_key
from mqforensics.systems.postfix.sample import BUNDLED, materialize
from tests import receipt_support as receipts

pytestmark = pytest.mark.integration

VICTOR, FRANK = "victor@example.net", "frank@example.com"
RULES = {"erasure-2026-044": VICTOR, "erasure-2026-045": FRANK}
# The planted anomalies whose file cannot be read to its end (ANOMALIES.md): the offset where
# reading stops is in planted.json.
DAMAGED = ("truncated", "flipped_length", "incomplete")


def _policy(path: Path) -> Path:
    path.write_text("version = 1\n" + "".join(
        f'\n[[rules]]\nid = "{rule}"\nkind = "erase_subject"\nsystems = ["postfix"]\n'
        f'legal_basis = "GDPR Art. 17 right to erasure, request {rule[8:]}"\n'
        f'addresses = ["{address}"]\nsearch = "full"\n'
        for rule, address in RULES.items()
    ))  # fmt: skip
    return path


@pytest.fixture
def instance(postfix: dict) -> Iterator[tuple[Path, Path]]:
    """A Postfix config directory (the session instance's main.cf and master.cf) whose
    queue_directory is a copy of the bundled sample's queue (modes and mtimes restored, owned
    by postfix as Postfix keeps it); (config directory, queue directory). Under /tmp in a
    directory postfix can search: postsuper drops to the mail owner."""
    root = Path(tempfile.mkdtemp(prefix="mqf-postfix-receipt-", dir="/tmp"))
    try:
        root.chmod(0o755)
        conf, data, logs = root / "conf", root / "data", root / "logs"
        shutil.copytree(postfix["config_directory"], conf)
        data.mkdir(mode=0o755)
        logs.mkdir()
        queue = materialize(data / "queue", root / "ground_truth.json").queue_dir
        queue.chmod(0o755)  # postfix-files: $queue_directory:d:root:-:755
        subprocess.run(["chown", "-R", f"{server.MAIL_OWNER}:{server.MAIL_OWNER}", str(logs),
                        *map(str, queue.iterdir())], check=True)  # fmt: skip
        # Not `postfix check`: its postsuper would rename the sample's files to their inodes.
        server._run([str(server.POSTCONF), "-c", str(conf), "-e", f"queue_directory={queue}",
                     f"data_directory={data / 'lib'}", f"maillog_file={logs / 'maillog'}",
                     f"maillog_file_prefixes={logs}"])  # fmt: skip
        yield conf, queue
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _truth() -> dict[str, dict]:
    """Per queue file of the sample (path under queue/): whether it is ready (mode 0700, a
    file cleanup finished: files.json) and where each address of RULES is in it, read from
    postcat of its message (envelope records, header fields, body); a planted copy
    (planted.json: "a copy of ...") holds its original's."""
    positions: dict[str, dict[str, set[str]]] = {}
    for entry in map(json.loads, (BUNDLED / "postqueue.jsonl").read_text().splitlines()):
        qid = entry["queue_id"]
        section, field = "envelope", ""
        found: dict[str, set[str]] = {}
        for line in (BUNDLED / "postcat" / f"{qid}.txt").read_text().splitlines():
            text = re.sub(r"^\s*\d+ ?", "", line)
            if text.startswith("*** MESSAGE CONTENTS"):
                section = "header"
                continue
            if text.startswith("*** HEADER EXTRACTED"):
                break
            if section == "header" and not text:
                section = "body"  # the empty line after the header section
            elif section == "header" and not text[:1].isspace():
                field = text.partition(":")[0].lower()
            for address in RULES.values():
                if address in text:
                    where = f"header:{field}" if section == "header" else section
                    found.setdefault(address, set()).add(where)
        positions[qid] = found
    files = {}
    for relative, facts in json.loads((BUNDLED / "files.json").read_text()).items():
        queue, _, _ = relative.partition("/")
        qid = relative.rsplit("/", 1)[1]
        if queue in ("defer", "bounce", "trace"):
            continue
        files[relative] = {"found": positions.get(qid, {}), "ready": facts["mode"] == "0700"}
    for anomaly in json.loads((BUNDLED / "planted.json").read_text()):
        copied = re.search(r"a (?:whole )?copy of \S+ \((\w+)\)", anomaly["note"])
        if copied:
            files[anomaly["path"]]["found"] = positions[copied.group(1)]
    return files


def test_postfix_sample_erasure_receipt(
    spark, instance, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf, queue = instance
    policy = _policy(tmp_path / "policy.toml")
    as_of = (BUNDLED / "as_of.txt").read_text().strip()
    argv = ["audit", "postfix", "--queue-dir", str(queue), "--config-dir", str(conf),
            "--as-of", as_of, "--erasure-policy", str(policy)]  # fmt: skip
    # Both audits exit 1: the sample's damaged files are errors.
    erasure = receipts.erase(argv, policy, tmp_path, capsys, statuses=(1,))
    document, printed = erasure.document, erasure.printed

    truth = _truth()
    planted = {a["anomaly"]: a for a in json.loads((BUNDLED / "planted.json").read_text())}
    damaged = {str(queue / planted[a]["path"]): planted[a]["offset"] for a in DAMAGED}
    ready = {str(queue / p) for p, t in truth.items() if t["ready"]}
    named = {str(queue / p) for p, t in truth.items() if t["found"]}
    deleted_by_any = {p for p in named if p in ready}
    key = read_key(erasure.audit)
    for rule, address in RULES.items():
        request = receipts.request(document, rule)
        holding = {str(queue / p): t["found"][address] for p, t in truth.items()
                   if address in t["found"]}  # fmt: skip
        subject = keyed(subject_hash(address), key)
        assert request["subjects"] == [subject]
        assert request["search"] == "full"
        assert [(s["kind"], s["location"], s["depth"]) for s in request["stores"]] == [
            ("Postfix main.cf", str(conf / "main.cf"), "full"),
            ("Postfix queue_directory", str(queue), "full"),
        ]
        store = request["stores"][1]
        assert "" != store["fingerprint_before"] != store["fingerprint_after"] != ""
        assert {f["object"]: {w["where"] for w in f["where"]} for f in request["found"]} == holding
        assert all(f["subjects"] == [subject] for f in request["found"])
        assert all(w["subject"] == subject for f in request["found"] for w in f["where"])
        gone = sorted(p for p in holding if p in ready)
        assert [(d["target"]["path"], d["outcome"], d["kind"]) for d in request["deleted"]] == [
            (p, "deleted", "postfix.postsuper_delete") for p in gone
        ]
        for item in request["deleted"]:
            assert item["precondition"]["size"] == item["bytes"] > 0
            assert len(item["precondition"]["sha256"]) == 64
        assert not any(Path(p).exists() for p in gone)
        # Deferred: the unfinished file holding the subject (postsuper -d deletes only ready
        # files), and every damaged file that does not hold it and no action deletes (it may
        # hold this subject where it could not be read, even if it holds another one).
        left = {p for p in holding if p not in ready}
        expected = {p: "not marked ready (mode 0600)" for p in left}
        expected |= {
            p: f"content could not be searched: envelope: the queue file is damaged "
            f"at byte {offset}"
            for p, offset in damaged.items()
            if p not in holding and p not in deleted_by_any
        }
        assert {d["target"]["path"]: d["reason"][: len(expected.get(d["target"]["path"], ""))]
                for d in request["deferred"]} == expected  # fmt: skip
        assert request["skipped"] == []
        assert {u["object"]: u["unreadable"][0]["reason"][: len("the queue file is damaged at "
                f"byte {damaged[u['object']]}")] for u in request["unreadable"]} == {
            p: f"the queue file is damaged at byte {offset}" for p, offset in damaged.items()
        }  # fmt: skip
        # After: what was deferred holding the subject is all that is left of it.
        after_request = request["after"]
        assert [(f["object"], f["subjects"]) for f in after_request["remaining"]] == [
            (p, [subject]) for p in sorted(left)
        ]
        assert {u["object"] for u in after_request["unreadable"]} == set(damaged)
        assert after_request["clean"] is (not left)
        counts = {"found": len(holding), "deleted": len(gone), "deferred": len(expected),
                  "skipped": 0, "unreadable": len(damaged), "remaining": len(left)}  # fmt: skip
        assert request["counts"] == counts
    victor, frank = (receipts.request(document, r) for r in RULES)
    assert victor["after"]["result"] == (
        "subject found in none of the stores at depth full; 3 object(s) could not be searched "
        "at that depth (listed)"
    )
    assert frank["after"]["result"] == "subject still found in 1 object(s) of the stores (listed)"
    assert [len(r["found"]) for r in (victor, frank)] == [1, 2]
    assert "request erasure-2026-044" in printed and "request erasure-2026-045" in printed
    receipts.no_address(erasure.out, printed, [VICTOR, FRANK])
    receipts.one_byte_changed_fails(erasure.out, capsys, b'"outcome": "d')
