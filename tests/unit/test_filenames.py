"""File names are bytes (docs/filenames.md): the escaped text every layer carries, exactly as
the page specifies it, reversible, and the one note an audit prints about odd names."""

from __future__ import annotations

import os
import random
import re

import pytest

from mqforensics.filenames import fs_path, is_odd, odd_names_note, shown, unescaped

CASES = [
    (b"E1AE5\xff\xfe", "E1AE5\\xff\\xfe", True),
    ("café".encode(), "café", False),
    (b"back\\slash", "back\\\\slash", False),
    (b"\\x41", "\\\\x41", False),  # a name that looks like an escape is not one
    (b"line\nbreak", "line\\x0abreak", True),
    (b"del\x7f", "del\\x7f", True),
    ("c1\u0085".encode(), "c1\\xc2\\x85", True),  # a C1 control, valid UTF-8, still escaped
    (b"mailboxes-\xff.db", "mailboxes-\\xff.db", True),
]


CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


@pytest.mark.parametrize(("raw", "text", "odd"), CASES)
def test_a_name_is_shown_as_the_page_says_and_given_back_exactly(raw, text, odd):
    assert shown(raw) == text
    assert shown(os.fsdecode(raw)) == text  # as os.listdir of a str directory gives it
    assert unescaped(text) == raw
    assert os.fsencode(fs_path(text)) == raw
    assert is_odd(raw) is odd
    assert text.isprintable() and "\n" not in text
    text.encode("utf-8")  # Arrow and JSON take it


def test_every_byte_string_goes_there_and_back_printable():
    # Random names over every byte but / and NUL, and multi-byte characters, C1 controls among
    # them: the text is valid UTF-8 without a control character, and gives back the bytes.
    rng = random.Random(47)
    pieces = [bytes([b]) for b in range(1, 256) if b != 0x2F]
    pieces += ["é".encode(), "\u0085".encode(), "€".encode(), "\U0001f4e7".encode()]
    for _ in range(20_000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 10)))
        text = shown(raw)
        assert unescaped(text) == raw and shown(os.fsdecode(raw)) == text
        assert text.encode("utf-8") and not CONTROL.search(text)


def test_an_audit_says_how_many_odd_names_and_lists_the_first_three():
    assert odd_names_note([]) is None
    names = [shown(b"d\xff"), shown(b"a\xfe"), shown(b"c\x01"), shown(b"b\xfd"), shown(b"a\xfe")]
    assert odd_names_note(names) == (
        "4 file names are not valid UTF-8 or hold control characters, audited like any other and "
        "shown escaped (\\xNN per odd byte, docs/filenames.md): a\\xfe, b\\xfd, c\\x01 and 1 more"
    )
    assert odd_names_note([shown(b"x\xff")]).startswith(
        "1 file name is not valid UTF-8 or holds a control character, audited"
    )


def test_an_error_line_naming_a_raw_name_is_one_printable_line(tmp_path, capsys):
    """A message that quotes a name as the file system gave it (surrogates, a newline) prints as
    one line, each odd byte as `shown` writes it; a name already shown is left as it is."""
    from mqforensics.cli import main

    odd = os.path.join(os.fsencode(tmp_path), b"queue\xff\nx")
    assert main(["audit", "logqueue", os.fsdecode(odd), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\udcff" not in err
    assert f"{shown(odd)}: no such queue directory" in err
