"""The Postfix reader, checks and purger against the session's real Postfix 3.7.

Mail submitted with Postfix's own sendmail defers (relayhost on a closed port). Then:

- every message, recipient and state the reader returns equals ``postqueue -j`` and ``postcat``
  on the same live queue;
- damage planted in the live queue (a truncation, a flipped length byte, an orphan log, a file a
  writer never finished, an over-age deferred message) gives exactly the planted findings, with
  the offsets ``postcat`` shows;
- a plan made with ``audit``/``plan``/``approve`` and applied with ``purge --apply`` removes
  exactly the planned messages through ``postsuper -d`` (``postqueue -j`` agrees afterwards),
  keeps every other byte, and skips the messages changed after planning.

Each test submits its own messages (senders unique to the run) and looks only at them: the
server is shared with the other Postfix modules.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from mqforensics.services import postfix as server
from mqforensics.systems.postfix.files import FILE_COLUMNS, read_files
from mqforensics.systems.postfix.queue_dir import QueueDir, list_queue_dir
from mqforensics.systems.postfix.records import read_records

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RUN = uuid.uuid4().hex[:8]


def message(subject: str, body: str = "Hello.\n") -> bytes:
    return f"Subject: {subject}\nFrom: sender@example.org\n\n{body}".encode()


def submit_deferred(postfix: dict, mails: list[tuple[str, list[str]]]) -> list[str]:
    """Submit each (sender, recipients) and wait until the queue manager deferred them all."""
    ids = [server.submit(postfix, s, r, message(f"{RUN} {i}")) for i, (s, r) in enumerate(mails)]
    server.wait_deferred(postfix, ids, timeout=60)
    return ids


def rows_of(postfix: dict, queue_ids: set[str]) -> dict[str, dict]:
    """The reader's rows (`files.FILES`) of the messages and logs of `queue_ids`, by path."""
    queue_dir = QueueDir("live", str(Path(postfix["queue_directory"]).resolve()))
    listed = [f for f in list_queue_dir(queue_dir) if f.name in queue_ids]
    return {r[3]: dict(zip(FILE_COLUMNS, r, strict=True)) for r in read_files(queue_dir, listed)}


def postcat_offsets(postfix: dict, path: Path) -> dict[str, list[tuple[int, str]]]:
    """postcat -o's records of a queue file: record name -> [(offset, value)]."""
    found: dict[str, list[tuple[int, str]]] = {}
    for line in server.postcat(postfix, path, "-o", "-e").splitlines():
        match = re.match(r"\s*(\d+) (\w+): (.*)$", line)
        if match:
            found.setdefault(match.group(2), []).append((int(match.group(1)), match.group(3)))
    return found


def test_reader_equals_postqueue_and_postcat(postfix: dict) -> None:
    senders = [f"alice-{RUN}@example.org", f"bob-{RUN}@example.com", ""]
    ids = submit_deferred(postfix, [
        (senders[0], ["carol@example.net", "dave@example.org"]),
        (senders[1], ["erin@example.com"]),
        (senders[2], ["frank@example.net"]),  # a bounce: the null sender
    ])  # fmt: skip
    server.hold(postfix, ids[1])
    listed = {m["queue_id"]: m for m in server.postqueue_json(postfix) if m["queue_id"] in ids}
    assert set(listed) == set(ids)
    rows = rows_of(postfix, set(ids))
    messages = {r["queue_id"]: r for r in rows.values() if r["kind"] == "message"}
    logs = {r["queue_id"]: r for r in rows.values() if r["kind"] == "log"}
    assert set(messages) == set(ids)
    for queue_id, shown in listed.items():
        row = messages[queue_id]
        assert row["queue"] == shown["queue_name"]
        assert int(row["arrival"].timestamp()) == shown["arrival_time"]
        assert row["content_size"] == shown["message_size"]
        assert (row["sender"] or "MAILER-DAEMON") == shown["sender"]
        assert row["forced_expire"] is shown["forced_expire"]
        assert (row["ready"], row["complete"], row["damage"]) == (True, True, None)
        pending = [r[0] for r in row["recipients"] if r[2] == "pending"]
        # postqueue lists the defer log's recipients first, then the file's R records, once each.
        assert sorted(pending) == sorted(r["address"] for r in shown["recipients"])
        reasons = {e[0]: e[5] for e in logs[queue_id]["log_entries"]}
        assert reasons == {r["address"]: r["delay_reason"] for r in shown["recipients"]}
        # Every recipient record where postcat -o shows it, with its value.
        records = postcat_offsets(postfix, Path(row["path"]))
        assert [(r[3], r[0]) for r in row["recipients"]] == records["recipient"]
        arrival = records["message_arrival_time"][0][0]
        assert read_records(Path(row["path"]).read_bytes()).records[1].offset == arrival
    assert messages[ids[1]]["queue"] == "hold"
    assert messages[ids[2]]["sender"] == ""


def _backdate(path: Path, days: int) -> None:
    """Rewrite the arrival (T) and create_time of a queue file `days` earlier, in place."""
    data = path.read_bytes()
    records = read_records(data).records
    arrival = next(r for r in records if r.type == "T").data.split()[0]
    older = str(int(arrival) - days * 86400).encode()
    assert len(older) == len(arrival)
    path.write_bytes(data.replace(arrival, older))


def _postcat_error_offset(postfix: dict, path: Path) -> int:
    """The offset of the last record postcat -o printed before its read error, plus that
    record: where the damaged record starts (postcat names the damage, not its offset)."""
    result = subprocess.run(
        [str(server.POSTCAT), "-c", postfix["config_directory"], "-o", str(path)],
        capture_output=True, text=True, errors="replace", timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and "record read error" in result.stderr
    shown = [
        (int(m.group(1)), m.group(2))
        for line in result.stdout.splitlines()
        if (m := re.match(r"\s*(\d+) (\w+): ", line))
    ]
    return shown[-1][0]


def test_planted_damage_gives_exactly_the_planted_findings(postfix: dict, tmp_path: Path) -> None:
    mails = [(f"{who}-{RUN}@example.org", [f"to-{who}@example.net"])
             for who in ("trunc", "flip", "orphan", "old", "clean")]  # fmt: skip
    ids = submit_deferred(postfix, mails)
    truncated, flipped, orphan, old, clean = (server.queue_file(postfix, i) for i in ids)
    assert all(p is not None for p in (truncated, flipped, orphan, old, clean))
    records = {i: read_records(server.queue_file(postfix, i).read_bytes()).records for i in ids}
    # Truncation: the file ends 3 bytes into its first recipient record.
    first_rcpt = next(r for r in records[ids[0]] if r.type == "R").offset
    with open(truncated, "r+b") as handle:
        handle.truncate(first_rcpt + 3)
    # A flipped byte: the sender record's length byte gets its high bit.
    sender_at = next(r for r in records[ids[1]] if r.type == "S").offset
    data = bytearray(flipped.read_bytes())
    data[sender_at + 1] |= 0x80
    flipped.write_bytes(bytes(data))
    # An orphan log: the message file removed by hand, its defer log left.
    orphan.unlink()
    # An over-age deferred message: 30 days old.
    _backdate(old, 30)
    # A writer that died: a 0600 file in incoming, no end record, two hours old.
    incomplete = Path(postfix["queue_directory"]) / "incoming" / f"{ids[4][:5]}F{RUN[:4].upper()}"
    incomplete = incomplete.with_name(re.sub("[^0-9A-F]", "A", incomplete.name))
    incomplete.write_bytes(clean.read_bytes()[:-2])
    incomplete.chmod(0o600)
    two_hours_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).timestamp()
    os.utime(incomplete, (two_hours_ago, two_hours_ago))

    out = tmp_path / "audit"
    result = _cli("audit", "postfix", "--queue-dir", postfix["queue_directory"],
                  "--config-dir", postfix["config_directory"], "--out", str(out))  # fmt: skip
    assert result.returncode == 1, result.stderr  # damage is an error
    ours = set(ids) | {incomplete.name}
    found = {
        (f["check"], Path(f["subject"]).name, f["detail"].get("offset"))
        for f in json.loads((out / "findings.raw.json").read_text())
        if Path(f["subject"]).name in ours
    }
    queue = Path(postfix["queue_directory"]).resolve()
    assert found == {
        ("damaged_queue_file", ids[0], first_rcpt),
        ("damaged_queue_file", ids[1], sender_at),
        ("orphan_log", ids[2], None),
        ("expired_in_queue", ids[3], None),
        ("retention_exceeded", ids[3], None),
        ("incomplete_queue_file", incomplete.name, len(clean.read_bytes()) - 2),
    }
    # Postfix's postcat stops at the same records (the last one it prints precedes them).
    assert _postcat_error_offset(postfix, truncated) < first_rcpt
    assert _postcat_error_offset(postfix, flipped) < sender_at
    assert queue.is_dir()
    incomplete.unlink()  # leave the shared queue without a dead writer's file


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "mqforensics", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _digests(root: Path, queue_ids: list[str]) -> dict[Path, str]:
    """The SHA-256 of every file of `queue_ids` (messages and logs) under `root`."""
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file() and p.name in queue_ids}  # fmt: skip


def test_plan_and_purge_through_postsuper(postfix: dict, tmp_path: Path) -> None:
    subject = f"erase-{RUN}@example.net"
    ids = submit_deferred(postfix, [
        (f"a-{RUN}@example.org", [subject]),  # erased
        (f"b-{RUN}@example.org", ["keep@example.com", subject]),  # erased
        (f"c-{RUN}@example.org", [subject]),  # held after planning: skipped
        (f"d-{RUN}@example.org", [subject]),  # touched after planning: skipped
        (f"e-{RUN}@example.org", ["keep@example.com"]),  # not selected
    ])  # fmt: skip
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\n\n[[rules]]\nid = "erase"\nkind = "erase_subject"\n'
        f'legal_basis = "GDPR Art. 17"\naddresses = ["{subject}"]\nsystems = ["postfix"]\n'
    )
    audit, plan = tmp_path / "audit", tmp_path / "plan"
    result = _cli("audit", "postfix", "--queue-dir", postfix["queue_directory"], "--config-dir",
                  postfix["config_directory"], "--erasure-policy", str(policy), "--out",
                  str(audit))  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    result = _cli("plan", "--findings", str(audit), "--policy", str(policy), "--out", str(plan))
    assert result.returncode == 0, result.stderr
    actions = [json.loads(line) for line in (plan / "actions.jsonl").read_text().splitlines()]
    assert sorted(a["target"]["queue_id"] for a in actions) == sorted(ids[:4])
    assert {a["kind"] for a in actions} == {"postfix.postsuper_delete"}
    assert _cli("approve", str(plan), "--by", "tests").returncode == 0

    server.hold(postfix, ids[2])
    touched = server.queue_file(postfix, ids[3])
    os.utime(touched, (touched.stat().st_atime, touched.stat().st_mtime + 60))
    queue = Path(postfix["queue_directory"]).resolve()
    planned = {server.queue_file(postfix, i) for i in ids[:2]}
    planned |= {server.log_file(postfix, i) for i in ids[:2]}
    before = _digests(queue, ids)

    dry = _cli("purge", str(plan))
    assert dry.returncode == 0, dry.stderr
    assert _digests(queue, ids) == before  # a dry run changes nothing
    applied = _cli("purge", str(plan), "--apply")
    assert applied.returncode in (0, 1), applied.stderr
    journal = [json.loads(line) for line in (plan / "journal.jsonl").read_text().splitlines()]
    seqs = {a["seq"]: a["target"]["queue_id"] for a in actions}
    outcome = {seqs[r["seq"]]: r["event"] for r in journal if r["event"] in ("done", "skipped")}
    assert outcome == {ids[0]: "done", ids[1]: "done", ids[2]: "skipped", ids[3]: "skipped"}
    reasons = {seqs[r["seq"]]: r["reason"] for r in journal if r["event"] == "skipped"}
    assert reasons[ids[2]].startswith(f"moved to hold/{ids[2]}")
    assert reasons[ids[3]] == "modified since the plan (mtime differs)"

    remaining = {m["queue_id"] for m in server.postqueue_json(postfix)}
    assert not remaining & set(ids[:2])
    assert set(ids[2:]) <= remaining
    after = _digests(queue, ids)
    assert set(before) - set(after) == planned
    assert all(after[p] == d for p, d in before.items() if p not in planned)
