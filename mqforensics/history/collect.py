"""A run's figures: what every system has, from its findings or its expectation results, next
to what its own ``metrics.py`` measures on its frames (`spec.System.metrics`).

From an audit (`audit_metrics`), for every check that ran, zeros included, so a series has a
point in every run:

- ``findings`` (count; ``check``, ``item`` = severity): one per severity the check reports
  by default or reported this run;
- ``reclaimable_bytes`` (bytes; ``check``): the bytes its findings hold;
- ``personal_data_objects`` (count): objects holding a data subject, when the audit looked;

and for the run: ``findings_total``, ``bytes_held`` (each stored object once, as the verdict
line counts it), ``objects_read`` and ``check_not_run`` (1 per check that did not run; ``check``).

From a validation (`validation_metrics`), per expectation (``check`` = the suite, ``item`` =
the expectation and its target): ``expectation_passed`` (success: 1 or 0) and, when it counted
them, ``unexpected_rows``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mqforensics.findings import held_objects
from mqforensics.metrics import Metric
from mqforensics.privacy import pseudonymize_value
from mqforensics.version import __version__

PERSONAL_DATA = "personal_data"


@dataclass(frozen=True)
class Run:
    """One run as the history keeps it: who it is, what it judged, and its figures."""

    system: str
    kind: str
    scope: str
    as_of: dt.datetime
    metrics: tuple[Metric, ...]
    run_id: str = ""
    run_at: dt.datetime | None = None
    tool_version: str = __version__

    def __post_init__(self) -> None:
        if self.kind not in ("audit", "validate"):
            raise ValueError(f"a run is an audit or a validation, not {self.kind!r}")
        if not self.run_id:
            object.__setattr__(self, "run_id", uuid.uuid4().hex)
        if self.run_at is None:
            object.__setattr__(self, "run_at", dt.datetime.now(dt.UTC))

    def rows(self) -> list[dict[str, Any]]:
        """The run's rows, one per figure (`schema.COLUMNS`, without the partition)."""
        from mqforensics.history.schema import SCHEMA_VERSION

        head = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "run_at": _utc(self.run_at),
            "as_of": _utc(self.as_of),
            "kind": self.kind,
            "scope": self.scope,
            "tool_version": self.tool_version,
        }
        return [
            {**head, "queue": m.queue, "check": m.check, "item": m.item, "metric": m.metric,
             "unit": m.unit, "value": m.value}
            for m in self.metrics
        ]  # fmt: skip


def _utc(instant: dt.datetime | None) -> dt.datetime:
    assert instant is not None
    return instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant.astimezone(dt.UTC)


def audit_metrics(
    checks: Sequence[Any],
    rows: Iterable[Mapping[str, Any]],
    *,
    not_run: Mapping[str, str],
    objects: int,
) -> list[Metric]:
    """The figures every audit has, from its `checks` (`spec.Check`, in report order), its
    findings `rows` (as written) and the checks that did not run."""
    written: list[dict[str, Any]] = [dict(row) for row in rows]
    counts = Counter((r["check"], r["severity"]) for r in written)
    sizes: Counter[str] = Counter()
    for row in written:
        sizes[row["check"]] += int(row["bytes"] or 0)
    found: list[Metric] = []
    for check in checks:
        if check.name in not_run:
            found.append(Metric("check_not_run", 1, "count", check=check.name))
            continue
        severities = {check.severity} | {sev for name, sev in counts if name == check.name}
        for severity in sorted(severities):
            count = counts[(check.name, severity)]
            found.append(Metric("findings", count, "count", check=check.name, item=severity))
        found.append(Metric("reclaimable_bytes", sizes[check.name], "bytes", check=check.name))
        if check.name == PERSONAL_DATA:
            holding = {(r["scope"], r["subject"]) for r in written if r["check"] == check.name}
            found.append(Metric("personal_data_objects", len(holding), "count"))
    held: int = sum(held_objects(written).values())
    found += [
        Metric("findings_total", len(written), "count"),
        Metric("bytes_held", held, "bytes"),
        Metric("objects_read", objects, "count"),
    ]
    return found


def validation_metrics(report: Any) -> list[Metric]:
    """The figures of a validation (`quality.QualityReport`): per expectation, whether it
    passed and how many rows it did not expect."""
    found: list[Metric] = []
    for suite in report.suites:
        for outcome in suite.expectations:
            item = f"{outcome.expectation} on {outcome.target}"
            found.append(
                Metric("expectation_passed", int(outcome.success), "success", check=suite.suite,
                       item=item)
            )  # fmt: skip
            if outcome.unexpected_count is not None:
                found.append(
                    Metric("unexpected_rows", outcome.unexpected_count, "count",
                           check=suite.suite, item=item)
                )  # fmt: skip
    return found


def pseudonymised(metrics: Iterable[Metric]) -> list[Metric]:
    """`metrics` with every address in a label pseudonymised (`privacy.pseudonymize_value`:
    stable, so a series keeps its name from run to run)."""
    return [
        replace(m, queue=_hidden(m.queue), check=_hidden(m.check), item=_hidden(m.item))
        for m in metrics
    ]


def _hidden(label: str) -> str:
    return str(pseudonymize_value(label)) if "@" in label else label
