"""The pure parts of the IMAP admin client: names, quoting, response tokens, error classes."""

from __future__ import annotations

import imaplib

import pytest

from mqforensics.errors import AuthenticationFailed
from mqforensics.systems.cyrus.imap_acl import (
    ImapAdmin,
    InvalidIdentifier,
    LoginRefused,
    classify_error,
    external_name,
    quote,
    tokens,
)


def test_external_names_as_the_admin_sees_them() -> None:
    assert external_name("user.alice.Dot^ted", "/") == "user/alice/Dot.ted"
    assert external_name("example.com!user.eve.Sent", "/") == "user/eve/Sent@example.com"
    assert external_name("DELETED.user.bob.6B0273EF", "/") == "DELETED/user/bob/6B0273EF"
    assert external_name("shared.team", ".") == "shared.team"


def test_quote_and_tokens_round_trip() -> None:
    assert quote('a "b" \\c') == '"a \\"b\\" \\\\c"'
    line = b'"Other Users/ann/My Box" -bob@example.org lr "group:team co" lrs anyone p'
    assert tokens(line) == [
        "Other Users/ann/My Box", "-bob@example.org", "lr", "group:team co", "lrs", "anyone", "p",
    ]  # fmt: skip


def test_error_classes() -> None:
    assert classify_error(LoginRefused("x")) == "auth"
    assert classify_error(AuthenticationFailed("x")) == "auth"
    assert classify_error(imaplib.IMAP4.abort("socket closed")) == "retry"
    assert classify_error(ConnectionRefusedError()) == "retry"
    assert classify_error(imaplib.IMAP4.error("DELETEACL failed: NO")) is None


def test_remove_rights_needs_rights_and_a_refused_identifier_is_not_retried() -> None:
    admin = ImapAdmin("127.0.0.1", 1, "admin", "pw")  # nothing listens: no command may be sent
    with pytest.raises(ValueError, match="no rights"):
        admin.remove_rights("user/ann/Box", "bob", "")  # "SETACL ... -" would remove nothing
    assert classify_error(InvalidIdentifier("SETACL failed: Invalid identifier")) is None
