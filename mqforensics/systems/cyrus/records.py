"""Typed view of `mailboxes.db` keys and values, ACL rows, and the RACL keys Cyrus must keep.

Key name spaces (§2, §3): 3.6+ ``N``+dbname, ``I``+uniqueid, ``J``+userid RS jmapid, ``A``+U/S
RS acluser RS dbname (``AS\\x1E`` alone is the "RACLs on" marker), ``UG`` user-group keys; ≤3.5
intname keys, ``$RACL$U$user$intname`` / ``$RACL`` and ``$RUNQ$uniqueid$intname`` / ``$RUNQ``.
Values: dlist (§5.3), or the ≤2.4 text ``<mbtype> <partition> <acl>`` (§5.1).

`expected_racls` applies exactly the version's builder rule (§4.2, §4.3): no key for the owner,
for `admins`, for tombstones (``d``) and intermediates (``i``), nor for rights that fail the
version's test (3.0: ``l``; 3.1-3.2: any; 3.3-3.4.1: ``r``; 3.4.2+: ``l`` or ``r``). Negative
(``-user``) and group identifiers get keys verbatim, as Cyrus writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mqforensics.errors import InputError
from mqforensics.systems.cyrus import dlist

HIERSEP = "\x1f"
DOMAINSEP = "\x1d"
RS = "\x1e"
RACL_MARKER = b"AS\x1e"
LEGACY_RACL_MARKER = b"$RACL"
LEGACY_RUNQ_MARKER = b"$RUNQ"


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def parse_version(version: str | tuple[int, ...]) -> tuple[int, int, int]:
    parts = [int(p) for p in version.split(".")] if isinstance(version, str) else list(version)
    parts = [*parts, 0, 0, 0][:3]
    return parts[0], parts[1], parts[2]


# --- names -------------------------------------------------------------------------------------


def dbname_to_intname(dbname: str) -> str:
    """``example.com\\x1Duser\\x1Feve`` → ``example.com!user.eve``; ``Dot.ted`` → ``Dot^ted``."""
    domain, sep, rest = dbname.rpartition(DOMAINSEP)
    body = ".".join(part.replace(".", "^") for part in rest.split(HIERSEP))
    return f"{domain}!{body}" if sep else body


def intname_to_dbname(intname: str) -> str:
    domain, sep, rest = intname.partition("!")
    if not sep:
        domain, rest = "", intname
    body = HIERSEP.join(part.replace("^", ".") for part in rest.split("."))
    return f"{domain}{DOMAINSEP}{body}" if domain else body


def owner_of(intname: str, deletedprefix: str = "DELETED") -> str | None:
    """`mbname_userid` of an intname: ``localpart[@domain]`` for (deleted) user mailboxes."""
    domain, sep, rest = intname.partition("!")
    if not sep:
        domain, rest = "", intname
    parts = rest.split(".")
    if parts[0] == deletedprefix and len(parts) > 2:
        parts = parts[1:-1]
    if len(parts) > 1 and parts[0] == "user":
        local = parts[1].replace("^", ".")
        return f"{local}@{domain}" if domain else local
    return None


# --- ACLs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AclRow:
    mailbox: str
    identifier: str
    rights: str
    negative: bool


def parse_acl_string(acl: str) -> list[tuple[str, str]]:
    """Cyrus's raw ACL ``id\\trights\\tid\\trights\\t`` as (identifier, rights) pairs."""
    fields = acl.split("\t")
    if fields and fields[-1] == "":
        fields.pop()
    if len(fields) % 2:
        raise InputError(f"ACL {acl!r}: odd number of TAB-separated fields")
    return list(zip(fields[::2], fields[1::2], strict=True))


# --- mailbox entries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MailboxEntry:
    """One mailbox as Cyrus stores it; `name` is the intname, `mbtype` the T letters (or the
    decimal type of a ≤2.4 text value / legacy dump line)."""

    name: str
    mbtype: str
    partition: str | None = None
    server: str | None = None
    acl: tuple[tuple[str, str], ...] = ()
    uniqueid: str | None = None
    mtime: int | None = None
    uidvalidity: int | None = None
    createdmodseq: int | None = None
    foldermodseq: int | None = None
    jmapid: str | None = None
    history: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def deleted(self) -> bool:
        """A tombstone: ``d`` in the T letters, or type bit 16 in a ≤3.4 decimal mbtype."""
        return "d" in self.mbtype if not self.mbtype.isdigit() else bool(int(self.mbtype) & 16)

    @property
    def intermediate(self) -> bool:
        return "i" in self.mbtype if not self.mbtype.isdigit() else bool(int(self.mbtype) & 256)

    def acl_rows(self) -> list[AclRow]:
        return [
            AclRow(self.name, ident.removeprefix("-"), rights, ident.startswith("-"))
            for ident, rights in self.acl
        ]


def _num(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def entry_from_fields(name: str, fields: dict[str, Any]) -> MailboxEntry:
    """A `MailboxEntry` from a parsed dlist kvlist (T, P, S, A, I, M, V, C, F, J, H)."""
    acl = fields.get("A") or {}
    if not isinstance(acl, dict):
        raise InputError(f"{name!r}: A field is not a kvlist")
    history = fields.get("H") or []
    return MailboxEntry(
        name=name,
        mbtype=fields.get("T") or "",
        partition=fields.get("P"),
        server=fields.get("S"),
        acl=tuple((str(k), str(v)) for k, v in acl.items()),
        uniqueid=fields.get("I"),
        mtime=_num(fields.get("M")),
        uidvalidity=_num(fields.get("V")),
        createdmodseq=_num(fields.get("C")),
        foldermodseq=_num(fields.get("F")),
        jmapid=fields.get("J"),
        history=tuple(h for h in history if isinstance(h, dict)),
    )


def decode_value(name: str, value: bytes) -> MailboxEntry:
    """Decode a mailbox record value: dlist (2.5+), or ≤2.4 ``<mbtype> <part> <acl>`` text."""
    if value.startswith(b"%"):
        fields = dlist.parse(value, where=f"mailbox {name!r}")
        if not isinstance(fields, dict):
            raise InputError(f"mailbox {name!r}: value is not a dlist kvlist")
        return entry_from_fields(name, fields)
    text = _text(value)
    if text.startswith("("):
        text = text[text.index(")") + 1 :].lstrip()
    mbtype, _, rest = text.partition(" ")
    part, _, acl = rest.partition(" ")
    if not mbtype.isdigit():
        raise InputError(f"mailbox {name!r}: value {text[:40]!r} is neither dlist nor text")
    server, bang, partition = part.rpartition("!")
    return MailboxEntry(
        name=name,
        mbtype=mbtype,
        partition=None if partition == "(null)" else partition,
        server=server if bang else None,
        acl=tuple(parse_acl_string(acl)),
    )


# --- keys --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """What a `mailboxes.db` key is. `name` is a dbname (3.6+) or intname (≤3.5)."""

    kind: str  # mailbox, id, jmapid, racl, racl_marker, runq, runq_marker, usergroup, legacy_*
    name: str | None = None
    user: str | None = None
    shared: bool | None = None
    ident: str | None = None


def classify_key(key: bytes) -> Key:
    """Classify one key of either name space (Appendix A's rules)."""
    text = _text(key)
    if key == RACL_MARKER:
        return Key("racl_marker")
    if key == LEGACY_RACL_MARKER:
        return Key("legacy_racl_marker")
    if key == LEGACY_RUNQ_MARKER:
        return Key("legacy_runq_marker")
    if key.startswith((b"AU\x1e", b"AS\x1e")):
        user, sep, dbname = text[3:].partition(RS)
        if not sep:
            return Key("unknown", ident=text)
        return Key("racl", name=dbname, user=user, shared=key[1:2] == b"S")
    if key.startswith((b"$RACL$U$", b"$RACL$S$")):
        user, _, intname = text[8:].partition("$")
        return Key("legacy_racl", name=intname, user=user, shared=key[6:7] == b"S")
    if key.startswith(b"$RUNQ$"):
        uniqueid, _, intname = text[6:].partition("$")
        return Key("legacy_runq", name=intname, ident=uniqueid)
    if key.startswith(b"$"):
        return Key("unknown", ident=text)
    if key.startswith(b"UG"):
        user, _, group = text[2:].partition(RS)
        return Key("usergroup", user=user, ident=group)
    if key.startswith(b"N"):
        return Key("mailbox", name=text[1:])
    if key.startswith(b"I"):
        return Key("id", ident=text[1:])
    if key.startswith(b"J") and RS in text:
        user, _, jmapid = text[1:].partition(RS)
        return Key("jmapid", user=user or None, ident=jmapid)
    return Key("legacy_mailbox", name=text)


def split_legacy_racl(key: bytes, intnames: Iterable[str]) -> list[tuple[str, str]]:
    """Every (acluser, intname) split of a ``$RACL$X$...`` key whose intname exists (§4.2: `$`
    is not escaped, so a key can be ambiguous)."""
    rest = _text(key)[8:]
    names = set(intnames)
    return [
        (rest[:i], rest[i + 1 :]) for i, c in enumerate(rest) if c == "$" and rest[i + 1 :] in names
    ]


def mailbox_entries(
    items: Iterable[tuple[bytes, bytes]], undecodable: list[tuple[bytes, str]] | None = None
) -> list[MailboxEntry]:
    """Decode every mailbox record (3.6+ ``N`` keys, ≤3.5 intname keys) of a key/value stream.

    A record whose value is neither dlist nor ≤2.4 text is left out and, when `undecodable` is
    given, listed there as (key, why): one bad record must not hide every other."""
    out: list[MailboxEntry] = []
    for key, value in items:
        info = classify_key(key)
        if info.kind not in ("mailbox", "legacy_mailbox") or info.name is None:
            continue
        name = dbname_to_intname(info.name) if info.kind == "mailbox" else info.name
        try:
            out.append(decode_value(name, value))
        except InputError as exc:
            if undecodable is None:
                raise
            undecodable.append((key, exc.message))
    return out


# --- RACL rule ---------------------------------------------------------------------------------


def _rights_make_racl(rights: str, version: tuple[int, int, int]) -> bool:
    if version < (3, 1, 0):
        return "l" in rights
    if version < (3, 3, 0):
        return True
    if version < (3, 4, 2):
        return "r" in rights
    return "l" in rights or "r" in rights


def racl_key(version: tuple[int, int, int], shared: bool, user: str, entry_name: str) -> bytes:
    """`mboxlist_racl_key` of the version for an intname."""
    if version >= (3, 6, 0):
        return (
            b"A"
            + (b"S" if shared else b"U")
            + b"\x1e"
            + _raw(f"{user}{RS}{intname_to_dbname(entry_name)}")
        )
    return b"$RACL$" + (b"S" if shared else b"U") + b"$" + _raw(f"{user}${entry_name}")


def expected_racls(
    entries: Iterable[MailboxEntry],
    version: str | tuple[int, ...],
    admins: Iterable[str] = (),
    deletedprefix: str = "DELETED",
) -> set[bytes]:
    """The RACL keys (not the marker) Cyrus `version` keeps for `entries` when RACLs are on."""
    ver = parse_version(version)
    if ver < (3, 0, 0):
        return set()
    admin_set = set(admins)
    keys: set[bytes] = set()
    for entry in entries:
        if entry.deleted or entry.intermediate:
            continue
        owner = owner_of(entry.name, deletedprefix)
        for ident, rights in entry.acl:
            if ident == owner or ident in admin_set or not _rights_make_racl(rights, ver):
                continue
            keys.add(racl_key(ver, owner is None, ident, entry.name))
    return keys


def racl_marker(version: str | tuple[int, ...]) -> bytes:
    return RACL_MARKER if parse_version(version) >= (3, 6, 0) else LEGACY_RACL_MARKER
