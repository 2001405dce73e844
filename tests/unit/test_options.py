"""Typed options: one declaration gives the API's keywords, the command line's flags, a
scheduler's variable and the manifest, and refuses the same mistakes in each."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqforensics.cli.arguments import add_options, options_from
from mqforensics.credentials import Login
from mqforensics.errors import ConfigError, InputError
from mqforensics.options import Options, as_json, describe, from_keywords, from_tokens, option
from mqforensics.units import parse_duration


@dataclass(frozen=True, kw_only=True)
class StoreOptions(Options):
    """A store of the tests."""

    root: Path = option(parse=Path, metavar="DIR", help="the store's directory")
    server: str | None = option(
        None, metavar="HOST[:PORT]", help="its server", login=Login(("MQF_T_PASSWORD",), host=True)
    )
    queue: list[str] | None = option(None, repeat=True, metavar="NAME", help="a queue, repeatable")
    grace: dt.timedelta = option(dt.timedelta(hours=1), parse=parse_duration, help="grace")
    strict: bool = option(False, help="refuse more")

    def check(self) -> None:
        if not self.root.is_dir():
            raise InputError(f"{self.root}: no such directory")


def test_keywords_take_typed_values_or_the_command_lines_text(tmp_path):
    typed = from_keywords(StoreOptions, {"root": tmp_path, "grace": dt.timedelta(days=2)})
    text = from_keywords(StoreOptions, {"root": str(tmp_path), "grace": "2d", "queue": "a"})
    assert typed.grace == text.grace == dt.timedelta(days=2)
    assert text.root == tmp_path and text.queue == ["a"]
    text.check()


def test_a_wrong_or_missing_keyword_is_one_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"takes no option 'qeue' \(did you mean 'queue'\?\)"):
        from_keywords(StoreOptions, {"root": tmp_path, "qeue": ["a"]}, what="store")
    with pytest.raises(ConfigError, match=r"store needs root= \(the store's directory\)"):
        from_keywords(StoreOptions, {}, what="store")
    with pytest.raises(ConfigError, match="duration 'soon'"):
        from_keywords(StoreOptions, {"root": tmp_path, "grace": "soon"})


def test_a_credential_is_refused_and_never_shown(tmp_path):
    with pytest.raises(ConfigError) as caught:
        from_keywords(StoreOptions, {"root": tmp_path, "server": "admin:s3cret@db1:9042"})
    assert "s3cret" not in caught.value.message and "MQF_T_PASSWORD" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        from_tokens(StoreOptions, ["--root", str(tmp_path), "--server", "u:pw@h"], where="MQF_X")
    assert caught.value.message.startswith("MQF_X: --server")
    assert "pw@" not in caught.value.message


def test_a_variable_is_parsed_like_a_command_line_without_argparse(tmp_path):
    tokens = ["--root", str(tmp_path), "--queue", "a", "--queue=b", "--grace", "5m", "--strict"]
    parsed = from_tokens(StoreOptions, tokens, where="MQF_X")
    assert parsed == StoreOptions(
        root=tmp_path, queue=["a", "b"], grace=dt.timedelta(minutes=5), strict=True
    )
    with pytest.raises(ConfigError, match="MQF_X: unknown option --qeue"):
        from_tokens(StoreOptions, ["--root", "x", "--qeue", "a"], where="MQF_X")
    with pytest.raises(ConfigError, match="MQF_X: --grace needs a value"):
        from_tokens(StoreOptions, ["--root", "x", "--grace"], where="MQF_X")
    with pytest.raises(ConfigError, match="MQF_X needs --root"):
        from_tokens(StoreOptions, [], where="MQF_X")


def test_the_command_line_has_the_same_options_and_values(tmp_path):
    parser = argparse.ArgumentParser()
    add_options(parser, StoreOptions)
    args = parser.parse_args(["--root", str(tmp_path), "--queue", "a", "--grace", "5m"])
    from_cli = options_from(StoreOptions, args)
    assert from_cli == from_tokens(
        StoreOptions, ["--root", str(tmp_path), "--queue", "a", "--grace", "5m"], where="X"
    )
    assert "--strict" in parser.format_help() and "the store's directory" in parser.format_help()


def test_the_manifest_and_the_docs_say_the_same(tmp_path):
    options = StoreOptions(root=tmp_path, grace=dt.timedelta(days=1))
    assert as_json(options) == {
        "grace": "1d", "queue": None, "root": str(tmp_path), "server": None, "strict": False,
    }  # fmt: skip
    lines = describe(StoreOptions).splitlines()
    assert lines[0] == "root (--root; required): the store's directory"
    assert "grace (--grace; default '1h'): grace" in lines


@dataclass(frozen=True, kw_only=True)
class SourceOptions(Options):
    live: str | None = option(None, exclusive="view", exclusive_required=True, help="a server")
    copy: Path | None = option(None, parse=Path, exclusive="view", help="a copy")


def test_options_of_one_set_exclude_each_other_whatever_the_door(tmp_path):
    from mqforensics.options import check_exclusive

    with pytest.raises(ConfigError, match="argument --live: not allowed with argument --copy"):
        check_exclusive(SourceOptions(live="h", copy=tmp_path))
    with pytest.raises(ConfigError, match="one of the arguments --live --copy is required"):
        check_exclusive(SourceOptions())
    check_exclusive(SourceOptions(copy=tmp_path))
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser, SourceOptions)
    with pytest.raises(argparse.ArgumentError, match="not allowed with argument --live"):
        parser.parse_args(["--live", "h", "--copy", str(tmp_path)])
