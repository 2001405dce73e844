"""What the runner appends: an audit's or a validation's `Run`, its figures gathered from the
system's own measure (`spec.System.metrics`) and from what every system has (`collect`), its
labels pseudonymised unless the run reveals addresses."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mqforensics.credentials import mask_secrets
from mqforensics.history.collect import Run, audit_metrics, pseudonymised, validation_metrics
from mqforensics.history.store import Location, append
from mqforensics.metrics import Metric
from mqforensics.privacy import pseudonymize_text


def scope_of(given: str | None, source: str, *, reveal: bool) -> str:
    """The store's name in the history: `given` (``--history-scope``), else the line saying
    where it was read from (credentials masked, addresses pseudonymised unless `reveal`)."""
    scope = given if given else mask_secrets(source)
    return scope if reveal else pseudonymize_text(scope)


def system_metrics(spec: Any, loaded: Any) -> list[Metric]:
    """What the system measures on its loaded frames (none when it measures nothing)."""
    return list(spec.metrics(loaded)) if spec.metrics is not None else []


def audit_run(
    spec: Any,
    loaded: Any,
    rows: Iterable[Mapping[str, Any]],
    *,
    scope: str,
    reveal: bool,
    run_at: dt.datetime,
) -> Run:
    """An audit's run: the system's figures, then the findings'."""
    found = system_metrics(spec, loaded) + audit_metrics(
        spec.checks, rows, not_run=loaded.not_run, objects=loaded.objects
    )
    return _run(spec.name, "audit", scope, loaded.as_of, found, reveal=reveal, run_at=run_at)


def validation_run(
    system: str,
    measured: Sequence[Metric],
    report: Any,
    *,
    scope: str,
    as_of: dt.datetime,
    reveal: bool,
) -> Run:
    """A validation's run: the system's figures, then each expectation's result."""
    found = [*measured, *validation_metrics(report)]
    return _run(system, "validate", scope, as_of, found, reveal=reveal)


def _run(
    system: str,
    kind: str,
    scope: str,
    as_of: dt.datetime,
    metrics: Sequence[Metric],
    *,
    reveal: bool,
    run_at: dt.datetime | None = None,
) -> Run:
    kept = tuple(metrics if reveal else pseudonymised(metrics))
    return Run(system, kind, scope, as_of, kept, run_at=run_at)


def appended_line(recorded: Mapping[str, Any]) -> str:
    """What a run says of its append (`appended`'s record), in one line."""
    return (
        f"Appended {recorded['figures']} figures to the history {recorded['location']} "
        f"(store {recorded['scope']!r}, run {recorded['run_id']})"
    )


def appended(run: Run, where: Location, spark: Any) -> dict[str, Any]:
    """Append `run` at `where`; what the run manifest records of it."""
    append(run, where, spark=spark)
    return {
        "location": str(where),
        "scope": run.scope,
        "run_id": run.run_id,
        "figures": len(run.metrics),
    }
