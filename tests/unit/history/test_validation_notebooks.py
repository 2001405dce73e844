"""The validation notebooks remember: with a run history (``MQF_HISTORY``, the store named by
``MQF_HISTORY_SCOPE``), a notebook run under ``pytest --nbmake`` appends its validation, plots its
store's trends and fails naming each alert's rule and metric when one fires at the store's latest
validation (with the failed expectations in the same error:
tests/integration/james/test_james_validation_notebook.py); with earlier runs that trigger
nothing it passes, the history one run longer. The bundled samples need no server. (With no
history, ``make test`` runs every validation notebook as before: `tests/conftest.py`.) Also:
`validation_trends` keeps to the store it was given, `ValidationTrends.raise_if_any` names
failed expectations and alerts in one error, and `History.plot` marks only the alerts of the
series it draws."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import mqforensics
from mqforensics import api
from mqforensics.api_history import NO_HISTORY, ValidationTrends, configured_history
from mqforensics.history.alerts import Alert
from mqforensics.history.collect import Run
from mqforensics.history.rules import load_rules
from mqforensics.history.store import Location, append
from mqforensics.metrics import Metric
from mqforensics.quality import QualityReport
from tests.history_runs import history_runs, seeded
from tests.notebook_runs import ROOT, run_notebook_copy

VALIDATION = ROOT / "notebooks" / "validation"
# What a scheduler's environment may hold that would change what these runs validate.
DROPPED = ("MQF_JAMES_ARGS", "MQF_POSTFIX_ARGS", "MQF_AS_OF", "MQF_REVEAL_ADDRESSES",
           "MQF_HISTORY", "MQF_HISTORY_SCOPE")  # fmt: skip


def with_parameters(notebook: Path, target: Path, parameters: dict[str, object]) -> Path:
    """A copy of `notebook` with an injected-parameters cell after its parameters cell, as
    ``papermill -p NAME VALUE`` runs it."""
    node = nbformat.read(notebook, as_version=4)
    index = next(i for i, cell in enumerate(node.cells)
                 if "parameters" in cell.metadata.get("tags", []))  # fmt: skip
    injected = nbformat.v4.new_code_cell(
        "# Parameters\n" + "".join(f"{name} = {value!r}\n" for name, value in parameters.items())
    )
    injected.metadata["tags"] = ["injected-parameters"]
    node.cells.insert(index + 1, injected)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(node, target)
    return target


QUIET_RULES = """
[[rule]]
id = "deferred-grows"
kind = "growing"
metric = "live_mails"
system = "postfix"
queue = "deferred"
runs = 3
why = "The deferred queue rose in each of the last three runs."

[[rule]]
id = "deferred-over-100"
kind = "threshold"
metric = "live_mails"
system = "postfix"
queue = "deferred"
above = 100
why = "More than 100 mails deferred."
"""


def test_a_quiet_history_passes_the_postfix_notebook_one_run_longer(tmp_path: Path) -> None:
    # The deferred queue shrank over three earlier validations (9, 8, 7 mails; the sample holds
    # 6): it did not grow, and never held over 100. Another store's runs are not this one's.
    rules = tmp_path / "rules.toml"
    rules.write_text(QUIET_RULES)
    now = dt.datetime.now(dt.UTC)
    history = tmp_path / "history"
    seeded(history, "postfix", "lab-postfix",
           [(now - dt.timedelta(days=3 - n), [Metric("live_mails", 9 - n, "count",
             queue="deferred")]) for n in range(3)])  # fmt: skip
    seeded(
        history,
        "postfix",
        "elsewhere",
        [(now - dt.timedelta(days=1), [Metric("live_mails", 500, "count", queue="deferred")])],
    )
    notebook = with_parameters(
        VALIDATION / "postfix_quality.ipynb", tmp_path / "parameterised" / "postfix_quality.ipynb",
        {"HISTORY_SCOPE": "lab-postfix", "RULES": str(rules)},
    )  # fmt: skip
    status, output = run_notebook_copy(notebook, tmp_path, {"MQF_HISTORY": str(history)},
                                       drop=DROPPED)  # fmt: skip
    assert status == 0, output[-4000:]
    assert "1 passed" in output
    runs = history_runs(history)
    ours = runs[runs["scope"] == "lab-postfix"]
    assert len(ours) == 4 and len(runs) == 5 and set(ours["kind"]) == {"validate"}
    quality = json.loads((tmp_path / "out" / "validation" / "postfix" / "quality.json").read_text())
    assert quality["history"]["scope"] == "lab-postfix"
    assert quality["history"]["run_id"] in set(ours["run_id"])
    added = pd.read_parquet(history)
    added = added[added["run_id"] == quality["history"]["run_id"]]
    assert len(added) == quality["history"]["figures"]
    assert {"live_mails", "oldest_live_age", "expectation_passed"} <= set(added["metric"])


# --- the API the notebooks call ------------------------------------------------------------------


def test_configured_history_is_the_given_one_else_mqf_history(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("MQF_HISTORY", raising=False)
    assert configured_history() is None and configured_history(None) is None
    assert configured_history(tmp_path) == str(tmp_path)
    monkeypatch.setenv("MQF_HISTORY", "s3a://ops/history")
    assert configured_history() == "s3a://ops/history"
    assert configured_history(tmp_path / "mine") == str(tmp_path / "mine")


def test_mqf_history_scope_is_the_default_of_the_scope(monkeypatch) -> None:
    for name in DROPPED:
        monkeypatch.delenv(name, raising=False)
    assert "history_scope" not in api.notebook_keywords("postfix")
    monkeypatch.setenv("MQF_HISTORY_SCOPE", "mx1")
    assert api.notebook_keywords("postfix")["history_scope"] == "mx1"
    assert api.notebook_keywords("postfix", history_scope="mx2")["history_scope"] == "mx2"
    keywords = api.notebook_keywords("postfix", history="/var/h")
    assert keywords["history"] == "/var/h"


def _alert(rule: str, metric: str, scope: str = "mx1") -> Alert:
    instant = dt.datetime(2027, 1, 2, tzinfo=dt.UTC)
    return Alert(rule, "threshold", "warning", "postfix", scope, metric, "hold", "", "",
                 "count", "r2", 2, True, instant, instant, 2.0, (2.0,), "above 0",
                 run_kind="validate")  # fmt: skip


def test_raise_if_any_names_failed_expectations_and_alerts_in_one_error() -> None:
    quiet = ValidationTrends("postfix", [])
    quiet.raise_if_any([])  # no history, nothing failed
    assert quiet.summary() == NO_HISTORY and not quiet.configured and quiet.figures() == []
    with pytest.raises(AssertionError) as failed:
        quiet.raise_if_any(["messages: expect_x on id_kind: 1 unexpected"])
    assert str(failed.value) == "expectations failed:\nmessages: expect_x on id_kind: 1 unexpected"

    firing = mqforensics.Alerts([_alert("postfix-held-mail", "live_mails")], [], "/h")
    trends = ValidationTrends("postfix", [], {"location": "/h", "scope": "mx1", "run_id": "r2",
                                              "figures": 3}, alerts=firing)  # fmt: skip
    with pytest.raises(AssertionError) as both:
        trends.raise_if_any(["messages: expect_x on id_kind: 1 unexpected"])
    text = str(both.value)
    assert text.startswith("expectations failed:\nmessages: expect_x on id_kind: 1 unexpected\n")
    assert "history alerts:\nALERT postfix-held-mail (warning): live_mails of postfix mx1" in text
    with pytest.raises(AssertionError, match=r"postfix-held-mail.*live_mails"):
        trends.raise_if_any([])


def test_validation_trends_keep_to_the_store_validated(spark, tmp_path, monkeypatch) -> None:
    start = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    history = tmp_path / "history"

    def figures(held: int, passed: int) -> list[Metric]:
        item = "expect_column_values_to_be_in_set on id_kind"
        return [Metric("live_mails", held, "count", queue="hold"),
                Metric("expectation_passed", passed, "success", check="postfix_messages",
                       item=item),
                Metric("unexpected_rows", 1 - passed, "count", check="postfix_messages",
                       item=item)]  # fmt: skip

    seeded(history, "postfix", "mx1",
           [(start + dt.timedelta(days=n), figures(held, passed))
            for n, (held, passed) in enumerate([(0, 1), (0, 1), (2, 0)])])  # fmt: skip
    seeded(history, "postfix", "mx2", [(start, figures(5, 1))])  # another store, firing
    # An audit of the same store: its series are apart, not this validation's.
    append(Run("postfix", "audit", "mx1", start, (Metric("live_mails", 9, "count", "hold"),)),
           Location(str(history), history))  # fmt: skip
    last = pd.read_parquet(history).sort_values("as_of").iloc[-1]
    recorded = {"location": str(history), "scope": "mx1", "run_id": last["run_id"], "figures": 3}
    report = QualityReport("postfix", False, [], history=recorded)
    rules = load_rules(None)
    trends = mqforensics.validation_trends(report, rules=rules, spark=spark)
    assert trends.configured and trends.metrics() == ["live_mails"]
    # mx1's latest validation: mail held, an expectation that passed before fails now (not
    # mx2's held mail, nor the audit's).
    assert [(a.rule, a.scope, a.run_kind) for a in trends.alerts] == [
        ("expectation-started-failing", "mx1", "validate"),
        ("postfix-held-mail", "mx1", "validate"),
    ]
    assert len(trends.figures()) == 1
    table = trends.expectations()
    assert list(table["run"]) == [*table["run"][:2], "this run"]
    assert list(table["postfix_messages"]) == ["1 of 1", "1 of 1", "0 of 1"]
    assert list(table["failed"]) == [0, 0, 1] and list(table["unexpected rows"]) == [0, 0, 1]
    summary = trends.summary().splitlines()
    assert summary[0] == (f"Appended 3 figures to the history {history} (store 'mx1', run "
                          f"{last['run_id']})")  # fmt: skip
    assert summary[1].startswith("3 validations of the store judged from 2027-01-01T00:00:00Z")
    assert summary[2] == f"2 alerts from the {len(rules)} rules at the store's latest validation"

    # History.plot marks the alerts of the series it draws only: mx1's audit and validations,
    # not mx2's held mail.
    import mqforensics.views.trends as views

    drawn: list[list[Alert]] = []
    monkeypatch.setattr(views, "trend_figure", lambda points, alerts, **_: drawn.append(alerts))
    mqforensics.open_history(history, spark=spark).plot("live_mails", rules=rules, scope="mx1")
    assert [(a.rule, a.scope, a.run_kind) for a in drawn[0]] == [
        ("postfix-held-mail", "mx1", "audit"),
        ("postfix-held-mail", "mx1", "validate"),
    ]
