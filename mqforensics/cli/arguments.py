"""Typed options as command-line options: the one place an options class meets argparse, and
the parser that refuses a credential written on the command line.

Every field of an options class (`mqforensics.options`) becomes one option, ``--name-with-dashes``
unless the field names its flag, with its help, its parser as the type (whose errors name the
option, `options.flag_parser`), a repeatable flag for a list, a switch for a bool;
`options_from` builds the typed object back from the parsed arguments, so the command line and
the Python API hold the same values.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

from mqforensics.credentials import (
    HIDDEN,
    Login,
    carries_credentials,
    instead_text,
    mask_secrets,
    refuse_in_environment,
    shown,
)
from mqforensics.errors import ConfigError
from mqforensics.options import Options, OptionsT, fields_of, flag_parser


def add_options(
    parser: argparse.ArgumentParser,
    cls: type[Options],
    *,
    suppress_defaults: bool = False,
    help_of: dict[str, str] | None = None,
    skip: Iterable[str] = (),
    groups: dict[str, Any] | None = None,
) -> None:
    """One option per field of `cls` on `parser`, in groups by the field's `group`.

    `suppress_defaults`: an option not given is left out of the parsed arguments (a subcommand
    whose options repeat its parent's). `help_of` replaces a field's help; `skip` leaves fields
    out; `groups` (name -> argument group) shares groups between several classes.
    """
    groups = {} if groups is None else groups
    exclusive: dict[str, Any] = {}
    skipped = set(skip)
    for item in fields_of(cls):
        if item.name in skipped:
            continue
        given = item.given
        group = groups.get(given.group)
        if group is None:
            group = groups[given.group] = parser.add_argument_group(given.group)
        if given.exclusive:
            one = exclusive.get(given.exclusive)
            if one is None:
                one = exclusive[given.exclusive] = group.add_mutually_exclusive_group(
                    required=given.exclusive_required and not suppress_defaults
                )
            group = one
        kwargs: dict[str, Any] = {"help": (help_of or {}).get(item.name, given.help)}
        if given.positional:
            kwargs["metavar"] = given.metavar or item.name.upper()
            if given.many:
                kwargs["nargs"] = "+" if item.required else "*"
        else:
            kwargs["dest"] = item.name
            if item.switch:
                kwargs["action"] = "store_true"
            else:
                kwargs["metavar"] = given.metavar
                if given.repeat:
                    kwargs["action"] = "append"
                if given.many:
                    kwargs["nargs"] = "+"
            if item.required and not suppress_defaults:
                kwargs["required"] = True
        if given.parse is not None:
            # Its errors name the option (``--retention: duration '-7d' is negative ...``).
            kwargs["type"] = flag_parser(kwargs["metavar"] if given.positional else item.flag,
                                         given.parse)  # fmt: skip
        if given.choices:
            kwargs["choices"] = list(given.choices)
        if suppress_defaults:
            kwargs["default"] = argparse.SUPPRESS
        elif not item.required:
            kwargs["default"] = item.default
        flags = (item.name,) if given.positional else item.flags
        action = group.add_argument(*flags, **kwargs)
        if given.login is not None:
            declare_login(action, given.login.variables, host=given.login.host)


def options_from(cls: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """The options object of `cls` from parsed arguments (every value parsed already; an
    option the command line left out keeps the class's default)."""
    values = {}
    for item in fields_of(cls):
        if hasattr(args, item.name):
            value = getattr(args, item.name)
            if value is None and item.default is not None and item.given.repeat:
                value = item.default
            values[item.name] = value
    return cls(**values)


# --- credentials on the command line -----------------------------------------------------------


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
    return ConfigError(
        f"{where}: credentials on the command line are refused (every user of the machine can "
        f"read it); {instead_text(variables)}"
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
