"""The one findings table every check of every system returns, and its summaries.

A finding names something exact that a person or a plan can act on: ``subject`` is the key (a
blob key, an enqueueId, a partition ``queue/timerangestart/bucket``, a RACL key, a segment file).
``detail`` is a JSON object string with check-specific facts; ``bytes`` the storage it holds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import Column, DataFrame, SparkSession

SCHEMA = (
    "check string, severity string, system string, queue string, scope string, subject string, "
    "observed_at timestamp, bytes bigint, detail string"
)
COLUMNS = [c.split()[0] for c in SCHEMA.split(", ")]

# Ordered from least to most serious; the CLI exits 1 when any finding is "error" or worse.
SEVERITIES = ("info", "warning", "error", "critical")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def exit_status(rows: Iterable[dict[str, Any]]) -> int:
    """An audit's exit status: 1 when any finding is ``error`` or worse, else 0."""
    worst = max((severity_rank(r["severity"]) for r in rows), default=-1)
    return 1 if worst >= SEVERITIES.index("error") else 0


@dataclass(frozen=True)
class Finding:
    """One finding as a plain value (for checks that build findings in Python, and for tests)."""

    check: str
    severity: str
    system: str
    queue: str | None
    scope: str
    subject: str
    observed_at: Any = None
    bytes: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> tuple:
        values = asdict(self)
        values["detail"] = json.dumps(self.detail, sort_keys=True, default=str)
        return tuple(values[c] for c in COLUMNS)


def to_frame(spark: SparkSession, findings: Iterable[Finding]) -> DataFrame:
    from mqforensics.spark import local_frame

    return local_frame(spark, [f.as_row() for f in findings], SCHEMA)


def empty(spark: SparkSession) -> DataFrame:
    from mqforensics.spark import local_frame

    return local_frame(spark, [], SCHEMA)


def union_all(spark: SparkSession, frames: Iterable[DataFrame]) -> DataFrame:
    result = empty(spark)
    for frame in frames:
        result = result.unionByName(frame.select(*COLUMNS))
    return result


def select_findings(
    frame: DataFrame,
    *,
    check: str,
    severity: str | Column,
    system: str,
    queue: str | Column | None,
    scope: str | Column,
    subject: str | Column,
    observed_at: dt.datetime | Column,
    bytes: int | Column | None,
    detail: Column | None = None,
    detail_json: Column | None = None,
) -> DataFrame:
    """The findings of `frame`'s rows, one each, in `SCHEMA`: the one way every check of every
    system builds its findings frame. A text or number is a literal, a `Column` is read per
    row; `observed_at` as an instant is written in UTC; `detail` is a struct, written as a JSON
    object keeping its null fields (or `detail_json`, a JSON text column already)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    def value(given: Any, kind: str) -> Column:
        return given if isinstance(given, Column) else F.lit(given).cast(kind)

    instant = observed_at
    if isinstance(instant, dt.datetime):
        utc = instant.replace(tzinfo=dt.UTC) if instant.tzinfo is None else instant
        instant = F.lit(utc.astimezone(dt.UTC)).cast("timestamp")
    if detail_json is None:
        if detail is None:
            raise ValueError("select_findings needs detail or detail_json")
        detail_json = F.to_json(detail, {"ignoreNullFields": "false"})
    return frame.select(
        F.lit(check).alias("check"),
        value(severity, "string").alias("severity"),
        F.lit(system).alias("system"),
        value(queue, "string").cast("string").alias("queue"),
        value(scope, "string").cast("string").alias("scope"),
        value(subject, "string").cast("string").alias("subject"),
        value(instant, "timestamp").cast("timestamp").alias("observed_at"),
        value(bytes, "bigint").cast("bigint").alias("bytes"),
        detail_json.alias("detail"),
    )


# --- the findings an audit writes ---------------------------------------------------------------

FINDINGS_JSON = "findings.json"
FINDINGS_PARQUET = "findings.parquet"
# The exact keys a plan acts on (addresses and names as stored), readable by the owner only.
FINDINGS_RAW = "findings.raw.json"
# What findings.json and findings.parquet hold: the id first, then the findings schema.
OUTPUT_SCHEMA = "id string, " + SCHEMA
_ORDER = ("check", "queue", "subject")


def finding_id(system: str | None, check: str, queue: str | None, scope: str, subject: str) -> str:
    """A finding's id: the same anomaly of the same input has the same id in every audit, so a
    plan's actions can cite it (16 hex digits of SHA-256 over what names it)."""
    text = "\n".join(v or "" for v in (system, check, queue, scope, subject))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` (in their final order) each with its `id` first; two findings that name the same
    thing (the same check, queue, scope and subject) get ``-2``, ``-3``... in that order."""
    seen: Counter[str] = Counter()
    result = []
    for row in rows:
        base = finding_id(row["system"], row["check"], row["queue"], row["scope"], row["subject"])
        seen[base] += 1
        ident = base if seen[base] == 1 else f"{base}-{seen[base]}"
        result.append({"id": ident, **row})
    return result


def write_findings(
    frame: DataFrame, out: Path, hide: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Write findings.parquet and findings.json atomically, each finding with its id, and
    return them as dicts (``detail`` decoded, ``observed_at`` as ISO text).

    With `hide` (which pseudonymises a finding's ``queue``, ``subject`` and ``detail``), those
    two files are what a person reads, pseudonymised, and ``findings.raw.json`` (mode 0600)
    keeps the exact keys a plan acts on: planning reads it, no report shows it. Ids are taken
    before `hide`, so a finding has the same id whether addresses are revealed or not.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mqforensics.spark import collected

    out.mkdir(parents=True, exist_ok=True)
    # Computed by one job and sorted here: findings.json holds every finding anyway, and both
    # outputs are written from the one table (keeping it on the executors, then writing and
    # reading it back, took two jobs more: bench/).
    table = _sorted(collected(frame), _ORDER)
    raw = [_decoded(r) for r in with_ids(table.to_pylist())]
    shown = raw if hide is None else [hide(dict(r)) for r in raw]
    if hide is not None:
        table = pa.Table.from_pylist([_encoded(r) for r in shown], schema=table.schema)
    table = table.add_column(0, "id", pa.array([r["id"] for r in shown], pa.string()))
    staging = out / ".findings.parquet.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    # A directory of one part file, as Spark writes a table: readable by Spark and pandas alike.
    pq.write_table(table, staging / "part-00000.parquet")
    write_json(out / FINDINGS_RAW, [_jsonable(r) for r in raw], private=True)
    rows = [_jsonable(r) for r in shown]
    json_tmp = out / ".findings.json.tmp"
    json_tmp.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    final = out / FINDINGS_PARQUET
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    json_tmp.replace(out / FINDINGS_JSON)
    return rows


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "detail": json.loads(row["detail"]) if row["detail"] else {}}


def _encoded(row: dict[str, Any]) -> dict[str, Any]:
    values = {k: v for k, v in row.items() if k != "id"}
    values["detail"] = json.dumps(values["detail"], sort_keys=True, default=str)
    return values


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    observed = row["observed_at"]
    if observed is not None and not isinstance(observed, str):
        observed = observed.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**row, "observed_at": observed}


def write_json(path: Path, document: Any, *, private: bool = False) -> None:
    """One JSON file of an audit directory, written atomically (a temporary file renamed over
    it); `private`: readable by its owner alone (0600). Values JSON lacks (instants) as text."""
    import os

    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(document, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(path)


def read_json(path: Path, what: str) -> Any:
    """One JSON file of an audit directory; an InputError naming `path` (and saying it is not
    `what`, e.g. "a findings file") when it is missing or unreadable."""
    from mqforensics.errors import InputError

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: not an audit directory") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not {what} ({type(exc).__name__})") from None


def _sorted(table: pyarrow.Table, columns: tuple[str, ...]) -> pyarrow.Table:
    """`table`'s rows ordered by `columns`, nulls first (as Spark sorts ascending)."""
    import pyarrow as pa

    keys = list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
    order = sorted(range(len(keys)), key=lambda i: [(v is not None, v) for v in keys[i]])
    return table.take(pa.array(order, pa.int64()))


def read_findings(directory: Path, *, raw: bool = False) -> list[dict[str, Any]]:
    """The findings of an audit directory: its findings.json, or with `raw` the exact keys of
    findings.raw.json (what planning reads)."""
    from mqforensics.errors import InputError

    path = Path(directory) / (FINDINGS_RAW if raw else FINDINGS_JSON)
    rows = read_json(path, "a findings file")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and {"id", *COLUMNS} <= set(r) for r in rows
    ):
        raise InputError(f"{path}: not a findings file (a list of findings with ids)")
    return rows


def summarise(rows: list[dict[str, Any]]) -> str:
    """A table of findings and bytes per check and severity; the bytes are ``-`` where no
    finding of that check and severity records a size (`verdict_line` says it in one line)."""
    counts: Counter[tuple[str, str]] = Counter()
    size: Counter[tuple[str, str]] = Counter()
    sized: set[tuple[str, str]] = set()
    for r in rows:
        counts[(r["check"], r["severity"])] += 1
        if r.get("bytes") is not None:
            size[(r["check"], r["severity"])] += r["bytes"]
            sized.add((r["check"], r["severity"]))
    width = max([22, *(len(check) + 2 for check, _ in counts)])
    lines = [f"{'check':<{width}}{'severity':<10}{'findings':>10}{'bytes':>16}"]
    for key, count in sorted(counts.items()):
        held = f"{size[key]:,}" if key in sized else "-"
        lines.append(f"{key[0]:<{width}}{key[1]:<10}{count:>10,}{held:>16}")
    if not rows:
        lines.append("(no findings)")
    return "\n".join(lines)


# --- what an auditor quotes: the verdict, and the bytes findings hold ----------------------------

ObjectKey = tuple[str, str, str]  # (system, scope, subject): one stored object


def held_objects(rows: Iterable[dict[str, Any]]) -> dict[ObjectKey, int]:
    """The stored objects some findings hold bytes in, each once, with its size: one object is
    a (system, scope, subject), whatever check found it, and its size the largest any of its
    findings records; a finding without a size (``bytes`` null) counts for nothing. An object
    inside another of them is left out, its bytes being part of that one's: a finding whose
    detail names its container by the container's scope (a James mail row's ``partition``,
    when that partition is a finding too)."""
    found = [r for r in rows if r.get("bytes") is not None]
    sizes: dict[ObjectKey, int] = {}
    for row in found:
        key = object_key(row)
        sizes[key] = max(sizes.get(key, 0), int(row["bytes"]))
    scopes = {scope for _, scope, _ in sizes}
    inside = set()
    for row in found:
        detail = _detail_of(row.get("detail"))
        system, scope, _ = key = object_key(row)
        for container in scopes - {scope}:
            named = detail.get(container)
            if isinstance(named, str) and (system, container, named) in sizes:
                inside.add(key)
    return {key: size for key, size in sizes.items() if key not in inside}


def object_key(row: dict[str, Any]) -> ObjectKey:
    """The stored object a finding is about: its system, scope and subject."""
    return (str(row.get("system") or ""), str(row.get("scope") or ""), str(row.get("subject")))


def _detail_of(detail: Any) -> dict[str, Any]:
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return {}
    return detail if isinstance(detail, dict) else {}


def size_text(count: float) -> str:
    """A number of bytes as people read it: ``870 B``, ``2.1 KiB``, ``3.4 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024:
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:,.1f} TiB"


def held_text(rows: Iterable[dict[str, Any]]) -> str:
    """What some findings hold, counted once per stored object (`held_objects`): ``8.1 KiB held
    by 21 stored objects``, or ``no size recorded`` when none of them records one."""
    from mqforensics.units import plural

    objects = held_objects(rows)
    if not objects:
        return "no size recorded"
    return f"{size_text(sum(objects.values()))} held by {plural(len(objects), 'stored object')}"


def severity_counts(rows: Iterable[dict[str, Any]]) -> str:
    """``22 errors, 11 warnings, 24 info``: findings per severity, worst first."""
    from mqforensics.units import plural

    counts = Counter(str(r.get("severity")) for r in rows)
    words = {"info": "info", "critical": "critical"}
    order = [*reversed(SEVERITIES), *sorted(set(counts) - set(SEVERITIES))]
    return ", ".join(plural(counts[s], s, words.get(s)) for s in order if counts[s])


def verdict_line(
    rows: list[dict[str, Any]], *, checks_run: int | None = None, not_run: int = 0
) -> str:
    """An audit in one line an auditor can quote: ``verdict: 57 findings (22 errors, 11
    warnings, 24 info) from 15 of the 17 checks run; 8.1 KiB held by 21 stored objects (each
    counted once)``, or ``verdict: clean (no finding from the 17 checks run)``. `checks_run`:
    how many checks ran (None: not said); `not_run`: how many did not (said when any)."""
    from mqforensics.units import plural

    skipped = f", {plural(not_run, 'check')} not run" if not_run else ""
    if not rows:
        if checks_run is None:
            return f"verdict: clean (no finding{skipped})"
        return f"verdict: clean (no finding from the {plural(checks_run, 'check')} run{skipped})"
    checks = len({(r.get("system"), r.get("check")) for r in rows})
    held = held_text(rows)
    if held_objects(rows):
        held += " (each counted once)"
    return (
        f"verdict: {plural(len(rows), 'finding')} ({severity_counts(rows)}) from "
        f"{checks_found(checks, checks_run)}{skipped}; {held}"
    )


def checks_found(checks: int, checks_run: int | None) -> str:
    """How many checks found something, of how many ran: ``15 of the 17 checks run``, ``all 8
    checks run``, ``the 1 check run``, or ``3 checks`` when how many ran is not known."""
    from mqforensics.units import plural

    if checks_run is None:
        return plural(checks, "check")
    if checks == checks_run:
        return f"all {checks_run:,} checks run" if checks_run > 1 else "the 1 check run"
    return f"{checks:,} of the {plural(checks_run, 'check')} run"
