import datetime as dt
import hashlib
import json
import re
import textwrap
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.errors import ConfigError, InputError
from mqforensics.retention.policy import Policy, Rule, merged_rule_kinds, subject_hash
from mqforensics.systems import load_policy

ALICE_HASH = hashlib.sha256(b"alice@example.org").hexdigest()
BOB_HASH = hashlib.sha256(b"bob@example.net").hexdigest()

TOML = f"""
version = 1
tombstone_budget_per_partition = 20

[[rules]]
id = "consumed-30d"
kind = "consumed_mail"
older_than = "30d"
legal_basis = "GDPR Art. 5(1)(e)"
systems = ["james"]
queues = ["spool", "outgoing"]

[[rules]]
id = "erasure-2026-017"
kind = "erase_subject"
legal_basis = "GDPR Art. 17, request 2026-017"
addresses = [" Alice@Example.ORG "]
address_sha256 = ["{BOB_HASH}"]

[[rules]]
id = "orphans-7d"
kind = "orphaned_blobs"
older_than = "2w"
references_complete = true
legal_basis = "no referrer"
"""

YAML = f"""
version: 1
tombstone_budget_per_partition: 20
rules:
  - id: consumed-30d
    kind: consumed_mail
    older_than: 30d
    legal_basis: GDPR Art. 5(1)(e)
    systems: [james]
    queues: [spool, outgoing]
  - id: erasure-2026-017
    kind: erase_subject
    legal_basis: GDPR Art. 17, request 2026-017
    addresses: [" Alice@Example.ORG "]
    address_sha256: ["{BOB_HASH}"]
  - id: orphans-7d
    kind: orphaned_blobs
    older_than: 2w
    references_complete: true
    legal_basis: no referrer
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def minimal(rule: str, top: str = "version = 1") -> str:
    return f"{top}\n\n[[rules]]\n{textwrap.dedent(rule)}"


def test_toml_and_yaml_of_the_same_policy_load_equal(tmp_path):
    from_toml = load_policy(write(tmp_path, "p.toml", TOML))
    from_yaml = load_policy(write(tmp_path, "p.yaml", YAML))
    assert from_toml.rules == from_yaml.rules
    assert from_toml.tombstone_budget_per_partition == from_yaml.tombstone_budget_per_partition
    assert from_toml.rules == (
        Rule(
            "consumed-30d",
            "consumed_mail",
            "GDPR Art. 5(1)(e)",
            older_than=dt.timedelta(days=30),
            systems=("james",),
            queues=("spool", "outgoing"),
        ),
        Rule(
            "erasure-2026-017",
            "erase_subject",
            "GDPR Art. 17, request 2026-017",
            subjects=tuple(sorted([ALICE_HASH, BOB_HASH])),
        ),
        Rule(
            "orphans-7d",
            "orphaned_blobs",
            "no referrer",
            older_than=dt.timedelta(weeks=2),
            references_complete=True,
            queueless=True,
        ),
    )


def test_the_policy_records_its_path_and_the_sha256_of_its_bytes(tmp_path):
    path = write(tmp_path, "p.toml", TOML)
    policy = load_policy(path)
    assert policy.path == str(path)
    assert policy.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_policy(str(path)) == policy


def test_yml_extension_and_default_budget(tmp_path):
    path = write(
        tmp_path,
        "p.yml",
        "version: 1\nrules:\n- {id: a, kind: consumed_mail, older_than: 1d, legal_basis: x}\n",
    )
    policy = load_policy(path)
    assert policy.tombstone_budget_per_partition == 100
    assert policy.rules[0].older_than == dt.timedelta(days=1)


def test_subject_hash_is_sha256_of_the_trimmed_lower_cased_address():
    assert subject_hash("  Alice@Example.ORG\n") == ALICE_HASH
    assert subject_hash("alice@example.org") == ALICE_HASH


def test_describe_is_the_plan_header_policy_object_without_any_subject(tmp_path):
    policy = load_policy(write(tmp_path, "p.toml", TOML))
    described = policy.describe()
    assert described == {
        "path": policy.path,
        "sha256": policy.sha256,
        "tombstone_budget_per_partition": 20,
        "rules": [
            {
                "id": "consumed-30d",
                "kind": "consumed_mail",
                "legal_basis": "GDPR Art. 5(1)(e)",
                "older_than": "30d",
                "systems": ["james"],
                "queues": ["spool", "outgoing"],
                "subject_count": 0,
                "references_complete": False,
            },
            {
                "id": "erasure-2026-017",
                "kind": "erase_subject",
                "legal_basis": "GDPR Art. 17, request 2026-017",
                "older_than": None,
                "systems": [],
                "queues": [],
                "subject_count": 2,
                "search": "headers",
                "references_complete": False,
            },
            {
                "id": "orphans-7d",
                "kind": "orphaned_blobs",
                "legal_basis": "no referrer",
                "older_than": "14d",
                "systems": [],
                "queues": [],
                "subject_count": 0,
                "references_complete": True,
            },
        ],
    }
    text = json.dumps(described).lower()
    assert "alice" not in text and ALICE_HASH not in text and BOB_HASH not in text


@pytest.mark.parametrize(
    ("older_than", "text"),
    [("30s", "30s"), ("90s", "90s"), ("5m", "5m"), ("12h", "12h"), ("36h", "36h"), ("7", "7d")],
)
def test_older_than_is_described_in_the_largest_exact_unit(tmp_path, older_than, text):
    rule = f'id = "a"\nkind = "consumed_mail"\nlegal_basis = "x"\nolder_than = "{older_than}"\n'
    policy = load_policy(write(tmp_path, "p.toml", minimal(rule)))
    assert policy.describe()["rules"][0]["older_than"] == text


def test_an_integer_older_than_is_days(tmp_path):
    rule = 'id = "a"\nkind = "consumed_mail"\nlegal_basis = "x"\nolder_than = 3\n'
    policy = load_policy(write(tmp_path, "p.toml", minimal(rule)))
    assert policy.rules[0].older_than == dt.timedelta(days=3)


def test_applies_to_systems_and_queues():
    everywhere = Rule("a", "consumed_mail", "x", older_than=dt.timedelta(days=1))
    james_spool = Rule("b", "consumed_mail", "x", systems=("james",), queues=("spool",))
    orphans = Rule(
        "c", "orphaned_blobs", "x", systems=("james",), queues=("spool",), queueless=True
    )
    assert everywhere.applies_to("james", "spool")
    assert everywhere.applies_to("postfix")
    assert james_spool.applies_to("james", "spool")
    assert not james_spool.applies_to("james", "outgoing")
    assert not james_spool.applies_to("postfix", "spool")
    # System-level objects (queue None): only for rules without a queue restriction...
    assert not james_spool.applies_to("james")
    assert everywhere.applies_to("james", None)
    # ...except those of a queueless kind (orphaned blobs belong to no queue by definition).
    assert orphans.applies_to("james")
    assert not orphans.applies_to("postfix")


def test_a_rule_is_queueless_when_its_kind_is(tmp_path):
    # The kind's registered RuleKind says it, not the shared layer: orphaned_blobs (James)
    # is, consumed_mail is not.
    rules = (
        'id = "o"\nkind = "orphaned_blobs"\nlegal_basis = "x"\nolder_than = "7d"\n'
        'queues = ["spool"]\n'
        '\n[[rules]]\nid = "c"\nkind = "consumed_mail"\nlegal_basis = "x"\n'
        'older_than = "1d"\nqueues = ["spool"]\n'
    )
    orphans, consumed = load_policy(write(tmp_path, "p.toml", minimal(rules))).rules
    assert (orphans.queueless, consumed.queueless) == (True, False)
    assert orphans.applies_to("james") and not consumed.applies_to("james")


def test_rules_of_selects_by_kind_and_system_in_file_order():
    a = Rule("a", "consumed_mail", "x", systems=("james",), queues=("spool",))
    b = Rule("b", "erase_subject", "x", subjects=(ALICE_HASH,))
    c = Rule("c", "consumed_mail", "x")
    d = Rule("d", "consumed_mail", "x", systems=("postfix",))
    policy = Policy("p.toml", "0" * 64, (a, b, c, d))
    assert policy.rules_of("consumed_mail", "james") == [a, c]
    assert policy.rules_of("consumed_mail", "postfix") == [c, d]
    assert policy.rules_of("erase_subject", "james") == [b]
    assert policy.rules_of("orphaned_blobs", "james") == []
    # The kinds come from the registered systems; erase_subject is everyone's.
    assert set(merged_rule_kinds(systems.rule_kinds())) == {
        "consumed_mail",
        "erase_subject",
        "orphaned_blobs",
        "racl_repair",
        "garbage_segments",
        "queued_mail",
        "queue_leftovers",
        "held_mail",
        "damaged_mail",
        "orphan_logs",
        "broker_reconcile",
    }
    consumed = merged_rule_kinds(systems.rule_kinds())["consumed_mail"]
    assert (consumed.keys, consumed.needs_older_than, consumed.queueless) == (
        ("older_than",),
        True,
        False,
    )


def test_a_registered_system_brings_its_rule_kinds(tmp_path):
    from mqforensics import systems
    from tests import toy_system

    path = tmp_path / "p.toml"
    path.write_text(minimal('id = "x"\nkind = "toy_retention"\nlegal_basis = "b"\n'))
    with pytest.raises(ConfigError, match="kind must be one of"):
        load_policy(path)
    systems.register(toy_system.SPEC)
    try:
        with pytest.raises(ConfigError, match="older_than is required for toy_retention"):
            load_policy(path)
    finally:
        systems.unregister("toy")


CONSUMED = 'id = "x"\nkind = "consumed_mail"\nlegal_basis = "basis"\nolder_than = "30d"\n'
ERASE = 'id = "x"\nkind = "erase_subject"\nlegal_basis = "basis"\n'


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            minimal('id = "x"\nkind = "consumed_mail"\nlegal_basis = "basis"\n'),
            "rule 'x': older_than is required for consumed_mail",
        ),
        (
            minimal('id = "x"\nkind = "orphaned_blobs"\nlegal_basis = "basis"\n'),
            "rule 'x': older_than is required for orphaned_blobs",
        ),
        (
            minimal('id = "x"\nkind = "queued_mail"\nlegal_basis = "basis"\n'),
            "rule 'x': older_than is required for queued_mail",
        ),
        (
            minimal('id = "x"\nkind = "queue_leftovers"\nlegal_basis = "basis"\n'),
            "rule 'x': older_than is required for queue_leftovers",
        ),
        (minimal(CONSUMED, "version = 1\nmode = 'fast'"), ": unknown key 'mode' (known: "),
        (minimal(CONSUMED + "olderthan = '1d'\n"), "rule 'x' (consumed_mail): unknown key "),
        (minimal(CONSUMED + "addresses = []\n"), "rule 'x' (consumed_mail): unknown key "),
        (minimal(ERASE + "older_than = '1d'\n"), "rule 'x' (erase_subject): unknown key "),
        (minimal(CONSUMED, "version = 2"), ": version must be 1 (got 2)"),
        (minimal(CONSUMED, ""), ": version must be 1 (got missing)"),
        (minimal(CONSUMED, "version = true"), ": version must be 1 (got True)"),
        (minimal(CONSUMED) + "\n[[rules]]\n" + CONSUMED, "rule 'x': id is used by more than one"),
        (
            minimal(CONSUMED.replace('"x"', '"a b"')),
            " rules[0]: id must match [A-Za-z0-9._-]+ (got 'a b')",
        ),
        (minimal(CONSUMED.replace('id = "x"\n', "")), "rules[0]: id must match"),
        (minimal(CONSUMED.replace('"consumed_mail"', '"old_mail"')), "rule 'x': kind must be "),
        (
            minimal(CONSUMED.replace('"basis"', '"  "')),
            "rule 'x': legal_basis is required (a non-empty text)",
        ),
        (
            minimal(CONSUMED.replace('legal_basis = "basis"\n', "")),
            "rule 'x': legal_basis is required",
        ),
        (
            minimal(CONSUMED.replace('"30d"', '"30 days"')),
            "rule 'x': older_than: duration '30 days' is not like",
        ),
        (minimal(ERASE), "rule 'x': erase_subject needs at least one of addresses"),
        (minimal(ERASE + "addresses = []\n"), "erase_subject needs at least one of"),
        (
            minimal(ERASE + f'address_sha256 = ["{ALICE_HASH.upper()}"]\n'),
            "rule 'x': address_sha256[0] is not 64 lower-case hex digits",
        ),
        (
            minimal(ERASE + f'address_sha256 = ["{ALICE_HASH}", "abc"]\n'),
            "rule 'x': address_sha256[1] is not 64 lower-case hex digits",
        ),
        (
            minimal(ERASE + 'addresses = ["a@example.org", "", "nobody"]\n'),
            "rule 'x': addresses[1] is not a mail address",
        ),
        (minimal(ERASE + 'addresses = "a@example.org"\n'), "rule 'x': addresses must be a list"),
        (
            minimal(CONSUMED, "version = 1\ntombstone_budget_per_partition = -1"),
            ": tombstone_budget_per_partition must be an integer >= 0 (got -1)",
        ),
        (
            minimal(CONSUMED, "version = 1\ntombstone_budget_per_partition = '5'"),
            ": tombstone_budget_per_partition must be an integer >= 0 (got '5')",
        ),
        (minimal(CONSUMED + 'systems = "james"\n'), "rule 'x': systems must be a list of names"),
        (minimal(CONSUMED + 'queues = ["spool", ""]\n'), "rule 'x': queues[1] must be a non-empty"),
        (minimal(CONSUMED + "queues = [1]\n"), "rule 'x': queues[0] must be a non-empty text"),
        (
            minimal(CONSUMED.replace("consumed_mail", "orphaned_blobs") + "references_complete=1"),
            "rule 'x': references_complete must be true or false",
        ),
        ("version = 1\nrules = []\n", ": rules must be a non-empty list of rule tables"),
        ("version = 1\n", ": rules must be a non-empty list of rule tables"),
    ],
)
def test_each_validation_error_names_the_file_and_rule(tmp_path, document, message):
    path = write(tmp_path, "p.toml", document)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert caught.value.message.startswith(f"policy {path}")
    assert message in caught.value.message


def test_an_error_never_quotes_an_address(tmp_path):
    rule = ERASE + 'addresses = ["alice@example.org", "bob.example.net"]\n'
    path = write(tmp_path, "p.toml", minimal(rule))
    with pytest.raises(ConfigError, match=re.escape("addresses[1]")) as caught:
        load_policy(path)
    assert "bob" not in caught.value.message and "alice" not in caught.value.message


def test_an_unknown_key_that_is_an_address_is_not_quoted(tmp_path):
    path = write(tmp_path, "p.yaml", "version: 1\nalice@example.org: 1\nrules: []\n")
    with pytest.raises(ConfigError, match="unknown key") as caught:
        load_policy(path)
    assert "alice@" not in caught.value.message


def test_a_yaml_syntax_error_names_the_line_but_not_its_content(tmp_path):
    path = write(tmp_path, "p.yaml", "version: 1\nrules:\n  - addresses: [alice@example.org\n")
    with pytest.raises(InputError, match=r"not valid YAML: .* \(at line \d+, column \d+\)") as c:
        load_policy(path)
    assert "alice" not in str(c.value)


def test_a_toml_syntax_error_names_the_file_and_line(tmp_path):
    path = write(tmp_path, "p.toml", "version = 1\n\n[[rules]\nid = 'x'\n")
    with pytest.raises(InputError, match=re.escape(f"policy {path}: not valid TOML: ")) as caught:
        load_policy(path)
    assert "line 3" in caught.value.message


def test_a_missing_or_unreadable_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match=re.escape(f"policy {tmp_path / 'no.toml'} does not")):
        load_policy(tmp_path / "no.toml")
    (tmp_path / "d.toml").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        load_policy(tmp_path / "d.toml")
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"version = 1\n\xff\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_policy(binary)


def test_an_unknown_extension_is_a_config_error(tmp_path):
    path = write(tmp_path, "p.json", "{}")
    with pytest.raises(ConfigError, match=re.escape(f"policy {path}: unknown format '.json'")):
        load_policy(path)


def test_a_top_level_that_is_not_a_table_is_refused(tmp_path):
    path = write(tmp_path, "p.yaml", "- 1\n- 2\n")
    with pytest.raises(ConfigError, match="the top level must be a table"):
        load_policy(path)


def _policy(tmp_path, rule):
    return load_policy(write(tmp_path, "p.toml", minimal(rule)))


def test_search_depth_is_headers_by_default_full_when_asked_and_nothing_else(tmp_path):
    address = 'addresses = ["a@example.org"]\n'
    assert _policy(tmp_path, ERASE + address).rules[0].search == "headers"
    full = _policy(tmp_path, ERASE + address + 'search = "full"\n')
    assert full.rules[0].search == "full"
    assert full.describe()["rules"][0]["search"] == "full"
    with pytest.raises(ConfigError, match=r"rule 'x': search must be 'headers'.*not 'body'"):
        _policy(tmp_path, ERASE + address + 'search = "body"\n')
    consumed = 'id = "x"\nkind = "consumed_mail"\nolder_than = "1d"\nlegal_basis = "b"\n'
    with pytest.raises(ConfigError, match=r"rule 'x' \(consumed_mail\): unknown key 'search'"):
        _policy(tmp_path, consumed + 'search = "full"\n')


def test_an_internationalised_domain_is_searched_in_both_its_forms(tmp_path):
    policy = _policy(tmp_path, ERASE + 'addresses = ["Carol@Bücher.example"]\n')
    assert set(policy.rules[0].subjects) == {
        subject_hash("carol@bücher.example"),
        subject_hash("carol@xn--bcher-kva.example"),
    }
    ascii_form = _policy(tmp_path, ERASE + 'addresses = ["carol@xn--bcher-kva.example"]\n')
    assert ascii_form.rules[0].subjects == policy.rules[0].subjects
    plain = _policy(tmp_path, ERASE + 'addresses = ["carol+news@example.org"]\n')
    assert plain.rules[0].subjects == (subject_hash("carol+news@example.org"),)
