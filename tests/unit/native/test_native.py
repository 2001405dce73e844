"""The kernel builder (`mqforensics.native`): a kernel is compiled once and its CRC-32 equals
zlib's; without a compiler, or with ``MQF_NATIVE=off``, `load` says why instead of failing."""

import ctypes
import random
import zlib

import pytest

from mqforensics import native

CRC_ONLY = native.Kernel(
    "crc_only",
    (),
    {"mqf_crc32_export": (ctypes.c_uint32, (ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t))},
)


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    native.forget()
    yield
    native.forget()


def test_the_crc_equals_zlibs_at_every_length_and_alignment(tmp_path):
    library = native.load(CRC_ONLY)
    assert library is not None, native.unavailable(CRC_ONLY)
    rng = random.Random(47)
    data = bytes(rng.getrandbits(8) for _ in range(4096))
    buffer = ctypes.create_string_buffer(data, len(data))
    for start in range(9):
        for length in (0, 1, 7, 8, 9, 63, 64, 65, 1000, 4096 - 9):
            seed = rng.getrandbits(32)
            got = library.mqf_crc32_export(
                seed, ctypes.cast(ctypes.byref(buffer, start), ctypes.c_char_p), length
            )
            assert got == zlib.crc32(data[start : start + length], seed)
    built = list((tmp_path / "cache" / "mqforensics" / "native").glob("crc_only-*.so"))
    assert len(built) == 1


def test_off_and_no_compiler_are_said_not_raised(monkeypatch):
    monkeypatch.setenv("MQF_NATIVE", "off")
    assert native.load(CRC_ONLY) is None
    assert native.unavailable(CRC_ONLY) == "MQF_NATIVE is off"
    native.forget()
    monkeypatch.delenv("MQF_NATIVE")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    assert native.load(CRC_ONLY) is None
    assert native.unavailable(CRC_ONLY) == "no C compiler ($CC, cc or gcc) on this machine"


def test_a_build_error_is_one_line(monkeypatch, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    kernel = native.Kernel("broken", (broken,))
    assert native.load(kernel) is None
    reason = native.unavailable(kernel)
    assert reason is not None and "failed on broken" in reason and "\n" not in reason
