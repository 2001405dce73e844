"""Messages with data subjects placed in known positions, queued by the REAL python-slimta 5.0.5.

Runs under the slimta runtime (`mqforensics.services.slimta_runtime`), never under the
product's interpreter. Each message is parsed by slimta's own ``Envelope.parse`` (headers into
an ``email.message.Message`` with the SMTP policy, the rest as the body bytes) and stored by
slimta's own storage, so the bytes the product reads are exactly what slimta keeps:

    python content_writer.py disk ENV_DIR META_DIR [FLAT_DIR]  > roles.json
    SLIMTA_REDIS_PASSWORD=... python content_writer.py redis HOST PORT PREFIX > roles.json

The output maps each role (below) to the id slimta gave it. With FLAT_DIR, each message's
``Envelope.flatten()`` (what slimta's relays send) is written there as ``<role>.eml``.

Subjects (what an erasure policy asks for): ``alice@example.com``, ``bob@example.com``,
``carol@bücher.example`` (the policy gives it as ``carol@xn--bcher-kva.example``) and
``dave@xn--bcher-kva.example`` (the policy gives ``dave@bücher.example``). Where each role puts
them is in the role's comment; the tests hold the expected (subject, where) pairs written by
hand from these comments, never from a run of the product.
"""

import base64
import json
import os
import sys
import time

from slimta.envelope import Envelope

NOW = time.time()
OTHER = "noreply@example.org"  # an envelope address that is no subject
DATE = "Date: Mon, 01 Jan 2024 10:00:00 +0000\r\n"


def message(sender, recipients, head, body=b"Nothing personal here.\r\n"):
    env = Envelope(sender, list(recipients))
    data = head.encode("utf-8") if isinstance(head, str) else head
    env.parse(data + b"\r\n" + body)
    env.client = {"ip": "192.0.2.10", "host": "client.example", "name": "helo.example",
                  "protocol": "ESMTPS", "auth": None}  # fmt: skip
    env.receiver = "mx.mqforensics.test"
    env.timestamp = NOW
    return env


def plain(extra=""):
    return f"From: Robot <robot@example.org>\r\nTo: x@example.org\r\n{extra}Subject: hi\r\n{DATE}"


def roles():
    """role -> Envelope (see the module docstring for the subjects)."""
    made = {}
    # alice: envelope sender.
    made["env_sender"] = message("alice@example.com", ["x@example.org"], plain())
    # bob: envelope recipient.
    made["env_rcpt"] = message(OTHER, ["x@example.org", "bob@example.com"], plain())
    # alice: From of list traffic whose envelope sender is the list's bounce address.
    made["list_from"] = message(
        "list-bounces+x=example.org@lists.example.net", ["x@example.org"],
        "From: Alice <alice@example.com>\r\nTo: list@lists.example.net\r\n"
        "List-Id: <list.lists.example.net>\r\nSubject: hello list\r\n" + DATE,
    )  # fmt: skip
    # bob: Reply-To.
    made["reply_to"] = message(OTHER, ["x@example.org"], plain("Reply-To: bob@example.com\r\n"))
    # alice: Sender.
    made["sender_header"] = message(
        OTHER, ["x@example.org"], plain("Sender: Alice <alice@example.com>\r\n")
    )
    # bob: Received ... for <bob@example.com> (folded over two lines).
    made["received_for"] = message(
        OTHER, ["x@example.org"],
        "Received: from mail.example.net (mail.example.net [192.0.2.7])\r\n"
        "\tby mx.mqforensics.test with ESMTPS id 4Xyz for <bob@example.com>;\r\n"
        "\tMon, 01 Jan 2024 10:00:00 +0000\r\n" + plain(),
    )  # fmt: skip
    # alice: Delivered-To.
    made["delivered_to"] = message(
        OTHER, ["x@example.org"], "Delivered-To: alice@example.com\r\n" + plain()
    )
    # bob: only inside an RFC 2047 encoded display name (the address itself is someone else's).
    name = base64.b64encode("Bob Müller (bob@example.com)".encode()).decode()
    made["encoded_name"] = message(
        OTHER, ["x@example.org"], plain(f"Cc: =?utf-8?b?{name}?= <assistant@example.org>\r\n")
    )
    # bob: the text body only (found in full).
    made["text_body"] = message(
        OTHER, ["x@example.org"], plain(),
        b"Hello,\r\nplease write to Bob at bob@example.com from now on.\r\n",
    )  # fmt: skip
    # alice: a base64 text attachment only (found in full).
    attached = base64.encodebytes(b"Contact list:\nalice@example.com\n").replace(b"\n", b"\r\n")
    made["attachment"] = message(
        OTHER, ["x@example.org"],
        plain('MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b1"\r\n'),
        b"--b1\r\nContent-Type: text/plain\r\n\r\nSee the attached file.\r\n"
        b'--b1\r\nContent-Type: text/plain; name="contacts.txt"\r\n'
        b'Content-Disposition: attachment; filename="contacts.txt"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n" + attached + b"--b1--\r\n",
    )  # fmt: skip
    # bob (its From) and alice (its body): a forwarded message/rfc822 only (found in full).
    made["nested"] = message(
        OTHER, ["x@example.org"],
        plain('MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b2"\r\n'),
        b"--b2\r\nContent-Type: text/plain\r\n\r\nForwarded below.\r\n"
        b"--b2\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\n"
        b"From: Bob <bob@example.com>\r\nTo: y@example.org\r\nSubject: inner\r\n\r\n"
        b"Ask alice@example.com.\r\n--b2--\r\n",
    )  # fmt: skip
    # No subject: decoys that contain a subject's address as a substring, or name a message.
    made["decoys"] = message(
        "malice@example.com", ["alice@example.com.evil.org", "bob+news@example.com"],
        "From: Mallory <malice@example.com>\r\nTo: xalice@example.com, bob@example.com.evil.org\r\n"
        "Message-ID: <alice@example.com>\r\nIn-Reply-To: <bob@example.com>\r\n"
        "References: <alice@example.com> <bob@example.com>\r\nSubject: decoys\r\n" + DATE,
        b"Write to malice@example.com or bob@example.com.evil.org, not carol@example.com.\r\n",
    )  # fmt: skip
    # alice (To, envelope recipient) and bob (envelope sender), in mixed case.
    made["mixed_case"] = message(
        "Bob@EXAMPLE.com", ["ALICE@Example.Com"],
        "From: Bob <Bob@EXAMPLE.com>\r\nTo: ALICE@Example.Com\r\nSubject: case\r\n" + DATE,
    )  # fmt: skip
    # carol, written with the Unicode domain (SMTPUTF8): envelope recipient and raw UTF-8 To.
    made["idna_unicode"] = message(
        OTHER, ["carol@bücher.example"],
        "From: Robot <robot@example.org>\r\nTo: Carol <carol@bücher.example>\r\n"
        "Subject: smtputf8\r\n" + DATE,
    )  # fmt: skip
    # dave, written with the ASCII (punycode) domain: envelope sender and From.
    made["idna_ascii"] = message(
        "dave@xn--bcher-kva.example", ["x@example.org"],
        "From: Dave <dave@xn--bcher-kva.example>\r\nTo: x@example.org\r\nSubject: ace\r\n" + DATE,
    )  # fmt: skip
    # bob: in a quoted-printable body, a soft line break inside the address (found in full).
    made["qp_soft_break"] = message(
        OTHER, ["x@example.org"],
        plain("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
              "Content-Transfer-Encoding: quoted-printable\r\n"),
        b"Gr=C3=BC=C3=9Fe, write to bob@exa=\r\nmple.com please.\r\n",
    )  # fmt: skip
    # alice: a base64 text body (found in full).
    encoded = base64.encodebytes(b"Reply to alice@example.com.\n").replace(b"\n", b"\r\n")
    made["base64_body"] = message(
        OTHER, ["x@example.org"],
        plain("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
              "Content-Transfer-Encoding: base64\r\n"),
        encoded,
    )  # fmt: skip
    # No subject readable: an S/MIME enveloped body (unreadable in full).
    cipher = base64.encodebytes(os.urandom(96)).replace(b"\n", b"\r\n")
    made["smime"] = message(
        OTHER, ["x@example.org"],
        plain("MIME-Version: 1.0\r\nContent-Type: application/pkcs7-mime; "
              'smime-type=enveloped-data; name="smime.p7m"\r\n'
              "Content-Transfer-Encoding: base64\r\n"),
        cipher,
    )  # fmt: skip
    return made


def write_disk(env_dir, meta_dir, flat_dir=None):
    from slimta.diskstorage import DiskStorage

    store = DiskStorage(env_dir, meta_dir)
    ids = {}
    for role, env in roles().items():
        ids[role] = store.write(env, NOW)
        if flat_dir:
            header, body = env.flatten()
            with open(os.path.join(flat_dir, role + ".eml"), "wb") as f:
                f.write(header + body)
    return ids


def write_redis(host, port, prefix):
    from slimta.redisstorage import RedisStorage

    password = os.environ.get("SLIMTA_REDIS_PASSWORD") or None
    store = RedisStorage(host=host, port=int(port), password=password, prefix=prefix)
    return {role: store.write(env, NOW) for role, env in roles().items()}


def main(argv):
    if argv[1] == "disk":
        ids = write_disk(*argv[2:5])
    elif argv[1] == "redis":
        ids = write_redis(*argv[2:5])
    else:
        raise SystemExit(f"unknown store kind {argv[1]!r}")
    json.dump(ids, sys.stdout, indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv)
