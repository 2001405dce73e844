"""Typed options: one frozen dataclass per system, each field declared once with its meaning.

A system's options (where its store is, its thresholds) are a dataclass whose fields are made
with `option`: a default (or none: required), a one-line help, and how text becomes the value
(`parse`). The same declaration serves every front door:

- the Python API takes them as keywords (`from_keywords`): a value may be given typed
  (``dt.timedelta(days=7)``) or as the text the command line takes (``"7d"``); an unknown
  keyword is refused by name, with the closest known one suggested;
- the command line (``mqforensics/cli/``, the only place argparse lives) makes one option per
  field, ``--name-with-dashes`` unless the field says otherwise;
- a scheduler's environment variable holding command-line style text (``MQF_JAMES_ARGS``) is
  parsed by `from_tokens`, with no argparse;
- the run manifest records them (`as_json`).

A value naming a server or a store never carries a credential: `from_keywords` and
`from_tokens` refuse one as the command line does, naming the variables its login comes from.
`Options.check` is everything that can be checked before Spark starts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, TypeVar

from mqforensics.credentials import Login, carries_credentials, instead_text, mask_secrets, shown
from mqforensics.errors import ConfigError
from mqforensics.filenames import shown as shown_name
from mqforensics.units import checked_duration, checked_instant, duration_text, utc_text

_META = "mqforensics.option"


@dataclass(frozen=True)
class Given:
    """How one option is given.

    `help`: one line, shown by ``--help``, `describe` and the API's docs. `parse`: text to value
    (None: the text as it is). `metavar`: the placeholder in help. `flag`: the command-line flag
    (default ``--`` and the field's name with dashes); `aliases`: other flags for it. `repeat`:
    the value is a list and the flag may be given again; `many`: the flag takes one or more
    values at once. `choices`: the values allowed. `login`: it names a server or a store, whose
    login comes from these variables (never from the value). `group`: its heading in help.
    `positional`: a command-line argument without a flag. `exclusive`: the name of a set of
    options of which at most one may be given (`exclusive_required`: exactly one), as an
    argparse mutually exclusive group; `check_exclusive` enforces it whatever the front door.
    """

    help: str
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    repeat: bool = False
    many: bool = False
    choices: tuple[str, ...] = ()
    login: Login | None = None
    group: str = "source"
    positional: bool = False
    exclusive: str = ""
    exclusive_required: bool = False


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    repeat: bool = False,
    many: bool = False,
    choices: Sequence[str] = (),
    login: Login | None = None,
    group: str = "source",
    positional: bool = False,
    exclusive: str = "",
    exclusive_required: bool = False,
) -> Any:
    """A dataclass field declaring one option (no `default`: it is required)."""
    given = Given(
        help, parse, metavar, flag, tuple(aliases), repeat, many, tuple(choices), login, group,
        positional, exclusive, exclusive_required,
    )  # fmt: skip
    metadata = {_META: given}
    if default is dataclasses.MISSING:
        return field(metadata=metadata)
    if isinstance(default, list | dict | set):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class OptionField:
    """One declared option of an options class: its name, how it is given, its default."""

    name: str
    given: Given
    default: Any
    required: bool

    @property
    def flag(self) -> str:
        return self.given.flag or "--" + self.name.replace("_", "-")

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.flag, *self.given.aliases)

    @property
    def switch(self) -> bool:
        """An on/off option (``--reveal-addresses``): a bool with no parser."""
        return self.given.parse is None and isinstance(self.default, bool)


@dataclass(frozen=True, kw_only=True)
class Options:
    """Base of every options class. Subclasses are frozen, keyword-only dataclasses of
    `option` fields; `check` raises `ConfigError` or `InputError` for what can be found wrong
    before Spark starts (a path that is not there, options that disagree)."""

    def check(self) -> None:
        """Everything that can be checked before Spark starts (nothing, unless overridden)."""


OptionsT = TypeVar("OptionsT", bound=Options)


def fields_of(cls: type[Options] | Options) -> list[OptionField]:
    """The declared options of `cls`, in declaration order."""
    found = []
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        given = item.metadata.get(_META)
        if not isinstance(given, Given):
            continue
        if item.default is not dataclasses.MISSING:
            default, required = item.default, False
        elif item.default_factory is not dataclasses.MISSING:
            default, required = item.default_factory(), False
        else:
            default, required = None, True
        found.append(OptionField(item.name, given, default, required))
    return found


def check_exclusive(options: Options) -> None:
    """A ConfigError when two options of one `exclusive` set are given, or none of a required
    one (the words argparse uses for its mutually exclusive groups)."""
    sets: dict[str, list[OptionField]] = {}
    for item in fields_of(options):
        if item.given.exclusive:
            sets.setdefault(item.given.exclusive, []).append(item)
    for members in sets.values():
        given = [m.flag for m in members if getattr(options, m.name) not in (None, "", [], False)]
        if len(given) > 1:
            raise ConfigError(f"argument {given[0]}: not allowed with argument {given[1]}")
        if not given and any(m.given.exclusive_required for m in members):
            flags = " ".join(m.flag for m in members)
            raise ConfigError(f"one of the arguments {flags} is required")


def _suggestion(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_keyword(what: str, name: str, known: Sequence[str]) -> ConfigError:
    """The error for a keyword `what` does not take, naming it and what it does take."""
    return ConfigError(
        f"{what} takes no option {name!r}{_suggestion(name, known)}; "
        f"its options: {', '.join(sorted(known)) or 'none'}"
    )


def refuse_credentials(item: OptionField, value: Any, *, shown_as: str | None = None) -> None:
    """A ConfigError when `value` (a text or a path, or a list of them) holds a credential: a
    URL's userinfo, a token in a query, a secret-named parameter; with a login that is a host
    spec, any ``user@``. The refusal names where the login belongs instead."""
    items = value if isinstance(value, list | tuple) else [value]
    host = bool(item.given.login and item.given.login.host)
    for one in items:
        if not isinstance(one, str | PurePath):
            continue
        if carries_credentials(str(one), host=host):
            where = shown_as or item.name
            variables = item.given.login.variables if item.given.login else None
            raise ConfigError(
                f"{where} {shown(str(one), host=host)}: credentials in an option are refused "
                f"(every user of the machine can read a command line, a notebook, a log); "
                f"{instead_text(variables)}"
            )


def checked_value(value: Any, text: str | None = None) -> Any:
    """`value` when every check can compute with it: an instant in range
    (`units.checked_instant`), a duration from 0 to `units.MAX_DURATION`
    (`units.checked_duration`); a ConfigError quoting `text` (what was given) otherwise."""
    if isinstance(value, dt.datetime):
        return checked_instant(value, text)
    if isinstance(value, dt.timedelta):
        return checked_duration(value)
    return value


def parse_text(parse: Callable[[str], Any], text: str) -> Any:
    """`text` parsed by `parse` and checked (`checked_value`); errors say what is wrong with the
    value, the caller names the option."""
    return checked_value(parse(text), text)


def named(flag: str, message: str) -> str:
    """`message` naming the option `flag`: ``--retention: duration '-7d' is negative ...``
    (as it is when the parser named it already, ``--retry-maximum 'x' is not a count``)."""
    if message.startswith((f"{flag} ", f"{flag}:")):
        return message
    return f"{flag}: {message}"


def flag_parser(flag: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A command-line converter of `flag`'s text: `parse_text`, its ConfigError naming `flag`
    (`named`); what argparse's ``type=`` gets, so that every option's parse error names it."""

    def convert(text: str) -> Any:
        try:
            return parse_text(parse, text)
        except ConfigError as exc:
            raise ConfigError(named(flag, exc.message)) from None

    convert.__name__ = getattr(parse, "__name__", "value")  # argparse's "invalid NAME value"
    return convert


def _coerce_one(item: OptionField, value: Any, where: str) -> Any:
    if isinstance(value, str) and item.given.parse is not None:
        return parse_text(item.given.parse, value)
    counts = item.given.parse
    if type(value) is int and counts is not None and hasattr(counts, "minimum"):
        return parse_text(counts, str(value))  # a count (`units.counter`), held to its minimum
    if isinstance(value, PurePath) and item.given.parse is Path:
        return Path(value)
    if item.given.choices and value not in item.given.choices:
        raise ConfigError(
            f"{where} {value!r}: not one of {', '.join(map(str, item.given.choices))}"
        )
    return checked_value(value)


def coerce(item: OptionField, value: Any, where: str | None = None) -> Any:
    """`value` as option `item` holds it: text parsed by its parser, a list for a repeated
    option (one value given alone becomes a list of one)."""
    where = where or item.name
    if value is None:
        return None
    if item.switch:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} {value!r}: True or False")
        return value
    if item.given.repeat or item.given.many:
        values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
        return [_coerce_one(item, one, where) for one in values]
    return _coerce_one(item, value, where)


def from_keywords(
    cls: type[OptionsT], keywords: Mapping[str, Any], *, what: str | None = None
) -> OptionsT:
    """An options object of `cls` from Python keywords: unknown names refused by name, text
    parsed as the command line parses it, credentials refused, required ones demanded."""
    # A value's error names the keyword (``retention= duration '-7d' is negative ...``), after
    # `what` when the caller said what takes it.
    prefix = f"{what}: " if what else ""
    what = what or cls.__name__
    declared = {item.name: item for item in fields_of(cls)}
    for name in keywords:
        if name not in declared:
            raise unknown_keyword(what, name, list(declared))
    values = {}
    for name, item in declared.items():
        if name not in keywords:
            if item.required:
                raise ConfigError(f"{what} needs {name}= ({item.given.help})")
            continue
        refuse_credentials(item, keywords[name])
        try:
            values[name] = coerce(item, keywords[name])
        except ConfigError as exc:
            raise ConfigError(f"{prefix}{name}= {exc.message}") from None
        if item.required and values[name] in (None, []):
            raise ConfigError(f"{what} needs {name}= ({item.given.help})")
    return cls(**values)


def _tokens_by_flag(cls: type[Options]) -> dict[str, OptionField]:
    return {flag: item for item in fields_of(cls) for flag in item.flags}


def from_tokens(cls: type[OptionsT], tokens: Sequence[str], *, where: str) -> OptionsT:
    """An options object of `cls` from command-line style tokens (``--flag VALUE``,
    ``--flag=VALUE``, a switch alone, positional values in order), as a scheduler's
    environment variable gives them; no argparse. Errors name `where` (the variable)."""
    by_flag = _tokens_by_flag(cls)
    positional = [item for item in fields_of(cls) if item.given.positional]
    values: dict[str, Any] = {}
    tokens = list(tokens)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            if not positional:
                raise ConfigError(f"{where}: unexpected argument {mask_secrets(token)!r}")
            where_to = positional[0] if positional[0].given.many else positional.pop(0)
            refuse_credentials(where_to, token, shown_as=f"{where}: argument")
            if where_to.given.many:
                values.setdefault(where_to.name, []).append(token)
            else:
                values[where_to.name] = token
            i += 1
            continue
        flag, has_value, inline = token.partition("=")
        found = by_flag.get(flag)
        if found is None:
            raise ConfigError(f"{where}: unknown option {flag}{_suggestion(flag, list(by_flag))}")
        item = found
        if item.switch:
            if has_value:
                raise ConfigError(f"{where}: {flag} takes no value")
            values[item.name] = True
            i += 1
            continue
        if has_value:
            taken = [inline]
            i += 1
        else:
            taken = []
            i += 1
            while i < len(tokens) and not (tokens[i].startswith("-") and tokens[i] != "-"):
                taken.append(tokens[i])
                i += 1
                if not item.given.many:
                    break
            if not taken:
                raise ConfigError(f"{where}: {flag} needs a value")
        for text in taken:
            refuse_credentials(item, text, shown_as=f"{where}: {flag}")
        if item.given.repeat or item.given.many:
            values.setdefault(item.name, []).extend(taken)
        else:
            values[item.name] = taken[0]
    try:
        return from_keywords(cls, values, what=where)
    except ConfigError as exc:
        message = _flagged(exc.message, cls)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None


def _flagged(message: str, cls: type[Options]) -> str:
    """`message` with keyword names (``name=``) written as the flags a variable uses."""
    for item in fields_of(cls):
        message = message.replace(f"{item.name}=", item.flag)
    return message


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    if isinstance(value, dt.datetime):
        return utc_text(value)
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Path) or not str(value).isprintable():
        return mask_secrets(shown_name(str(value)))  # a file name is bytes: docs/filenames.md
    return mask_secrets(str(value))


def as_json(options: Options | Mapping[str, Any]) -> dict[str, Any]:
    """The options as JSON values, by name, in name order (texts masked all the same)."""
    given = values(options) if isinstance(options, Options) else dict(options)
    return {name: _json_value(value) for name, value in sorted(given.items())}


def values(options: Options) -> dict[str, Any]:
    """The options' values by name."""
    return {item.name: getattr(options, item.name) for item in fields_of(options)}


def _token(value: Any) -> str:
    import shlex

    text = _json_value(value)
    return shlex.quote(text if isinstance(text, str) else str(text))


def command_text(options: Options) -> str:
    """The options given (those not at their default), as a command line writes them: the
    positional values, then ``--flag VALUE`` (masked; what a command says it is about to read,
    before Spark starts)."""
    words: list[str] = []
    flagged: list[str] = []
    for item in fields_of(options):
        value = getattr(options, item.name)
        if value in (None, "", [], False) or (not item.required and value == item.default):
            continue
        items = list(value) if isinstance(value, list | tuple) else [value]
        if item.given.positional:
            words.extend(_token(one) for one in items)
        elif item.switch:
            flagged.append(item.flag)
        elif item.given.many:
            flagged.append(" ".join([item.flag, *(_token(one) for one in items)]))
        else:
            flagged.extend(f"{item.flag} {_token(one)}" for one in items)
    return " ".join(words + flagged)


def describe(cls: type[Options]) -> str:
    """The options of `cls` as documentation: one line each, keyword, default and help."""
    lines = []
    for item in fields_of(cls):
        if item.required:
            default = "required"
        elif item.default in (None, [], ()):
            default = "optional"
        else:
            default = f"default {_json_value(item.default)!r}"
        given = item.given.metavar or item.name.upper() if item.given.positional else item.flag
        lines.append(f"{item.name} ({given}; {default}): {item.given.help}")
    return "\n".join(lines)
