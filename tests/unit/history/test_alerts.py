"""The alert rules' documented semantics, on a history with planted series: the exact alerts
fire on the exact runs, and nothing else fires."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mqforensics.history.alerts import latest
from mqforensics.history.collect import Run
from mqforensics.history.query import alerts as history_alerts
from mqforensics.history.rules import load_rules
from mqforensics.history.store import append, location, read
from mqforensics.metrics import Metric

DAY1 = dt.datetime(2027, 3, 1, 6, tzinfo=dt.UTC)

# series name -> (metric, unit, labels, the value on days 1..8)
PLANTED = {
    "stuck": ("browse_start", "instant", {"queue": "spool"}, [1, 2, 3, 4, 4, 4, 4, 4]),
    "grows": ("live_mails", "count", {"queue": "outgoing"}, [10, 10, 10, 11, 12, 13, 14, 14]),
    "doubles": ("reclaimable_bytes", "bytes", {"check": "orphaned_blob"},
                [100, 100, 100, 100, 150, 150, 200, 200]),
    "appears": ("findings", "count", {"check": "racl_drift", "item": "error"},
                [0, 0, 0, 0, 0, 0, 2, 3]),
    "old": ("oldest_live_age", "seconds", {"queue": "spool"}, [50, 150, 150, 50, 120, 90, 90, 90]),
    "spike": ("live_mails", "count", {"queue": "relay"}, [10, 11, 10, 11, 10, 50, 10, 11]),
    "steady": ("live_mails", "count", {"queue": "steady"}, [7] * 8),
    "flat_bytes": ("reclaimable_bytes", "bytes", {"check": "unreclaimed_slice"}, [9] * 8),
}  # fmt: skip

RULES = """
[[rule]]
id = "stuck"
kind = "unchanged"
metric = "browse_start"
runs = 5
why = "browseStart stopped"

[[rule]]
id = "growing"
kind = "growing"
metric = "live_mails"
queue = "out*"
runs = 3
why = "a queue grows"

[[rule]]
id = "doubled"
kind = "change"
metric = "reclaimable_bytes"
relative = 1.0
runs = 4
why = "bytes doubled"

[[rule]]
id = "first"
kind = "new"
metric = "findings"
why = "a check finds something for the first time"

[[rule]]
id = "old"
kind = "threshold"
metric = "oldest_live_age"
above = 100
why = "old mail"

[[rule]]
id = "spike"
kind = "outlier"
metric = "live_mails"
queue = "re?ay"
runs = 4
sigmas = 3
why = "a sudden change"
"""


def day(number: int) -> dt.datetime:
    return DAY1 + dt.timedelta(days=number - 1)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    where = location(root)
    assert where is not None
    for number in range(1, 9):
        metrics = [
            Metric(metric, values[number - 1], unit, **labels)
            for metric, unit, labels, values in PLANTED.values()
        ]
        append(Run("james", "audit", "a", day(number), tuple(metrics)), where)
        # A validation of the same store an hour after each audit, its own job: its series
        # are apart from the audits' (interleaved, they would break every streak above, and
        # its run would be the store's latest).
        checked = [Metric("live_mails", 5, "count", queue="outgoing"),
                   Metric("browse_start", number, "instant", queue="spool")]  # fmt: skip
        append(Run("james", "validate", "a", day(number) + dt.timedelta(hours=1),
                   tuple(checked)), where)  # fmt: skip
    # Another store with one run: nothing is new in a store's first run.
    once = [Metric("findings", 5, "count", check="racl_drift", item="error")]
    append(Run("james", "audit", "b", day(8), tuple(once)), where)
    return root


@pytest.fixture(scope="module")
def alerts(spark, history: Path, tmp_path_factory: pytest.TempPathFactory):
    rules_file = tmp_path_factory.mktemp("rules") / "rules.toml"
    rules_file.write_text(RULES)
    rules = load_rules(rules_file)
    where = location(history)
    assert where is not None
    return history_alerts(read(spark, where), rules)


def fired(alerts) -> set[tuple[str, str, int, dt.datetime]]:
    return {(a.rule, a.scope, a.run_number, a.since) for a in alerts}


def test_each_rule_fires_on_exactly_the_planted_runs(alerts) -> None:
    assert fired(alerts) == {
        ("stuck", "a", 8, day(4)),  # equal on days 4..8: five runs
        ("growing", "a", 6, day(3)),  # rose on days 4, 5, 6: three runs, from day 3's value
        ("growing", "a", 7, day(3)),
        ("doubled", "a", 7, day(3)),  # 200 on day 7 against 100 four runs before
        ("doubled", "a", 8, day(4)),
        ("first", "a", 7, day(7)),  # never above 0 before day 7; store b has one run only
        ("old", "a", 2, day(2)),
        ("old", "a", 3, day(2)),  # the streak over 100 began on day 2
        ("old", "a", 5, day(5)),
        ("spike", "a", 6, day(6)),  # 50 against 10, 11, 10, 11
    }


def test_audits_and_validations_of_a_store_are_apart(alerts) -> None:
    assert {a.run_kind for a in alerts} == {"audit"}
    assert all(a.run_number <= 8 for a in alerts)


def test_alerts_carry_their_series_and_values(alerts) -> None:
    stuck = next(a for a in alerts if a.rule == "stuck")
    assert (stuck.metric, stuck.queue, stuck.values) == ("browse_start", "spool", (4.0,) * 5)
    growing = [a for a in alerts if a.rule == "growing"]
    assert {a.queue for a in growing} == {"outgoing"}
    assert growing[0].values == (10.0, 11.0, 12.0, 13.0)
    doubled = [a for a in alerts if a.rule == "doubled"]
    assert {a.check for a in doubled} == {"orphaned_blob"}
    assert doubled[0].values == (100.0, 100.0, 150.0, 150.0, 200.0)
    assert "grew in each of the last 3 runs" in growing[0].line()


def test_latest_keeps_what_fires_at_each_stores_newest_run(alerts) -> None:
    assert {(a.rule, a.run_number) for a in latest(alerts)} == {("stuck", 8), ("doubled", 8)}


def test_history_alerts_exits_1_naming_each_rule_and_metric(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mqforensics.cli import main

    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(RULES)
    assert main(["history", "alerts", "--history", str(history), "--rules", str(rules_file)]) == 1
    out = capsys.readouterr().out
    assert "ALERT stuck (warning): browse_start of james a queue spool" in out
    assert "ALERT doubled (warning): reclaimable_bytes of james a check orphaned_blob" in out
    assert out.count("ALERT ") == 2
    assert "2 alerts from the 6 rules at each store's latest run" in out


def test_history_alerts_exits_0_when_none_fires(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mqforensics.cli import main

    quiet = tmp_path / "quiet.toml"
    quiet.write_text('[[rule]]\nid = "huge"\nkind = "threshold"\nmetric = "live_mails"\n'
                     'above = 1e9\nwhy = "never"\n')  # fmt: skip
    assert main(["history", "alerts", "--history", str(history), "--rules", str(quiet)]) == 0
    assert "no alert from the 1 rules" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ('[[rule]]\nid = "x"\nkind = "sideways"\nmetric = "m"\nwhy = "w"\n',
         "rule 1 (x): kind 'sideways' is not one of threshold, change"),
        ('[[rule]]\nid = "x"\nkind = "unchanged"\nmetric = "m"\nruns = 1\nwhy = "w"\n',
         "rule 1 (x): a unchanged rule needs runs of at least 2"),
        ('[[rule]]\nid = "x"\nkind = "threshold"\nmetric = "m"\nwhy = "w"\n',
         "rule 1 (x): a threshold rule needs above or below"),
        ('[[rule]]\nid = "x"\nkind = "growing"\nmetric = "m"\nabove = 3\nwhy = "w"\n',
         "rule 1 (x): above has no meaning in a growing rule"),
    ],
)  # fmt: skip
def test_a_bad_rules_file_exits_2_in_one_line_naming_the_rule_and_key(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], rules: str, message: str
) -> None:
    from mqforensics.cli import main

    bad = tmp_path / "bad.toml"
    bad.write_text(rules)
    assert main(["history", "alerts", "--history", str(history), "--rules", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(bad) in err[0]


def test_the_bundled_rules_load_and_each_says_why() -> None:
    rules = load_rules()
    assert len({r.id for r in rules}) == len(rules) >= 10
    assert all(len(r.why) > 60 for r in rules)
