"""`local_frame`: a few rows held in the plan, read without a Spark job, values bound safely."""

import datetime as dt

import pytest

from mqforensics import findings
from mqforensics.spark import LOCAL_ROWS, local_frame

SCHEMA = "queuename string, browsestart timestamp, pace int"


def jobs_run_by(spark, action):
    """The number of Spark jobs `action` ran (job group set for the duration)."""
    context = spark.sparkContext
    group = f"local-frame-{id(action)}"
    context.setJobGroup(group, "local_frame test")
    try:
        result = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group)), result


def test_rows_come_back_typed_without_a_job(spark):
    start = dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC)
    frame = local_frame(spark, [("spool", start, 1000), ("relay", None, None)], SCHEMA)
    count, rows = jobs_run_by(spark, frame.collect)
    assert count == 0
    assert [tuple(r) for r in rows] == [
        ("spool", dt.datetime(2026, 1, 1, 9), 1000),  # the session is in UTC
        ("relay", None, None),
    ]
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("queuename", "string"), ("browsestart", "timestamp"), ("pace", "int"),
    ]  # fmt: skip


def test_text_is_a_value_never_sql(spark):
    hostile = "x') , ('y'; DROP TABLE t; --"
    rows = local_frame(spark, [(hostile, None, 1)], SCHEMA).collect()
    assert [r.queuename for r in rows] == [hostile]


def test_no_rows_is_an_empty_frame_of_the_schema(spark):
    frame = local_frame(spark, [], SCHEMA)
    assert frame.collect() == []
    assert frame.columns == ["queuename", "browsestart", "pace"]


def test_more_rows_than_the_limit_are_all_there(spark):
    rows = [(f"q{i}", None, i) for i in range(LOCAL_ROWS + 5)]
    got = local_frame(spark, rows, SCHEMA).collect()
    assert [(r.queuename, r.pace) for r in got] == [(q, p) for q, _, p in rows]


def test_a_row_of_the_wrong_width_is_refused(spark):
    with pytest.raises(ValueError, match="row of 2 values for 3 columns"):
        local_frame(spark, [("spool", None)], SCHEMA)


def test_findings_made_on_the_driver_are_local(spark):
    made = findings.Finding("config_advice", "info", "james", "spool", "queue", "spool",
                            dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None, {"peak": 3})  # fmt: skip
    count, rows = jobs_run_by(spark, findings.to_frame(spark, [made]).collect)
    assert count == 0
    assert [(r.check, r.subject, r.detail) for r in rows] == [
        ("config_advice", "spool", '{"peak": 3}')
    ]
