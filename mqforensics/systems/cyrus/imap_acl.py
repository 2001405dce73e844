"""ACLs over IMAP as a Cyrus admin: LIST, GETACL, SETACL removing rights, DELETEACL (RFC 4314),
nothing else (it never grants a right).

``SETACL mailbox identifier -rights`` removes exactly those rights from the entry, atomically on
the server (Cyrus reads and rewrites the ACL under its mailbox and `mailboxes.db` locks), and
Cyrus drops the entry, and the entry's RACL key with it, when no right is left (``cyrus_acl_set``:
an entry whose access becomes 0 is removed; verified on 3.6.1). Cyrus refuses to name an
identifier its auth module cannot canonify in a SETACL with rights (with ``auth_mech: unix``,
the default: a ``group:`` that no longer exists, a name longer than 80 bytes, a byte outside its
allowed set such as ``&``, ``/`` or non-ASCII): `InvalidIdentifier`. Such legacy entries can
still be removed whole with DELETEACL. Both commands name the canonical form of the identifier
(``username_tolower`` lowercases it), not necessarily the entry's stored spelling.

Mailboxes are named as the admin sees them: the intname's components joined with the hierarchy
separator of the admin's NAMESPACE (``/`` with ``unixhierarchysep: yes``, where ``^`` in an
intname is a ``.``), the domain appended as ``@domain`` (``example.com!user.eve.Sent`` →
``user/eve/Sent@example.com``). Arguments are sent as quoted strings, responses are read as
atoms, quoted strings and literals.
"""

from __future__ import annotations

import contextlib
import imaplib
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from mqforensics.errors import AuthenticationFailed

_NAMESPACE_DELIMITER = re.compile(rb'\(\("[^"]*" (?:"(.)"|NIL)\)')


class LoginRefused(Exception):
    """The server refused the admin's credentials (never retried)."""


class NoSuchMailbox(Exception):
    pass


class InvalidIdentifier(Exception):
    """Cyrus will not take the identifier in a SETACL with rights (see the module docstring)."""


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tokens(data: bytes) -> list[str]:
    """Atoms and quoted strings of one response line (``NIL`` stays the text ``NIL``)."""
    out: list[str] = []
    i = 0
    while i < len(data):
        c = data[i : i + 1]
        if c == b" ":
            i += 1
        elif c == b'"':
            j = i + 1
            buf = bytearray()
            while j < len(data) and data[j : j + 1] != b'"':
                if data[j : j + 1] == b"\\":
                    j += 1
                buf += data[j : j + 1]
                j += 1
            out.append(buf.decode("utf-8", "surrogateescape"))
            i = j + 1
        else:
            j = data.find(b" ", i)
            j = len(data) if j < 0 else j
            out.append(data[i:j].decode("utf-8", "surrogateescape"))
            i = j
    return out


def _flatten(item: Any) -> bytes:
    """imaplib gives a literal as (prefix ``... {n}``, literal bytes): splice it back quoted."""
    if isinstance(item, tuple):
        head = re.sub(rb"\{\d+\}$", b"", item[0])
        literal = item[1].replace(b"\\", b"\\\\").replace(b'"', b'\\"')
        return head + b'"' + literal + b'"'
    return bytes(item)


def external_name(intname: str, separator: str) -> str:
    """The admin's name of an intname (see the module docstring)."""
    domain, bang, rest = intname.partition("!")
    if not bang:
        rest = intname
    parts = rest.split(".")
    if separator != ".":
        parts = [part.replace("^", ".") for part in parts]
    name = separator.join(parts)
    return f"{name}@{domain}" if bang else name


@dataclass
class ImapAdmin:
    """One admin session; reconnects after the server went away (the caller retries)."""

    host: str
    port: int
    username: str
    password: str
    use_ssl: bool = False
    timeout: float = 30.0

    def __post_init__(self) -> None:
        self._imap: imaplib.IMAP4 | None = None
        self._separator: str | None = None

    def _connect(self) -> imaplib.IMAP4:
        if self._imap is not None:
            return self._imap
        if self.use_ssl:
            context = ssl.create_default_context()
            imap: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                self.host, self.port, ssl_context=context, timeout=self.timeout
            )
        else:
            imap = imaplib.IMAP4(self.host, self.port, timeout=self.timeout)
        try:
            imap.login(self.username, self.password)
        except imaplib.IMAP4.error:
            imap.shutdown()
            raise LoginRefused(f"IMAP login as {self.username} refused") from None
        self._imap = imap
        return imap

    def _command(self, name: str, *args: str, response: str | None = None) -> list[bytes]:
        """Run `name`; the data of its untagged `response` (default: the command's name)."""
        imap = self._connect()
        try:
            status, data = imap._simple_command(name, *args)
            if status == "OK":
                status, data = imap._untagged_response(status, data, response or name)
        except (imaplib.IMAP4.abort, OSError):
            self._imap = None  # broken: the next command logs in again
            raise
        if status != "OK":
            text = b" ".join(_flatten(d) for d in data if d).decode(errors="replace")
            if "NONEXISTENT" in text.upper() or "does not exist" in text:
                raise NoSuchMailbox(text)
            if "invalid identifier" in text.lower():
                raise InvalidIdentifier(f"{name} failed: {text}")
            raise imaplib.IMAP4.error(f"{name} failed: {text}")
        return [_flatten(d) for d in data if d is not None]

    @property
    def separator(self) -> str:
        """The hierarchy separator of the admin's shared (else other users') namespace."""
        if self._separator is None:
            (line,) = self._command("NAMESPACE")[:1] or [b""]
            found = [m.group(1) for m in _NAMESPACE_DELIMITER.finditer(line) if m.group(1)]
            self._separator = found[-1].decode() if found else "."
        return self._separator

    def name_of(self, intname: str) -> str:
        return external_name(intname, self.separator)

    def getacl(self, mailbox: str) -> dict[str, str]:
        """Identifier → rights of `mailbox` (an admin-visible name); `NoSuchMailbox` if absent."""
        lines = self._command("GETACL", quote(mailbox), response="ACL")
        for line in lines:
            fields = tokens(line)
            if fields and fields[0] == mailbox:
                pairs = fields[1:]
                return dict(zip(pairs[::2], pairs[1::2], strict=False))
        # Never read "no answer" as "no grant": that would pass a DELETEACL as already done.
        raise imaplib.IMAP4.error(f"GETACL {mailbox}: no ACL response for that name ({lines!r})")

    def remove_rights(self, mailbox: str, identifier: str, rights: str) -> None:
        """``SETACL mailbox identifier -rights``: takes exactly `rights` from the entry (the
        entry goes when none is left); rights granted beside them stay."""
        if not rights:
            raise ValueError("remove_rights: no rights to remove")
        self._command("SETACL", quote(mailbox), quote(identifier), quote("-" + rights))

    def deleteacl(self, mailbox: str, identifier: str) -> None:
        self._command("DELETEACL", quote(mailbox), quote(identifier))

    def mailboxes(self) -> list[str]:
        """Every mailbox the admin can LIST (``LIST "" "*"``), \\Noselect ones left out."""
        names = []
        for line in self._command("LIST", '""', '"*"'):
            flags_end = line.find(b")")
            fields = tokens(line[flags_end + 1 :])
            if len(fields) >= 2 and b"\\noselect" not in line[:flags_end].lower():
                names.append(fields[1])
        return names

    def close(self) -> None:
        imap, self._imap = self._imap, None
        if imap is not None:
            with contextlib.suppress(imaplib.IMAP4.error, OSError):
                imap.logout()


def classify_error(exc: BaseException) -> str | None:
    """``auth`` for a refused login, ``retry`` when the connection broke, else None."""
    if isinstance(exc, LoginRefused | AuthenticationFailed):
        return "auth"
    if isinstance(exc, imaplib.IMAP4.abort | ConnectionError | socket.timeout | TimeoutError):
        return "retry"
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLCertVerificationError):
        return "retry"
    return None
