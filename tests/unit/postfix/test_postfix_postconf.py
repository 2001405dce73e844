"""Queue lifetimes from a main.cf or `postconf -n` output, as Postfix parses them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mqforensics.errors import InputError
from mqforensics.systems.postfix.postconf import Lifetimes, lifetimes, time_value

DAY = dt.timedelta(days=1)


def test_defaults_without_a_file() -> None:
    assert lifetimes(None) == Lifetimes(5 * DAY, 5 * DAY, "Postfix defaults")


def test_units_references_continuations_and_the_clamp(tmp_path: Path) -> None:
    main_cf = tmp_path / "main.cf"
    main_cf.write_text(
        "# comment\nqueue_directory = /var/spool/postfix\n"
        "my_life = 3\nmaximal_queue_lifetime = ${my_life}d\n"
        "bounce_queue_lifetime =\n    12h\n"
    )
    assert lifetimes(main_cf) == Lifetimes(3 * DAY, dt.timedelta(hours=12), str(main_cf))
    main_cf.write_text("maximal_queue_lifetime = 2\nbounce_queue_lifetime = 1w\n")
    # qmgr clamps a bounce lifetime longer than the maximal one.
    assert lifetimes(main_cf).bounce_queue_lifetime == 2 * DAY


@pytest.mark.parametrize(("text", "seconds"), [("5", 5 * 86400), ("90s", 90), ("5days", 5 * 86400),
                                               ("2w", 14 * 86400), ("10m", 600)])  # fmt: skip
def test_time_values(text: str, seconds: int) -> None:
    assert time_value(text, "x").total_seconds() == seconds


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    main_cf = tmp_path / "main.cf"
    main_cf.write_text("maximal_queue_lifetime = 5d\nthis is not a parameter\n")
    with pytest.raises(InputError, match=rf"{main_cf}, line 2: not a 'name = value'"):
        lifetimes(main_cf)
    main_cf.write_text("maximal_queue_lifetime = 5x\n")
    with pytest.raises(InputError, match="maximal_queue_lifetime: '5x' is not a Postfix time"):
        lifetimes(main_cf)
