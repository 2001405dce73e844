"""Data quality of canonical frames, checked with Great Expectations suites kept as JSON data.

Each frame of a system's state has a suite in ``expectations/<system>_<frame>.json``: exactly what
GX's ``ExpectationSuite`` serializes to (name, expectations with type/kwargs/meta/description),
versioned with the code and reviewed like it. `validate` loads the suites of the frames it is
given, runs each on its Spark DataFrame in an in-memory GX context (nothing is written into the
repository; data docs only when a directory is given) and returns a typed `QualityReport` whose
sample values are pseudonymised by default (`mqforensics.privacy`).

GX computes one Spark job per metric, so every frame is persisted for the length of its
validation (and unpersisted afterwards unless it was already cached), and results are asked for
in the BASIC format: unexpected counts and a few values, no per-value histograms. A frame of at
most `SMALL_FRAME_ROWS` rows is validated as one partition (`_held`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.errors import ConfigError
from mqforensics.privacy import pseudonymize_text

if TYPE_CHECKING:
    from great_expectations import ExpectationSuite
    from pyspark.sql import DataFrame

SUITES_DIR = Path(__file__).resolve().parent.parent / "expectations"
DEFAULT_SAMPLES = 5
_QUERY_TYPE = "unexpected_rows_expectation"
_SUITE_KEYS = {"name", "id", "expectations", "suite_parameters", "meta", "notes"}


@dataclass(frozen=True)
class ExpectationOutcome:
    """The result of one expectation on one frame.

    `target` is the column, the comma-separated column list, or the SQL query it checks.
    `unexpected_count` is the number of offending rows (None when the expectation could not be
    evaluated; `error` then says why). `unexpected_values` holds at most a few offending values
    (or rows, for query expectations), pseudonymised unless the report says otherwise.
    """

    expectation: str
    target: str
    description: str | None
    success: bool
    unexpected_count: int | None
    element_count: int | None = None
    unexpected_values: list[Any] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class SuiteOutcome:
    """One suite run on one frame: its file, overall success, timing and every expectation."""

    suite: str
    frame: str
    file: str
    success: bool
    seconds: float
    expectations: list[ExpectationOutcome]

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success]


@dataclass(frozen=True)
class QualityReport:
    """The outcome of every suite run by `validate`; `success` is true when all passed.
    `history` says where the validation's figures were appended (the history's location, the
    store's ``scope``, the ``run_id`` and how many ``figures``), None when they were not."""

    system: str
    success: bool
    suites: list[SuiteOutcome]
    pseudonymized: bool = True
    history: dict[str, Any] | None = None

    def failures(self) -> list[tuple[SuiteOutcome, ExpectationOutcome]]:
        """Every failed expectation with its suite, in suite and file order."""
        return [(s, e) for s in self.suites for e in s.failures]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- suites -----------------------------------------------------------------------------------


def suite_path(frame: str, *, system: str, suites_dir: Path = SUITES_DIR) -> Path:
    """Where the suite of `frame` of `system` lives: ``<suites_dir>/<system>_<frame>.json``."""
    return Path(suites_dir) / f"{system}_{frame}.json"


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    # GX logs a traceback for every expectation it drops; we report the drop as a ConfigError.
    logger = logging.getLogger(logger_name)
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def _describe_drop(index: int, entry: Any) -> str | None:
    """Why GX refuses expectation `index` of a suite file, or None if it accepts it."""
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    try:
        ExpectationConfiguration(**entry).to_domain_obj()
    except Exception as exc:
        reason = " ".join(str(getattr(exc, "message", None) or exc).split())
        return f"expectation #{index} ({entry.get('type')!r}): {reason[:300]}"
    return None


def load_suite(path: Path) -> ExpectationSuite:
    """The GX suite stored in `path`; ConfigError naming the file if it is malformed.

    GX silently drops an expectation whose type it does not know (or whose kwargs it rejects)
    while building a suite, so the loaded count is compared with the file's count.
    """
    import great_expectations as gx

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"expectation suite {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"expectation suite {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"expectation suite {path} is not a JSON object")
    unknown = set(data) - _SUITE_KEYS
    if unknown:
        raise ConfigError(f"expectation suite {path} has unknown keys {sorted(unknown)}")
    if data.get("name") != path.stem:
        raise ConfigError(
            f"expectation suite {path} is named {data.get('name')!r}, not {path.stem!r}"
        )
    entries = data.get("expectations")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"expectation suite {path} has no list of expectations")
    for index, entry in enumerate(entries):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("type"), str)
            and isinstance(entry.get("kwargs"), dict)
        ):
            raise ConfigError(
                f"expectation suite {path}: expectation #{index} is not an object with a "
                "string 'type' and an object 'kwargs'"
            )
    try:
        with _quiet("great_expectations.core.expectation_suite"):
            suite = gx.ExpectationSuite(**data)
    except Exception as exc:
        raise ConfigError(f"expectation suite {path} is malformed ({exc})") from None
    if len(suite.expectations) != len(entries):
        dropped = [r for i, e in enumerate(entries) if (r := _describe_drop(i, e))]
        raise ConfigError(
            f"expectation suite {path}: GX loaded {len(suite.expectations)} of {len(entries)} "
            f"expectations; rejected: {'; '.join(dropped) or 'unknown'}"
        )
    return suite


# --- running ----------------------------------------------------------------------------------


def _context(data_docs_dir: Path | None) -> Any:
    """An in-memory GX context: no gx/ directory, no progress bars, data docs only if asked."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    sites: dict[str, Any] = {}
    if data_docs_dir is not None:
        sites["local_site"] = {
            "class_name": "SiteBuilder",
            "show_how_to_buttons": False,
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(Path(data_docs_dir).resolve()),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites=sites,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def _is_cached(frame: DataFrame) -> bool:
    level = frame.storageLevel
    return bool(level.useMemory or level.useDisk or level.useOffHeap)


# GX runs a Spark job per metric, each scheduling a task per partition, and fetches its samples
# with `limit`, which Spark runs as several jobs over growing sets of partitions. A small frame
# read as one partition answers each in one task and one job: the logqueue sample's 58
# expectations took 18 s instead of 24 (the same results), in a warm session on two cores.
SMALL_FRAME_ROWS = 100_000


@contextmanager
def _held(frame: DataFrame) -> Iterator[DataFrame]:
    """`frame` persisted for its validation (as one partition when it has at most
    `SMALL_FRAME_ROWS` rows); what was persisted here is unpersisted afterwards."""
    ours = [] if _is_cached(frame) else [frame.persist()]
    try:
        if frame.count() > SMALL_FRAME_ROWS:
            yield frame
            return
        single = frame.coalesce(1).persist()
        ours.append(single)
        single.count()  # read from `frame`'s cache, which may not be readable twice
        yield single
    finally:
        for held in ours:
            held.unpersist()


def _plain(value: Any, pseudonymize: bool, salt: str) -> Any:
    """`value` as JSON-ready data, with mail addresses in strings pseudonymised if asked."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return pseudonymize_text(value, salt) if pseudonymize else value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, pseudonymize, salt) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v, pseudonymize, salt) for v in value]
    return _plain(str(value), pseudonymize, salt)


def _query_samples(frame: DataFrame, query: str, limit: int) -> list[dict[str, Any]]:
    """The first `limit` rows of an unexpected-rows query (BASIC results carry only a count)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    view = f"mqf_quality_{uuid.uuid4().hex}"
    spark = frame.sparkSession
    frame.createOrReplaceTempView(view)
    try:
        rows = spark.sql(query.format(batch=view))
        # Timestamps as UTC strings in Spark: collecting them would give local naive datetimes.
        rows = rows.select(
            *(
                F.col(f"`{f.name}`").cast("string").alias(f.name)
                if isinstance(f.dataType, TimestampType | TimestampNTZType)
                else F.col(f"`{f.name}`")
                for f in rows.schema.fields
            )
        )
        return [row.asDict(recursive=True) for row in rows.limit(limit).collect()]
    finally:
        spark.catalog.dropTempView(view)


def _target(kwargs: Mapping[str, Any]) -> str:
    if "column" in kwargs:
        return str(kwargs["column"])
    if "column_list" in kwargs:
        return ", ".join(kwargs["column_list"])
    if "unexpected_rows_query" in kwargs:
        return str(kwargs["unexpected_rows_query"])
    return ""


def _outcome(
    expectation: Any,
    result: Any,
    frame: DataFrame,
    samples: int,
    pseudonymize: bool,
    salt: str,
) -> ExpectationOutcome:
    config = expectation.configuration
    kind = config.type
    kwargs = config.kwargs
    details = result.result or {}
    info = result.exception_info or {}
    # exception_info is either flat or keyed by metric id (one entry per failed metric).
    raised = [info] if "raised_exception" in info else list(info.values())
    errors = [e.get("exception_message") for e in raised if e.get("raised_exception")]
    error = "; ".join(str(e) for e in errors) or None
    values: list[Any] = []
    if kind == _QUERY_TYPE:
        count = details.get("observed_value")
        if not result.success and not error and samples:
            values = _query_samples(frame, kwargs["unexpected_rows_query"], samples)
    else:
        count = details.get("unexpected_count")
        values = list(details.get("partial_unexpected_list") or [])[:samples]
    return ExpectationOutcome(
        expectation=kind,
        target=_plain(_target(kwargs), pseudonymize, salt),
        description=config.description,
        success=bool(result.success),
        unexpected_count=None if error else (int(count) if count is not None else None),
        element_count=details.get("element_count"),
        unexpected_values=_plain(values, pseudonymize, salt),
        error=_plain(error, pseudonymize, salt),
    )


def validate(
    frames: Mapping[str, DataFrame],
    *,
    system: str,
    suites_dir: Path = SUITES_DIR,
    pseudonymize: bool = True,
    salt: str = "",
    samples: int = DEFAULT_SAMPLES,
    data_docs_dir: Path | None = None,
) -> QualityReport:
    """Run the suite of every frame in `frames` (``<suites_dir>/<system>_<frame>.json``).

    Every suite is loaded before any Spark work: a missing or malformed suite is a ConfigError
    naming its file. `samples` bounds the unexpected values kept per expectation; string values
    are pseudonymised (`salt` as in `mqforensics.privacy`) unless `pseudonymize` is false.
    `data_docs_dir`, when given, receives GX data docs of the run; they show GX's raw values,
    not pseudonymised, so keep them with the data rather than with the report.
    """
    suites = {
        name: load_suite(suite_path(name, system=system, suites_dir=suites_dir))
        for name in sorted(frames)
    }
    if not suites:
        return QualityReport(system=system, success=True, suites=[], pseudonymized=pseudonymize)

    import great_expectations as gx

    context = _context(data_docs_dir)
    source = context.data_sources.add_spark(name=f"mqforensics_{system}", persist=False)
    result_format = {"result_format": "BASIC", "partial_unexpected_count": max(samples, 1)}
    outcomes = []
    for name, suite in suites.items():
        frame = frames[name]
        batch = source.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe(name)
        suite = context.suites.add(suite)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=suite)
        )
        started = time.monotonic()
        with _held(frame) as held:
            run = definition.run(batch_parameters={"dataframe": held}, result_format=result_format)
            by_id = {r.expectation_config.id: r for r in run.results}
            results = [
                _outcome(e, by_id[e.id], held, samples, pseudonymize, salt)
                for e in suite.expectations
            ]
        outcomes.append(
            SuiteOutcome(
                suite=suite.name,
                frame=name,
                file=str(suite_path(name, system=system, suites_dir=suites_dir)),
                success=all(r.success for r in results),
                seconds=round(time.monotonic() - started, 3),
                expectations=results,
            )
        )
    if data_docs_dir is not None:
        context.build_data_docs()
    return QualityReport(
        system=system,
        success=all(s.success for s in outcomes),
        suites=outcomes,
        pseudonymized=pseudonymize,
    )


# --- rendering --------------------------------------------------------------------------------


def report_to_json(report: QualityReport, indent: int | None = 2) -> str:
    """The report as a JSON document (stable key order, values already JSON-ready)."""
    return json.dumps(report.to_dict(), indent=indent, sort_keys=True, default=str)


def failure_lines(report: QualityReport) -> list[str]:
    """One line per failed expectation: suite, expectation, target, count and a few values."""
    lines = []
    for suite, outcome in report.failures():
        target = " ".join(outcome.target.split())
        if outcome.error:
            what = f"could not be evaluated: {outcome.error}"
        else:
            what = f"{outcome.unexpected_count} unexpected"
            if outcome.unexpected_values:
                shown = json.dumps(outcome.unexpected_values, sort_keys=True, default=str)
                what += f", e.g. {shown}"
        lines.append(f"{suite.suite}: {outcome.expectation} [{target}]: {what}")
    return lines


def render_text(report: QualityReport) -> str:
    """A summary line, one line per failure (see `failure_lines`), then the verdict in one
    line: ``verdict: every expectation passed`` or ``verdict: 2 of 44 expectations failed, in 1
    of 3 suites``."""
    from mqforensics.units import plural

    total = sum(len(s.expectations) for s in report.suites)
    failed = report.failures()
    seconds = sum(s.seconds for s in report.suites)
    head = (
        f"quality {report.system}: {plural(len(report.suites), 'suite')}, "
        f"{plural(total, 'expectation')}, {len(failed):,} failed ({seconds:.1f}s)"
    )
    suites = sum(1 for s in report.suites if s.failures)
    verdict = (
        f"verdict: {len(failed):,} of {plural(total, 'expectation')} failed, in {suites:,} of "
        f"{plural(len(report.suites), 'suite')}"
        if failed
        else "verdict: every expectation passed"
    )
    return "\n".join([head, *failure_lines(report), verdict])
