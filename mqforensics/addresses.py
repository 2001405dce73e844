"""Mail addresses as an erasure request compares them: one address, every form it is written in.

The policy hashes an address lower-cased and trimmed (`retention.policy.subject_hash`). An
internationalised domain is written two ways, Unicode (``bücher.example``, as SMTPUTF8 mail and
its envelopes carry it) and IDNA ASCII (``xn--bcher-kva.example``, as DNS and most headers do):
both are the same mailbox, so an address is compared in both forms. The local part is compared
whole and lower-cased: a plus tag is part of it (``carol+news`` is not ``carol``).
"""

from __future__ import annotations

import re

__all__ = ["address_forms", "find_addresses"]

# atext of RFC 5322 and any non-ASCII letter (RFC 6532); a dot anywhere in it.
_LOCAL = r"[\w!#$%&'*+/=?^`{|}~.\-]"
_DOMAIN = r"[\w.\-]"
# A whole address: never begun or ended inside a longer run of address characters, so
# ``malice@example.org`` and ``alice@example.org.evil.org`` are not ``alice@example.org``.
ADDRESS = re.compile(rf"(?<!{_LOCAL})(?<!@)({_LOCAL}+)@({_DOMAIN}+)")


def _domain_forms(domain: str) -> list[str]:
    domain = domain.lower()
    forms = [domain]
    try:
        if domain.isascii():
            if "xn--" in domain:
                forms.append(domain.encode("ascii").decode("idna").lower())
        else:
            forms.append(domain.encode("idna").decode("ascii").lower())
    except (UnicodeError, ValueError):
        pass  # not a valid IDNA name: compared as written only
    return forms


def address_forms(address: str) -> tuple[str, ...]:
    """The forms `address` is compared in, trimmed and lower-cased: as written, and with its
    domain in the other IDNA form when it has one (``xn--`` labels or non-ASCII letters)."""
    text = address.strip().lower()
    local, at, domain = text.rpartition("@")
    if not at:
        return (text,)
    return tuple(dict.fromkeys(f"{local}@{form}" for form in _domain_forms(domain)))


def find_addresses(text: str) -> list[str]:
    """Every whole address in `text`, as written (a domain's trailing dots and hyphens, the end
    of a sentence, are not part of it; nor are a local part's leading dots)."""
    found = []
    for match in ADDRESS.finditer(text):
        local, domain = match.group(1).lstrip("."), match.group(2).rstrip(".-")
        if local and domain:
            found.append(f"{local}@{domain}")
    return found
