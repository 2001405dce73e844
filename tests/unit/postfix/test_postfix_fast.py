"""The kernel walk (`fast`, walk.c) against the reference reader (`records.read_records`): the
same `files.message_columns` for every bundled queue file and test fixture, and for thousands
of fuzzed files (truncated, bit-flipped, spliced, records retyped) from a fixed seed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqforensics import native
from mqforensics.systems.postfix import fast
from mqforensics.systems.postfix.files import message_columns
from mqforensics.systems.postfix.queue_dir import MESSAGE_QUEUES
from tests.unit.postfix import planted_queue

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "datasets" / "postfix" / "sample" / "queue"
DATA = ROOT / "tests" / "data" / "postfix"
FUZZED = 3000
TYPES = b"CTcFILSDRO/WAKfdMNwXrePpV<ionmE>"


def _bundled() -> dict[str, bytes]:
    files = {
        str(p.relative_to(ROOT)): p.read_bytes()
        for queue in MESSAGE_QUEUES
        for p in sorted((SAMPLE / queue).rglob("*"))
        if p.is_file()
    }
    files.update({p.name: p.read_bytes() for p in sorted(DATA.iterdir()) if not p.suffix})
    files.update({name: content for name, (content, *_) in planted_queue.FILES.items()})
    return files


BUNDLED = _bundled()


@pytest.fixture(autouse=True)
def kernel() -> None:
    native.forget()
    assert fast.available(), native.unavailable(fast.KERNEL)


def _same(data: bytes) -> bool:
    return message_columns(data) == message_columns(data, reference=True)


def test_the_bundled_files_read_alike() -> None:
    assert len(BUNDLED) >= 12
    clean = [name for name, data in BUNDLED.items() if fast.envelope_records(data) is not None]
    assert len(clean) >= 8  # the kernel answered for the undamaged ones
    for name, data in BUNDLED.items():
        assert _same(data), name


def test_a_clean_file_keeps_envelope_headers_and_extracted_records() -> None:
    data = (DATA / "deferred-9564D9841D2").read_bytes()
    walked = fast.envelope_records(data)
    assert walked is not None and walked.complete
    assert {"C", "T", "S", "R", "M", "N", "X", "E"} <= {r.type for r in walked.records}


def _fuzzed(rng: random.Random, sources: list[bytes]) -> bytes:
    data = bytearray(rng.choice(sources))
    how = rng.randrange(5)
    if how == 0:  # truncated
        return bytes(data[: rng.randrange(len(data) + 1)])
    if how == 1:  # bits flipped
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == 2:  # spliced with another file
        other = rng.choice(sources)
        data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]
    elif how == 3:  # a byte set to a record type (a type byte retyped, or a length changed)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.choice(TYPES)
    else:  # a pointer record inserted somewhere, to a random offset
        at = rng.randrange(len(data) + 1)
        target = str(rng.randrange(len(data) + 8)).encode()
        data = data[:at] + b"p" + bytes([len(target)]) + target + data[at:]
    return bytes(data)


def test_fuzzed_files_read_alike() -> None:
    rng = random.Random(47)
    sources = list(BUNDLED.values())
    answered = 0
    for n in range(FUZZED):
        data = _fuzzed(rng, sources)
        answered += fast.envelope_records(data) is not None
        assert _same(data), f"fuzzed file {n}: {data!r}"
    assert answered >= FUZZED // 10  # many still read cleanly: the kernel's path is exercised


def test_without_the_kernel_the_reference_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    data = (DATA / "deferred-9564D9841D2").read_bytes()
    assert fast.envelope_records(data) is None
    assert message_columns(data) == message_columns(data, reference=True)
    native.forget()


def test_an_audit_says_when_the_reference_reads_every_file(monkeypatch: pytest.MonkeyPatch):
    native.forget()
    assert fast.kernel_note() is None
    monkeypatch.setenv("MQF_NATIVE", "off")
    native.forget()
    assert fast.kernel_note() == (
        "Postfix queue files read by the reference reader: MQF_NATIVE is off"
    )
    native.forget()
