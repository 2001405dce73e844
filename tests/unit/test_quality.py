"""The James expectation suites on small in-memory frames: planted violations, clean frames,
malformed suite files. Each full validation costs tens of seconds of Spark jobs on a small
machine, so the two validations are module-scoped and shared by the tests that read them."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError
from mqforensics.privacy import pseudonymize_address
from mqforensics.quality import (
    SUITES_DIR,
    failure_lines,
    load_suite,
    render_text,
    report_to_json,
    suite_path,
    validate,
)
from mqforensics.systems.james import schema

FRAMES = ("entries", "deleted", "browse_start", "content_start", "config_history", "blobs")
UTC = dt.UTC
SLICE = dt.datetime(2026, 11, 1, 10, 0, 0, tzinfo=UTC)
IDS = [
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "16fd2706-8baf-433b-82eb-8c7fada847da",
    "9b2e3c1a-5f4d-4e6b-8a7c-1d2e3f4a5b6c",
    "c56a4180-65aa-42ec-a945-5fd21dec0538",
]


def entry(enqueueid, *, slice_start=SLICE, header="h-1", version="v4", recipients=("b@x.org",)):
    enqueued = SLICE + dt.timedelta(seconds=5)
    return (
        "spool", slice_start, 1, enqueueid, enqueued, f"mail-{enqueueid[:4]}", "root", header,
        "b-1", {}, None, "alice@example.org", list(recipients), None, None, None, [], version,
    )  # fmt: skip


def blob(key, kind="passthrough", size=10):
    return ("james-default", key, size, SLICE, "etag", None, kind, None, None, None)


def clean_rows() -> dict[str, tuple[list, str]]:
    return {
        "entries": (
            [entry(IDS[0]), entry(IDS[1], version="v3", recipients=()), entry(IDS[2])],
            schema.ENTRIES,
        ),
        "deleted": ([("spool", IDS[0]), ("other", IDS[0])], schema.DELETED),
        "browse_start": ([("spool", SLICE), ("other", SLICE)], schema.BROWSE_START),
        "content_start": ([("spool", SLICE)], schema.CONTENT_START),
        "config_history": ([(0, 3600, 1, 1000), (1, 600, 2, 10)], schema.CONFIG_HISTORY),
        "blobs": (
            [
                blob(IDS[0]),
                blob("1_628_" + IDS[1], "generation_aware", 0),
                blob("3b6f9a8e5c", "legacy_hash"),
                blob("odd/key", "unknown"),
            ],
            schema.BLOBS,
        ),
    }


def planted_rows() -> dict[str, tuple[list, str]]:
    rows = clean_rows()
    rows["entries"][0].extend(
        [
            entry(IDS[0]),  # duplicated (queuename, enqueueid)
            entry(IDS[3], header=None),  # null blob id
            entry("not-a-uuid"),  # non-uuid enqueueId
            entry(IDS[4], slice_start=SLICE + dt.timedelta(seconds=0.5)),  # fractional seconds
        ]
    )
    rows["deleted"][0].append(("spool", "carol@example.org"))  # non-uuid, looks like an address
    rows["browse_start"][0].append(("spool", SLICE))  # two rows for one queue
    rows["config_history"][0].append((2, 0, 2, 10))  # a window of 0
    rows["blobs"][0].append(blob(IDS[2], size=-1))  # a negative size
    return rows


# (suite, expectation type, target) -> unexpected count, for the planted frames.
PLANTED_FAILURES = {
    ("james_entries", "expect_compound_columns_to_be_unique", "queuename, enqueueid"): 2,
    ("james_entries", "expect_column_values_to_not_be_null", "headerblobid"): 1,
    ("james_entries", "expect_column_values_to_match_regex", "enqueueid"): 1,
    ("james_entries", "unexpected_rows_expectation", "timerangestart"): 1,
    ("james_deleted", "expect_column_values_to_match_regex", "enqueueid"): 1,
    ("james_browse_start", "expect_column_values_to_be_unique", "queuename"): 2,
    ("james_config_history", "expect_column_values_to_be_between", "slice_window_seconds"): 1,
    ("james_blobs", "expect_column_values_to_be_between", "size"): 1,
}


def _validate(spark, rows, tmp_path_factory):
    frames = {name: spark.createDataFrame(data, ddl) for name, (data, ddl) in rows.items()}
    # GX must not write a gx/ project (or anything else) into the working directory.
    workdir = tmp_path_factory.mktemp("cwd")
    old = Path.cwd()
    os.chdir(workdir)
    try:
        report = validate(frames, system="james")
    finally:
        os.chdir(old)
    assert list(workdir.iterdir()) == []
    return report


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory):
    return _validate(spark, planted_rows(), tmp_path_factory)


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    return _validate(spark, clean_rows(), tmp_path_factory)


def _key(suite, outcome):
    target = outcome.target
    if outcome.expectation == "unexpected_rows_expectation":
        target = "timerangestart" if "timerangestart" in target else target
    return (suite.suite, outcome.expectation, target)


def test_exactly_the_planted_violations_fail_with_their_counts(planted):
    failed = {_key(s, o): o.unexpected_count for s, o in planted.failures()}
    assert failed == PLANTED_FAILURES
    assert not planted.success
    assert all(o.error is None for s in planted.suites for o in s.expectations)


def test_failures_carry_a_few_pseudonymised_values(planted):
    values = {_key(s, o): o.unexpected_values for s, o in planted.failures()}
    entries = "james_entries"
    assert values[(entries, "expect_column_values_to_match_regex", "enqueueid")] == ["not-a-uuid"]
    assert (
        values[(entries, "expect_compound_columns_to_be_unique", "queuename, enqueueid")]
        == [{"queuename": "spool", "enqueueid": IDS[0]}] * 2
    )
    [misaligned] = values[(entries, "unexpected_rows_expectation", "timerangestart")]
    assert misaligned["enqueueid"] == IDS[4]
    assert misaligned["timerangestart"] == "2026-11-01 10:00:00.5"
    deleted = values[("james_deleted", "expect_column_values_to_match_regex", "enqueueid")]
    assert deleted == [pseudonymize_address("carol@example.org")]
    assert "carol" not in report_to_json(planted)


def test_the_report_renders_as_json_and_one_line_per_failure(planted):
    data = json.loads(report_to_json(planted))
    assert data["success"] is False and data["pseudonymized"] is True
    assert [s["suite"] for s in data["suites"]] == sorted(f"james_{f}" for f in FRAMES)
    lines = failure_lines(planted)
    assert len(lines) == len(PLANTED_FAILURES)
    assert any(line.startswith("james_blobs: expect_column_values_to_be_between [size]: 1 ")
               for line in lines)  # fmt: skip
    text = render_text(planted)
    assert text.splitlines()[1:-1] == lines
    assert "6 suites" in text.splitlines()[0]
    total = sum(len(s.expectations) for s in planted.suites)
    failing = sum(1 for s in planted.suites if s.failures)
    assert text.splitlines()[-1] == (
        f"verdict: {len(lines)} of {total} expectations failed, in {failing} of 6 suites"
    )


def test_clean_frames_pass_every_expectation(clean):
    assert clean.success, render_text(clean)
    assert {s.frame for s in clean.suites} == set(FRAMES)
    for suite in clean.suites:
        assert suite.expectations, suite.suite
        for outcome in suite.expectations:
            assert outcome.success and outcome.unexpected_count == 0, (suite.suite, outcome)
    assert failure_lines(clean) == []


@pytest.mark.parametrize("frame", FRAMES)
def test_suite_files_are_exactly_gx_serialisations(frame):
    path = suite_path(frame, system="james")
    stored = json.loads(path.read_text())
    suite = load_suite(path)
    assert suite.name == f"james_{frame}"
    assert suite.to_json_dict() == stored
    assert len(suite.expectations) == len(stored["expectations"])


def _write(directory: Path, name: str, content: str) -> Path:
    path = directory / f"{name}.json"
    path.write_text(content)
    return path


def _good_suite() -> dict:
    return json.loads((SUITES_DIR / "james_deleted.json").read_text())


def test_a_suite_naming_an_unknown_expectation_is_a_config_error(spark, tmp_path):
    suite = _good_suite()
    suite["expectations"].append({"type": "expect_mail_to_be_nice", "kwargs": {}, "meta": {}})
    path = _write(tmp_path, "james_deleted", json.dumps(suite))
    frames = {"deleted": spark.createDataFrame(*clean_rows()["deleted"])}
    with pytest.raises(ConfigError) as error:
        validate(frames, system="james", suites_dir=tmp_path)
    assert str(path) in error.value.message
    assert "expect_mail_to_be_nice" in error.value.message
    assert f"loaded {len(suite['expectations']) - 1} of {len(suite['expectations'])}" in (
        error.value.message
    )


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        json.dumps({"name": "james_deleted", "expectations": [{"type": 3}]}),
        json.dumps({"name": "james_deleted", "expectations": []}),
        json.dumps({"name": "someone_else", "expectations": _good_suite()["expectations"]}),
        json.dumps(
            {
                "name": "james_deleted",
                "expectations": [
                    {"type": "expect_column_values_to_not_be_null", "kwargs": {"colum": "x"}}
                ],
            }
        ),
    ],
    ids=["invalid-json", "not-an-object", "bad-entry", "empty", "wrong-name", "bad-kwargs"],
)
def test_a_malformed_suite_file_is_a_config_error_naming_it(tmp_path, content):
    path = _write(tmp_path, "james_deleted", content)
    with pytest.raises(ConfigError) as error:
        load_suite(path)
    assert str(path) in error.value.message


def test_a_frame_without_a_suite_is_a_config_error(spark, tmp_path):
    frames = {"deleted": spark.createDataFrame(*clean_rows()["deleted"])}
    with pytest.raises(ConfigError, match=r"james_deleted\.json does not exist"):
        validate(frames, system="james", suites_dir=tmp_path)


@pytest.mark.parametrize("limit, partitions", [(100_000, 1), (49, 4)])
def test_a_frame_is_held_persisted_and_a_small_one_as_one_partition(
    spark, monkeypatch, limit, partitions
):
    from mqforensics import quality

    monkeypatch.setattr(quality, "SMALL_FRAME_ROWS", limit)
    frame = spark.range(0, 50, numPartitions=4)
    with quality._held(frame) as held:
        assert held.rdd.getNumPartitions() == partitions
        assert quality._is_cached(held) and quality._is_cached(frame)
        assert sorted(r.id for r in held.collect()) == list(range(50))
    # What it persisted is released; a frame its caller cached stays cached.
    assert not quality._is_cached(held) and not quality._is_cached(frame)
    frame.persist()
    with quality._held(frame):
        pass
    assert quality._is_cached(frame)
    frame.unpersist()


def test_every_suite_names_a_schema_the_code_defines():
    """A suite's ``meta.schema`` says where its frame's columns are declared; a module or a
    constant renamed without its suites would leave a reader of the suite nowhere to look."""
    import importlib
    from pathlib import Path

    suites = Path(__file__).resolve().parents[2] / "expectations"
    unresolved = []
    for path in sorted(suites.glob("*.json")):
        text = json.dumps(json.loads(path.read_text()))
        for reference in re.findall(r'"schema": "(mqforensics\.[A-Za-z0-9_.]+)"', text):
            parts = reference.split(".")
            for end in range(len(parts) - 1, 0, -1):
                try:
                    found: object = importlib.import_module(".".join(parts[:end]))
                except ImportError:
                    continue
                try:
                    for name in parts[end:]:
                        found = getattr(found, name)
                except AttributeError:
                    unresolved.append(f"{path.name}: {reference}")
                break
            else:
                unresolved.append(f"{path.name}: {reference}")
    assert unresolved == []
