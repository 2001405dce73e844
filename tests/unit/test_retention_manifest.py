import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError, InputError, PlanModified, PlanNotApproved
from mqforensics.retention.manifest import (
    FORMAT,
    Action,
    Deferred,
    action_id,
    approve,
    canonical_json,
    read_plan,
    require_approval,
    write_plan,
)
from mqforensics.retention.policy import Policy, Rule

POLICY = Policy(
    "policy.toml",
    "ab" * 32,
    (
        Rule("consumed-30d", "consumed_mail", "Art. 5(1)(e)", older_than=dt.timedelta(days=30)),
        Rule("erasure-1", "erase_subject", "Art. 17", subjects=("cd" * 32,)),
    ),
    tombstone_budget_per_partition=7,
)
AS_OF = dt.datetime(2026, 11, 22, 2, 30, tzinfo=dt.UTC)
INPUTS = {"source": "live 127.0.0.1:9042", "keyspace": "apache_james", "blobs": "s3://default"}
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def partition(bucketid: int, tombstones: int = 1, size: int = 100) -> Action:
    return Action(
        kind="james.delete_partition",
        target={
            "keyspace": "ks",
            "table": "enqueuedmailsv4",
            "queue": "spool",
            "timerangestart": "2026-11-03T10:00:00.000Z",
            "bucketid": bucketid,
        },
        precondition={"enqueueids": [f"id-{bucketid}"], "markers": [], "browsestart": "x"},
        rules=("consumed-30d",),
        bytes=size,
        tombstones=tombstones,
        reason="fully consumed partition before browseStart",
        findings=("f0123456789abcdef",),
    )


def blob(key: str, size: int) -> Action:
    return Action(
        kind="james.delete_blob",
        target={"bucket": "default", "key": key},
        precondition={"size": size, "etag": None, "orphan": True, "referrers": []},
        rules=("consumed-30d", "erasure-1"),
        bytes=size,
        tombstones=0,
        reason="passthrough blob of a consumed mail",
        findings=("f0123456789abcdef",),
    )


ACTIONS = [partition(0, 1, 10), partition(1, 3, 20), blob("k1", 1000), blob("k2", 24)]
DEFERRED = [
    Deferred("james.delete_row", {"keyspace": "ks", "enqueueid": "e1"}, ("erasure-1",), "live"),
    Deferred("james.delete_row", {"keyspace": "ks", "enqueueid": "e2"}, ("erasure-1",), "live"),
    Deferred("james.delete_row", {"keyspace": "ks", "enqueueid": "e3"}, ("erasure-1",), "budget"),
]


def make(out: Path, actions=ACTIONS, deferred=DEFERRED, **overrides):
    arguments = {
        "system": "james",
        "as_of": AS_OF,
        "policy": POLICY,
        "inputs": INPUTS,
        "actions": actions,
        "deferred": deferred,
        "notes": ["rule orphans-7d planned nothing: references incomplete"],
    }
    arguments.update(overrides)
    return write_plan(out, **arguments)


def test_canonical_json_sorts_keys_without_spaces_and_keeps_unicode():
    assert canonical_json({"b": 1, "a": [1, {"d": "é", "c": None}]}) == (
        '{"a":[1,{"c":null,"d":"é"}],"b":1}'
    )
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


def test_action_id_is_16_hex_of_sha256_over_kind_and_canonical_target():
    target = {"key": "k", "bucket": "b"}
    expected = hashlib.sha256(b'james.delete_blob\n{"bucket":"b","key":"k"}').hexdigest()[:16]
    assert action_id("james.delete_blob", target) == expected
    assert action_id("james.delete_blob", {"bucket": "b", "key": "k"}) == expected
    assert action_id("james.delete_row", target) != expected
    assert blob("k", 1).id == action_id("james.delete_blob", {"bucket": "default", "key": "k"})


def test_action_json_round_trips_and_carries_seq_and_id():
    action = Action(**{**partition(3).__dict__, "seq": 5})
    line = action.to_json()
    assert json.loads(line)["seq"] == 5
    assert json.loads(line)["id"] == action.id
    assert " " not in line.replace("fully consumed partition before browseStart", "")
    assert Action.from_json(line, "actions.jsonl line 6") == action
    item = DEFERRED[0]
    assert Deferred.from_json(item.to_json(), "deferred.jsonl line 1") == item


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "actions.jsonl line 5: not valid JSON"),
        ("[1]", "actions.jsonl line 5: not a JSON object"),
        ('{"seq": 0}', "actions.jsonl line 5: missing id, kind, target"),
        (partition(1).to_json().replace('"bytes":100', '"bytes":"100"'), "bytes has the wrong"),
        (partition(1).to_json().replace('"seq":-1', '"seq":-1,"x":1'), "unknown key x"),
        (partition(1).to_json().replace('"bucketid":1', '"bucketid":2'), "does not match"),
    ],
)
def test_a_bad_action_line_is_an_input_error_naming_where(line, message):
    line = line.replace('"seq":-1', '"seq":0')
    with pytest.raises(InputError, match=re.escape(message)):
        Action.from_json(line, "actions.jsonl line 5")


def test_write_then_read_gives_the_same_actions_in_seq_order(tmp_path):
    written = make(tmp_path / "plan")
    plan = read_plan(tmp_path / "plan")
    assert (
        plan.sha256
        == written.sha256
        == hashlib.sha256((tmp_path / "plan" / "plan.json").read_bytes()).hexdigest()
    )
    assert plan.header == written.header
    actions = list(plan.actions())
    assert [a.seq for a in actions] == [0, 1, 2, 3]
    assert [Action(**{**a.__dict__, "seq": -1}) for a in actions] == ACTIONS
    assert list(plan.deferred()) == DEFERRED
    assert plan.system == "james"
    assert plan.action_count == 4
    lines = (tmp_path / "plan" / "actions.jsonl").read_text().splitlines()
    assert lines == [a.to_json() for a in actions]
    assert [json.loads(line)["id"] for line in lines] == [a.id for a in ACTIONS]


def test_the_header_holds_exact_totals_counts_and_hashes(tmp_path):
    plan = make(tmp_path / "plan")
    header = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert header == plan.header
    directory = tmp_path / "plan"
    assert header["format"] == FORMAT == "mqforensics-plan/2"
    assert header["system"] == "james"
    assert header["as_of"] == "2026-11-22T02:30:00Z"
    assert TIME.fullmatch(header["created_at"])
    assert header["policy"] == POLICY.describe()
    assert header["inputs"] == INPUTS
    assert header["totals"] == {
        "james.delete_partition": {"actions": 2, "bytes": 30, "tombstones": 4},
        "james.delete_blob": {"actions": 2, "bytes": 1024, "tombstones": 0},
    }
    assert header["deferred"] == {"live": 2, "budget": 1}
    assert header["notes"] == ["rule orphans-7d planned nothing: references incomplete"]
    assert header["action_count"] == 4
    for name, key in (("actions.jsonl", "actions_sha256"), ("deferred.jsonl", "deferred_sha256")):
        assert header[key] == hashlib.sha256((directory / name).read_bytes()).hexdigest()
    text = (directory / "plan.json").read_text()
    assert text == json.dumps(header, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert sorted(p.name for p in directory.iterdir()) == [
        "actions.jsonl",
        "deferred.jsonl",
        "plan.json",
    ]


def test_as_of_is_written_in_utc(tmp_path):
    local = dt.datetime(2026, 11, 22, 3, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert make(tmp_path / "a", as_of=local).header["as_of"] == "2026-11-22T02:30:00Z"
    naive = dt.datetime(2026, 11, 22, 2, 30)
    assert make(tmp_path / "b", as_of=naive).header["as_of"] == "2026-11-22T02:30:00Z"


def test_an_empty_plan_is_valid(tmp_path):
    plan = make(tmp_path / "plan", actions=[], deferred=[], notes=[])
    again = read_plan(tmp_path / "plan")
    assert again.action_count == 0 and list(again.actions()) == []
    assert plan.header["totals"] == {} and plan.header["deferred"] == {}
    assert plan.header["actions_sha256"] == hashlib.sha256(b"").hexdigest()


def test_actions_are_streamed_from_a_generator(tmp_path):
    consumed = []

    def generate():
        for bucketid in range(1000):
            consumed.append(bucketid)
            yield partition(bucketid)

    plan = make(tmp_path / "plan", actions=generate())
    assert plan.action_count == 1000 == len(consumed)
    assert plan.header["totals"]["james.delete_partition"] == {
        "actions": 1000,
        "bytes": 100_000,
        "tombstones": 1000,
    }
    assert [a.target["bucketid"] for a in read_plan(tmp_path / "plan").actions()] == consumed


def test_one_changed_byte_in_actions_is_plan_modified(tmp_path):
    make(tmp_path / "plan")
    path = tmp_path / "plan" / "actions.jsonl"
    data = bytearray(path.read_bytes())
    data[data.index(b'"bytes":10') + 8] = ord("9")
    path.write_bytes(bytes(data))
    with pytest.raises(PlanModified, match=re.escape("actions.jsonl was modified after planning")):
        read_plan(tmp_path / "plan")


def test_a_changed_deferred_file_is_plan_modified(tmp_path):
    make(tmp_path / "plan")
    path = tmp_path / "plan" / "deferred.jsonl"
    path.write_text(path.read_text().replace("budget", "budgeT"))
    with pytest.raises(PlanModified, match=r"deferred.jsonl was modified after planning \(sha256"):
        read_plan(tmp_path / "plan")


def test_the_modified_message_names_the_plan_and_both_hashes(tmp_path):
    plan = make(tmp_path / "plan")
    path = tmp_path / "plan" / "actions.jsonl"
    path.write_bytes(path.read_bytes() + b"\n")
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(PlanModified) as caught:
        read_plan(tmp_path / "plan")
    assert caught.value.message == (
        f"plan {tmp_path / 'plan'}: actions.jsonl was modified after planning "
        f"(sha256 {actual} != {plan.header['actions_sha256']})"
    )


def test_an_approval_binds_the_plan_hash(tmp_path):
    plan = make(tmp_path / "plan")
    record = approve(tmp_path / "plan", "ops-oncall", "ticket 42")
    assert record["plan_sha256"] == plan.sha256
    assert record["approved_by"] == "ops-oncall"
    assert record["note"] == "ticket 42"
    assert TIME.fullmatch(record["approved_at"])
    on_disk = json.loads((tmp_path / "plan" / "approval.json").read_text())
    assert on_disk == record
    assert require_approval(read_plan(tmp_path / "plan")) == record
    assert sorted(p.name for p in (tmp_path / "plan").iterdir()) == [
        "actions.jsonl",
        "approval.json",
        "deferred.jsonl",
        "plan.json",
    ]


def test_modifying_plan_json_after_approval_is_plan_modified(tmp_path):
    make(tmp_path / "plan")
    approve(tmp_path / "plan", "ops")
    header_path = tmp_path / "plan" / "plan.json"
    header = json.loads(header_path.read_text())
    header["notes"].append("added later")
    header_path.write_text(json.dumps(header, indent=2, sort_keys=True))
    plan = read_plan(tmp_path / "plan")  # the actions still match: integrity alone is fine
    with pytest.raises(PlanModified, match=r"approves plan hash .* but plan\.json now hashes to"):
        require_approval(plan)


def test_an_unapproved_plan_is_refused_with_what_to_do(tmp_path):
    plan = make(tmp_path / "plan")
    directory = tmp_path / "plan"
    with pytest.raises(PlanNotApproved) as caught:
        require_approval(plan)
    assert caught.value.message == (
        f"plan {directory} is not approved: review it with `mqforensics report plan {directory}`"
        f", then `mqforensics approve {directory} --by NAME`"
    )


def test_approving_a_modified_plan_is_refused(tmp_path):
    make(tmp_path / "plan")
    path = tmp_path / "plan" / "actions.jsonl"
    path.write_text(path.read_text().replace("k1", "k9"))
    with pytest.raises(PlanModified):
        approve(tmp_path / "plan", "ops")
    assert not (tmp_path / "plan" / "approval.json").exists()


def test_approval_needs_a_name(tmp_path):
    make(tmp_path / "plan")
    with pytest.raises(ConfigError, match="--by"):
        approve(tmp_path / "plan", "  ")


def test_an_existing_non_empty_out_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "plan"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match=re.escape(f"plan {out} already exists and is not empty")):
        make(out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_an_existing_file_as_out_is_refused(tmp_path):
    (tmp_path / "plan").write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        make(tmp_path / "plan")


def test_an_existing_empty_out_is_replaced_and_missing_parents_created(tmp_path):
    (tmp_path / "plan").mkdir()
    make(tmp_path / "plan")
    assert (tmp_path / "plan" / "plan.json").exists()
    make(tmp_path / "deep" / "er" / "plan")
    assert read_plan(tmp_path / "deep" / "er" / "plan").action_count == 4


def test_a_failing_generator_leaves_no_plan_and_no_temporary_directory(tmp_path):
    def generate():
        yield partition(0)
        yield partition(1)
        raise RuntimeError("cassandra went away")

    with pytest.raises(RuntimeError, match="cassandra went away"):
        make(tmp_path / "plan", actions=generate())
    assert list(tmp_path.iterdir()) == []


def test_a_failure_after_the_actions_leaves_nothing_either(tmp_path):
    def deferred():
        yield DEFERRED[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make(tmp_path / "plan", deferred=deferred())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "inputs",
    [
        {"cassandra_password": "x"},
        {"s3": {"secret_access_key": "x"}},
        {"AWS_ACCESS_KEY_ID": "x"},
        {"auth_token": "x"},
        {"blobs": "s3://user:pass@bucket"},
        {"source": "live https://admin@james.example:8000/"},
        {"hosts": ["a:9042", "cql://u:p@b:9042"]},
    ],
)
def test_credentials_in_inputs_are_a_programming_error(tmp_path, inputs):
    with pytest.raises(ValueError, match=r"credential|user info"):
        make(tmp_path / "plan", inputs=inputs)
    assert list(tmp_path.iterdir()) == []


def test_an_address_in_a_reason_or_note_is_a_programming_error(tmp_path):
    leaky = Action(**{**partition(0).__dict__, "reason": "mail of alice@example.org"})
    with pytest.raises(ValueError, match="mail address"):
        make(tmp_path / "a", actions=[leaky])
    with pytest.raises(ValueError, match=r"notes\[0\]: contains a mail address"):
        make(tmp_path / "b", notes=["asked by bob@example.net"])
    bad = Deferred("james.delete_row", {}, ("erasure-1",), "live mail of bob@example.net")
    with pytest.raises(ValueError, match="mail address"):
        make(tmp_path / "c", deferred=[bad])
    assert list(tmp_path.iterdir()) == []


def test_every_action_must_cite_a_rule_of_the_policy(tmp_path):
    unknown = Action(**{**partition(0).__dict__, "rules": ("made-up",)})
    with pytest.raises(ValueError, match="made-up, not a rule of the policy"):
        make(tmp_path / "a", actions=[unknown])
    none = Action(**{**partition(0).__dict__, "rules": ()})
    with pytest.raises(ValueError, match="cites no rule"):
        make(tmp_path / "b", actions=[none])


def test_every_action_must_cite_a_finding(tmp_path):
    bare = Action(**{**partition(0).__dict__, "findings": ()})
    with pytest.raises(ValueError, match="cites no finding"):
        make(tmp_path / "a", actions=[bare])
    assert list(tmp_path.iterdir()) == []
    make(tmp_path / "b")
    line = json.loads((tmp_path / "b" / "actions.jsonl").read_text().splitlines()[0])
    assert line["findings"] == ["f0123456789abcdef"]


def test_read_plan_names_what_is_missing_or_wrong(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_plan(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"plan\.json is missing"):
        read_plan(tmp_path / "empty")
    make(tmp_path / "plan")
    (tmp_path / "plan" / "deferred.jsonl").unlink()
    with pytest.raises(InputError, match=r"deferred\.jsonl is missing"):
        read_plan(tmp_path / "plan")
    header_path = tmp_path / "plan" / "plan.json"
    header = json.loads(header_path.read_text())
    header_path.write_text(json.dumps({**header, "format": "mqforensics-plan/1"}))
    with pytest.raises(InputError, match="format 'mqforensics-plan/1' is not"):
        read_plan(tmp_path / "plan")
    header_path.write_text("{")
    with pytest.raises(InputError, match=r"plan\.json is not valid JSON"):
        read_plan(tmp_path / "plan")
    del header["action_count"]
    header_path.write_text(json.dumps(header))
    with pytest.raises(InputError, match=r"plan\.json lacks action_count"):
        read_plan(tmp_path / "plan")


def test_a_header_count_that_disagrees_with_the_file_is_plan_modified(tmp_path):
    make(tmp_path / "plan")
    header_path = tmp_path / "plan" / "plan.json"
    header = json.loads(header_path.read_text())
    header_path.write_text(json.dumps({**header, "action_count": 3}))
    with pytest.raises(PlanModified, match=r"counts 3 lines for actions\.jsonl, which has 4"):
        read_plan(tmp_path / "plan")


def test_a_broken_line_is_reported_with_its_file_and_number(tmp_path):
    plan = make(tmp_path / "plan")
    path = tmp_path / "plan" / "actions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "{oops}\n"
    path.write_text("".join(lines))
    # Plan.actions() verifies no hash (read_plan does): it still names the broken line.
    with pytest.raises(InputError, match=re.escape(f"{path} line 3: not valid JSON")):
        list(plan.actions())
