"""Credentials: the one masking function every message and output goes through, and the refusal
of credentials written where every user of the machine can read them.

`mask_secrets(text)` hides, wherever they appear in a text:

- a URL's userinfo: ``scheme://user:password@host`` and ``scheme://token@host`` become
  ``scheme://[hidden]@host`` (the brackets keep pseudonymisation from reading ``hidden@host``
  as a mail address);
- the value of a field named like a secret (`is_secret_name`), in every way it is written:
  query and connection strings (``?X-Amz-Signature=...``, ``&access_token=...``,
  ``sc://host/;token=...``), ``name=value``, ``name: value``, ``"name": "value"``,
  ``'name': 'value'``, ``name -> value`` (Scala maps) and ``--name value``.

Credentials come only from their environment variables. A credential written on a command line
(any user of the machine can list it), in a notebook's ``MQF_<SYSTEM>_ARGS`` or in a variable
that holds an address (``MQF_S3_ENDPOINT``, ``MQF_CASSANDRA``, ``SPARK_REMOTE``,
``MQF_SPARK_MASTER``) is refused before anything runs (`refuse_on_command_line`,
`refuse_in_variable`), in one line that names the option or variable and the variables to use
instead, and never repeats the secret. `masked_streams` masks everything the CLI prints.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import IO, Any

HIDDEN = "[hidden]"

AWS_LOGIN = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
CASSANDRA_LOGIN = ("MQF_CASSANDRA_USERNAME", "MQF_CASSANDRA_PASSWORD")
RABBITMQ_LOGIN = ("MQF_RABBITMQ_USERNAME", "MQF_RABBITMQ_PASSWORD")
SPARK_CONNECT_TOKEN = ("SPARK_CONNECT_AUTHENTICATE_TOKEN",)

# Environment variables holding an address: (where its login goes, whether it is a host spec).
ADDRESS_VARIABLES: dict[str, tuple[tuple[str, ...], bool]] = {
    "MQF_S3_ENDPOINT": (AWS_LOGIN, False),
    "MQF_CASSANDRA": (CASSANDRA_LOGIN, True),
    "MQF_RABBITMQ_URL": (RABBITMQ_LOGIN, True),
    "SPARK_REMOTE": (SPARK_CONNECT_TOKEN, False),
    "MQF_SPARK_MASTER": ((), False),
}

# --- masking ------------------------------------------------------------------------------------

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


def _instead(variables: Iterable[str] | None) -> str:
    names = list(variables or ())
    if not names:
        return "credentials come only from their environment variables (README, 'Credentials')"
    listed = " and ".join(names) if len(names) <= 2 else ", ".join(names)
    return f"give the address alone and set {listed} instead"


# --- refusal ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Login:
    """What an option naming a server or a store says about its login: the variables it comes
    from, and whether the option's value is a HOST[:PORT] spec (a URL too), where any
    ``user@`` is a login."""

    variables: tuple[str, ...] = ()
    host: bool = False


def declare_login(
    action: argparse.Action, variables: Iterable[str], *, host: bool = False
) -> argparse.Action:
    """Mark the option `action` (what ``add_argument`` returned) as naming a server or a store
    whose login comes from `variables`: a credential written in it is refused with those
    variables named, and with `host`, any ``user@`` in it too. Every other option is checked
    as well, without the names."""
    action.mqf_login = Login(tuple(variables), host)  # type: ignore[attr-defined]
    return action


def declared_logins(parser: argparse.ArgumentParser) -> dict[str, Login]:
    """dest -> `Login` of the options of `parser` and of its subcommands' parsers declared
    with `declare_login` (an option several subcommands declare takes every variable)."""
    found: dict[str, Login] = {}

    def add(dest: str, login: Login) -> None:
        known = found.get(dest, Login())
        variables = tuple(dict.fromkeys((*known.variables, *login.variables)))
        found[dest] = Login(variables, known.host or login.host)

    for action in parser._actions:
        login = getattr(action, "mqf_login", None)
        if isinstance(login, Login):
            add(action.dest, login)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for dest, declared in declared_logins(sub).items():
                    add(dest, declared)
    return found


def _refused(where: str, variables: Iterable[str] | None) -> Exception:
    from mqforensics.errors import ConfigError

    return ConfigError(
        f"{where}: credentials on the command line are refused (every user of the machine can "
        f"read it); {_instead(variables)}"
    )


def refuse_in_arguments(argv: Sequence[str], logins: Mapping[str, Login] | None = None) -> None:
    """A ConfigError when a command line argument, as written, holds a credential (checked
    before parsing: a path option's value would lose its ``//``, an unknown one is echoed).
    `logins` (`declared_logins`) names the variables to use instead."""
    for i, token in enumerate(argv):
        before = argv[i - 1] if i else ""
        option = before if before.startswith("-") and "=" not in before else ""
        if token.startswith("-") and "=" in token:
            option = token.partition("=")[0]
        if carries_credentials(token) or (option == before and carries_credentials(
            f"{before} {token}"
        )):  # fmt: skip
            where = mask_secrets(token if option != before else f"{before} {token}")
            dest = option.lstrip("-").replace("-", "_")
            login = (logins or {}).get(dest)
            variables = login.variables if login else None
            raise _refused(where if option else f"argument {where}", variables)


def refuse_on_command_line(
    args: argparse.Namespace,
    names: Mapping[str, str] | None = None,
    logins: Mapping[str, Login] | None = None,
) -> None:
    """A ConfigError (one line, exit 2) when any option value in `args` holds a credential.

    Every string and path value is checked (a URL's userinfo, a token in a query string, a
    field named like a secret); the options `logins` declares host specs refuse any ``user@``
    too, and the refusal names their login variables. `names` maps dests to how the user
    wrote the option (default ``--dest-with-dashes``).
    """
    for dest, value in sorted(vars(args).items()):
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if not isinstance(item, str | PurePath):
                continue
            text = str(item)
            login = (logins or {}).get(dest)
            host = bool(login and login.host)
            if carries_credentials(text, host=host):
                option = (names or {}).get(dest) or "--" + dest.replace("_", "-")
                variables = login.variables if login else None
                raise _refused(f"{option} {shown(text, host=host)}", variables)


def refuse_in_variable(
    name: str, value: str | None, variables: Iterable[str] | None = None, *, host: bool = False
) -> None:
    """A ConfigError when the environment variable `name`, which holds an address, holds a
    credential too; its login belongs in `variables`."""
    if value and carries_credentials(value, host=host):
        from mqforensics.errors import ConfigError

        raise ConfigError(
            f"{name} {shown(value, host=host)}: credentials in an address are refused; "
            f"{_instead(variables)}"
        )


def refuse_in_environment(environ: Mapping[str, str] | None = None) -> None:
    """`refuse_in_variable` for every variable of `ADDRESS_VARIABLES` that is set."""
    env = os.environ if environ is None else environ
    for name, (variables, host) in ADDRESS_VARIABLES.items():
        refuse_in_variable(name, env.get(name), variables, host=host)


class ArgumentParser(argparse.ArgumentParser):
    """The CLI's parser (subcommands inherit it): arguments holding a credential, and address
    variables holding one (`ADDRESS_VARIABLES`), are refused when the command line is parsed,
    before any command runs; usage errors are masked."""

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        logins = declared_logins(self)
        refuse_in_arguments(list(sys.argv[1:] if args is None else args), logins)
        parsed, extras = super().parse_known_args(args, namespace)
        refuse_on_command_line(parsed, self._option_names(), logins)
        refuse_in_environment()
        return parsed, extras

    def _option_names(self) -> dict[str, str]:
        names = {}
        for action in self._actions:
            long = [s for s in action.option_strings if s.startswith("--")]
            if long or action.option_strings:
                names[action.dest] = max(long or action.option_strings, key=len)
            else:
                names[action.dest] = (
                    action.metavar if isinstance(action.metavar, str) else action.dest.upper()
                )
        return names

    def error(self, message: str) -> Any:  # argparse quotes what it could not parse
        super().error(re.sub(r"\S*@", HIDDEN + "@", mask_secrets(message)))


# --- Spark --------------------------------------------------------------------------------------

# Spark Connect logs each operation's plan as protobuf text (``options { key: "password" value:
# "..." }``) in its listener events and event log, redacted only by this session setting.
SPARK_STRING_REDACTION = "spark.sql.redaction.string.regex"
OPTION_REDACTION = (
    r'(?i)key: "[^"\\]*(?:secret|password|passwd|token|signature|credential|access[._]?key)'
    r'[^"\\]*"\s*value: "(?:[^"\\]|\\.)*"'
)


def redaction_pattern(current: str | None) -> str:
    """The session's string redaction regex with `OPTION_REDACTION` added to `current`."""
    if not current or OPTION_REDACTION in current:
        return current or OPTION_REDACTION
    return f"(?:{current})|(?:{OPTION_REDACTION})"


# --- output -------------------------------------------------------------------------------------


class MaskedStream:
    """A text stream that writes through `mask_secrets`, a line (or a ``\\r`` bar) at a time."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        end = max(self._pending.rfind("\n"), self._pending.rfind("\r"))
        if end >= 0:
            done, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
            self._stream.write(mask_secrets(done))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(mask_secrets(self._pending))
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...
        return getattr(self._stream, name)


@contextlib.contextmanager
def masked_streams() -> Iterator[None]:
    """Everything printed to stdout and stderr inside the block goes through `mask_secrets`."""
    saved = sys.stdout, sys.stderr
    out, err = MaskedStream(saved[0]), MaskedStream(saved[1])
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for stream in (out, err):
            with contextlib.suppress(Exception):
                stream.flush()
