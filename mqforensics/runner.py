"""One audit runner for every system: `mqforensics audit <system>` and `validate <system>`.

The contract (docs/architecture.md): the options every audit has (``--out``, ``--as-of``,
``--reveal-addresses``) next to the system's own; everything that can be checked before Spark
starts is checked first (the output directory, the system's inputs); one Spark session; the
system's loader, then every check with the one signature; ``findings.json`` and
``findings.parquet`` (each finding with its stable id) and ``manifest.json`` (tool version,
inputs with fingerprints, as-of, options), each written atomically; a summary; exit 0 (no
finding of severity ``error`` or worse), 1 (some), 2 (bad input: nothing to audit is bad input,
never a clean bill).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics import __version__, systems
from mqforensics.credentials import mask_secrets
from mqforensics.errors import ConfigError, InputError, translated, typed
from mqforensics.findings import (
    FINDINGS_JSON,
    FINDINGS_RAW,
    exit_status,
    read_json,
    summarise,
    write_findings,
    write_json,
)
from mqforensics.spec import AuditArgs, Loaded, System
from mqforensics.units import parse_instant, utc_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "mqforensics-audit/1"
# Options that say how the command runs, not what it audits: left out of the manifest.
_NOT_OPTIONS = {"run", "command", "debug", "system", "out", "as_of", "reveal_addresses", "quiet"}


def add_common_options(parser: argparse.ArgumentParser, *, out_help: str) -> None:
    """``--out``, ``--as-of`` and ``--reveal-addresses``, the same on every audit and validate."""
    common = parser.add_argument_group("output")
    common.add_argument("--out", type=Path, required=True, metavar="DIR", help=out_help)
    common.add_argument(
        "--as-of", type=parse_instant, metavar="INSTANT",
        help="the instant ages are judged at, ISO-8601 (default: the snapshot's time, or now)",
    )  # fmt: skip
    common.add_argument(
        "--reveal-addresses", action="store_true",
        help="show mail addresses and user names as they are (default: pseudonymised)",
    )  # fmt: skip
    common.add_argument(
        "--erasure-policy", type=Path, metavar="FILE",
        help="look for the data subjects of this policy's erase_subject rules: every object "
        "holding one becomes a personal_data finding (subjects as keyed hashes only)",
    )  # fmt: skip


def add_system_parsers(
    command: argparse.ArgumentParser, run: Any, *, out_help: str, common: bool = True
) -> None:
    """One subcommand per registered system under `command`, each with the system's source
    options (and the common ones unless `common` is false)."""
    subparsers = command.add_subparsers(dest="system", required=True, metavar="SYSTEM")
    for spec in systems.all_systems():
        parser = subparsers.add_parser(spec.name, help=spec.title, description=spec.title)
        spec.add_source_options(parser)
        if common:
            add_common_options(parser, out_help=out_help)
        parser.set_defaults(run=run)


def common_args(args: argparse.Namespace, *, keyed: bool = True) -> AuditArgs:
    """The common options of `args`; with `keyed`, the audit's subject key is made (and kept in
    ``--out``) and the erasure policy's subjects are keyed with it."""
    from mqforensics import subjects

    key = subjects.new_key(args.out) if keyed else b""
    wanted: frozenset[str] = frozenset()
    policy_file = getattr(args, "erasure_policy", None)
    if policy_file is not None and keyed:
        from mqforensics.retention.policy import load_policy

        hashes = subjects.erasure_subjects(load_policy(policy_file))
        wanted = frozenset(subjects.keyed_all(hashes, key))
    return AuditArgs(
        out=args.out,
        as_of=getattr(args, "as_of", None),
        reveal_addresses=bool(getattr(args, "reveal_addresses", False)),
        subjects=wanted,
        subject_key=key,
    )


def check_out(out: Path, what: str = "--out") -> None:
    """An output directory: may exist (as a directory) or be created; a file there is refused."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{what} {out} exists and is not a directory")
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {out}: {parent} is not a directory")


def check_before_spark(spec: System, args: argparse.Namespace) -> None:
    """What fails fast: the output directory, then the system's own inputs and options."""
    if getattr(args, "out", None) is not None:
        check_out(args.out)
    if getattr(args, "erasure_policy", None) is not None:
        from mqforensics.retention.policy import load_policy

        load_policy(args.erasure_policy)
    spec.check_inputs(args)


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


def load(spark: SparkSession, spec: System, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """The system's store read into canonical frames; nothing read is an InputError."""
    loaded = spec.load(spark, args, common)
    if loaded.objects <= 0:
        loaded.close()
        raise InputError(f"nothing to audit: {loaded.source} holds nothing {spec.name} keeps")
    return loaded


def findings_frame(spark: SparkSession, spec: System, loaded: Loaded, settings: Any) -> DataFrame:
    """Every check of the system on the loaded frames, as one findings frame."""
    from mqforensics.findings import union_all

    return union_all(spark, [check.run(loaded.frames, settings) for check in spec.checks])


def audit(spark: SparkSession, spec: System, args: argparse.Namespace) -> AuditResult:
    """Load, check, write findings and the manifest to ``args.out``; the frames stay loaded for
    the caller (a notebook explores them; the CLI closes them). A file Spark cannot read, and a
    toolkit error raised in a Spark worker, are raised as their typed error (an InputError
    naming the file: `errors.translated`), wherever the job that met them ran; a failed audit
    leaves ``args.out`` as it found it (`out_kept_on_failure`)."""
    with out_kept_on_failure(args.out), translated():
        return _audit(spark, spec, args)


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


def _audit(spark: SparkSession, spec: System, args: argparse.Namespace) -> AuditResult:
    from mqforensics.views.progress import step

    common = common_args(args)
    step("reading the store")
    loaded = load(spark, spec, args, common)
    try:
        step("preparing the checks")
        settings = spec.settings(args, common, loaded)
        step(f"running {len(spec.checks)} checks")
        frame = findings_frame(spark, spec, loaded, settings)
        rows = write_findings(frame, args.out, None if common.reveal_addresses else hider(spec))
        step("writing the manifest")
        for name, document in loaded.outputs.items():
            write_json(args.out / name, document)
        manifest = write_manifest(spec, args, loaded, args.out, common)
    except BaseException:
        loaded.close()
        raise
    return AuditResult(spec, loaded, rows, manifest, args.out)


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


def options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The options an audit ran with, as JSON values (credentials never reach here: the parser
    refuses them, and every text is masked all the same)."""
    return {
        key: _json_value(value)
        for key, value in sorted(vars(args).items())
        if key not in _NOT_OPTIONS and not callable(value)
    }


def _json_value(value: Any) -> Any:
    from mqforensics.retention.policy import duration_text

    if isinstance(value, dt.timedelta):
        return duration_text(value)
    if isinstance(value, dt.datetime):
        return utc_text(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return mask_secrets(str(value))


def write_manifest(
    spec: System, args: argparse.Namespace, loaded: Loaded, out: Path, common: AuditArgs
) -> dict[str, Any]:
    findings_bytes = (out / FINDINGS_JSON).read_bytes()
    raw_bytes = (out / FINDINGS_RAW).read_bytes()
    manifest = {
        "format": MANIFEST_FORMAT,
        "tool": {"name": "mqforensics", "version": __version__},
        "system": spec.name,
        "created_at": utc_text(dt.datetime.now(dt.UTC)),
        "as_of": utc_text(loaded.as_of),
        "source": mask_secrets(loaded.source),
        "objects": loaded.objects,
        "inputs": loaded.inputs,
        "plan_inputs": loaded.plan_inputs,
        "options": options_of(args),
        "reveal_addresses": bool(getattr(args, "reveal_addresses", False)),
        "checks": [check.name for check in spec.checks],
        # Checks whose results are incomplete because the read was, and why ({} when none).
        "partial": dict(sorted(loaded.partial.items())),
        "subjects_searched": sorted(common.subjects),
        "findings": {
            "count": len(json.loads(findings_bytes)),
            "sha256": hashlib.sha256(findings_bytes).hexdigest(),
            "raw_sha256": hashlib.sha256(raw_bytes).hexdigest(),
        },
    }
    write_json(out / MANIFEST, manifest)
    return manifest


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of an audit directory, checked against its findings.json."""
    path = Path(directory) / MANIFEST
    manifest = read_json(path, "an audit manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise InputError(f"{path}: not an audit manifest (format {MANIFEST_FORMAT})")
    for name, key in ((FINDINGS_JSON, "sha256"), (FINDINGS_RAW, "raw_sha256")):
        path = Path(directory) / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{path} does not exist") from None
        if hashlib.sha256(data).hexdigest() != manifest["findings"][key]:
            raise InputError(f"{path} does not match its manifest (changed since the audit)")
    return manifest


def run_audit_command(args: argparse.Namespace) -> int:
    """`mqforensics audit <system>`."""
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spec = systems.get(args.system)
    check_before_spark(spec, args)
    spark = session(f"mqforensics-audit-{spec.name}")
    with spark_progress(spark, f"audit {spec.name}"):
        result = audit(spark, spec, args)
    result.loaded.close()
    print(f"{spec.title}: {result.loaded.source}; judged at {utc_text(result.as_of)}")
    print(summarise(result.findings))
    for note in result.loaded.notes:
        print(f"note: {note}")
    for why, checks in partial_by_reason(result.loaded.partial).items():
        print(f"warning: partial results of {', '.join(checks)}: {why}", file=sys.stderr)
    written = [FINDINGS_JSON, "findings.parquet", *result.loaded.outputs, MANIFEST]
    print(f"Wrote {', '.join(str(args.out / name) for name in written)}")
    return exit_status(result.findings)


def partial_by_reason(partial: dict[str, str]) -> dict[str, list[str]]:
    """The checks of `partial` (check -> why) grouped by why, each group in name order."""
    grouped: dict[str, list[str]] = {}
    for check, why in sorted(partial.items()):
        grouped.setdefault(why, []).append(check)
    return grouped


def add_audit_parser(commands: argparse._SubParsersAction) -> None:
    audit_parser = commands.add_parser(
        "audit", help="read a mail queue store and report what is wrong",
        description="Read a store into canonical frames, run every check, write findings.json, "
        "findings.parquet and manifest.json. Exit 0: no finding of severity error or worse; "
        "1: some; 2: the input cannot be read (or holds nothing to audit).",
    )  # fmt: skip
    add_system_parsers(
        audit_parser, run_audit_command,
        out_help="directory for findings.json, findings.parquet and manifest.json",
    )  # fmt: skip


# --- validate ---------------------------------------------------------------------------------


def add_validate_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "validate", help="run the expectation suites on a store's canonical frames",
        description="Check the canonical frames with the Great Expectations suites of "
        "expectations/. Exit 0: every suite passes; 1: an expectation failed; 2: the input "
        "cannot be read (never reported as a failed expectation).",
    )  # fmt: skip
    add_system_parsers(parser, run_validate_command, out_help="directory for quality.json")


def validate(spark: SparkSession, spec: System, args: argparse.Namespace) -> Any:
    """The quality report of the system's frames (`quality.QualityReport`). Input that cannot be
    read is its typed error (exit 2), as in `audit`, never a failed expectation: also when an
    expectation's query met it (`unreadable_input`)."""
    from mqforensics.quality import validate as run_suites

    if spec.validation_frames is None:
        raise ConfigError(f"{spec.name} has no expectation suites")
    with translated():
        loaded = load(spark, spec, args, common_args(args, keyed=False))
        try:
            frames = spec.validation_frames(loaded)
            report = run_suites(
                frames, system=spec.name, pseudonymize=not getattr(args, "reveal_addresses", False)
            )
        finally:
            loaded.close()
    error = unreadable_input(report)
    if error is not None:
        raise error
    return report


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


def run_validate_command(args: argparse.Namespace) -> int:
    from mqforensics.quality import render_text, report_to_json
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spec = systems.get(args.system)
    check_before_spark(spec, args)
    spark = session(f"mqforensics-validate-{spec.name}")
    with spark_progress(spark, f"validate {spec.name}"):
        report = validate(spark, spec, args)
    print(render_text(report))
    args.out.mkdir(parents=True, exist_ok=True)
    staging = args.out / ".quality.json.tmp"
    staging.write_text(report_to_json(report) + "\n")
    staging.replace(args.out / "quality.json")
    print(f"Wrote {args.out / 'quality.json'}")
    return 0 if report.success else 1
