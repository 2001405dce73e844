"""Durations as people read them in reports (`units.human_duration`), and the one exact form
every olderThan of a James WebAdmin call takes (`finding.older_than`: whole seconds, as James's
DurationParser reads them)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from mqforensics.systems.james.finding import older_than
from mqforensics.units import human_duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"), (45, "45s"), (59.6, "1m"), (90, "1m 30s"), (1800, "30m"), (3599, "59m 59s"),
        (3661, "1h 1m"), (64799, "18h"), (86399, "1d"), (90000, "1d 1h"), (701970, "8d 3h"),
        (2592601, "30d"), (-7500, "-2h 5m"),
    ],
)  # fmt: skip
def test_a_duration_reads_in_its_two_largest_units(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


@pytest.mark.parametrize(
    ("seconds", "exact"),
    [(86400, "86400s"), (64799, "64799s"), (3600, "3600s"), (0, "0s")],
)
def test_every_older_than_is_in_whole_seconds(seconds: int, exact: str) -> None:
    """stuck_mail's republish call and broker_missing_mail's write olderThan one way, so the
    calls of one report compare at a glance (``1d`` beside ``64799s`` did not)."""
    assert older_than(dt.timedelta(seconds=seconds)) == exact
    assert re.fullmatch(r"\d+s", exact)  # one amount, one unit James's DurationParser reads
