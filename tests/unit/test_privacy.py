import re

from mqforensics.privacy import pseudonymize_address, pseudonymize_text

PSEUDONYM = re.compile(r"u-[0-9a-f]{8}@(?P<domain>.+)")


def test_an_address_keeps_its_domain_and_gets_a_short_stable_local_part():
    first = pseudonymize_address("alice@example.org")
    assert PSEUDONYM.fullmatch(first).group("domain") == "example.org"
    assert pseudonymize_address("alice@example.org") == first
    assert "alice" not in first


def test_different_addresses_salts_and_domains_give_different_pseudonyms():
    base = pseudonymize_address("alice@example.org")
    assert pseudonymize_address("bob@example.org") != base
    assert pseudonymize_address("alice@example.net").split("@")[0] != base.split("@")[0]
    assert pseudonymize_address("alice@example.org", salt="case-42") != base


def test_the_domain_is_compared_case_insensitively_and_kept_as_written():
    upper = pseudonymize_address("alice@Example.ORG")
    assert upper.endswith("@Example.ORG")
    assert upper.split("@")[0] == pseudonymize_address("alice@example.org").split("@")[0]


def test_pseudonymising_is_idempotent():
    once = pseudonymize_address("alice@example.org")
    assert pseudonymize_address(once) == once
    text = pseudonymize_text("to alice@example.org")
    assert pseudonymize_text(text) == text


def test_a_bare_local_part_is_replaced_whole():
    assert re.fullmatch(r"u-[0-9a-f]{8}", pseudonymize_address("postmaster"))


def test_every_address_in_a_text_is_replaced_and_nothing_else():
    text = (
        "550 5.1.1 <bob@example.org>: unknown user; cc alice.smith+tag@mail.example.com, "
        "root@localhost"
    )
    out = pseudonymize_text(text)
    assert out == (
        f"550 5.1.1 <{pseudonymize_address('bob@example.org')}>: unknown user; cc "
        f"{pseudonymize_address('alice.smith+tag@mail.example.com')}, "
        f"{pseudonymize_address('root@localhost')}"
    )
    for secret in ("bob", "alice.smith", "root@"):
        assert secret not in out


def test_text_without_addresses_is_unchanged():
    for text in ("", "spool", "0f8fad5b-d9cb-469f-a165-70867728950e", "a @ b", "@example.org"):
        assert pseudonymize_text(text) == text


def test_a_file_position_is_kept_and_an_address_at_an_ip_is_not():
    # logqueue findings name positions as ``<file>@<offset>``: one all-digit label, no host.
    assert pseudonymize_text("torn at seg-00000003.lq@1042") == "torn at seg-00000003.lq@1042"
    # An unbracketed IPv4 domain still names a mailbox.
    out = pseudonymize_text("rcpt alice@10.0.0.1")
    assert out == f"rcpt {pseudonymize_address('alice@10.0.0.1')}"
    assert "alice" not in out
