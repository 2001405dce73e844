"""Content search (`mqforensics.content_search`): where a subject is in a message, at each depth,
with the decoys an erasure must not take for the subject, and what cannot be searched."""

from __future__ import annotations

import base64
import gzip
import pickle

import pyarrow as pa
import pytest

from mqforensics.addresses import address_forms, find_addresses
from mqforensics.content_search import (
    Searched,
    Undecodable,
    decode_stored,
    header_text,
    search_envelope,
    search_message,
)
from mqforensics.retention.policy import subject_hash
from mqforensics.subjects import keyed

KEY = b"content-search-test-key-32-bytes"
ALICE, CAROL, ERIN = "alice@example.org", "carol+news@bücher.example", "erin@example.org"


def _k(address: str) -> str:
    return keyed(subject_hash(address), KEY)


def _searched(full: bool, *addresses: str) -> Searched:
    """As an audit builds it from a policy: each plain address in every IDNA form."""
    hashes = {_k(f) for a in addresses for f in address_forms(a)}
    return Searched(KEY, frozenset(hashes), frozenset(hashes) if full else frozenset())


NAMES = {_k(f): a for a in (ALICE, CAROL, ERIN) for f in address_forms(a)}


def _where(raw: bytes, full: bool, *addresses: str) -> set[tuple[str, str]]:
    found = search_message(raw, _searched(full, *(addresses or (ALICE, CAROL, ERIN))))
    return {(NAMES[h.subject], h.where) for h in found.hits}


MESSAGE = (
    b"Return-Path: <list-bounces@lists.example.net>\r\n"
    b"Received: from mx.example.net by mx.example.org\r\n\tfor <ALICE@example.org>; Tue, 1 Dec\r\n"
    b"Delivered-To: alice@EXAMPLE.org\r\n"
    b"From: =?utf-8?b?w4lyaW4gPGVyaW5AZXhhbXBsZS5vcmc+?= <list@lists.example.net>\r\n"
    b"Sender: carol+news@xn--bcher-kva.example\r\n"
    b"To: malice@example.org, alice@example.org.evil.net, carol@b\xc3\xbccher.example\r\n"
    b"Message-ID: <alice@example.org>\r\n"
    b"References: <erin@example.org>\r\n"
    b"Subject: minutes\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/mixed; boundary="outer"\r\n\r\n'
    b"--outer\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"Write to al=\r\nice@example.org, not to xalice@example.org.\r\n"
    b"--outer\r\nContent-Type: text/csv; charset=utf-8\r\n"
    b'Content-Disposition: attachment; filename="people.csv"\r\n'
    b"Content-Transfer-Encoding: base64\r\n\r\n"
    + base64.encodebytes("name,mail\nCarol,CAROL+NEWS@BÜCHER.EXAMPLE\n".encode())
    + b"--outer\r\nContent-Type: message/rfc822\r\n\r\n"
    b"From: erin@example.org\r\nSubject: fwd\r\n\r\nforwarded text\r\n"
    b"--outer--\r\n"
)


def test_headers_depth_finds_each_header_field_and_nothing_in_the_content() -> None:
    assert _where(MESSAGE, False) == {
        (ALICE, "header:received"),
        (ALICE, "header:delivered-to"),
        (ERIN, "header:from"),  # an RFC 2047 encoded display name
        (CAROL, "header:sender"),  # the IDNA ASCII form of the policy's Unicode domain
    }


def test_full_depth_adds_the_decoded_body_attachment_and_attached_message() -> None:
    assert _where(MESSAGE, True) - _where(MESSAGE, False) == {
        (ALICE, "body"),  # a quoted-printable soft line break inside the address
        (CAROL, "attachment"),  # base64, upper case, Unicode domain
        (ERIN, "attachment"),  # the attached message's From
    }


def test_a_rule_at_headers_depth_is_not_searched_in_bodies_beside_a_full_one() -> None:
    headers_only = {_k(f) for f in address_forms(ALICE)}
    full = {_k(f) for f in address_forms(ERIN)}
    searched = Searched(KEY, frozenset(headers_only | full), frozenset(full))
    found = {(NAMES[h.subject], h.where) for h in search_message(MESSAGE, searched).hits}
    assert (ALICE, "body") not in found and (ERIN, "attachment") in found
    assert (ALICE, "header:received") in found


@pytest.mark.parametrize(
    "decoy",
    [
        "malice@example.org",
        "alice@example.org.evil.net",
        "alice.smith@example.org",
        "alice@example.organic",
        "carol@bücher.example",  # no plus tag: not carol+news
        "carol+news2@bücher.example",
        "alice@sub.example.org",
    ],
)
def test_a_longer_or_different_address_is_never_the_subject(decoy: str) -> None:
    raw = f"From: {decoy}\r\nTo: <{decoy}>\r\n\r\n{decoy}\r\n".encode()
    assert _where(raw, True) == set()


def test_identifier_fields_are_not_searched() -> None:
    raw = b"Message-ID: <alice@example.org>\r\nIn-Reply-To: <alice@example.org>\r\n\r\nx\r\n"
    assert _where(raw, True) == set()


def test_rfc2231_filename_parameter_is_decoded() -> None:
    raw = (
        b"Content-Type: text/plain\r\n"
        b"Content-Disposition: attachment;\r\n"
        b" filename*=utf-8''alice%40example.org%20notes.txt\r\n\r\nx\r\n"
    )
    assert _where(raw, False) == {(ALICE, "header:content-disposition")}


def test_an_smtputf8_header_in_raw_utf8_is_read() -> None:
    raw = "To: Carol <carol+news@bücher.example>\r\n\r\nx\r\n".encode()
    assert _where(raw, False) == {(CAROL, "header:to")}


ENCRYPTED = (
    b"From: alice@example.org\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"\r\n'
    b"Content-Transfer-Encoding: base64\r\n\r\nMIAGCSqGSIb3DQEHA6CAMIACAQAxggE=\r\n"
)
PGP = (
    b"From: x@example.net\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="b"\r\n'
    b"\r\n--b\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n"
    b"--b\r\nContent-Type: application/octet-stream\r\n\r\n-----BEGIN PGP MESSAGE-----\r\n"
    b"hQEMA\r\n-----END PGP MESSAGE-----\r\n--b--\r\n"
)


def test_encrypted_parts_are_unreadable_at_full_depth_and_headers_still_searched() -> None:
    full = search_message(ENCRYPTED, _searched(True, ALICE))
    assert [tuple(u) for u in full.unreadable] == [("body", "encrypted (S/MIME enveloped-data)")]
    assert {h.where for h in full.hits} == {"header:from"}
    assert search_message(ENCRYPTED, _searched(False, ALICE)).unreadable == []
    pgp = search_message(PGP, _searched(True, ALICE))
    assert [tuple(u) for u in pgp.unreadable] == [
        ("body", "encrypted (PGP/MIME, application/pgp-encrypted)")
    ]


def test_damaged_base64_and_unknown_transfer_encoding_are_unreadable_but_searched() -> None:
    raw = (
        b"Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + base64.b64encode(b"to alice@example.org")
        + b"!!*\r\n"
    )
    found = search_message(raw, _searched(True, ALICE))
    assert {h.where for h in found.hits} == {"body"}
    assert [u.reason for u in found.unreadable] == [
        "base64 damaged (the bytes that decode are searched)"
    ]
    odd = b"Content-Type: text/plain\r\nContent-Transfer-Encoding: x-rot13\r\n\r\nnyvpr\r\n"
    assert [u.reason for u in search_message(odd, _searched(True, ALICE)).unreadable] == [
        "unknown transfer encoding 'x-rot13' (searched as it is)"
    ]


def test_inline_pgp_and_containers_are_said_out_loud() -> None:
    raw = (
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\n"
        b"-----BEGIN PGP MESSAGE-----\r\nhQEM\r\n-----END PGP MESSAGE-----\r\n"
        b"--b\r\nContent-Type: application/zip\r\nContent-Disposition: attachment; "
        b'filename="a.zip"\r\nContent-Transfer-Encoding: base64\r\n\r\nUEsDBA==\r\n--b--\r\n'
    )
    reasons = [tuple(u) for u in search_message(raw, _searched(True, ALICE)).unreadable]
    assert reasons == [
        ("body", "encrypted (inline PGP)"),
        (
            "attachment",
            "application/zip: a compressed container, not opened (its raw bytes searched)",
        ),
    ]


def test_a_gzip_attachment_is_searched_decompressed() -> None:
    payload = base64.encodebytes(gzip.compress(b"contact: erin@example.org\n"))
    raw = (
        b"Content-Type: application/gzip\r\nContent-Disposition: attachment; filename=x.gz\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\n" + payload
    )
    assert _where(raw, True, ERIN) == {(ERIN, "attachment")}


def test_nesting_is_bounded() -> None:
    inner = b"From: alice@example.org\r\n\r\nx\r\n"
    for _ in range(40):
        inner = b"Content-Type: message/rfc822\r\n\r\n" + inner
    found = search_message(inner, _searched(True, ALICE))
    assert [u.reason for u in found.unreadable] == ["parts nested deeper than 32 levels"]


def test_stored_bytes_are_decompressed_as_james_writes_them() -> None:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as stream:
        stream.write(MESSAGE)
    zstd = sink.getvalue().to_pybytes()
    assert decode_stored(zstd, "zstd") == MESSAGE
    assert decode_stored(zstd) == MESSAGE  # by the frame's magic number
    assert decode_stored(gzip.compress(MESSAGE)) == MESSAGE
    assert decode_stored(MESSAGE) == MESSAGE
    with pytest.raises(Undecodable, match="zstd data damaged"):
        decode_stored(zstd[:20], "zstd")
    with pytest.raises(Undecodable, match="unknown content encoding 'br'"):
        decode_stored(MESSAGE, "br")


def test_envelope_addresses_in_either_idna_form_and_any_case() -> None:
    searched = _searched(False, CAROL, ALICE)
    hits = search_envelope(
        ["CAROL+NEWS@XN--BCHER-KVA.EXAMPLE", "malice@example.org", None], searched
    )
    assert {(NAMES[h.subject], h.where) for h in hits} == {(CAROL, "envelope")}


def test_searched_is_picklable_and_never_shows_its_key() -> None:
    searched = _searched(True, ALICE)
    assert pickle.loads(pickle.dumps(searched)) == searched
    assert (
        KEY.decode() not in repr(searched) and repr(searched) == "Searched(1 subjects, 1 in full)"
    )


def test_address_forms_and_tokens() -> None:
    assert address_forms(" Carol@Bücher.Example ") == (
        "carol@bücher.example",
        "carol@xn--bcher-kva.example",
    )
    assert find_addresses("mail alice@example.org. or <bob@x.example>, c@d") == [
        "alice@example.org",
        "bob@x.example",
        "c@d",
    ]
    assert header_text("=?iso-8859-1?q?J=F6rg?= <j@example.org>") == "Jörg <j@example.org>"
