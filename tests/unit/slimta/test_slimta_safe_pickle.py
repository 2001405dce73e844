"""safe_pickle over real python-slimta 5.0.5 pickles (datasets/slimta/make_pickle_fixtures.py),
over hostile pickles (rejected, never executed, nothing imported) and over corrupt ones."""

from __future__ import annotations

import _compat_pickle
import contextlib
import copyreg
import dataclasses
import datetime
import email.message
import email.policy
import importlib
import io
import json
import os
import pickle
import pickletools
import random
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.slimta import safe_pickle as sp

DATA = Path(__file__).resolve().parents[2] / "data" / "slimta" / "pickles"
EXPECTED = json.loads((DATA / "expected.json").read_text())
POLICIES_P5 = (DATA / "envelope_policies.p5.pickle").read_bytes()
POLICIES_P0 = (DATA / "envelope_policies.p0.pickle").read_bytes()


# ---- real slimta fixtures ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED["envelopes"]))
def test_envelope_decodes_to_what_slimta_sees(name: str) -> None:
    expected = dict(EXPECTED["envelopes"][name])
    expected.pop("flattened_bytes")  # BytesGenerator refolds long headers; informational only
    got = dataclasses.asdict(sp.decode_envelope((DATA / name).read_bytes()))
    assert len(got.pop("body")) == expected["body_bytes"]  # the body itself: content search only
    got["headers"] = [list(pair) for pair in got["headers"]]
    assert got == expected


@pytest.mark.parametrize("name", sorted(EXPECTED["metas"]))
def test_meta_decodes_to_what_slimta_sees(name: str) -> None:
    assert dataclasses.asdict(sp.decode_meta((DATA / name).read_bytes())) == EXPECTED["metas"][name]


def test_redis_fields_decode_to_what_slimta_sees() -> None:
    for name, want in EXPECTED["delivered_indexes"].items():
        assert sp.decode_delivered_indexes((DATA / name).read_bytes()) == (
            want["indexes"],
            want["type"],
        )
    for name, want in EXPECTED["queue_entries"].items():
        assert list(sp.decode_queue_entry((DATA / name).read_bytes())) == want


def test_fixture_details_worth_knowing() -> None:
    env = sp.decode_envelope(POLICIES_P5)
    assert env.pickle_protocol == 5 and not env.is_bounce
    assert env.client["auth"] == "('alice', None)"  # SmtpEdge stores (authcid, authzid)
    assert ("Subject", "caf\udcc3\udca9 menu") in env.headers  # 8-bit header: surrogate escapes
    assert ("X-Folded", "part one\n\tpart two") in env.headers  # folding kept, with a bare LF
    bounce = sp.decode_envelope((DATA / "bounce_full.p0.pickle").read_bytes())
    assert bounce.is_bounce and bounce.sender == "" and bounce.pickle_protocol == 0
    assert sp.decode_envelope((DATA / "disk.env").read_bytes()) == env  # DiskStorage wrote it


class _Recorder(pickle.Unpickler):
    """The real Unpickler's own find_class calls, with permissive dummies (fixtures only)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), encoding="latin1")
        self.names: list[tuple[str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        key = _compat_pickle.NAME_MAPPING.get((module, name))
        self.names.append(key or (_compat_pickle.IMPORT_MAPPING.get(module, module), name))

        class Dummy(list):  # type: ignore[type-arg]
            def __new__(cls, *args: Any, **kwargs: Any) -> Dummy:
                return list.__new__(cls)

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                pass

            def __call__(self, *args: Any) -> Any:
                return Dummy()

        return Dummy if name != "object" else object


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir() if p.suffix != ".json"))
def test_inventory_agrees_with_the_unpickler(name: str) -> None:
    data = (DATA / name).read_bytes()
    recorder = _Recorder(data)
    recorder.load()
    refs = sp.inventory(data)
    assert [(r.module, r.name) for r in refs] == recorder.names
    ops = {pos: op.name for op, _, pos in pickletools.genops(data)}
    assert all(ops[r.offset] in ("GLOBAL", "STACK_GLOBAL") for r in refs if r.offset is not None)


def test_stack_global_operands_come_from_the_memo() -> None:
    # Protocol 4+ header objects: 'email.headerregistry' is pushed once, then BINGET'ed.
    ops = list(pickletools.genops(POLICIES_P5))
    uses = [i for i, (op, _, _) in enumerate(ops) if op.name == "STACK_GLOBAL"]
    assert any(ops[i - 3][0].name == "BINGET" for i in uses)  # BINGET, string, MEMOIZE
    names = {(r.module, r.name) for r in sp.inventory(POLICIES_P5)}
    assert ("email.headerregistry", "UniqueDateHeader") in names
    assert ("email.headerregistry", "MessageIDHeader") in names


def test_python2_protocol0_pickle_loads_losslessly() -> None:
    # What Python 2 slimta wrote: old-style Message via INST, 8-bit str via STRING (latin1).
    data = (
        b"ccopy_reg\n_reconstructor\np0\n(cslimta.envelope\nEnvelope\np1\nc__builtin__\nobject\n"
        b"p2\nNtp3\nRp4\n(dp5\nS'sender'\np6\nS'alice@example.com'\np7\nsS'recipients'\np8\n"
        b"(lp9\nS'bob@example.org'\np10\nasS'headers'\np11\n(iemail.message\nMessage\np12\n"
        b"(dp13\nS'_headers'\np14\n(lp15\n(S'Subject'\np16\nS'caf\\xe9'\np17\ntp18\nasbsS'message'"
        b"\np19\nS'body \\xe9\\r\\n'\np20\nsS'timestamp'\np21\nF1700000000.25\nsb."
    )
    with pytest.raises(ValueError):  # why the walk cannot be pickletools.genops itself
        list(pickletools.genops(data))
    env = sp.decode_envelope(data)
    assert env.headers == [("Subject", "caf\xe9")] and env.body_bytes == 8
    assert (env.sender, env.recipients, env.timestamp) == (
        "alice@example.com",
        ["bob@example.org"],
        1700000000.25,
    )
    # Header sizes count UTF-8 (what the product can know); Python 2 wrote "é" as one byte.
    assert env.message_bytes == len("Subject: café\r\n\r\n".encode()) + 8
    # Python 2's protocols 1-2 wrote the same old-style instance with OBJ instead of INST.
    as_obj = data.replace(b"(iemail.message\nMessage\np12\n", b"(cemail.message\nMessage\no")
    assert sp.decode_envelope(as_obj).headers == env.headers


def test_bounce_defaults_come_from_the_class() -> None:
    with fake_slimta() as (_, bounce):
        data = pickle.dumps(bounce(), 2)  # no instance state at all
    env = sp.decode_envelope(data)
    assert env.is_bounce and env.sender == "" and env.recipients == []
    assert env.client == {"name": "postmaster", "ip": "127.0.0.1", "host": "localhost"}


# ---- hostile pickles -------------------------------------------------------------------------


class _Reduce:
    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


@contextlib.contextmanager
def fake_slimta() -> Iterator[tuple[type, type]]:
    """Importable slimta.envelope/bounce stand-ins, only while the *test* pickles with them."""
    saved = {k: sys.modules.get(k) for k in ("slimta", "slimta.envelope", "slimta.bounce")}
    envelope_mod, bounce_mod = (
        types.ModuleType("slimta.envelope"),
        types.ModuleType("slimta.bounce"),
    )
    envelope = type("Envelope", (), {"__module__": "slimta.envelope"})
    bounce = type("Bounce", (envelope,), {"__module__": "slimta.bounce"})
    envelope_mod.Envelope, bounce_mod.Bounce = envelope, bounce  # type: ignore[attr-defined]
    sys.modules.update(
        {"slimta": types.ModuleType("slimta"), "slimta.envelope": envelope_mod,
         "slimta.bounce": bounce_mod}
    )  # fmt: skip
    try:
        yield envelope, bounce
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


def envelope_pickle(protocol: int = 5, **attrs: Any) -> bytes:
    with fake_slimta() as (envelope, _):
        env = envelope()
        env.__dict__.update({"sender": "a@example.com", "recipients": ["b@example.org"]})
        env.__dict__.update(attrs)
        return pickle.dumps(env, protocol)


def _refs(exc: sp.PickleRejected) -> list[tuple[str, str, int | None]]:
    return [(g.module, g.name, g.offset) for g in exc.globals]


def _offsets(data: bytes, opcode: str) -> list[int]:
    return [pos for op, _, pos in pickletools.genops(data) if op.name == opcode]


def assert_rejected(
    data: bytes, expected: list[tuple[str, str, int | None]], *markers: Path
) -> None:
    before = set(sys.modules)
    for decode in (sp.safe_loads, sp.decode_envelope):
        with pytest.raises(sp.PickleRejected) as info:
            decode(data)
        assert _refs(info.value) == expected
        assert info.value.kind == "unsafe_pickle" and isinstance(info.value, InputError)
        for _, name, offset in expected:
            assert f"{name} " in info.value.detail and f"offset {offset}" in info.value.detail
    assert not [m for m in markers if m.exists()]
    assert set(sys.modules) - before == set()


def test_control_the_os_system_payload_is_live(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Reduce(os.system, f"touch {marker}"), 0))
    assert marker.exists()


@pytest.mark.parametrize("protocol", range(6))
def test_os_system_rejected_in_every_protocol(protocol: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps(_Reduce(os.system, f"touch {marker}"), protocol)
    opcode = "STACK_GLOBAL" if protocol >= 4 else "GLOBAL"
    assert_rejected(data, [("posix", "system", _offsets(data, opcode)[0])], marker)


def test_memoized_strings_feed_stack_global_via_binget(tmp_path: Path) -> None:
    data = pickle.dumps([os.system, os.getpid, os.listdir], 4)
    assert b"h" in data and len(_offsets(data, "BINGET")) >= 2
    at = _offsets(data, "STACK_GLOBAL")
    assert_rejected(
        data, [("posix", "system", at[0]), ("posix", "getpid", at[1]), ("posix", "listdir", at[2])]
    )


def test_decoy_strings_do_not_fool_the_walk() -> None:
    # 'posix' and 'system' are memoized and dropped; the last two strings pushed are
    # 'builtins' 'list' (allowed), but STACK_GLOBAL takes its operands from the memo.
    def s(text: str) -> bytes:
        return b"\x8c" + bytes([len(text)]) + text.encode()

    data = (
        b"\x80\x04" + s("posix") + b"\x94" + s("system") + b"\x940" + b"0"
        + s("builtins") + s("list") + b"00" + b"h\x00h\x01\x93" + b"N\x85R."
    )  # fmt: skip
    assert_rejected(data, [("posix", "system", data.index(b"\x93"))])


@pytest.mark.parametrize(
    ("func", "args", "name"),
    [
        (eval, ("1",), ("builtins", "eval")),
        (exec, ("x = 1",), ("builtins", "exec")),
        (__import__, ("this",), ("builtins", "__import__")),
        (importlib.import_module, ("antigravity",), ("importlib", "import_module")),
    ],
)
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_builtins_and_importers_rejected(
    func: Any, args: tuple, name: tuple, protocol: int
) -> None:
    data = pickle.dumps(_Reduce(func, *args), protocol)
    opcode = "STACK_GLOBAL" if protocol >= 4 else "GLOBAL"
    assert_rejected(data, [(*name, _offsets(data, opcode)[0])])


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_subprocess_popen_rejected(protocol: int, tmp_path: Path) -> None:
    marker = tmp_path / "popen"
    data = pickle.dumps(_Reduce(subprocess.Popen, ["touch", str(marker)]), protocol)
    opcode = "STACK_GLOBAL" if protocol >= 4 else "GLOBAL"
    assert_rejected(data, [("subprocess", "Popen", _offsets(data, opcode)[0])], marker)


def test_getattr_rejected_while_its_allowed_argument_is_not_listed() -> None:
    data = pickle.dumps(_Reduce(getattr, datetime.datetime, "now"), 2)
    refs = sp.inventory(data)
    assert [(r.module, r.name) for r in refs] == [("builtins", "getattr"), ("datetime", "datetime")]
    assert_rejected(data, [("builtins", "getattr", refs[0].offset)])


def test_inst_and_obj_opcodes(tmp_path: Path) -> None:
    marker = tmp_path / "inst"
    inst = b"(S'touch " + str(marker).encode() + b"'\nios\nsystem\n."
    assert_rejected(inst, [("os", "system", inst.index(b"ios"))], marker)
    obj = b"(cos\nsystem\nS'touch " + str(marker).encode() + b"'\no."
    assert_rejected(obj, [("os", "system", 1)], marker)
    # An allowed function called through OBJ escapes REDUCE's argument check: refused too.
    obj_fn = b"(c_codecs\nencode\nVx\nVlatin1\no."
    assert_rejected(obj_fn, [("_codecs", "encode", obj_fn.index(b"o."))])


def test_extension_codes(tmp_path: Path) -> None:
    copyreg.add_extension("posix", "system", 240)
    try:
        data = pickle.dumps(_Reduce(os.system, f"touch {tmp_path / 'ext'}"), 2)
        assert _offsets(data, "EXT1")
        assert_rejected(data, [("<extension>", "240=posix.system", _offsets(data, "EXT1")[0])])
    finally:
        copyreg.remove_extension("posix", "system", 240)
    assert_rejected(data, [("<extension>", "240", _offsets(data, "EXT1")[0])], tmp_path / "ext")


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_global_hidden_in_a_nested_header_object(protocol: int, tmp_path: Path) -> None:
    marker = tmp_path / "nested"
    message = email.message.EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = "hello"
    message["Reply-To"] = "Bob <bob@example.org>"
    header = message._headers[1][1]  # type: ignore[attr-defined]
    header._parse_tree[0].evil = _Reduce(os.system, f"touch {marker}")
    data = envelope_pickle(protocol, headers=message, message=b"body\r\n")
    opcode = "STACK_GLOBAL" if protocol >= 4 else "GLOBAL"
    system = [r for r in sp.inventory(data) if r.name == "system"]
    assert [r.offset for r in system] and _offsets(data, opcode)
    assert_rejected(data, [("posix", "system", system[0].offset)], marker)


def test_codecs_encode_only_with_latin1() -> None:
    for codec in (b"rot13", b"zlib_codec", b"utf-8"):
        data = b"c_codecs\nencode\n(Vx\nV" + codec + b"\ntR."
        assert_rejected(data, [("_codecs", "encode", data.index(b"R."))])
    assert sp.safe_loads(b"c_codecs\nencode\n(Vx\xe9\nVlatin1\ntR.") == b"x\xe9"


def test_reconstructor_only_builds_stand_ins() -> None:
    real_class = b"ccopy_reg\n_reconstructor\n(cdatetime\ndatetime\nc__builtin__\nobject\nNtR."
    assert_rejected(real_class, [("copyreg", "_reconstructor", real_class.index(b"R."))])
    hostile = b"ccopy_reg\n_reconstructor\n(csubprocess\nPopen\nc__builtin__\nobject\nNtR."
    assert_rejected(
        hostile,
        [("subprocess", "Popen", hostile.index(b"csub")),
         ("copyreg", "_reconstructor", hostile.index(b"R."))],
    )  # fmt: skip


def test_throwaway_module_and_stdlib_easter_eggs_are_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    name = f"mqf_throwaway_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef boom(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = f"c{name}\nboom\n(tR.".encode()
    assert_rejected(data, [(name, "boom", 0)], marker)
    assert name not in sys.modules
    for module, attr in (("antigravity", "fly"), ("this", "s")):
        was_loaded = module in sys.modules
        data = f"c{module}\n{attr}\n.".encode()
        assert_rejected(data, [(module, attr, 0)])
        assert (module in sys.modules) == was_loaded


def test_stand_ins_cannot_be_poisoned() -> None:
    # BUILD with slot state calls setattr on the object: here the Envelope class itself.
    build_class = b"cslimta.envelope\nEnvelope\n(N}Vis_bounce\nI01\nstb."
    with pytest.raises(sp.PickleCorrupt):  # the class's own __setstate__ or its metaclass
        sp.safe_loads(build_class)
    assert sp.Envelope.is_bounce is False
    as_bounce = (
        b"\x80\x02cslimta.envelope\nEnvelope\n)\x81N}V__class__\ncslimta.bounce\nBounce\ns\x86b."
    )
    with pytest.raises(sp.PickleCorrupt, match="may not hold a class"):
        sp.safe_loads(as_bounce)
    new_dict = b"\x80\x02cslimta.envelope\nEnvelope\n)\x81N}V__dict__\n}s\x86b."
    with pytest.raises(sp.PickleCorrupt, match="cannot set __dict__"):
        sp.safe_loads(new_dict)
    # Dict state would land in the instance __dict__, where the Unpickler looks up __setstate__
    # and extend: an allowed function planted there would be called with unchecked arguments.
    env = b"\x80\x02cslimta.envelope\nEnvelope\n)\x81"
    encode = b"c_codecs\nencode\n"
    for state in (b"}V__setstate__\n" + encode + b"sbVx\nb.", b"}Vextend\n" + encode + b"sb."):
        with pytest.raises(sp.PickleCorrupt):
            sp.safe_loads(env + state)
    token_list = b"\x80\x02cemail._header_value_parser\nTokenList\n)\x81}Vextend\n"
    with pytest.raises(sp.PickleCorrupt, match="may not hold a class or function"):
        sp.safe_loads(token_list + encode + b"sb(Vx\nVrot13\ne.")


# ---- wrong types and corrupt data -------------------------------------------------------------


def test_wrong_types() -> None:
    for value in (42, {"sender": "x"}, ["a"]):
        with pytest.raises(sp.NotAnEnvelope) as info:
            sp.decode_envelope(pickle.dumps(value))
        assert info.value.kind == "wrong_type"
    with pytest.raises(sp.NotAMeta):
        sp.decode_meta(pickle.dumps([1700000000.0, 0]))
    for meta in ({"timestamp": "soon"}, {"attempts": True}, {"delivered_indexes": "0,1"}):
        with pytest.raises(sp.NotAMeta):
            sp.decode_meta(pickle.dumps(meta))
    assert sp.decode_meta(pickle.dumps({"timestamp": 1, "x": 1, 2: 3})).extra_keys == ["<int>", "x"]
    with pytest.raises(sp.NotAMeta):
        sp.decode_delivered_indexes(pickle.dumps({"0": 1}))
    for entry in ((1.5,), (None, "id"), ("1.5", "id"), [1.5, "id"]):
        with pytest.raises(sp.NotAMeta):
            sp.decode_queue_entry(pickle.dumps(entry))


@pytest.mark.parametrize(
    "attrs",
    [
        {"recipients": "b@example.org"},
        {"recipients": ["b@example.org", 7]},
        {"sender": b"a@example.com"},
        {"client": ["ip"]},
        {"headers": {"Subject": "x"}},
        {"message": ["body"]},
        {"timestamp": "yesterday"},
    ],
)
def test_envelope_with_wrong_attribute_types(attrs: dict) -> None:
    with pytest.raises(sp.NotAnEnvelope) as info:
        sp.decode_envelope(envelope_pickle(**attrs))
    assert "@" not in str(info.value) and "example" not in str(info.value)


def test_self_referencing_recipients() -> None:
    recipients: list[Any] = ["b@example.org"]
    recipients.append(recipients)
    with pytest.raises(sp.NotAnEnvelope, match="recipient #1 is a list"):
        sp.decode_envelope(envelope_pickle(recipients=recipients))


def test_memo_amplification_is_refused() -> None:
    rcpt = "r" * 1000 + "@example.org"
    data = envelope_pickle(recipients=[rcpt] * 5000)
    assert len(data) < 30_000
    with pytest.raises(sp.PickleRejected, match="far larger") as info:
        sp.decode_envelope(data)
    assert info.value.globals == []


def test_odd_but_valid_envelope_values() -> None:
    env = sp.decode_envelope(
        envelope_pickle(2, client={"auth": ("u", None), "ip": b"\x7f", "x": datetime.timedelta(1)})
    )
    assert env.client == {"auth": "('u', None)", "ip": "b'\\x7f'", "x": "<timedelta>"}
    assert (env.headers, env.body_bytes, env.message_bytes) == ([], 0, 0)


def test_empty_and_size_and_opcode_limits() -> None:
    with pytest.raises(sp.PickleCorrupt, match="ends without STOP at offset 0"):
        sp.safe_loads(b"")
    with pytest.raises(sp.PickleCorrupt, match="limit"):
        sp.decode_envelope(POLICIES_P5, max_bytes=1000)
    with pytest.raises(sp.PickleCorrupt, match="more than 100 opcodes"):
        sp.safe_loads(POLICIES_P5, max_opcodes=100)


def test_huge_length_field_fails_fast() -> None:
    for data in (
        b"\x80\x04\x8e" + (1 << 60).to_bytes(8, "little") + b"abc.",  # BINBYTES8
        b"\x80\x04\x8d" + (1 << 60).to_bytes(8, "little") + b"abc.",  # BINUNICODE8
        b"\x80\x04\x95" + (1 << 60).to_bytes(8, "little") + b"N.",  # FRAME
        b"\x80\x03B\xff\xff\xff\x7fabc.",  # BINBYTES
    ):
        start = time.perf_counter()
        with pytest.raises(sp.PickleCorrupt):
            sp.safe_loads(data)
        assert time.perf_counter() - start < 1


@pytest.mark.parametrize("data", [POLICIES_P5, POLICIES_P0], ids=["p5", "p0"])
def test_every_truncation_is_corrupt(data: bytes) -> None:
    details = set()
    for end in range(len(data)):
        with pytest.raises((sp.PickleCorrupt, sp.NotAnEnvelope)) as info:
            sp.decode_envelope(data[:end])
        details.add(info.value.detail)
    assert not [d for d in details if "@" in d or "example" in d]


def test_random_bytes_and_mutations_only_raise_our_errors() -> None:
    rng = random.Random(20240414)
    before = set(sys.modules)
    samples = [rng.randbytes(rng.randrange(0, 300)) for _ in range(1500)]
    samples += [b"\x80\x05" + rng.randbytes(rng.randrange(0, 100)) for _ in range(1500)]
    for base in (POLICIES_P5, POLICIES_P0, (DATA / "bounce_full.p2.pickle").read_bytes()):
        for _ in range(700):
            mutated = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            samples.append(bytes(mutated))
    outcomes: dict[str, int] = {}
    for data in samples:
        try:
            sp.decode_envelope(data)
            key = "ok"
        except sp.SlimtaPickleError as exc:
            key = exc.kind
        outcomes[key] = outcomes.get(key, 0) + 1
    assert set(sys.modules) - before == set()
    assert outcomes["corrupt_pickle"] > outcomes.get("unsafe_pickle", 0)
