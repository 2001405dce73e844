"""The harness's real Postfix (Debian 12, 3.7): mail submitted to it defers and stays queued.

Every test uses its own senders (a random tag) and looks only at the queue ids it got, so the
tests do not depend on each other's messages on the shared instance.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from mqforensics.errors import ServiceStartError
from mqforensics.services import postfix as postfix_service
from mqforensics.services.harness import SESSIONS_BASE, Harness
from mqforensics.services.process import port_open
from tests.server_probes import all_pids, cmdline, listening_addresses

pytestmark = pytest.mark.integration


def _message(sender: str, recipients: list[str], subject: str) -> bytes:
    return (
        f"From: {sender or 'MAILER-DAEMON'}\nTo: {', '.join(recipients)}\n"
        f"Subject: {subject}\n\nA test message.\n"
    ).encode()


@pytest.fixture(scope="module")
def queued(postfix) -> dict[str, dict]:
    """Three deferred messages (one with two recipients, one through smtpd), by queue id:
    their sender, recipients and the postqueue -j object once deferred."""
    tag = uuid.uuid4().hex[:8]
    wanted = [
        (f"alice-{tag}@example.org", ["bob@example.net", "carol@example.com"], "sendmail"),
        (f"dave-{tag}@example.com", ["erin@example.net"], "sendmail"),
        (f"frank-{tag}@example.net", ["grace@example.org"], "smtp"),
    ]
    sent: dict[str, dict] = {}
    for sender, recipients, how in wanted:
        submit = postfix_service.submit if how == "sendmail" else postfix_service.submit_smtp
        queue_id = submit(postfix, sender, recipients, _message(sender, recipients, how))
        sent[queue_id] = {"sender": sender, "recipients": recipients}
    listed = postfix_service.wait_deferred(postfix, sent)
    for queue_id, entry in listed.items():
        sent[queue_id]["listed"] = entry
    return sent


def test_submitted_mail_is_deferred_with_a_reason(postfix, queued):
    assert postfix["version"].startswith("3.7")
    assert len(queued) == 3
    listed = {e["queue_id"]: e for e in postfix_service.postqueue_json(postfix)}
    for queue_id, sent in queued.items():
        entry = listed[queue_id]
        assert entry["queue_name"] == "deferred"
        assert entry["sender"] == sent["sender"]
        assert sorted(r["address"] for r in entry["recipients"]) == sorted(sent["recipients"])
        for recipient in entry["recipients"]:
            # The relayhost is a loopback port nothing listens on.
            reason = recipient["delay_reason"]
            assert f":{postfix['relayhost_port']}: Connection refused" in reason, reason
        assert entry["message_size"] > 0 and entry["arrival_time"] <= time.time()


def test_deferred_files_and_their_defer_logs(postfix, queued):
    queue = Path(postfix["queue_directory"])
    for queue_id, sent in queued.items():
        # Short queue ids (upper-case hex); deferred/ and defer/ are hashed one level deep by the
        # id's first character (hash_queue_names, hash_queue_depth 1).
        assert queue_id.isalnum() and queue_id == queue_id.upper()
        message = queue / "deferred" / queue_id[0] / queue_id
        log = queue / "defer" / queue_id[0] / queue_id
        assert postfix_service.queue_file(postfix, queue_id) == message
        assert postfix_service.log_file(postfix, queue_id) == log
        stat = message.stat()
        assert stat.st_mode & 0o777 == 0o700  # ready (cleanup: 0600 while writing)
        # qmgr sets a deferred file's time to its next attempt: an hour on (minimal_backoff_time).
        arrival = sent["listed"]["arrival_time"]
        assert arrival + 3500 < stat.st_mtime < arrival + 3700
        text = log.read_text()
        for recipient in sent["recipients"]:
            assert f"recipient={recipient}\n" in text
        assert text.count("action=delayed\n") == len(sent["recipients"])
        assert "status=4.4.1\n" in text


def test_postcat_shows_the_envelope_and_names_only_the_test_host(postfix, queued):
    for queue_id, sent in queued.items():
        out = postfix_service.postcat(postfix, queue_id, "-o")
        assert f"sender: {sent['sender']}\n" in out
        assert "by mqforensics-postfix.test (Postfix" in out
        assert re.search(rf"\sid {queue_id}\b", out)  # in the Received: header
    via_smtp = next(q for q, s in queued.items() if s["sender"].startswith("frank-"))
    envelope = postfix_service.postcat(postfix, via_smtp, "-e")
    assert "log_helo_name=client.example.net" in envelope
    assert "log_client_address=127.0.0.1" in envelope


def test_hold_moves_a_message_to_the_hold_queue(postfix):
    sender = f"henry-{uuid.uuid4().hex[:8]}@example.com"
    queue_id = postfix_service.submit(
        postfix, sender, ["ivan@example.net"], _message(sender, ["ivan@example.net"], "hold")
    )
    postfix_service.wait_deferred(postfix, [queue_id])
    postfix_service.hold(postfix, queue_id)
    entry = {e["queue_id"]: e for e in postfix_service.postqueue_json(postfix)}[queue_id]
    assert entry["queue_name"] == "hold"
    assert entry["sender"] == sender
    queue = Path(postfix["queue_directory"])
    assert postfix_service.queue_file(postfix, queue_id) == queue / "hold" / queue_id  # no hash
    assert (queue / "defer" / queue_id[0] / queue_id).is_file()  # the log stays
    # postsuper exits 0 when nothing matched; `hold` reads its count.
    again = postfix_service.postsuper(postfix, "-h", queue_id)
    assert again.returncode == 0 and "Placed on hold: 0 messages" in again.stderr
    with pytest.raises(ServiceStartError, match="held nothing"):
        postfix_service.hold(postfix, queue_id)


def test_smtp_is_bound_to_127_0_0_1_only(postfix):
    assert listening_addresses(postfix["port"]) == {"0100007F"}  # 127.0.0.1, no IPv6
    assert postfix_service.smtp_ready(postfix["port"])
    assert not port_open(postfix["port"], host="127.0.0.2")
    assert not port_open(postfix["relayhost_port"])


def test_stop_leaves_no_postfix_process():
    """A private instance: SIGTERM to master's group ends master and all its children."""
    SESSIONS_BASE.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="postfix-stop-", dir=SESSIONS_BASE))
    root.chmod(0o755)  # master opens data_directory/master.lock as `postfix`
    harness = Harness(root)
    try:
        info = harness.ensure("postfix")
        server = harness.server_dir("postfix")
        sender = "judy@example.org"
        queue_id = postfix_service.submit(
            info, sender, ["ken@example.com"], _message(sender, ["ken@example.com"], "stop")
        )
        postfix_service.wait_deferred(info, [queue_id])
        members = postfix_service.instance_pids(info)
        # master, and at least pickup, qmgr, postlogd, cleanup, smtp, bounce (defer)
        assert int(info["pid"]) in members and len(members) >= 5, members
        assert Harness(root).running("postfix") is not None  # the probe: reused
        assert harness.stop("postfix")
        assert harness.running("postfix") is None
        deadline = time.monotonic() + 5
        while postfix_service.instance_pids(info) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert postfix_service.instance_pids(info) == []
        assert not [pid for pid in all_pids() if str(server.path) in cmdline(pid)]
        assert not postfix_service.smtp_ready(info["port"])
    finally:
        harness.stop_all(["postfix"])
        shutil.rmtree(root, ignore_errors=True)
