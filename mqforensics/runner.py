"""One audit runner for every system: what `mqforensics.audit`, `mqforensics.validate` and the
commands ``audit <system>`` and ``validate <system>`` run.

The contract (docs/architecture.md): the options every audit has (`spec.CommonOptions`: ``out``,
``as_of``, ``reveal_addresses``, ``erasure_policy``) next to the system's own typed options;
everything that can be checked before Spark
starts is checked first (the output directory, the system's inputs); one Spark session; the
system's loader, then every check with the one signature; ``findings.json`` and
``findings.parquet`` (each finding with its stable id) and ``manifest.json`` (tool version,
inputs with fingerprints, as-of, options), each written atomically; a summary; exit 0 (no
finding of severity ``error`` or worse), 1 (some), 2 (bad input: nothing to audit is bad input,
never a clean bill).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics import systems
from mqforensics.audit_manifest import MANIFEST, MANIFEST_FORMAT
from mqforensics.content_search import FULL
from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, InputError, translated, typed
from mqforensics.findings import (
    FINDINGS_JSON,
    FINDINGS_RAW,
    write_findings,
    write_json,
)
from mqforensics.options import Options, as_json, check_exclusive, fields_of, values
from mqforensics.outputs import check_out
from mqforensics.spec import AuditArgs, Check, CommonOptions, Loaded, System
from mqforensics.units import utc_text
from mqforensics.version import __version__

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def resolve_common(common: CommonOptions, *, keyed: bool = True) -> AuditArgs:
    """The common options resolved; with `keyed`, the audit's subject key is made (and kept in
    ``out``) and the erasure policy's subjects are keyed with it."""
    from mqforensics import subjects

    key = subjects.new_key(common.out) if keyed else b""
    wanted: frozenset[str] = frozenset()
    full: frozenset[str] = frozenset()
    policy_sha256 = None
    if common.erasure_policy is not None and keyed:
        policy = systems.load_policy(common.erasure_policy)
        policy_sha256 = policy.sha256
        wanted = frozenset(subjects.keyed_all(subjects.erasure_subjects(policy), key))
        full = frozenset(subjects.keyed_all(subjects.erasure_subjects(policy, FULL), key))
    return AuditArgs(
        out=common.out,
        as_of=common.as_of,
        reveal_addresses=common.reveal_addresses,
        subjects=wanted,
        subject_key=key,
        full_subjects=full,
        erasure_policy_sha256=policy_sha256,
    )


def check_before_spark(options: Options, common: CommonOptions | None = None) -> None:
    """What fails fast: the output directory, the erasure policy, then the system's own inputs
    and options (`Options.check`)."""
    if common is not None:
        check_out(common.out)
        if common.erasure_policy is not None:
            systems.load_policy(common.erasure_policy)
    if common is not None:
        history = history_location(common)
        if history is not None:
            check_history(history)
    check_exclusive(options)
    options.check()


def history_location(common: CommonOptions) -> Any:
    """The run history the audit appends to (`history.store.Location`): ``history``, else
    ``MQF_HISTORY``, else None."""
    from mqforensics.history.store import location

    return location(common.history)


def check_history(where: Any) -> None:
    from mqforensics.history.store import check_writable

    check_writable(where)


@dataclass
class AuditResult:
    """An audit as the CLI, the notebooks and planning see it."""

    system: System
    loaded: Loaded
    findings: list[dict[str, Any]]
    manifest: dict[str, Any]
    out: Path

    @property
    def frames(self) -> Any:
        return self.loaded.frames

    @property
    def as_of(self) -> dt.datetime:
        return self.loaded.as_of


def load(spark: SparkSession, spec: System, options: Options, common: AuditArgs) -> Loaded[Any]:
    """The system's store read into canonical frames; nothing read is an InputError."""
    loaded = spec.load(spark, options, common)
    if loaded.objects <= 0:
        loaded.close()
        raise InputError(f"nothing to audit: {loaded.source} holds nothing {spec.name} keeps")
    return loaded


def unmet_needs(spec: System, options: Options, common: CommonOptions) -> dict[str, str]:
    """The checks of `spec` whose `Check.needs` the options do not meet (check name -> what is
    missing and the flags that would give it), decided before Spark starts."""
    given = {**values(common), **values(options)}
    flags = {
        item.name: item.flag for cls in (CommonOptions, type(options)) for item in fields_of(cls)
    }
    unmet: dict[str, str] = {}
    for check in spec.checks:
        needs = check.needs
        if needs is None or any(
            given.get(name) not in (None, "", [], False) for name in needs.options
        ):
            continue
        wanted = [flags.get(name, name) for name in needs.options]
        give = wanted[0] if len(wanted) == 1 else f"one of {', '.join(wanted)}"
        unmet[check.name] = f"{needs.what}; give {give}"
    return unmet


def checks_to_run(spec: System, not_run: dict[str, str]) -> list[Check]:
    return [check for check in spec.checks if check.name not in not_run]


def findings_frame(
    spark: SparkSession, spec: System, loaded: Loaded[Any], settings: Any
) -> DataFrame:
    """Every check of the system that can run on the loaded frames (not in ``loaded.not_run``),
    as one findings frame."""
    from mqforensics.findings import union_all
    from mqforensics.views.progress import step

    checks = checks_to_run(spec, loaded.not_run)
    frames = []
    for number, check in enumerate(checks, 1):
        step(f"running check {number} of {len(checks)}: {check.name}", (number, len(checks)))
        frames.append(check.run(loaded.frames, settings))
    return union_all(spark, frames)


def audit(
    spark: SparkSession, spec: System, options: Options, common: CommonOptions
) -> AuditResult:
    """Load, check, write findings and the manifest to ``common.out``; the frames stay loaded
    for the caller (a notebook explores them; the CLI closes them). A file Spark cannot read,
    and a toolkit error raised in a Spark worker, are raised as their typed error (an InputError
    naming the file: `errors.translated`), wherever the job that met them ran; a failed audit
    leaves ``common.out`` as it found it (`out_kept_on_failure`)."""
    with out_kept_on_failure(common.out), translated():
        return _audit(spark, spec, options, common)


@contextlib.contextmanager
def out_kept_on_failure(out: Path) -> Iterator[None]:
    """On failure inside, `out` as it was before: the directories made for it removed (with
    what was written there), or, in a directory that existed, the subject key the audit wrote
    taken back (the one it replaced put back)."""
    from mqforensics.subjects import KEY_FILE

    made = _first_missing(out)
    key = out / KEY_FILE
    old_key = key.read_bytes() if made is None and key.is_file() else None
    try:
        yield
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        elif old_key is not None:
            key.write_bytes(old_key)
        else:
            key.unlink(missing_ok=True)
        raise


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of `path` that does not exist yet (`path` itself, or one of
    its parents); None when `path` exists."""
    missing = None
    for candidate in (path.absolute(), *path.absolute().parents):
        if candidate.exists():
            return missing
        missing = candidate
    return missing


def _audit(
    spark: SparkSession, spec: System, options: Options, common: CommonOptions
) -> AuditResult:
    from mqforensics.views.progress import step

    resolved = resolve_common(common)
    step("reading the store")
    loaded = load(spark, spec, options, resolved)
    loaded.not_run = dict(sorted({**unmet_needs(spec, options, common), **loaded.not_run}.items()))
    try:
        step("preparing the checks")
        settings = spec.settings(options, resolved, loaded)
        frame = findings_frame(spark, spec, loaded, settings)  # step: running check N of M
        out = common.out
        step("computing and writing the findings")
        rows = write_findings(frame, out, None if common.reveal_addresses else hider(spec))
        created_at = dt.datetime.now(dt.UTC)
        history = history_location(common)
        recorded = None
        if history is not None:
            step("appending the run to the history")
            recorded = append_audit(spark, spec, loaded, rows, common, history, created_at)
        step("writing the manifest")
        for name, document in loaded.outputs.items():
            write_json(out / name, document)
        manifest = write_manifest(
            spec, options, common, loaded, resolved, created_at=created_at, history=recorded
        )
    except BaseException:
        loaded.close()
        raise
    return AuditResult(spec, loaded, rows, manifest, common.out)


def append_audit(
    spark: SparkSession,
    spec: System,
    loaded: Loaded[Any],
    rows: list[dict[str, Any]],
    common: CommonOptions,
    where: Any,
    created_at: dt.datetime,
) -> dict[str, Any]:
    """The audit's figures appended to the history at `where`; what the manifest says of it."""
    from mqforensics.history.record import appended, audit_run, scope_of

    reveal = common.reveal_addresses
    scope = scope_of(common.history_scope, loaded.source, reveal=reveal)
    run = audit_run(spec, loaded, rows, scope=scope, reveal=reveal, run_at=created_at)
    return appended(run, where, spark)


def hider(spec: System) -> Any:
    """What pseudonymises one finding: every address in its queue, subject and detail, then
    what the system's `hide_finding` adds (identifiers that are not addresses)."""
    from mqforensics.privacy import pseudonymize_value

    def hide(row: dict[str, Any]) -> dict[str, Any]:
        row = {
            **row,
            "queue": pseudonymize_value(row["queue"]),
            "subject": pseudonymize_value(row["subject"]),
            "detail": pseudonymize_value(row["detail"]),
        }
        return spec.hide_finding(row) if spec.hide_finding is not None else row

    return hide


def options_of(options: Options, common: CommonOptions) -> dict[str, Any]:
    """The options an audit ran with, as JSON values by name (credentials never reach here:
    every front door refuses them, and every text is masked all the same)."""
    return as_json({**values(options), "erasure_policy": common.erasure_policy})


def write_manifest(
    spec: System,
    options: Options,
    common: CommonOptions,
    loaded: Loaded[Any],
    resolved: AuditArgs,
    *,
    created_at: dt.datetime | None = None,
    history: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out = common.out
    findings_bytes = (out / FINDINGS_JSON).read_bytes()
    raw_bytes = (out / FINDINGS_RAW).read_bytes()
    manifest = {
        "format": MANIFEST_FORMAT,
        "tool": {"name": "mqforensics", "version": __version__},
        "system": spec.name,
        "created_at": utc_text(created_at or dt.datetime.now(dt.UTC)),
        "as_of": utc_text(loaded.as_of),
        "source": mask_secrets(loaded.source),
        "objects": loaded.objects,
        "inputs": loaded.inputs,
        "plan_inputs": loaded.plan_inputs,
        "options": options_of(options, common),
        "reveal_addresses": common.reveal_addresses,
        "checks": [check.name for check in spec.checks],
        # Checks whose results are incomplete because the read was, and why ({} when none).
        "partial": dict(sorted(loaded.partial.items())),
        # Checks that did not run: what was missing and which input would give it ({}: none).
        "not_run": dict(sorted(loaded.not_run.items())),
        # What the audit said besides its findings (odd file names, the broker's notes).
        "notes": [mask_secrets(note) for note in loaded.notes],
        "subjects_searched": sorted(resolved.subjects),
        # Those searched in bodies and attachments too (rules with search = "full").
        "subjects_searched_full": sorted(resolved.full_subjects & resolved.subjects),
        # The erasure policy's bytes the subjects came from (None: no erasure policy).
        "erasure_policy_sha256": resolved.erasure_policy_sha256,
        # The run history this audit's figures went to (None: none).
        "history": history,
        "findings": {
            "count": len(json.loads(findings_bytes)),
            "sha256": hashlib.sha256(findings_bytes).hexdigest(),
            "raw_sha256": hashlib.sha256(raw_bytes).hexdigest(),
        },
    }
    write_json(out / MANIFEST, manifest)
    return manifest


def partial_by_reason(partial: dict[str, str]) -> dict[str, list[str]]:
    """The checks of `partial` (or of ``not_run``: check -> why) grouped by why, each group in
    name order."""
    grouped: dict[str, list[str]] = {}
    for check, why in sorted(partial.items()):
        grouped.setdefault(why, []).append(check)
    return grouped


def validate(
    spark: SparkSession,
    spec: System,
    options: Options,
    *,
    as_of: dt.datetime | None = None,
    reveal_addresses: bool = False,
    history: Any = None,
    history_scope: str | None = None,
) -> Any:
    """The quality report of the system's frames (`quality.QualityReport`). Input that cannot be
    read is its typed error (exit 2), as in `audit`, never a failed expectation: also when an
    expectation's query met it (`unreadable_input`). With a `history` (`history.store.Location`),
    the system's figures and each expectation's result are appended to it, and the report says
    where (`QualityReport.history`: the location, the store's scope, the run id)."""
    from dataclasses import replace

    from mqforensics.quality import validate as run_suites

    if spec.validation_frames is None:
        raise ConfigError(f"{spec.name} has no expectation suites")
    with translated():
        unkeyed = AuditArgs(out=Path(), as_of=as_of, reveal_addresses=reveal_addresses)
        loaded = load(spark, spec, options, unkeyed)
        try:
            frames = spec.validation_frames(loaded)
            report = run_suites(frames, system=spec.name, pseudonymize=not reveal_addresses)
            error = unreadable_input(report)
            if error is not None:
                raise error
            if history is not None:
                recorded = append_validation(spark, spec, loaded, report, history, history_scope,
                                             reveal=reveal_addresses)  # fmt: skip
                report = replace(report, history=recorded)
        finally:
            loaded.close()
    return report


def append_validation(
    spark: SparkSession,
    spec: System,
    loaded: Loaded[Any],
    report: Any,
    where: Any,
    history_scope: str | None,
    *,
    reveal: bool,
) -> dict[str, Any]:
    """A validation's figures appended to the history at `where`; what the report says of it
    (`history.record.appended`: location, scope, run_id, figures)."""
    from mqforensics.history.record import appended, scope_of, system_metrics, validation_run

    scope = scope_of(history_scope, loaded.source, reveal=reveal)
    run = validation_run(spec.name, system_metrics(spec, loaded), report, scope=scope,
                         as_of=loaded.as_of, reveal=reveal)  # fmt: skip
    return appended(run, where, spark)


def unreadable_input(report: Any) -> Exception | None:
    """The typed error an expectation of `report` met instead of a result (a file Spark could
    not read, an InputError raised by a reader in a worker), or None: great_expectations
    records such a failure as the expectation's error, which is not the data failing it."""
    for suite in report.suites:
        for outcome in suite.expectations:
            if outcome.error:
                error = typed(Exception(outcome.error))
                if error is not None:
                    return error
    return None
