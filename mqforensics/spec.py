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

import argparse
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import Login, declare_login

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mqforensics.retention.manifest import Action, Deferred, Plan
    from mqforensics.retention.policy import Policy


@dataclass(frozen=True)
class Check:
    """One check: a pure function from a system's loaded frames and its settings to findings.

    `run(frames, settings)` returns a frame of `findings.SCHEMA` (the runner adds the ids).
    `severity` is what the check usually reports (a finding may carry another one, said in its
    `detail`). `what`, `why` and `todo` are one or two plain sentences each, shown by reports and
    notebooks: what it detects, why it matters (cost, privacy, data loss) and what to do.
    """

    name: str
    severity: str
    run: Callable[[Any, Any], DataFrame]
    what: str
    why: str
    todo: str


@dataclass
class Loaded:
    """What a system's loader read, in the shape every layer after it understands.

    `frames` is the system's canonical frames object (a state with one DataFrame per table, or
    one frame), passed to every check as it is. `source` is one line saying where it was read
    from (never a credential). `objects` counts what was read (rows, files, messages): zero is
    "nothing to audit", an error. `inputs` are the run manifest's inputs, each a dict with at
    least ``kind`` and ``location`` and, for files, ``fingerprint``. `plan_inputs` is what the
    system's executors need from the plan header (where to reach the store). `outputs` are extra
    JSON documents the runner writes next to the findings (file name -> JSON value). `notes` are
    printed after the summary. `partial` names the checks whose results are incomplete because
    the read was (check name -> why): the runner says so on stderr and in the manifest. `close`
    releases what the frames hold (cached data).
    """

    frames: Any
    source: str
    as_of: dt.datetime
    objects: int
    inputs: list[dict[str, Any]] = field(default_factory=list)
    plan_inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: dict[str, str] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


@dataclass
class PlanParts:
    """What a system's planner decided: actions in execution order, what it would not do (with
    the reason) and notes for the reviewer."""

    actions: list[Action] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RuleKind:
    """A policy rule kind a system plans: the keys it takes beyond the common ones, whether
    ``older_than`` is required, and whether its objects belong to no queue (`queueless`: a
    rule of it restricted to some ``queues`` still selects them, as orphaned blobs are by
    definition referenced by no queue; any other rule so restricted never does)."""

    name: str
    keys: tuple[str, ...] = ()
    needs_older_than: bool = False
    queueless: bool = False


@dataclass(frozen=True)
class Option:
    """A command-line option, as ``add_argument(*flags, **kwargs)`` takes it."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    # It names a server or a store: where its login comes from (`credentials.declare_login`).
    login: Login | None = None

    @property
    def dest(self) -> str:
        explicit = self.kwargs.get("dest")
        if explicit:
            return str(explicit)
        longest = max(self.flags, key=len)
        return longest.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        action = parser.add_argument(*self.flags, **dict(self.kwargs))
        if self.login is not None:
            declare_login(action, self.login.variables, host=self.login.host)


@dataclass(frozen=True)
class AuditArgs:
    """The options every audit has, parsed (the runner's), next to the system's own.

    `subjects` are the keyed hashes (`mqforensics.subjects`) of the data subjects the audit is
    to look for (``--erasure-policy``): a system's ``personal_data`` check records each object
    holding one, with the matching keyed hashes in ``detail.subjects``. `subject_key` keys them.
    """

    out: Path
    as_of: dt.datetime | None
    reveal_addresses: bool
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""


@dataclass(frozen=True)
class Sample:
    """The bundled sample of a system: the source arguments that audit it (materialised under
    a work directory when it must be), the instant it is judged at (None: its own), the
    ground truth of its planted anomalies and its retention policy."""

    argv: list[str]
    as_of: str | None = None
    ground_truth: Path | None = None
    policy: Path | None = None


@dataclass(frozen=True)
class System:
    """One mail system, as the shared layers see it.

    - `add_source_options(parser)`: the options naming the store and the system's thresholds,
      each with help text (``--out``, ``--as-of`` and ``--reveal-addresses`` are the runner's).
    - `check_inputs(args)`: everything that can be checked before Spark starts (paths exist and
      are of the right type, options agree); raises `InputError` or `ConfigError`.
    - `load(spark, args, common)`: the store read into canonical frames.
    - `settings(args, common, loaded)`: the object every check receives next to the frames.
    - `checks`: every check, in report order; names are stable and unique across systems.
    - `plan(findings, policy, header)`: findings (the rows of ``findings.json``) and a policy to
      actions; `header` is the run manifest (``as_of``, ``plan_inputs``, ``options``). No store is
      read: an anomaly is defined once, in its check.
    - `rule_kinds`: the policy rule kinds `plan` understands.
    - `executors(plan, args)`: the purge executors of a plan (`purge/engine.py`);
      `purge_options` are the ``purge`` options they read (declared once across systems by dest;
      an option of another system given with this system's plan is refused).
    - `validation_frames(loaded)`: frame name -> DataFrame, each checked with the suite
      ``expectations/<system>_<frame>.json``.
    - `sample(workdir)`: the bundled `Sample` (``datasets/<system>/sample``).
    - `hide_target(target, salt)`: a plan action's target with what it holds beyond plain
      addresses pseudonymised (plain addresses are pseudonymised by the report itself).
    - `hide_finding(row)`: a finding (``detail`` decoded) with what it holds beyond plain
      addresses pseudonymised; the runner has pseudonymised the addresses already. Checks never
      pseudonymise: findings are written pseudonymised unless ``--reveal-addresses``, and the
      exact keys a plan needs are kept apart (``findings.raw.json``, owner-only).
    - `views`: the system's notebook and report hooks (a module; see `mqforensics.views`).
    - `data_sources()`: Spark Python data sources to register in every session (a function, so
      that importing a spec imports no Spark).
    """

    name: str
    title: str
    add_source_options: Callable[[argparse.ArgumentParser], None]
    check_inputs: Callable[[argparse.Namespace], None]
    load: Callable[[SparkSession, argparse.Namespace, AuditArgs], Loaded]
    settings: Callable[[argparse.Namespace, AuditArgs, Loaded], Any]
    checks: Sequence[Check]
    plan: Callable[[list[dict[str, Any]], Policy, Mapping[str, Any]], PlanParts]
    rule_kinds: Sequence[RuleKind]
    executors: Callable[[Plan, argparse.Namespace], Iterable[Any]]
    purge_options: Sequence[Option] = ()
    validation_frames: Callable[[Loaded], Mapping[str, DataFrame]] | None = None
    sample: Callable[[Path], Sample] | None = None
    data_sources: Callable[[], Sequence[type]] | None = None
    hide_target: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    hide_finding: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    views: Any = None

    def check(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)
