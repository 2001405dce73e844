"""The content search of James's queued mails (`systems.james.content`) on a copy of the
bundled sample whose blobs hold two data subjects in every position a message can name them,
and decoys that must not match: the exact (subject, where) pairs of every row at depth
``headers`` and ``full``, the rows that could not be searched, and the plan made of them."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from email.message import EmailMessage
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqforensics.addresses import address_forms
from mqforensics.cli import main
from mqforensics.content_search import Searched
from mqforensics.retention.manifest import read_plan
from mqforensics.retention.policy import subject_hash
from mqforensics.subjects import keyed, read_key
from mqforensics.systems.james.content import BlobContent, search_content

SAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "james" / "sample"
DORA = "dora@example.net"
YANN = "yann@bücher.example"  # searched in both IDNA forms
CRLF = "\r\n"


def _headers(*lines: str) -> bytes:
    """A header blob as James writes it: each line ending in CRLF, then an empty line."""
    return "".join(line + CRLF for line in lines).encode("utf-8") + CRLF.encode()


BASE = ("Date: Tue, 03 Nov 2026 08:30:22 +0000", "Subject: planted")


def _plain(*lines: str, extra: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    return _headers(*BASE, "From: list@lists.example", "To: team@example.org", *extra), (
        CRLF.join(lines) + CRLF
    ).encode("utf-8")


def _split(message: EmailMessage) -> tuple[bytes, bytes]:
    raw = message.as_bytes(policy=message.policy.clone(linesep=CRLF))
    head, _, body = raw.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", body


def _multipart_with_attachment() -> tuple[bytes, bytes]:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.org", "b@example.org", "x"
    message.set_content("see the attached list")
    message.add_attachment(
        f"contacts:\n{DORA}\n".encode(), maintype="text", subtype="csv", filename="contacts.csv"
    )
    return _split(message)


def _nested_message() -> tuple[bytes, bytes]:
    inner = EmailMessage()
    inner["From"], inner["To"], inner["Subject"] = YANN, "c@example.org", "inner"
    inner.set_content("forwarded")
    outer = EmailMessage()
    outer["From"], outer["To"], outer["Subject"] = "a@example.org", "b@example.org", "Fwd"
    outer.set_content("forwarding")
    outer.add_attachment(inner)
    return _split(outer)


def _smime() -> tuple[bytes, bytes]:
    cipher = base64.encodebytes(bytes(range(256)) * 4).decode().replace("\n", CRLF)
    head = _headers(
        *BASE, "From: a@example.org", "To: b@example.org", "MIME-Version: 1.0",
        'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"',
        "Content-Transfer-Encoding: base64",
    )  # fmt: skip
    return head, cipher.encode()


def _base64_body() -> tuple[bytes, bytes]:
    head = _headers(
        *BASE, "From: a@example.org", "To: b@example.org", "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: base64",
    )  # fmt: skip
    return head, base64.encodebytes(f"Please reply to {DORA} today.\n".encode()).replace(
        b"\n", b"\r\n"
    )


def _qp_soft_break() -> tuple[bytes, bytes]:
    head = _headers(
        *BASE, "From: a@example.org", "To: b@example.org", "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: quoted-printable",
    )  # fmt: skip
    return head, b"Contact: dora@exam=\r\nple.net for details\r\n"


def _decoys() -> tuple[bytes, bytes]:
    return _plain(
        "not her: adora@example.net, dora@example.net.evil.org, dora+news@example.net,",
        "<dora@example.net.evil.org> and mail.dora@example.net",
        extra=(
            "Cc: adora@example.net, dora@example.net.evil.org, dora+news@example.net",
            "Message-ID: <dora@example.net>",
            "References: <dora@example.net> <yann@xn--bcher-kva.example>",
        ),
    )


def _zstd(data: bytes) -> bytes:
    return pa.Codec("zstd").compress(data, asbytes=True)


# Per live sample row (in the order of `LIVE_WITH_BLOBS`): its planted (header, body) blobs,
# and what each depth finds there: {(subject, where)} with D / Y for the two subjects.
PLANTED: list[tuple[str, tuple[bytes, bytes], set[tuple[str, str]], set[tuple[str, str]]]] = [
    (
        "list From, envelope sender the list's bounce",
        (
            _headers(
                *BASE,
                f"From: Dora <{DORA}>",
                "To: list@lists.example",
                "Sender: list-bounces@lists.example",
            ),
            b"hello\r\n",
        ),
        {("D", "header:from")},
        {("D", "header:from")},
    ),
    (
        "Reply-To",
        _plain("hi", extra=(f"Reply-To: Dora <{DORA}>",)),
        {("D", "header:reply-to")},
        {("D", "header:reply-to")},
    ),
    (
        "Sender, mixed case",
        _plain("hi", extra=("Sender: DORA@Example.NET",)),
        {("D", "header:sender")},
        {("D", "header:sender")},
    ),
    (
        "Received for",
        _plain(
            "hi",
            extra=(
                "Received: from mx.example.org by mail.example.net with ESMTP id 1",
                f"  for <{DORA}>; Tue, 03 Nov 2026 08:30:22 +0000",
            ),
        ),
        {("D", "header:received")},
        {("D", "header:received")},
    ),
    (
        "Delivered-To, IDNA ASCII form",
        _plain("hi", extra=("Delivered-To: yann@xn--bcher-kva.example",)),
        {("Y", "header:delivered-to")},
        {("Y", "header:delivered-to")},
    ),
    (
        "RFC 2047 display name, Unicode domain",
        _plain("hi", extra=("Cc: =?utf-8?q?yann=40b=C3=BCcher=2Eexample?= <noreply@example.org>",)),
        {("Y", "header:cc")},
        {("Y", "header:cc")},
    ),
    ("body", _plain("hello", f"write to {DORA.upper()} please"), set(), {("D", "body")}),
    ("attachment", _multipart_with_attachment(), set(), {("D", "attachment")}),
    ("nested message/rfc822", _nested_message(), set(), {("Y", "attachment")}),
    ("QP soft break in the address", _qp_soft_break(), set(), {("D", "body")}),
    ("base64 body", _base64_body(), set(), {("D", "body")}),
    ("decoys", _decoys(), set(), set()),
]
ZSTD_ROW, GZIP_ROW, SMIME_ROW = len(PLANTED), len(PLANTED) + 1, len(PLANTED) + 2
# A body blob whose header blob is gone: its raw bytes are searched, the MIME structure unknown.
UNKNOWN_STRUCTURE = {"where": "body", "reason": "header blob unreadable: MIME structure unknown"}
SMIME_UNREADABLE = [{"where": "body", "reason": "encrypted (S/MIME enveloped-data)"}]


def _sample_rows() -> tuple[list[dict], set[tuple[str, str]]]:
    rows = pq.read_table(SAMPLE / "enqueuedmailsv4.parquet").to_pylist()
    deleted = pq.read_table(SAMPLE / "deletedmailsv2.parquet").to_pylist()
    return rows, {(r["queuename"], r["enqueueid"]) for r in deleted}


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The sample with planted blobs: live rows with both blobs get a message each; two
    consumed rows get blobs holding a subject (one in an unreclaimed partition); one live row
    loses its header blob and one its body blob."""
    root = tmp_path_factory.mktemp("james-content")
    snapshot = root / "snapshot"
    shutil.copytree(SAMPLE, snapshot)
    blobs = snapshot / "blobs"
    rows, consumed = _sample_rows()
    live = [r for r in rows if (r["queuename"], r["enqueueid"]) not in consumed]
    whole = [r for r in live if (blobs / r["headerblobid"]).exists()
             and (blobs / r["bodyblobid"]).exists()]  # fmt: skip
    whole.sort(key=lambda r: r["enqueueid"])
    planted: dict[str, tuple[set, set, list, list]] = {}
    for row, (_, (head, body), at_headers, at_full) in zip(whole, PLANTED, strict=False):
        (blobs / row["headerblobid"]).write_bytes(head)
        (blobs / row["bodyblobid"]).write_bytes(body)
        planted[row["enqueueid"]] = (at_headers, at_full, [], [])
    extra = whole[len(PLANTED) :]
    # A zstd-compressed header blob and a gzip-compressed body blob: searched decompressed.
    head, body = _plain("hi", extra=(f"Sender: {DORA}",))
    (blobs / extra[0]["headerblobid"]).write_bytes(_zstd(head))
    (blobs / extra[0]["bodyblobid"]).write_bytes(body)
    planted[extra[0]["enqueueid"]] = ({("D", "header:sender")}, {("D", "header:sender")}, [], [])
    head, body = _plain(f"reach {DORA}")
    (blobs / extra[1]["headerblobid"]).write_bytes(head)
    (blobs / extra[1]["bodyblobid"]).write_bytes(gzip.compress(body))
    planted[extra[1]["enqueueid"]] = (set(), {("D", "body")}, [], [])
    head, body = _smime()
    (blobs / extra[2]["headerblobid"]).write_bytes(head)
    (blobs / extra[2]["bodyblobid"]).write_bytes(body)
    planted[extra[2]["enqueueid"]] = (set(), set(), [], SMIME_UNREADABLE)
    # A live row whose header blob is gone, another whose body blob is.
    (blobs / extra[3]["headerblobid"]).unlink()
    gone = [{"where": "headers", "reason": "blob missing"}]
    planted[extra[3]["enqueueid"]] = (set(), set(), gone, [*gone, UNKNOWN_STRUCTURE])
    (blobs / extra[4]["bodyblobid"]).unlink()
    planted[extra[4]["enqueueid"]] = (
        set(),
        set(),
        [],
        [{"where": "body", "reason": "blob missing"}],
    )
    # The sample's own live rows with a blob missing (its dangling_blob_ref mails).
    for row in live:
        header = (blobs / row["headerblobid"]).exists()
        body = (blobs / row["bodyblobid"]).exists()
        if row["enqueueid"] in planted or (header and body):
            continue
        at_headers = [] if header else [{"where": "headers", "reason": "blob missing"}]
        at_full = at_headers + (
            [{"where": "body", "reason": "blob missing"}]
            if not body
            else [UNKNOWN_STRUCTURE]
            if not header
            else []
        )
        planted[row["enqueueid"]] = (set(), set(), at_headers, at_full)
    # Consumed rows whose blobs James failed to delete, holding a subject in a header.
    kept = sorted((r for r in rows if (r["queuename"], r["enqueueid"]) in consumed),
                  key=lambda r: (r["timerangestart"], r["enqueueid"]))  # fmt: skip
    for row in (kept[0], kept[-1]):
        head, body = _plain("hi", extra=(f"Reply-To: {DORA}",))
        (blobs / row["headerblobid"]).write_bytes(head)
        (blobs / row["bodyblobid"]).write_bytes(body)
        planted[row["enqueueid"]] = (
            {("D", "header:reply-to")}, {("D", "header:reply-to")}, [], []
        )  # fmt: skip
    return snapshot, planted, {r["enqueueid"] for r in live}


def _policy(path: Path, search: str) -> Path:
    path.write_text(
        "version = 1\n[[rules]]\n"
        'id = "erase-2026-031"\nkind = "erase_subject"\n'
        'legal_basis = "GDPR Art. 17, request 2026-031"\n'
        f'addresses = ["{DORA}", "{YANN}"]\nsearch = "{search}"\n',
        encoding="utf-8",
    )
    return path


def _audit(snapshot: Path, out: Path, search: str) -> tuple[list[dict], dict[str, str], Path, Path]:
    policy = _policy(out.parent / f"policy-{search}.toml", search)
    blobs = str(snapshot / "blobs")
    argv = ["audit", "james", "--snapshot", str(snapshot), "--blob-dir", blobs,
            "--erasure-policy", str(policy), "--out", str(out)]  # fmt: skip
    assert main(argv) == 1
    key = read_key(out)
    names = {}
    for name, address in (("D", DORA), ("Y", YANN)):
        for form in address_forms(address):
            names[keyed(subject_hash(form), key)] = name
    return json.loads((out / "findings.raw.json").read_text()), names, policy, out


@pytest.fixture(scope="module")
def audits(copy, tmp_path_factory):
    snapshot = copy[0]
    root = tmp_path_factory.mktemp("james-content-audits")
    return {depth: _audit(snapshot, root / depth, depth) for depth in ("headers", "full")}


def _found(findings: list[dict], names: dict[str, str]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for f in findings:
        if f["check"] == "personal_data":
            pairs = {(names[h["subject"]], h["where"]) for h in f["detail"]["found"]}
            found[f["detail"]["enqueueid"]] = pairs
    return found


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_every_position_is_found_at_its_depth_and_no_decoy(copy, audits, depth):
    _, planted, _ = copy
    findings, names, _, _ = audits[depth]
    which = 0 if depth == "headers" else 1
    expected = {row: pairs[which] for row, pairs in planted.items() if pairs[which]}
    assert _found(findings, names) == expected
    for f in findings:
        if f["check"] == "personal_data":
            d = f["detail"]
            assert d["depth"] == depth
            assert d["subjects"] == sorted({h["subject"] for h in d["found"]})
            assert d["found"] == sorted(d["found"], key=lambda h: (h["subject"], h["where"]))
    text = json.dumps(findings).lower()
    assert "dora@" not in text and "yann@" not in text and "bcher" not in text


@pytest.mark.parametrize("depth", ["headers", "full"])
def test_what_could_not_be_searched_is_said(copy, audits, depth):
    _, planted, live = copy
    findings, _, _, _ = audits[depth]
    which = 2 if depth == "headers" else 3
    unreadable = {
        f["detail"]["enqueueid"]: f["detail"]["unreadable"]
        for f in findings
        if f["check"] == "unreadable_content"
    }
    assert unreadable == {row: p[which] for row, p in planted.items() if p[which]}
    for f in findings:
        if f["check"] == "unreadable_content":
            assert f["severity"] == "warning" and f["detail"]["depth"] == depth
            assert f["detail"]["enqueueid"] in live  # consumed mails' deleted blobs are gone


def test_the_plan_covers_content_found_rows_and_defers_unreadable_ones(copy, audits, tmp_path):
    _, _, live = copy
    findings, _, policy, audit_out = audits["full"]
    out = tmp_path / "plan"
    by_id = {f["id"]: f for f in findings}
    personal = {
        f["detail"]["enqueueid"]: f["id"] for f in findings if f["check"] == "personal_data"
    }
    unread = {f["detail"]["enqueueid"]: f for f in findings if f["check"] == "unreadable_content"}
    assert main(["plan", "--findings", str(audit_out), "--policy", str(policy),
                 "--out", str(out)]) == 0  # fmt: skip
    plan = read_plan(out)
    actions, deferred = list(plan.actions()), list(plan.deferred())
    cited = {i for item in [*actions, *deferred] for i in item.findings}
    # Every content-found row is acted on or deferred, citing its finding.
    assert set(personal.values()) <= cited
    for row, ident in personal.items():
        items = [x for x in [*actions, *deferred] if ident in x.findings]
        if row in live:
            assert [x.reason.split(":")[0] for x in items] == ["live mail"], row
        else:
            assert items and all("erase-2026-031" in x.rules for x in items), row
    # Rows that could not be searched: deferred, never deleted.
    unsearched = [d for d in deferred if d.reason.startswith("content could not be searched")]
    assert {d.target["enqueueid"] for d in unsearched} == set(unread) - set(personal)
    for d in unsearched:
        finding = unread[d.target["enqueueid"]]
        assert d.findings == (finding["id"],) and d.rules == ("erase-2026-031",)
        places = "; ".join(f"{u['where']}: {u['reason']}" for u in finding["detail"]["unreadable"])
        assert d.reason == f"content could not be searched: {places}"
    assert not any(by_id[i]["check"] == "unreadable_content" for a in actions for i in a.findings)


def test_one_mail_searched_in_a_local_copy(tmp_path):
    """`search_content` on one mail: headers alone at depth headers, both blobs at full."""
    head, body = _plain(f"to {DORA}", extra=(f"Reply-To: {DORA}",))
    (tmp_path / "h").write_bytes(gzip.compress(head))
    (tmp_path / "b").write_bytes(_zstd(body))
    (tmp_path / "junk").write_bytes(bytes(range(256)))
    (tmp_path / "bad").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    reader = BlobContent.directory(tmp_path).reader()
    key = b"k" * 32
    subject = keyed(subject_hash(DORA), key)
    headers = Searched(key, frozenset({subject}))
    full = Searched(key, frozenset({subject}), frozenset({subject}))
    assert search_content(reader, "h", "b", headers).hits == {(subject, "header:reply-to")}
    assert search_content(reader, "h", "b", full).hits == {
        (subject, "header:reply-to"), (subject, "body"),
    }  # fmt: skip
    assert search_content(reader, "h", "missing", headers).unreadable == []  # body not read
    aes = search_content(reader, "junk", "b", full)
    assert [u.where for u in aes.unreadable] == ["headers", "body"]
    assert aes.unreadable[0].reason.startswith("not a header section")
    assert aes.hits == {(subject, "body")}  # the raw body bytes still searched
    damaged = search_content(reader, "bad", "b", headers).unreadable
    assert [(u.where, u.reason.split(":")[0]) for u in damaged] == [
        ("headers", "blob cannot be decoded")
    ]
    assert search_content(reader, "../h", None, full).unreadable == [
        ("headers", "blob missing"), ("body", "no blob id in the view row"),
    ]  # fmt: skip
    assert "k" * 8 not in repr(BlobContent.directory(tmp_path))
