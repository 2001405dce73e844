"""Messages with data subjects placed in each position an erasure search must find, and decoys
it must not, for the Postfix content search (unit tests write them into queue files with
`queue_file`; the integration test has the real Postfix write them).

Three subjects, named by the policy: ``carol@example.net``; ``dave@xn--bcher-kva.example``
(the policy's ASCII form; the mail writes ``dave@bücher.example``), ``erin@bücher.example``
(the policy's Unicode form; the mail writes ``erin@xn--bcher-kva.example``). Each `Case` says
exactly which (subject, where) pairs a search finds at depth headers and at depth full, and
which places are unreadable at depth full.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from mqforensics.addresses import address_forms
from mqforensics.content_search import Searched
from mqforensics.subjects import keyed

CAROL, DAVE, ERIN = "carol@example.net", "dave@xn--bcher-kva.example", "erin@bücher.example"
SUBJECTS = {"carol": CAROL, "dave": DAVE, "erin": ERIN}
OTHER, TEAM = "olga@example.org", "team@example.org"
LIST_BOUNCE = "list-bounces@lists.example.org"
KEY = b"placed-subjects-key-0123456789ab"


def hashes(key: bytes = KEY) -> dict[str, str]:
    """Every keyed hash of every form of each subject (as a policy holds them) -> its name."""
    return {
        keyed(hashlib.sha256(form.encode()).hexdigest(), key): name
        for name, address in SUBJECTS.items()
        for form in address_forms(address)
    }


def searched(depth: str, key: bytes = KEY) -> Searched:
    every = frozenset(hashes(key))
    return Searched(key, every, every if depth == "full" else frozenset())


@dataclass(frozen=True)
class Case:
    name: str
    sender: str
    recipients: tuple[str, ...]
    headers: str  # header lines (LF), without the blank line
    body: str
    at_headers: frozenset[tuple[str, str]] = frozenset()
    only_full: frozenset[tuple[str, str]] = frozenset()  # also found at depth full
    unreadable_full: frozenset[str] = frozenset()  # places unreadable at depth full
    smtputf8: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def message(self, marker: str = "") -> bytes:
        """The message as submitted; `marker` makes its Subject and Message-ID unique."""
        head = f"Subject: {self.name} {marker}\nDate: Tue, 01 Dec 2026 10:00:00 +0000\n"
        head += f"Message-ID: <{self.name}.{marker or 'x'}@mqf.example>\n" + self.headers
        return (head + "\n" + self.body).encode()

    @property
    def at_full(self) -> frozenset[tuple[str, str]]:
        return self.at_headers | self.only_full


def _pairs(*pairs: tuple[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(pairs)


def _b64(text: str) -> str:
    return base64.encodebytes(text.encode()).decode()


PLAIN = f"From: Olga <{OTHER}>\nTo: {TEAM}\n"
SMIME = (
    "MIME-Version: 1.0\n"
    'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"\n'
    "Content-Transfer-Encoding: base64\n"
    'Content-Disposition: attachment; filename="smime.p7m"\n'
)
SMIME_BODY = _b64("\x30\x82\x01\x0a" + "enveloped-data-that-is-not-text " * 4)
BOUNDARY = "=-=boundary-=-"

CASES: tuple[Case, ...] = (
    Case("envelope_sender", CAROL, (OTHER,), PLAIN, "Hello.\n",
         at_headers=_pairs(("carol", "envelope"))),
    Case("envelope_recipient", OTHER, (CAROL,), PLAIN, "Hello.\n",
         at_headers=_pairs(("carol", "envelope"))),
    # Mailing-list traffic: the envelope sender is the list's bounce address.
    Case("list_from", LIST_BOUNCE, (OTHER,), f"From: Carol <{CAROL}>\nTo: {TEAM}\n", "Hi all.\n",
         at_headers=_pairs(("carol", "header:from"))),
    Case("reply_to", OTHER, (TEAM,), PLAIN + f"Reply-To: {CAROL}\n", "Hello.\n",
         at_headers=_pairs(("carol", "header:reply-to"))),
    Case("sender_field", OTHER, (TEAM,), PLAIN + f"Sender: Carol <{CAROL}>\n", "Hello.\n",
         at_headers=_pairs(("carol", "header:sender"))),
    Case("received_for", OTHER, (TEAM,),
         "Received: from mx.example.org (mx.example.org [192.0.2.1])\n"
         "\tby relay.example.org (Postfix) with ESMTP id 4ABCD\n"
         f"\tfor <{CAROL}>; Tue, 01 Dec 2026 09:59:00 +0000\n" + PLAIN, "Hello.\n",
         at_headers=_pairs(("carol", "header:received"))),
    Case("delivered_to", OTHER, (TEAM,), f"Delivered-To: {CAROL}\n" + PLAIN, "Hello.\n",
         at_headers=_pairs(("carol", "header:delivered-to"))),
    # The address only in an RFC 2047 encoded display name.
    Case("encoded_name", LIST_BOUNCE, (OTHER,),
         f"From: =?utf-8?q?carol=40example=2Enet_via_list?= <{LIST_BOUNCE}>\nTo: {TEAM}\n",
         "Hello.\n", at_headers=_pairs(("carol", "header:from"))),
    Case("text_body", OTHER, (TEAM,), PLAIN, f"Please write to {CAROL} instead.\n",
         only_full=_pairs(("carol", "body"))),
    Case("attachment", OTHER, (TEAM,),
         PLAIN + f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{BOUNDARY}"\n',
         f"--{BOUNDARY}\nContent-Type: text/plain\n\nSee the attached list.\n"
         f"--{BOUNDARY}\nContent-Type: text/csv; name=\"contacts.csv\"\n"
         "Content-Transfer-Encoding: base64\n"
         "Content-Disposition: attachment; filename=\"contacts.csv\"\n\n"
         + _b64(f"name,mail\nCarol,{CAROL}\n") + f"--{BOUNDARY}--\n",
         only_full=_pairs(("carol", "attachment"))),
    Case("nested_message", OTHER, (TEAM,),
         PLAIN + f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{BOUNDARY}"\n',
         f"--{BOUNDARY}\nContent-Type: text/plain\n\nForwarded below.\n"
         f"--{BOUNDARY}\nContent-Type: message/rfc822\n\n"
         f"From: Carol <{CAROL}>\nTo: {OTHER}\nSubject: inner\n\nInner text.\n"
         f"--{BOUNDARY}--\n",
         only_full=_pairs(("carol", "attachment"))),
    # Never a match: a longer local part, a longer domain, message ids holding the address.
    Case("decoys", OTHER, (TEAM,),
         PLAIN + f"Cc: malice@example.net, {CAROL}.evil.org\nIn-Reply-To: <{CAROL}>\n"
         f"References: <{CAROL}> <x.{CAROL}>\n",
         f"Not malice@example.net, nor {CAROL}.evil.org, nor mcarol@example.net.\n"),
    Case("mixed_case", OTHER, ("Carol@EXAMPLE.net",), PLAIN + "Cc: CAROL@Example.Net\n",
         "Hello.\n", at_headers=_pairs(("carol", "envelope"), ("carol", "header:cc"))),
    # SMTPUTF8: each subject in the IDNA form its policy does not name.
    Case("idna_envelope", "dave@bücher.example", ("erin@xn--bcher-kva.example",),
         PLAIN, "Hello.\n", smtputf8=True,
         at_headers=_pairs(("dave", "envelope"), ("erin", "envelope"))),
    Case("idna_headers", OTHER, (TEAM,),
         "From: Olga <olga@example.org>\nTo: Erin <erin@xn--bcher-kva.example>\n"
         "Cc: Dave <dave@bücher.example>\n", "Hello.\n", smtputf8=True,
         at_headers=_pairs(("erin", "header:to"), ("dave", "header:cc"))),
    Case("qp_soft_break", OTHER, (TEAM,),
         PLAIN + "MIME-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\n"
         "Content-Transfer-Encoding: quoted-printable\n",
         "Please write to carol@exam=\nple.net about it.\n",
         only_full=_pairs(("carol", "body"))),
    Case("base64_body", OTHER, (TEAM,),
         PLAIN + "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n"
         "Content-Transfer-Encoding: base64\n", _b64(f"Write to {CAROL}.\n"),
         only_full=_pairs(("carol", "body"))),
    # Encrypted: unreadable at depth full; the envelope still searched.
    Case("smime_to_subject", OTHER, (CAROL,), PLAIN + SMIME, SMIME_BODY,
         at_headers=_pairs(("carol", "envelope")), unreadable_full=frozenset({"attachment"})),
    Case("smime", OTHER, (TEAM,), PLAIN + SMIME, SMIME_BODY,
         unreadable_full=frozenset({"attachment"})),
)  # fmt: skip
BY_NAME = {case.name: case for case in CASES}


def record(kind: str, data: bytes) -> bytes:
    """One queue-file record (src/global/record.c): type, length in 7-bit groups, data."""
    length, encoded = len(data), bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return kind.encode() + bytes(encoded) + data


def content_records(message: bytes, split: int = 40) -> bytes:
    """A message's lines as cleanup writes them: ``N`` per line, a line longer than `split`
    bytes cut into ``L`` records first (Postfix cuts at line_length_limit, 2048)."""
    out = b""
    lines = message.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in lines:
        while len(line) > split:
            out += record("L", line[:split])
            line = line[split:]
        out += record("N", line)
    return out


def queue_file(case: Case, marker: str = "", split: int = 40) -> bytes:
    """A queue file of `case` as Postfix's cleanup lays it out (envelope, ``M``, the message,
    ``X``, ``E``)."""
    rcpts = b"".join(
        record("A", f"dsn_orig_rcpt=rfc822;{r}".encode()) + record("O", r.encode())
        + record("R", r.encode())
        for r in case.recipients
    )  # fmt: skip
    content = content_records(case.message(marker), split)
    head = record("T", b"1764583200 0") + record("A", b"create_time=1764583200")
    head += record("S", case.sender.encode()) + rcpts
    # C: content size (M's data to X), where M's data starts, recipients; fixed width, so the
    # record's own length is known before its numbers.
    c_length = len(record("C", b"%15d %15d %15d %15d %15d %15d" % (0, 0, 0, 0, 0, 0)))
    data_at = c_length + len(head) + len(record("M", b""))
    size = b"%15d %15d %15d %15d %15d %15d" % (len(content), data_at, len(case.recipients), 0,
                                               len(content), 0)  # fmt: skip
    return (
        record("C", size) + head + record("M", b"") + content + record("X", b"")
        + record("E", b"")
    )  # fmt: skip
