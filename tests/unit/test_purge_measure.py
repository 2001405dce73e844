"""The engine's optional `measure` hook: journaled before the first action and after the
verification, once per journal, shown by a dry run without writing, rendered by the report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mqforensics.purge.engine import run_purge
from mqforensics.purge.journal import read_journal
from mqforensics.retention.manifest import Plan
from mqforensics.views.plan_report import render_html, render_text
from tests.unit.test_purge_engine import PLANNED, STORE, DictExecutor, make_plan


class MeasuringExecutor(DictExecutor):
    """Reports how many objects its store holds, and predicts one removal per action."""

    def __init__(self, store: dict[str, str], plan: Plan) -> None:
        super().__init__(store, plan)
        self.measures = 0
        self.fail_measure: list[BaseException] = []

    def measure(self) -> dict[str, Any]:
        self.measures += 1
        if self.fail_measure:
            raise self.fail_measure.pop(0)
        return {
            "predicted": {"store": {"objects removed": len(self.named)}},
            "observed": {"store": {"objects": len(self.store), "ratio": float("nan")}},
            "notes": ["counted every object"],
        }


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    return make_plan(tmp_path, PLANNED)


def _measured(plan: Plan) -> list[dict[str, Any]]:
    return [r for r in read_journal(plan.directory / "journal.jsonl") if r["event"] == "measured"]


def test_measured_before_the_first_action_and_after_the_verification(plan: Plan) -> None:
    out: list[str] = []
    result = run_purge(plan, [MeasuringExecutor(dict(STORE), plan)], apply=True, out=out.append)
    events = [r["event"] for r in read_journal(plan.directory / "journal.jsonl")]
    assert events[:3] == ["begin", "census", "measured"] and events[-2:] == ["verified", "measured"]
    before, after = _measured(plan)
    assert (before["phase"], after["phase"]) == ("before", "after")
    assert before["MeasuringExecutor"]["observed"] == {"store": {"objects": 4, "ratio": None}}
    assert after["MeasuringExecutor"]["observed"]["store"]["objects"] == 1
    assert result.measured["after"]["MeasuringExecutor"]["predicted"] == {
        "store": {"objects removed": 3}
    }
    assert "measured before, MeasuringExecutor observed store: objects 4, ratio -" in out

    # A rerun of the finished purge measures nothing and writes nothing.
    written = (plan.directory / "journal.jsonl").read_bytes()
    again = MeasuringExecutor({"keep": "k"}, plan)
    run_purge(plan, [again], apply=True, out=lambda _: None)
    assert again.measures == 0
    assert (plan.directory / "journal.jsonl").read_bytes() == written

    journal = read_journal(plan.directory / "journal.jsonl")
    text = render_text(plan, journal)
    assert re.search(r"MeasuringExecutor\s+store\s+objects\s+-\s+4\s+1", text), text
    assert re.search(r"MeasuringExecutor\s+store\s+objects removed\s+3\s+-\s+-", text), text
    assert "MeasuringExecutor before: counted every object" in text
    for report in (text, render_html(plan, journal)):
        section = report[report.index("Measured (what the live system reported)") :]
        assert not re.search(r"\b(nan|NaN|None|null)\b", section), section


def test_a_resumed_purge_does_not_measure_before_again(plan: Plan) -> None:
    store = dict(STORE)
    first = MeasuringExecutor(store, plan)
    first.fail_apply["b"] = [RuntimeError("the run stops here")]
    with pytest.raises(RuntimeError):
        run_purge(plan, [first], apply=True, out=lambda _: None)
    assert [r["phase"] for r in _measured(plan)] == ["before"]
    run_purge(plan, [MeasuringExecutor(store, plan)], apply=True, out=lambda _: None)
    assert [r["phase"] for r in _measured(plan)] == ["before", "after"]


def test_a_run_stopped_before_measuring_after_gets_it_on_the_rerun(plan: Plan) -> None:
    store = dict(STORE)
    run_purge(plan, [MeasuringExecutor(store, plan)], apply=True, out=lambda _: None)
    path = plan.directory / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))  # as if killed right after "verified"
    out: list[str] = []
    run_purge(plan, [MeasuringExecutor(store, plan)], apply=True, out=out.append)
    assert [r["phase"] for r in _measured(plan)] == ["before", "after"]
    assert any("measuring after it" in line for line in out)
    written = path.read_bytes()
    run_purge(plan, [MeasuringExecutor(store, plan)], apply=True, out=lambda _: None)
    assert path.read_bytes() == written


def test_a_dry_run_shows_the_measurement_and_writes_nothing(plan: Plan) -> None:
    out: list[str] = []
    result = run_purge(plan, [MeasuringExecutor(dict(STORE), plan)], apply=False, out=out.append)
    assert result.measured["before"]["MeasuringExecutor"]["observed"]["store"]["objects"] == 4
    assert "measured before, MeasuringExecutor predicted store: objects removed 3" in out
    assert not (plan.directory / "journal.jsonl").exists()


def test_a_failed_measurement_is_recorded_and_the_purge_goes_on(plan: Plan) -> None:
    store = dict(STORE)
    executor = MeasuringExecutor(store, plan)
    executor.fail_measure = [ValueError("tracing refused")]
    result = run_purge(plan, [executor], apply=True, out=lambda _: None)
    assert store == {"keep": "k"} and result.done == 3
    before, after = _measured(plan)
    assert before["MeasuringExecutor"] == {"error": "ValueError: tracing refused"}
    assert "error" not in after["MeasuringExecutor"]
    text = render_text(plan, read_journal(plan.directory / "journal.jsonl"))
    assert "MeasuringExecutor before: measurement failed: ValueError: tracing refused" in text


def test_executors_without_measure_write_no_measured_record(plan: Plan) -> None:
    run_purge(plan, [DictExecutor(dict(STORE), plan)], apply=True, out=lambda _: None)
    assert _measured(plan) == []
