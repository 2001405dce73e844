"""Credentials: the one masking function every message and output goes through, and the refusal
of credentials written where every user of the machine can read them.

`mask_secrets(text)` hides every credential a text holds: a URL's userinfo, the value of a
field named like a secret (`is_secret_name`) however it is written. It lives in
`mqforensics.masking` (which `errors` uses, and which imports nothing of the package) and is
re-exported here with `is_secret_name`, `carries_credentials`, `shown` and `HIDDEN`.

Credentials come only from their environment variables. A credential written on a command line
(any user of the machine can list it), in a notebook's ``MQF_<SYSTEM>_ARGS`` or in a variable
that holds an address (``MQF_S3_ENDPOINT``, ``MQF_CASSANDRA``, ``SPARK_REMOTE``,
``MQF_SPARK_MASTER``) is refused before anything runs (`mqforensics.options` for an option,
the command line's parser in ``mqforensics/cli/arguments.py``, `refuse_in_variable`), in one
line that names the option or variable and the variables to use instead, and never repeats
the secret. `masked_streams` masks everything the CLI prints.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from mqforensics.errors import ConfigError
from mqforensics.masking import HIDDEN as HIDDEN
from mqforensics.masking import carries_credentials as carries_credentials
from mqforensics.masking import is_secret_name as is_secret_name
from mqforensics.masking import mask_secrets as mask_secrets
from mqforensics.masking import shown as shown

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

# --- refusal ------------------------------------------------------------------------------------


def instead_text(variables: Iterable[str] | None) -> str:
    names = list(variables or ())
    if not names:
        return "credentials come only from their environment variables (README, 'Credentials')"
    listed = " and ".join(names) if len(names) <= 2 else ", ".join(names)
    return f"give the address alone and set {listed} instead"


@dataclass(frozen=True)
class Login:
    """What an option naming a server or a store says about its login: the variables it comes
    from, and whether the option's value is a HOST[:PORT] spec (a URL too), where any
    ``user@`` is a login."""

    variables: tuple[str, ...] = ()
    host: bool = False


def refuse_in_variable(
    name: str, value: str | None, variables: Iterable[str] | None = None, *, host: bool = False
) -> None:
    """A ConfigError when the environment variable `name`, which holds an address, holds a
    credential too; its login belongs in `variables`."""
    if value and carries_credentials(value, host=host):
        raise ConfigError(
            f"{name} {shown(value, host=host)}: credentials in an address are refused; "
            f"{instead_text(variables)}"
        )


def refuse_in_environment(environ: Mapping[str, str] | None = None) -> None:
    """`refuse_in_variable` for every variable of `ADDRESS_VARIABLES` that is set."""
    env = os.environ if environ is None else environ
    for name, (variables, host) in ADDRESS_VARIABLES.items():
        refuse_in_variable(name, env.get(name), variables, host=host)


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
