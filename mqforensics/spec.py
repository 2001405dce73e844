"""The contract every mail system keeps: one `System` spec per folder under ``systems/``.

The shared layers (the CLI, the audit runner, planning, the purger, retention policies,
validation, notebooks and reports) only ever see these types, through the registry
(`mqforensics.systems`); they never import a system by name. A new system is a new folder whose
``spec.py`` defines ``SPEC = System(...)`` and one line in ``systems/__init__.py``.

Data flows one way (docs/architecture.md): a system's `load` reads its store into canonical
frames (`Loaded.frames`); every `Check` is the same kind of function from those frames and the
system's settings to a findings frame; the runner writes the findings with their ids and a run
manifest; `plan` turns findings (never the store) and a policy into actions, each citing the
finding ids that justify it; the system's executors carry the actions out, re-checking each one
live right before its destructive call.
"""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mqforensics.content_search import Searched
from mqforensics.errors import InputError
from mqforensics.options import Options, option
from mqforensics.retention.policy import RuleKind
from mqforensics.units import parse_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.metrics import Metric
    from mqforensics.retention.manifest import Action, Deferred, Plan
    from mqforensics.retention.policy import Policy

__all__ = [
    "SUBJECTS_SEARCHED", "AuditArgs", "Check", "CommonOptions", "Loaded", "Needs",
    "NoPurgeOptions", "PlanParts", "RuleKind", "Sample", "System", "deferred",
]  # fmt: skip

F = TypeVar("F")


def deferred(module: str, function: str) -> Callable[..., Any]:
    """`module.function`, imported when first called: a spec names its checks, loader and
    executors without importing Spark (importing a spec must stay cheap)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = function
    call.__qualname__ = function
    call.__doc__ = f"{module}.{function}, imported when called."
    return call


@dataclass(frozen=True)
class Needs:
    """What a check needs beyond the store: one of `options` given (names of the system's
    options or of `CommonOptions`), said as `what` when none is. The runner decides it before
    Spark starts, runs only the checks whose needs are met, and says of every other one that it
    did not run, `what` was missing and which flags would have given it (``not_run``)."""

    what: str
    options: tuple[str, ...]


# What every system's personal_data check needs: the data subjects to look for.
SUBJECTS_SEARCHED = Needs(
    "no erasure policy names the data subjects to look for", ("erasure_policy",)
)


@dataclass(frozen=True)
class Check:
    """One check: a pure function from a system's loaded frames and its settings to findings.

    `run(frames, settings)` returns a frame of `findings.SCHEMA` (the runner adds the ids).
    `severity` is what the check usually reports (a finding may carry another one, said in its
    `detail`). `what`, `why` and `todo` are one or two plain sentences each, shown by reports and
    notebooks: what it detects, why it matters (cost, privacy, data loss) and what to do.
    `needs` is what it needs beyond the store (an input or option), None when the store is all.
    """

    name: str
    severity: str
    run: Callable[[Any, Any], DataFrame]
    what: str
    why: str
    todo: str
    needs: Needs | None = None


@dataclass
class Loaded(Generic[F]):
    """What a system's loader read, in the shape every layer after it understands.

    `frames` is the system's canonical frames object (``systems/<name>/frames.py``: a dataclass
    with one DataFrame per table, each column documented), passed to every check as it is.
    `source` is one line saying where it was read from (never a credential). `objects` counts
    what was read (rows, files, messages): zero is "nothing to audit", an error. `inputs` are
    the run manifest's inputs, each a dict with at least ``kind`` and ``location`` and, for
    files, ``fingerprint``. `plan_inputs` is what the system's executors need from the plan
    header (where to reach the store). `outputs` are extra JSON documents the runner writes next
    to the findings (file name -> JSON value). `notes` are printed after the summary. `partial`
    names the checks whose results are incomplete because the read was (check name -> why): the
    runner says so on stderr and in the manifest. `not_run` names the checks the read showed
    cannot run (check name -> what is missing and which input would give it; the checks whose
    `Check.needs` are not met are added by the runner): they are not run, and said so on stderr,
    in the manifest and in the report. `close` releases what the frames hold.
    """

    frames: F
    source: str
    as_of: dt.datetime
    objects: int
    inputs: list[dict[str, Any]] = field(default_factory=list)
    plan_inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: dict[str, str] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


@dataclass
class PlanParts:
    """What a system's planner decided: actions in execution order, what it would not do (with
    the reason) and notes for the reviewer."""

    actions: list[Action] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class CommonOptions(Options):
    """The options every audit and validation has, whatever the system: where its files go,
    the instant it judges at, whether addresses are shown, the erasure policy whose data
    subjects it looks for, and the run history its figures are appended to."""

    out: Path = option(help="directory for findings.json, findings.parquet and manifest.json",
                       parse=Path, metavar="DIR", group="output")  # fmt: skip
    as_of: dt.datetime | None = option(
        None, parse=parse_instant, metavar="INSTANT", group="output",
        help="the instant ages are judged at, ISO-8601 (default: the snapshot's time, or now)",
    )  # fmt: skip
    reveal_addresses: bool = option(
        False, group="output",
        help="show mail addresses and user names as they are (default: pseudonymised)",
    )  # fmt: skip
    erasure_policy: Path | None = option(
        None, parse=Path, metavar="FILE", group="output",
        help="look for the data subjects of this policy's erase_subject rules: every object "
        "holding one becomes a personal_data finding (subjects as keyed hashes only)",
    )  # fmt: skip
    history: str | None = option(
        None, metavar="DIR|URL", group="history",
        help="append this run's figures to the run history there (a directory, or a URL Spark "
        "writes: s3a://, hdfs://); default: $MQF_HISTORY, else none (docs/history.md)",
    )  # fmt: skip
    history_scope: str | None = option(
        None, metavar="NAME", group="history",
        help="the host or cluster the run's figures are of in the history (default: where the "
        "store was read from)",
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class NoPurgeOptions(Options):
    """A system whose executors need nothing beyond the plan."""


@dataclass(frozen=True)
class AuditArgs:
    """The common options of one audit, resolved (the runner's), next to the system's own.

    `subjects` are the keyed hashes (`mqforensics.subjects`) of the data subjects the audit is
    to look for (``erasure_policy``): a system's ``personal_data`` check records each object
    holding one, with the matching keyed hashes in ``detail.subjects``. `subject_key` keys them;
    `full_subjects` are those searched in message bodies and attachments too (`searched`).
    """

    out: Path
    as_of: dt.datetime | None
    reveal_addresses: bool
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    # The `subjects` of rules with ``search = "full"``: also searched in bodies and attachments.
    full_subjects: frozenset[str] = frozenset()
    # The SHA-256 of the erasure policy file the subjects came from (None: none).
    erasure_policy_sha256: str | None = None

    @property
    def searched(self) -> Searched:
        """What content searches look for (`content_search.Searched`)."""
        return Searched(self.subject_key, self.subjects, self.full_subjects & self.subjects)


CHECKOUT_SAMPLES = Path(__file__).resolve().parents[1] / "datasets"


def refuse_checkout_sample(system: str, given: Path | str, lost: str) -> None:
    """Refuse, in one line saying how to get it right, a path into the bundled sample of
    `system` as the checkout keeps it, when git loses what its checks read (`lost`: file modes,
    modification times): ``mqforensics sample SYSTEM`` writes a copy with them put back."""
    sample = CHECKOUT_SAMPLES / system / "sample"
    path = Path(given).resolve()
    if path == sample or sample in path.parents:
        raise InputError(
            f"{given}: the bundled {system} sample as git keeps it, without {lost}: "
            f"`mqforensics sample {system} --out DIR` writes a copy to audit and prints its command"
        )


@dataclass(frozen=True)
class Sample:
    """The bundled sample of a system: the source options that audit it (materialised under a
    work directory when it must be), the instant it is judged at (None: its own), the ground
    truth of its planted anomalies, its retention policy, and a run history of the sample as
    it evolves over days (docs/history.md), when one is bundled."""

    options: Options
    as_of: str | None = None
    ground_truth: Path | None = None
    policy: Path | None = None
    history: Path | None = None


@dataclass(frozen=True)
class System:
    """One mail system, as the shared layers see it. Every system folder has the same files for
    the same roles (docs/architecture.md, "One system template"): ``options.py``, ``read.py``,
    ``frames.py``, ``checks.py``, ``plan.py``, ``purge.py``, ``views.py``, ``sample.py`` and
    ``spec.py``, which holds the one `System`.

    - `options`: the system's options class (`mqforensics.options`): where its store is and its
      thresholds, each documented; its `check()` is everything checked before Spark starts.
    - `load(spark, options, common)`: the store read into canonical frames (`Loaded`).
    - `settings(options, common, loaded)`: the object every check receives next to the frames.
    - `checks`: every check, in report order; names are stable and unique across systems.
    - `plan(findings, policy, header)`: findings (the rows of ``findings.json``) and a policy to
      actions; `header` is the run manifest (``as_of``, ``plan_inputs``, ``options``). No store is
      read: an anomaly is defined once, in its check.
    - `rule_kinds`: the policy rule kinds `plan` understands.
    - `executors(plan, purge_options)`: the purge executors of a plan (`purge/contract.py`);
      `purge_options` is the class of the ``purge`` options they read (an option declared by
      several systems is one option; one of another system given with this system's plan is
      refused).
    - `validation_frames(loaded)`: frame name -> DataFrame, each checked with the suite
      ``expectations/<system>_<frame>.json``.
    - `sample(workdir)`: the bundled `Sample` (``datasets/<system>/sample``).
    - `hide_target(target, salt)`: a plan action's target with what it holds beyond plain
      addresses pseudonymised (plain addresses are pseudonymised by the report itself).
    - `hide_finding(row)`: a finding (``detail`` decoded) with what it holds beyond plain
      addresses pseudonymised; the runner has pseudonymised the addresses already.
    - `views`: the system's notebook and report hooks (a module; see `mqforensics.views`).
    - `data_sources()`: Spark Python data sources to register in every session (a function, so
      that importing a spec imports no Spark).
    - `metrics(loaded)`: the figures an operator trends, measured on the loaded frames
      (`mqforensics.metrics.Metric`, ``systems/<name>/metrics.py``): what the run history
      appends next to the findings' and expectations' figures every system has
      (docs/history.md).
    """

    name: str
    title: str
    options: type[Options]
    load: Callable[[SparkSession, Any, AuditArgs], Loaded[Any]]
    settings: Callable[[Any, AuditArgs, Loaded[Any]], Any]
    checks: Sequence[Check]
    plan: Callable[[list[dict[str, Any]], Policy, Mapping[str, Any]], PlanParts]
    rule_kinds: Sequence[RuleKind]
    executors: Callable[[Plan, Any], Iterable[Any]]
    purge_options: type[Options] = NoPurgeOptions
    validation_frames: Callable[[Loaded[Any]], Mapping[str, DataFrame]] | None = None
    sample: Callable[[Path], Sample] | None = None
    data_sources: Callable[[], Sequence[type]] | None = None
    hide_target: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    hide_finding: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    views: Any = None
    metrics: Callable[[Loaded[Any]], Sequence[Metric]] | None = None

    def check(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)
