"""Masking: hiding the credentials a text holds, for every message and output of the toolkit.

`mask_secrets(text)` hides, wherever they appear in a text:

- a URL's userinfo: ``scheme://user:password@host`` and ``scheme://token@host`` become
  ``scheme://[hidden]@host`` (the brackets keep pseudonymisation from reading ``hidden@host``
  as a mail address);
- the value of a field named like a secret (`is_secret_name`), in every way it is written:
  query and connection strings (``?X-Amz-Signature=...``, ``&access_token=...``,
  ``sc://host/;token=...``), ``name=value``, ``name: value``, ``"name": "value"``,
  ``'name': 'value'``, ``name -> value`` (Scala maps) and ``--name value``.

This module imports no other module of the package: `errors` masks every message with it, and
`credentials` (which raises those errors) re-exports it.
"""

from __future__ import annotations

import re

HIDDEN = "[hidden]"

# The last word of a secret's name (words split at '_', '-', '.', and camelCase).
_SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "pw", "passphrase", "secret", "token", "signature",
    "sig", "credential", "authorization", "auth", "apikey", "accesskey", "secretkey",
})  # fmt: skip
# ``key`` is a secret after one of these words (``api_key``, ``secret access key``,
# ``AccountKey``); alone it is not: here it names S3 objects and Redis keys.
_KEY_QUALIFIERS = frozenset({
    "api", "access", "secret", "private", "account", "session", "signing", "master", "sas",
    "auth", "encryption",
})  # fmt: skip
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# scheme://userinfo@: ``user:password@`` (the password may hold '/': AWS secret keys do; a port
# followed by a path is not a password), or a lone ``token@``.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?:[^\s/?#@:]*:(?!\d+(?:[/?#\s]|$))[^\s@]*|[^\s/?#@:]+)@"
)
# name SEP value: the name not inside a path or a longer name; quoted values kept quoted.
_FIELD = re.compile(
    r"(?<![\w./-])(?P<quote>[\"']?)(?P<name>[A-Za-z][\w.-]*)(?P=quote)"
    r"(?P<sep>[ \t]*(?:=|->)[ \t]*|:[ \t]?)"
    r"(?P<value>\[hidden\]|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s&;\"',)\]}]+)"
)
_FLAG = re.compile(r"(?<![\w-])--?(?P<name>[A-Za-z][\w-]*)(?:[ \t]+|=)(?P<value>\[hidden\]|\S+)")


def is_secret_name(name: str) -> bool:
    """Whether a field or option called `name` holds a secret: ``password``, ``redis_password``,
    ``aws_secret_access_key``, ``X-Amz-Signature``, ``access_token``, ``apiKey``...; not
    ``aws_access_key_id``, ``key``, ``message_key``, ``keyspace``, ``token_range``, ``username``."""
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return False
    if words[-1] in _SECRET_WORDS:
        return True
    return words[-1] == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


def _hide_value(value: str) -> str:
    if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
        return value[0] + HIDDEN + value[0]
    return HIDDEN


def _hide_named(pattern: re.Pattern[str], text: str) -> str:
    """The values of `pattern`'s matches whose name is a secret's, hidden. A match of another
    name does not consume its value, which may hold the next field (``https://h/?token=x``)."""
    parts, done, start = [], 0, 0
    while (match := pattern.search(text, start)) is not None:
        if is_secret_name(match.group("name")):
            parts += [text[done : match.start("value")], _hide_value(match.group("value"))]
            done = start = match.end()
        else:
            start = match.end("name")
    return "".join([*parts, text[done:]])


def mask_secrets(text: object) -> str:
    """`text` with every credential in it replaced by ``[hidden]`` (see the module docstring);
    a text without one comes back unchanged, and masking twice changes nothing more."""
    out = text if isinstance(text, str) else str(text)
    if not out:
        return out
    out = _USERINFO.sub(lambda m: m.group("scheme") + HIDDEN + "@", out)
    return _hide_named(_FLAG, _hide_named(_FIELD, out))


def carries_credentials(value: str, *, host: bool = False) -> bool:
    """Whether `value` holds a credential: anything `mask_secrets` hides, or (for a HOST[:PORT]
    spec, `host`) any ``user[:password]@`` at all."""
    return mask_secrets(value) != value or (host and "@" in value)


def shown(value: str, *, host: bool = False) -> str:
    """`value` as an error may show it: masked, and a host spec's login cut off."""
    if host and "@" in value:
        scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value)
        prefix = scheme.group(0) if scheme else ""
        value = prefix + HIDDEN + "@" + value.rpartition("@")[2]
    return mask_secrets(value)
