"""Small C kernels for the readers' hot loops, compiled once per machine and loaded with ctypes.

A reader whose format costs one Python object per record (log-queue segments, twoskip, ...)
keeps its pure-Python reader as the reference and may add a kernel: a C source file beside the
Python module that uses it, compiled together with the shared CRC-32 (`crc32.c`) into a shared
library by the machine's C compiler (``$CC``, else ``cc``, else ``gcc``: from Debian, the
registry the project installs its servers from). The library is cached in
``~/.cache/mqforensics/native/`` under a name that hashes its sources, flags and compiler, so a
changed source is rebuilt and concurrent processes (Spark's Python workers, pytest's) build it
once, under a file lock.

Nothing here is required: `load` answers None when the kernel cannot be had (no compiler, a
build error, a big-endian host, or ``MQF_NATIVE=off``) and `unavailable` says why, so the caller
falls back to its reference reader, which gives the same answers, slower, and says so where the
user sees it (a run's notes). Tests compare every kernel with its reference reader.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqforensics.services.cache import cache_dir

__all__ = ["CRC32", "Kernel", "load", "note", "unavailable"]

HERE = Path(__file__).resolve().parent
CRC32 = HERE / "crc32.c"
FLAGS = ("-O3", "-std=c11", "-fPIC", "-shared", "-Wall", "-fno-strict-aliasing")
OFF = ("0", "off", "no", "false")

_loaded: dict[str, ctypes.CDLL | None] = {}
_reasons: dict[str, str] = {}


@dataclass(frozen=True)
class Kernel:
    """A kernel: its `name` (the library's file name stem), its C `sources` (the shared CRC-32
    is always added) and each exported function's ctypes signature, ``name -> (restype,
    argtypes)``."""

    name: str
    sources: tuple[Path, ...]
    functions: Mapping[str, tuple[Any, Sequence[Any]]] = field(default_factory=dict)


def _compiler() -> str | None:
    for candidate in (os.environ.get("CC"), "cc", "gcc"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _library_path(kernel: Kernel, compiler: str) -> Path:
    digest = hashlib.sha256()
    for source in (CRC32, HERE / "crc32.h", *kernel.sources):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update(" ".join((compiler, *FLAGS, platform.machine())).encode())
    return cache_dir("native") / f"{kernel.name}-{digest.hexdigest()[:16]}.so"


def _build(kernel: Kernel, compiler: str, target: Path) -> None:
    """Compile into `target` (under a lock; built to a temporary name, then renamed)."""
    with (target.parent / f"{kernel.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        command = [compiler, *FLAGS, f"-I{HERE}", "-o", str(tmp)]
        command += [str(CRC32), *(str(s) for s in kernel.sources)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"{compiler} could not run: {exc}") from None
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            first = (result.stderr.strip().splitlines() or ["no message"])[0]
            raise RuntimeError(f"{compiler} failed on {kernel.name}: {first}")
        os.replace(tmp, target)


def _open(kernel: Kernel) -> ctypes.CDLL:
    if os.environ.get("MQF_NATIVE", "").strip().lower() in OFF:
        raise RuntimeError("MQF_NATIVE is off")
    if sys.byteorder != "little":
        raise RuntimeError("the kernels assume a little-endian host")
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C compiler ($CC, cc or gcc) on this machine")
    target = _library_path(kernel, compiler)
    if not target.exists():
        _build(kernel, compiler, target)
    library = ctypes.CDLL(str(target))
    check = library.mqf_crc32_export
    check.restype, check.argtypes = (
        ctypes.c_uint32,
        [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t],
    )
    probe = bytes(range(256)) * 3 + b"mqforensics"
    if check(7, probe, len(probe)) != zlib.crc32(probe, 7):
        raise RuntimeError(f"{target.name}: its CRC-32 disagrees with zlib's")
    for name, (restype, argtypes) in kernel.functions.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, list(argtypes)
    return library


def load(kernel: Kernel) -> ctypes.CDLL | None:
    """The kernel's library with its functions typed, built on first use; None when it cannot
    be had (`unavailable` says why). Once per process."""
    if kernel.name not in _loaded:
        try:
            _loaded[kernel.name] = _open(kernel)
        except (OSError, RuntimeError, AttributeError) as exc:
            _loaded[kernel.name] = None
            _reasons[kernel.name] = str(exc)
    return _loaded[kernel.name]


def unavailable(kernel: Kernel) -> str | None:
    """Why `load(kernel)` gives None (after trying it), or None when the kernel is loaded."""
    return None if load(kernel) is not None else _reasons.get(kernel.name, "not loaded")


def note(kernel: Kernel, said: str) -> str | None:
    """A run's note when `kernel` cannot be had: `said` (what the reference reader reads
    instead) and why; None when the kernel is loaded."""
    reason = unavailable(kernel)
    return None if reason is None else f"{said}: {reason}"


def forget() -> None:
    """Forget what was loaded or refused in this process (tests switch ``MQF_NATIVE``)."""
    _loaded.clear()
    _reasons.clear()
