"""The Python API: what an analyst in JupyterLab, a scheduler and the command line all call.

Every function takes keywords, checked against the system's typed options (`mqforensics.options`):
a wrong keyword is one `ConfigError` naming it. Values may be typed (``dt.timedelta(days=7)``,
``Path(...)``) or the text the command line takes (``"7d"``). The command line's source options
are these keywords with underscores: ``--blob-listing FILE`` is ``blob_listing="FILE"``.
Each system's options are documented on its class: ``help(mqforensics.options_of("james"))``
or `describe_options`.

    import mqforensics
    audit = mqforensics.audit("postfix", sample=True)      # the bundled sample
    audit                                                  # a summary, in a notebook a table
    audit.findings.groupBy("check").count().show()         # a Spark DataFrame
    plan = audit.plan(policy="datasets/postfix/sample/policy.toml")
    plan.approve(by="me")
    plan.purge()                                           # a dry run: nothing is changed
    plan.purge(apply=True)                                 # or mqforensics.purge_plan(dir, ...)

A plan goes through exactly the command line's safeguards: it is made from the audit's findings
only, must be approved (its hash recorded) before anything is applied, a purge is a dry run
unless ``apply=True``, and credentials come only from their environment variables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics import planning, runner, systems
from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError
from mqforensics.options import (
    Options,
    command_text,
    describe,
    fields_of,
    from_keywords,
    unknown_keyword,
    values,
)
from mqforensics.spec import CommonOptions, System
from mqforensics.units import parse_duration, utc_text

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.purge.engine import PurgeResult
    from mqforensics.quality import QualityReport
    from mqforensics.retention.manifest import Plan as PlanFiles
    from mqforensics.spec import Check, Loaded

__all__ = [
    "Audit",
    "Frames",
    "Plan",
    "approve",
    "audit",
    "audit_and_plan",
    "checks",
    "configured_options",
    "demo",
    "describe_options",
    "names",
    "notebook_keywords",
    "notebook_out",
    "notebook_policy",
    "open_plan",
    "options_of",
    "plan",
    "purge_options_of",
    "purge_plan",
    "read",
    "review",
    "session",
    "validate",
]  # fmt: skip

_COMMON = frozenset(item.name for item in fields_of(CommonOptions))


def names() -> list[str]:
    """The registered systems: ``james``, ``logqueue``, ``cyrus``, ``slimta``, ``postfix``."""
    return systems.names()


def options_of(system: str) -> type[Options]:
    """The options class of `system`: its fields are the keywords `audit`, `read` and
    `validate` take for it (``help()`` shows each one's meaning and default)."""
    return systems.get(system).options


def describe_options(system: str) -> str:
    """The keywords of `system`, one line each: name, flag, default and meaning."""
    spec = systems.get(system)
    return f"{spec.title} ({spec.name}):\n{describe(spec.options)}"


def checks(system: str) -> pd.DataFrame:
    """Every check of `system`: name, severity, what it detects, why it matters, what to do."""
    import pandas as pd

    return pd.DataFrame(
        [(c.name, c.severity, c.what, c.why, c.todo) for c in systems.get(system).checks],
        columns=["check", "severity", "what", "why it matters", "what to do"],
    )


def session(app_name: str = "mqforensics") -> SparkSession:
    """The Spark session every function here uses by default: local on 127.0.0.1 unless
    ``SPARK_REMOTE`` or ``MQF_SPARK_MASTER`` says otherwise, every system's data sources
    registered."""
    from mqforensics.spark import session as spark_session

    return spark_session(app_name, data_sources=systems.data_sources())


def started_session(app_name: str) -> SparkSession:
    """`session`, said as the step ``starting Spark`` of the progress shown (whose display then
    follows its jobs): what a command that starts Spark calls, after its checks."""
    from mqforensics.views.progress import attach, step

    step("starting Spark")
    spark = session(app_name)
    attach(spark)
    return spark


# --- options -----------------------------------------------------------------------------------


def _split(spec: System, keywords: Mapping[str, Any], common_names: frozenset[str]) -> tuple[
    dict[str, Any], dict[str, Any]
]:  # fmt: skip
    own = {item.name for item in fields_of(spec.options)}
    source, common = {}, {}
    for name, value in keywords.items():
        if name in common_names:
            common[name] = value
        elif name in own:
            source[name] = value
        else:
            raise unknown_keyword(f"{spec.name}", name, sorted(own | common_names))
    return source, common


def _source_options(
    spec: System, keywords: Mapping[str, Any], *, sample: bool, workdir: Path
) -> tuple[Options, dict[str, Any]]:
    """The system's options from `keywords` (on top of the bundled sample's, with `sample`),
    and what the sample says of the common options (its instant, its policy)."""
    defaults: dict[str, Any] = {}
    if sample:
        if spec.sample is None:
            raise ConfigError(f"{spec.name} has no bundled sample")
        bundled = spec.sample(workdir)
        options = from_keywords(
            spec.options, {**values(bundled.options), **keywords}, what=spec.name
        )
        if bundled.as_of:
            defaults["as_of"] = bundled.as_of
        if bundled.policy is not None:
            defaults["erasure_policy"] = bundled.policy
            defaults["_policy"] = bundled.policy
        if bundled.ground_truth is not None:
            defaults["_ground_truth"] = bundled.ground_truth
        return options, defaults
    return from_keywords(spec.options, keywords, what=spec.name), defaults


def _out(out: str | Path | None, system: str) -> Path:
    if out is not None:
        return Path(out)
    return Path(tempfile.mkdtemp(prefix=f"mqforensics-{system}-"))


# --- audit -------------------------------------------------------------------------------------


@dataclass(repr=False)
class Audit:
    """One audit: where it read, what it found, the frames it read, and the next steps.

    `rows` are the findings as written to ``findings.json`` (addresses pseudonymised unless
    revealed); `findings` is the same as a Spark DataFrame; `state` is the system's canonical
    frames object and `frames` its DataFrames by name. `not_run` names the checks that did not
    run (check -> what was missing and which keyword or flag would give it); `partial` those
    whose results are incomplete; `notes` what the audit said besides its findings.
    `plan(policy=...)` plans a cleanup from these findings. `close()` releases the frames' cache.
    """

    system: str
    title: str
    source: str
    as_of: dt.datetime
    out: Path
    bundled: bool
    rows: list[dict[str, Any]]
    manifest: dict[str, Any]
    state: Any
    notes: list[str]
    partial: dict[str, str]
    not_run: dict[str, str] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    policy: Path | None = None
    ground_truth: Path | None = None
    _loaded: Loaded[Any] | None = field(default=None, repr=False)
    _spark: SparkSession | None = field(default=None, repr=False)

    @property
    def findings(self) -> DataFrame:
        """The findings as a Spark DataFrame (``findings.parquet``)."""
        spark = self._spark or session()
        return spark.read.parquet(str(self.out / "findings.parquet"))

    @property
    def frames(self) -> dict[str, DataFrame]:
        """The canonical frames by name (`read` gives the same without the checks)."""
        return frames_of(systems.get(self.system), self._loaded, self.state)

    @property
    def checks(self) -> list[Check]:
        return list(systems.get(self.system).checks)

    @property
    def status(self) -> int:
        """The command's exit status: 0 (no finding of severity error or worse) or 1."""
        from mqforensics.findings import exit_status

        return exit_status(self.rows)

    def summary(self) -> str:
        """Where it read, when it judged, and the findings per check and severity."""
        from mqforensics.findings import summarise, verdict_line

        origin = "bundled sample" if self.bundled else "configured source"
        ran = len(self.checks) - len(self.not_run)
        text = (
            f"{self.system}: {self.source} ({origin}, judged at {utc_text(self.as_of)})\n"
            f"{summarise(self.rows)}\n"
            f"{verdict_line(self.rows, checks_run=ran, not_run=len(self.not_run))}"
        )
        for why, checks in runner.partial_by_reason(self.not_run).items():
            text += f"\nnot run: {', '.join(checks)}: {why}"
        history = self.manifest.get("history")
        if history:
            text += (f"\nappended {history['figures']} figures to the history "
                     f"{history['location']} (store {history['scope']})")  # fmt: skip
        return mask_secrets(text)

    def table(self) -> pd.DataFrame:
        """The findings as a pandas table (one column per detail key)."""
        from mqforensics.views.plot_data import findings_table

        return findings_table(self.rows)

    def explore(self, title: str | None = None) -> Any:
        """The findings explorer widget: by queue, observation time and severity."""
        from mqforensics.views.widgets import FindingsExplorer

        return FindingsExplorer(self.table(), title=title or f"{self.title}: findings")

    def plan(
        self,
        policy: str | Path | None = None,
        *,
        out: str | Path | None = None,
        replace: bool = False,
        max_audit_age: str | dt.timedelta = planning.DEFAULT_MAX_AUDIT_AGE,
        tombstone_budget: int | None = None,
    ) -> Plan:
        """A cleanup plan of these findings under `policy` (default: the bundled sample's),
        written to `out` (default ``<audit out>/plan``). With `replace`, the plan of an earlier
        run there is replaced (only a plan nothing was journaled for)."""
        policy = policy or self.policy
        target = Path(out) if out is not None else self.out / "plan"
        if replace:
            _remove_unused_plan(target)
        return plan(
            self.out, policy=policy, out=target, max_audit_age=max_audit_age,
            tombstone_budget=tombstone_budget,
        )  # fmt: skip

    def close(self) -> None:
        """Release what the frames hold (their cache)."""
        if self._loaded is not None:
            self._loaded.close()

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        from mqforensics.findings import SEVERITIES, verdict_line

        counts: dict[tuple[str, str], int] = {}
        for row in self.rows:
            key = (row["check"], row["severity"])
            counts[key] = counts.get(key, 0) + 1
        order = {severity: i for i, severity in enumerate(reversed(SEVERITIES))}
        body = (
            "".join(
                f"<tr><td>{html.escape(c)}</td><td>{html.escape(s)}</td><td>{n:,}</td></tr>"
                for (c, s), n in sorted(
                    counts.items(), key=lambda kv: (order.get(kv[0][1], 9), kv[0])
                )
            )
            or "<tr><td colspan=3>no finding</td></tr>"
        )
        origin = "bundled sample" if self.bundled else "configured source"
        not_run = "".join(
            f"<li>{html.escape(', '.join(checks))}: {html.escape(why)}</li>"
            for why, checks in runner.partial_by_reason(self.not_run).items()
        )
        ran = len(self.checks) - len(self.not_run)
        history = self.manifest.get("history")
        appended = (
            f"; figures appended to the history {html.escape(mask_secrets(history['location']))}"
            f" (store {html.escape(history['scope'])})" if history else ""
        )  # fmt: skip
        return (
            f"<div><b>{html.escape(self.title)}</b>: {html.escape(mask_secrets(self.source))} "
            f"({origin}, judged at {utc_text(self.as_of)})<br>"
            f"{html.escape(verdict_line(self.rows, checks_run=ran, not_run=len(self.not_run)))}<br>"
            f"written to {html.escape(str(self.out))}{appended}"
            f"<table><tr><th>check</th><th>severity</th><th>findings</th></tr>{body}</table>"
            + (f"<p>Not run:</p><ul>{not_run}</ul>" if not_run else "")
            + "<small>.findings (DataFrame) · .rows · .frames · .table() · .explore() · "
            ".plan(policy=…)</small></div>"
        )


def frames_of(spec: System, loaded: Loaded[Any] | None, state: Any) -> dict[str, DataFrame]:
    """The canonical frames by name: those the system's expectation suites check (its
    `validation_frames`), else the DataFrames its frames object holds."""
    if spec.validation_frames is not None and loaded is not None:
        return dict(spec.validation_frames(loaded))
    return frames_by_name(state)


def frames_by_name(state: Any) -> dict[str, DataFrame]:
    """The DataFrames a frames object holds, by field name (a frames class is a dataclass)."""
    from pyspark.sql import DataFrame

    if isinstance(state, DataFrame):
        return {"frame": state}
    if dataclasses.is_dataclass(state):
        found = {}
        for item in dataclasses.fields(state):
            value = getattr(state, item.name)
            if isinstance(value, DataFrame):
                found[item.name] = value
        return found
    return {}


def audit(
    system: str,
    *,
    options: Options | None = None,
    sample: bool = False,
    spark: SparkSession | None = None,
    **keywords: Any,
) -> Audit:
    """Audit a store of `system` (``james``, ``logqueue``, ``cyrus``, ``slimta`` or ``postfix``;
    `names()`): read it into canonical frames, run every check, write ``findings.json``,
    ``findings.parquet`` and ``manifest.json`` to `out` (as the command ``mqforensics audit
    <system> ... --out DIR`` does) and return the `Audit`.

    Keywords: the system's source options, documented on its options class
    (``help(mqforensics.options_of(system))``, ``print(mqforensics.describe_options(system))``,
    docs/api.md and docs/<system>.md; e.g. ``snapshot=``, ``blob_listing=`` for James,
    ``queue_dir=`` for Postfix), or a typed ``options=`` object;
    and the options every audit has: ``out`` (default: a new temporary directory), ``as_of``,
    ``reveal_addresses`` (default False: addresses pseudonymised), ``erasure_policy``,
    ``history`` (a run history to append the audit's figures to, a directory or a URL; default
    ``MQF_HISTORY``) and ``history_scope`` (the store's name there; docs/history.md).
    ``sample=True`` audits the bundled sample (``datasets/<system>/sample``) at its own instant,
    looking for its policy's data subjects; keywords given override it.

    A bad keyword or input is a `ConfigError` or `InputError` naming it, raised before Spark
    starts when it can be.
    """
    spec = systems.get(system)
    source, common_keywords = _split(spec, keywords, _COMMON)
    out = _out(common_keywords.pop("out", None), spec.name)
    if options is not None:
        if source or sample:
            raise ConfigError("give the source as options= or as keywords, not both")
        typed, extra = options, dict[str, Any]()
    else:
        typed, extra = _source_options(spec, source, sample=sample, workdir=out / "sample")
    policy, truth = extra.pop("_policy", None), extra.pop("_ground_truth", None)
    common = from_keywords(CommonOptions, {**extra, **common_keywords, "out": out})
    return run_audit(spec, typed, common, spark=spark, bundled=sample, policy=policy,
                     ground_truth=truth)  # fmt: skip


def run_audit(
    spec: System,
    options: Options,
    common: CommonOptions,
    *,
    spark: SparkSession | None = None,
    bundled: bool = False,
    policy: Path | None = None,
    ground_truth: Path | None = None,
) -> Audit:
    """`audit` of typed options (what the command line calls once it has parsed them)."""
    from mqforensics.views.progress import spark_progress

    runner.check_before_spark(options, common)
    about = f"auditing {spec.name} {command_text(options)}; findings into {common.out}"
    with spark_progress(spark, f"audit {spec.name}", about=f"mqforensics: {about}"):
        spark = spark or started_session(f"mqforensics-audit-{spec.name}")
        result = runner.audit(spark, spec, options, common)
    loaded = result.loaded
    return Audit(
        system=spec.name, title=spec.title, source=loaded.source, as_of=loaded.as_of,
        out=common.out, bundled=bundled, rows=result.findings, manifest=result.manifest,
        state=loaded.frames, notes=list(loaded.notes), partial=dict(loaded.partial),
        not_run=dict(loaded.not_run), outputs=list(loaded.outputs),
        policy=policy or common.erasure_policy, ground_truth=ground_truth, _loaded=loaded,
        _spark=spark,
    )  # fmt: skip


# --- read and validate -------------------------------------------------------------------------


@dataclass(repr=False)
class Frames:
    """A store read into its canonical frames, no check run: `state` is the system's frames
    object, `frames` its DataFrames by name."""

    system: str
    source: str
    as_of: dt.datetime
    objects: int
    state: Any
    notes: list[str]
    _loaded: Loaded[Any] | None = field(default=None, repr=False)

    @property
    def frames(self) -> dict[str, DataFrame]:
        return frames_of(systems.get(self.system), self._loaded, self.state)

    def __getitem__(self, name: str) -> DataFrame:
        try:
            return self.frames[name]
        except KeyError:
            known = ", ".join(self.frames)
            raise KeyError(f"{self.system} has no frame {name!r} ({known})") from None

    def close(self) -> None:
        if self._loaded is not None:
            self._loaded.close()

    def __repr__(self) -> str:
        return (
            f"{self.system}: {mask_secrets(self.source)}, {self.objects:,} objects read "
            f"(as of {utc_text(self.as_of)}); frames: {', '.join(self.frames)}"
        )

    def _repr_html_(self) -> str:
        return f"<div>{html.escape(repr(self))}</div>"


def read(
    system: str,
    *,
    options: Options | None = None,
    sample: bool = False,
    as_of: str | dt.datetime | None = None,
    spark: SparkSession | None = None,
    **keywords: Any,
) -> Frames:
    """Read a store of `system` into its canonical frames without running a check (the same
    source keywords as `audit`)."""
    from mqforensics.spec import AuditArgs

    spec = systems.get(system)
    work = Path(tempfile.mkdtemp(prefix=f"mqforensics-{system}-read-"))
    typed = options or _source_options(spec, keywords, sample=sample, workdir=work)[0]
    instant = from_keywords(CommonOptions, {"out": work, "as_of": as_of}).as_of
    runner.check_before_spark(typed)
    spark = spark or session(f"mqforensics-read-{spec.name}")
    loaded = runner.load(spark, spec, typed, AuditArgs(work, instant, False))
    return Frames(spec.name, loaded.source, loaded.as_of, loaded.objects, loaded.frames,
                  list(loaded.notes), loaded)  # fmt: skip


def validate(
    system: str,
    *,
    options: Options | None = None,
    sample: bool = False,
    out: str | Path | None = None,
    as_of: str | dt.datetime | None = None,
    reveal_addresses: bool = False,
    erasure_policy: str | Path | None = None,
    history: str | Path | None = None,
    history_scope: str | None = None,
    spark: SparkSession | None = None,
    **keywords: Any,
) -> QualityReport:
    """Check the canonical frames of a store of `system` with its Great Expectations suites
    (``expectations/<system>_<frame>.json``); with `out`, ``quality.json`` is written there.
    Input that cannot be read is its typed error, never a failed expectation. With `history`
    (a directory or a URL; default ``MQF_HISTORY``), the store's figures and each expectation's
    result are appended to that run history, as the store `history_scope` (docs/history.md);
    the report's `history` then says where (its scope and run id: `validation_trends`)."""
    spec = systems.get(system)
    target = Path(out) if out is not None else None
    work = target or Path(tempfile.mkdtemp(prefix=f"mqforensics-{system}-validate-"))
    typed = options or _source_options(spec, keywords, sample=sample, workdir=work / "sample")[0]
    instant = from_keywords(CommonOptions, {"out": work, "as_of": as_of}).as_of
    return run_validate(
        spec, typed, out=target, as_of=instant, reveal_addresses=reveal_addresses,
        erasure_policy=Path(erasure_policy) if erasure_policy is not None else None, spark=spark,
        history=str(history) if history is not None else None, history_scope=history_scope,
    )  # fmt: skip


def run_validate(
    spec: System,
    options: Options,
    *,
    out: Path | None,
    as_of: dt.datetime | None = None,
    reveal_addresses: bool = False,
    erasure_policy: Path | None = None,
    spark: SparkSession | None = None,
    history: str | None = None,
    history_scope: str | None = None,
) -> QualityReport:
    """`validate` of typed options (what the command line calls)."""
    from mqforensics.history.store import location
    from mqforensics.quality import report_to_json
    from mqforensics.views.progress import spark_progress, step

    if out is not None:
        runner.check_out(out)
    if erasure_policy is not None:
        systems.load_policy(erasure_policy)
    where = location(history)
    if where is not None:
        runner.check_history(where)
    runner.check_before_spark(options)
    about = f"validating {spec.name} {command_text(options)}"
    about += f"; quality.json into {out}" if out is not None else ""
    with spark_progress(spark, f"validate {spec.name}", about=f"mqforensics: {about}"):
        spark = spark or started_session(f"mqforensics-validate-{spec.name}")
        step("reading the store and running the expectation suites")
        report = runner.validate(
            spark, spec, options, as_of=as_of, reveal_addresses=reveal_addresses,
            history=where, history_scope=history_scope,
        )  # fmt: skip
    if out is not None:
        from mqforensics.retention.manifest import write_atomically

        out.mkdir(parents=True, exist_ok=True)
        write_atomically(out / "quality.json", (report_to_json(report) + "\n").encode("utf-8"))
    return report


# --- plans -------------------------------------------------------------------------------------


@dataclass(repr=False)
class Plan:
    """A cleanup plan on disk: its header, actions and deferrals (`files`), and the review
    steps: `report()`, `approve(by=...)`, `purge()` (a dry run unless ``apply=True``)."""

    files: PlanFiles
    notes: list[str] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return self.files.directory

    @property
    def sha256(self) -> str:
        return self.files.sha256

    @property
    def header(self) -> dict[str, Any]:
        return self.files.header

    @property
    def system(self) -> str:
        return self.files.system

    def actions(self) -> list[Any]:
        return list(self.files.actions())

    def deferred(self) -> list[Any]:
        return list(self.files.deferred())

    def summary(self) -> str:
        from mqforensics.spec import PlanParts

        return planning.summarise(self.files, PlanParts(notes=self.notes))

    def report(self, *, reveal_addresses: bool = False, journal: str | Path | None = None) -> str:
        """The review report (``report.txt`` and ``report.html`` written in the plan), as text."""
        return review(self.directory, reveal_addresses=reveal_addresses, journal=journal)

    def approve(self, *, by: str, note: str = "") -> dict[str, Any]:
        """Record the approval of this plan (its hash) by `by`."""
        return approve(self.directory, by=by, note=note)

    def purge(self, *, apply: bool = False, **keywords: Any) -> PurgeResult:
        """`purge_plan` of this plan: a dry run unless ``apply=True`` (which needs an approval)."""
        return purge_plan(self.directory, apply=apply, **keywords)

    def __repr__(self) -> str:
        from mqforensics.views.plan_report import summary_line

        return f"plan {self.directory} (sha256 {self.sha256}): {summary_line(self.files)}"

    def _repr_html_(self) -> str:
        totals = self.header.get("totals") or {}
        body = (
            "".join(
                f"<tr><td>{html.escape(kind)}</td><td>{t['actions']:,}</td><td>{t['bytes']:,}</td>"
                f"<td>{t['tombstones']:,}</td></tr>"
                for kind, t in sorted(totals.items())
            )
            or "<tr><td colspan=4>no action</td></tr>"
        )
        deferred = sum((self.header.get("deferred") or {}).values())
        return (
            f"<div><b>Plan</b> {html.escape(str(self.directory))} "
            f"<small>(sha256 {self.sha256[:16]}…)</small>"
            f"<table><tr><th>action</th><th>actions</th><th>bytes</th><th>tombstones</th></tr>"
            f"{body}</table>{deferred:,} deferred (not planned) · nothing deleted until "
            f"<code>.approve(by=…)</code> and <code>.purge(apply=True)</code></div>"
        )


def open_plan(plan_dir: str | Path) -> Plan:
    """A plan directory made earlier (by `plan`, the ``plan`` command, or on another machine),
    checked against its hashes, to review, approve or purge."""
    from mqforensics.retention.manifest import read_plan

    return Plan(read_plan(plan_dir))


def _remove_unused_plan(directory: Path) -> None:
    import shutil

    from mqforensics.retention.manifest import JOURNAL, PLAN_JSON

    if not directory.exists():
        return
    if not (directory / PLAN_JSON).is_file() or (directory / JOURNAL).exists():
        raise ConfigError(f"{directory} is not an unused plan: remove it or choose another out")
    shutil.rmtree(directory)


def plan(
    findings: Audit | str | Path,
    *,
    policy: str | Path | None,
    out: str | Path,
    max_audit_age: str | dt.timedelta = planning.DEFAULT_MAX_AUDIT_AGE,
    tombstone_budget: int | None = None,
) -> Plan:
    """A cleanup plan of an audit's findings (an `Audit`, or the directory an audit wrote) under
    the retention `policy` (.toml, .yaml), written to `out` (which must not exist, or be empty).
    Nothing is deleted: every action cites the findings that justify it. An audit older than
    `max_audit_age` (default 1d) is refused."""
    from mqforensics.options import checked_value, parse_text

    directory = findings.out if isinstance(findings, Audit) else Path(findings)
    try:
        if isinstance(max_audit_age, str):
            age = parse_text(parse_duration, max_audit_age)
        else:
            age = checked_value(max_audit_age)
    except ConfigError as exc:
        raise ConfigError(f"max_audit_age= {exc.message}") from None
    if tombstone_budget is not None and tombstone_budget < 0:
        raise ConfigError(f"tombstone_budget= {tombstone_budget!r} is not an integer >= 0")
    policy_file = planning.policy_of(Path(policy) if policy else None, tombstone_budget)
    target = planning.check_plan_out(Path(out) if out else None)
    written, parts = planning.plan_from_audit(directory, policy_file, target, max_age=age)
    return Plan(written, list(parts.notes))


def audit_and_plan(
    system: str,
    *,
    policy: str | Path | None,
    out: str | Path | None,
    audit_out: str | Path | None = None,
    options: Options | None = None,
    tombstone_budget: int | None = None,
    spark: SparkSession | None = None,
    **keywords: Any,
) -> Plan:
    """Audit a store of `system` into `audit_out` (default ``<out>.audit``), looking for the
    policy's data subjects, then plan its findings into `out`: the ``plan <system> SOURCE``
    command. Keywords: as `audit` (``as_of``, ``reveal_addresses`` and the source options)."""
    spec = systems.get(system)
    policy_file = planning.policy_of(Path(policy) if policy else None, tombstone_budget)
    planning.check_policy_applies(policy_file, spec)  # before the audit: Spark is not started
    target = planning.check_plan_out(Path(out) if out else None)
    audit_dir = (
        Path(audit_out) if audit_out is not None else target.with_name(target.name + ".audit")
    )
    runner.check_out(audit_dir, "--audit-out")
    source, common_keywords = _split(spec, keywords, _COMMON - {"out", "erasure_policy"})
    typed = options or from_keywords(spec.options, source, what=spec.name)
    common = from_keywords(
        CommonOptions, {**common_keywords, "out": audit_dir, "erasure_policy": policy_file.path}
    )
    audit = run_audit(spec, typed, common, spark=spark)
    audit.close()
    print(f"{spec.title}: {audit.source}; audited into {audit_dir}")
    written, parts = planning.plan_from_audit(audit_dir, policy_file, target)
    return Plan(written, list(parts.notes))


def review(
    plan_dir: str | Path, *, reveal_addresses: bool = False, journal: str | Path | None = None,
    html_out: str | Path | None = None,
) -> str:  # fmt: skip
    """The plan's review report: ``report.txt`` in the plan and ``report.html`` (or
    `html_out`), with its purge journal when there is one; returns the text."""
    from mqforensics.purge.journal import read_journal
    from mqforensics.retention.manifest import JOURNAL, read_plan, write_atomically
    from mqforensics.views.plan_report import render_html, render_text

    if html_out is not None:
        from mqforensics.views.report import check_out_file

        check_out_file(Path(html_out))  # before anything is read or written
    files = read_plan(plan_dir)
    journal_path = Path(journal) if journal is not None else None
    if journal_path is None and (files.directory / JOURNAL).exists():
        journal_path = files.directory / JOURNAL
    records = read_journal(journal_path) if journal_path is not None else None
    hide = target_hider(files.system)
    text = render_text(files, records, reveal=reveal_addresses, hide_target=hide)
    page = render_html(files, records, reveal=reveal_addresses, hide_target=hide)
    write_atomically(files.directory / "report.txt", text.encode("utf-8"))
    html_path = Path(html_out) if html_out is not None else files.directory / "report.html"
    write_atomically(html_path, page.encode("utf-8"))
    return text


def target_hider(system: str) -> Callable[[dict[str, Any], str], dict[str, Any]] | None:
    """The `hide_target` of `system` (what pseudonymises a plan action's target beyond plain
    addresses); None for a system this version does not know."""
    if system not in systems.names():
        return None
    return systems.get(system).hide_target


def approve(plan_dir: str | Path, *, by: str, note: str = "") -> dict[str, Any]:
    """Approve a reviewed plan: its hash, who and when, in ``approval.json``."""
    from mqforensics.retention.manifest import read_plan, record_approval

    return record_approval(read_plan(plan_dir), by, note)


def purge_options_of(system: str) -> type[Options]:
    """The class of the purge keywords a plan of `system` takes (beyond `purge`'s own)."""
    return systems.get(system).purge_options


def purge_plan(
    plan_dir: str | Path,
    *,
    apply: bool = False,
    journal: str | Path | None = None,
    rate: float | None = None,
    retries: int | None = None,
    on_action: Callable[[int, int, int], None] | None = None,
    options: Options | None = None,
    **keywords: Any,
) -> PurgeResult:
    """Re-verify every action of a plan against the live store; with ``apply=True``, carry out
    an approved plan, journaled (a rerun resumes). Keywords: the plan's system's purge options
    (`purge_options_of`). Nothing that waits (`rate`, `retries`) stands between an action's
    last check and its destructive call."""
    from mqforensics.purge.engine import run_purge
    from mqforensics.purge.retry import DEFAULT_RETRIES
    from mqforensics.retention.manifest import read_plan

    files = read_plan(plan_dir)
    spec = system_of_plan(files)
    typed = options or from_keywords(
        spec.purge_options, keywords, what=f"purge of a {spec.name} plan"
    )
    executors = list(spec.executors(files, typed))
    try:
        return run_purge(
            files, executors, apply=apply, journal_path=Path(journal) if journal else None,
            rate=rate, on_action=on_action,
            retries=DEFAULT_RETRIES if retries is None else retries,
        )  # fmt: skip
    finally:
        close_all(executors)


def close_all(executors: list[Any]) -> None:
    """Close every executor; a failure to close one is said, never hides the run's outcome."""
    import sys

    from mqforensics.purge.retry import one_line

    for executor in executors:
        try:
            executor.close()
        except Exception as exc:
            print(f"closing {type(executor).__name__}: {one_line(exc)}", file=sys.stderr)


def system_of_plan(files: PlanFiles) -> System:
    system = files.system
    if not isinstance(system, str) or system not in systems.names():
        raise ConfigError(
            f"plan {files.directory}: no purger for system {system!r} "
            f"(known: {', '.join(systems.names())})"
        )
    return systems.get(system)


# --- demo --------------------------------------------------------------------------------------


def demo(
    system: str | None = None, *, out: str | Path = "out/demo", spark: SparkSession | None = None
) -> int:
    """Audit the bundled sample of `system` (default: the first registered, James), compare the
    findings with its ground truth and plan their cleanup with its policy into ``out/plan``,
    printing each step; nothing is deleted. 0 when the findings match the ground truth."""
    import time

    from mqforensics import sample_demo as demo_flow
    from mqforensics.spark import describe

    spec = systems.get(system or systems.names()[0])
    sample, common = demo_flow.sample_audit(spec, Path(out))
    if spark is None:
        started = time.monotonic()
        spark = session("mqforensics-demo")
        print(f"Spark {spark.version} ({describe(spark)}) started in "
              f"{time.monotonic() - started:.1f}s")  # fmt: skip
    return demo_flow.run_sample(spark, spec, sample, common)


# --- notebooks and schedulers ------------------------------------------------------------------

CHECKOUT = Path(__file__).resolve().parents[1]
DATASETS = CHECKOUT / "datasets"


def _flag(name: str) -> bool:
    import os

    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes"}


def notebook_out(system: str) -> Path:
    """Where a notebook writes: ``$MQF_NOTEBOOK_OUT/<system>`` (default ``out/notebooks/<system>``
    of the checkout, wherever the notebook runs from)."""
    import os

    return Path(os.environ.get("MQF_NOTEBOOK_OUT") or CHECKOUT / "out" / "notebooks") / system


def notebook_policy(system: str, policy: str | Path | None = None) -> Path:
    """`policy`, else ``MQF_POLICY``, else the bundled sample's retention policy."""
    import os

    if policy is not None:
        return Path(policy)
    configured = os.environ.get("MQF_POLICY")
    return Path(configured) if configured else DATASETS / system / "sample" / "policy.toml"


def configured_options(system: str) -> Options | None:
    """The options ``MQF_<SYSTEM>_ARGS`` names (command-line style text, shell-quoted, parsed
    into the system's typed options without the command line's parser), or None when it is
    unset or empty. A credential in it is refused, as on a command line."""
    import os
    import shlex

    from mqforensics.options import from_tokens

    name = f"MQF_{system.upper()}_ARGS"
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{name} is not shell-quoted arguments: {exc}") from None
    return from_tokens(systems.get(system).options, tokens, where=name)


def notebook_keywords(
    system: str,
    source: Mapping[str, Any] | None = None,
    *,
    as_of: str | dt.datetime | None = None,
    reveal_addresses: bool = False,
    out: str | Path | None = None,
    policy: str | Path | None = None,
    history: str | Path | None = None,
    history_scope: str | None = None,
) -> dict[str, Any]:
    """The keywords of `audit` (and `validate`) for a notebook's parameters cell: `source` names
    the store (the system's option keywords); none, the bundled sample. A scheduler may set the
    parameters, or override them with environment variables: ``MQF_<SYSTEM>_ARGS`` (the
    source as command-line options), ``MQF_AS_OF``, ``MQF_REVEAL_ADDRESSES=1``,
    ``MQF_NOTEBOOK_OUT``, ``MQF_POLICY``, ``MQF_HISTORY`` (the run history the run's figures
    are appended to, when `history` is None), ``MQF_HISTORY_SCOPE`` (the store's name in that
    history, when `history_scope` is None). The audit looks for the policy's data subjects."""
    import os

    keywords: dict[str, Any] = {}
    configured = configured_options(system)
    if configured is not None:
        keywords["options"] = configured
    elif source:
        keywords.update(source)
    else:
        keywords["sample"] = True
    instant = os.environ.get("MQF_AS_OF") or as_of
    if instant:
        keywords["as_of"] = instant
    keywords["reveal_addresses"] = reveal_addresses or _flag("MQF_REVEAL_ADDRESSES")
    keywords["out"] = Path(out) if out is not None else notebook_out(system)
    policy_file = notebook_policy(system, policy)
    if policy_file.is_file():
        keywords["erasure_policy"] = policy_file
    if history is not None:
        keywords["history"] = str(history)
    scope = history_scope or os.environ.get("MQF_HISTORY_SCOPE", "").strip()
    if scope:
        keywords["history_scope"] = scope
    return keywords
