"""Data subjects in findings: keyed hashes that match an erasure request and name nobody.

An erasure rule names its subjects by the SHA-256 of the lower-cased, trimmed address
(`retention.policy.subject_hash`). An audit told to look for them (``--erasure-policy FILE``)
records every object holding one as a ``personal_data`` finding whose ``detail.subjects`` are
HMAC-SHA256 of those hashes under the audit's own key: a findings file alone cannot be tested
against candidate addresses, and the planner, given the same key, matches the policy's rules
to the findings. The key is 32 random bytes in ``<audit dir>/subject.key`` (mode 0600), or
``MQF_SUBJECT_KEY`` (hex) when several audits must agree.

Spark has no HMAC function; `keyed_column` builds it from ``sha2`` and ``concat`` of binaries
(RFC 2104 with a 64-byte block), so it runs in the executors and equals `keyed`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.errors import ConfigError, InputError

if TYPE_CHECKING:
    from pyspark.sql import Column

    from mqforensics.retention.policy import Policy

KEY_FILE = "subject.key"
KEY_VARIABLE = "MQF_SUBJECT_KEY"
CHECK = "personal_data"
_BLOCK = 64


def new_key(out: Path) -> bytes:
    """The audit's key: ``MQF_SUBJECT_KEY`` (hex) or 32 random bytes, kept in `out`."""
    configured = os.environ.get(KEY_VARIABLE, "").strip()
    if configured:
        try:
            key = bytes.fromhex(configured)
        except ValueError:
            raise ConfigError(f"{KEY_VARIABLE} is not hexadecimal") from None
        if len(key) < 16:
            raise ConfigError(f"{KEY_VARIABLE} must hold at least 16 bytes (32 hex digits)")
    else:
        key = secrets.token_bytes(32)
    out.mkdir(parents=True, exist_ok=True)
    path = out / KEY_FILE
    tmp = out / f".{KEY_FILE}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key.hex() + "\n")
    tmp.replace(path)
    return key


def read_key(audit_dir: Path) -> bytes:
    path = Path(audit_dir) / KEY_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: the audit's subject key is missing") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a subject key ({type(exc).__name__})") from None


def keyed(subject_sha256: str, key: bytes) -> str:
    """HMAC-SHA256 of a subject's hash under `key`, as 64 hex digits."""
    return hmac.new(key, subject_sha256.encode(), hashlib.sha256).hexdigest()


def keyed_all(subject_hashes: Iterable[str], key: bytes) -> list[str]:
    return sorted({keyed(s, key) for s in subject_hashes})


def erasure_subjects(policy: Policy, search: str | None = None) -> list[str]:
    """Every subject hash of the policy's erase_subject rules (of those searching at `search`
    depth, ``headers`` or ``full``, when given)."""
    rules = [r for r in policy.rules if search is None or r.search == search]
    return sorted({s for rule in rules for s in rule.subjects})


def address_hash_column(address: Column) -> Column:
    """SHA-256 hex of the lower-cased, trimmed address (``\\s`` trims tabs and line breaks too,
    as Python's ``strip``), as `retention.policy.subject_hash` computes it."""
    from pyspark.sql import functions as F

    return F.sha2(F.lower(F.regexp_replace(address, r"^\s+|\s+$", "")), 256)


def _pads(key: bytes) -> tuple[bytes, bytes]:
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in key), bytes(b ^ 0x5C for b in key)


def keyed_column(subject_sha256: Column, key: bytes) -> Column:
    """`keyed` as a Spark expression over a column of subject hashes (hex text)."""
    from pyspark.sql import functions as F

    inner, outer = _pads(key)
    message = subject_sha256.cast("binary")
    first = F.unhex(F.sha2(F.concat(F.lit(inner), message), 256))
    return F.sha2(F.concat(F.lit(outer), first), 256)


def keyed_addresses(addresses: Column, key: bytes) -> Column:
    """An array column of addresses as the array of their keyed subject hashes (nulls dropped)."""
    from pyspark.sql import functions as F

    hashed = F.transform(addresses, lambda a: keyed_column(address_hash_column(a), key))
    return F.filter(hashed, lambda h: h.isNotNull())


def keyed_policy(policy: Policy, key: bytes) -> Policy:
    """`policy` with each erase rule's subjects replaced by their keyed hashes, as findings
    carry them: what a planner matches `detail.subjects` against."""
    import dataclasses

    rules = tuple(
        dataclasses.replace(rule, subjects=tuple(keyed_all(rule.subjects, key)))
        if rule.subjects
        else rule
        for rule in policy.rules
    )
    return dataclasses.replace(policy, rules=rules)
