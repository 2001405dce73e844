"""Pseudonymisation of mail addresses in everything a report shows.

Reports, findings summaries and validation samples may quote values that contain mail addresses
(senders, recipients, error messages). They are shown pseudonymised by default: the local part is
replaced by ``u-`` and 8 hex digits of a SHA-256 over the salt and the address, the domain is
kept (``alice@example.org`` -> ``u-3fa2c1d0@example.org``), so a reader can still tell addresses
apart, group them by domain and match them across one report, without learning who they are.

The hash is stable: the same address (domain compared case-insensitively) and salt always give
the same pseudonym. Without a salt anyone holding a candidate address can recompute its
pseudonym; pass a per-investigation secret `salt` when that matters. Pseudonymising is idempotent:
text that is already pseudonymised is left as it is.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# An unquoted address: dot-atom local part (RFC 5322 atext) and a host name (a dot is optional:
# James accepts `user@localhost`). Quoted local parts are rare in queues and not matched.
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
ADDRESS = re.compile(
    rf"(?<![A-Za-z0-9!#$%&'*+/=?^_`{{|}}~.-])"
    rf"(?P<local>{_ATEXT}+(?:\.{_ATEXT}+)*)"
    r"@(?P<domain>[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)"
)
_PSEUDONYM = re.compile(r"u-[0-9a-f]{8}")
_DIGITS = 8


def _token(value: str, salt: str) -> str:
    digest = hashlib.sha256(f"{salt}\x00{value}".encode()).hexdigest()
    return f"u-{digest[:_DIGITS]}"


def pseudonymize_address(addr: str, salt: str = "") -> str:
    """``local@domain`` with the local part replaced by a short stable hash of the address.

    The domain is kept as written. A value without ``@`` is treated as a bare local part and
    replaced as a whole. An address that is already a pseudonym is returned unchanged.
    """
    local, at, domain = addr.rpartition("@")
    if not at:
        return addr if _PSEUDONYM.fullmatch(addr) else _token(addr, salt)
    if _PSEUDONYM.fullmatch(local):
        return addr
    return f"{_token(f'{local}@{domain.lower()}', salt)}@{domain}"


def _pseudonymize_match(match: re.Match[str], salt: str) -> str:
    # ``seg-00000003.lq@1042`` is a position in a file (logqueue findings), not an address: a
    # domain of one all-digit label names no host (RFC 3696, section 2). A dotted all-digit
    # domain (``alice@10.0.0.1``, an unbracketed IPv4 literal some MTAs accept) is still an address.
    if match.group("domain").isdigit():
        return match.group(0)
    # ``=`` is atext, so ``to=alice@example.org`` (log lines, ``key=value`` summaries) matches
    # as one address: the part up to the last ``=`` is kept as the key it almost always is.
    prefix, eq, address = match.group(0).rpartition("=")
    if not eq:
        return pseudonymize_address(address, salt)
    return prefix + eq + pseudonymize_address(address, salt)


def pseudonymize_text(text: str, salt: str = "") -> str:
    """`text` with every mail address in it pseudonymised (see `pseudonymize_address`)."""
    if "@" not in text:
        return text
    return ADDRESS.sub(lambda m: _pseudonymize_match(m, salt), text)


def pseudonymize_value(value: Any, salt: str = "") -> Any:
    """`value` as shown in a table: text pseudonymised, lists/tuples/dicts item by item, anything
    else (numbers, times, None) as it is."""
    if isinstance(value, str):
        return pseudonymize_text(value, salt)
    if isinstance(value, (list, tuple)):
        return [pseudonymize_value(v, salt) for v in value]
    if isinstance(value, dict):
        return {k: pseudonymize_value(v, salt) for k, v in value.items()}
    if hasattr(value, "tolist"):  # a numpy array, as pandas holds Spark arrays
        return pseudonymize_value(value.tolist(), salt)
    return value


def pseudonymize_table(
    table: pd.DataFrame, *, reveal: bool = False, salt: str = ""
) -> pd.DataFrame:
    """A copy of a pandas table with every address in every cell pseudonymised, unless `reveal`:
    what notebooks show of a frame they collected (a handful of rows)."""
    if reveal:
        return table
    return table.apply(lambda column: column.map(lambda v: pseudonymize_value(v, salt)))
