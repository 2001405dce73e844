"""Benchmark: our slimta DiskStorage reader against python-slimta's own load of the spool.

Data: a DiskStorage spool (``env/``, ``meta/``, ``tmp/``) of exactly `size` envelopes written
by the real python-slimta 5.0.5 (`bench/slimta_spool_writer.py` under the slimta runtime,
`mqforensics.services.slimta_runtime`): every envelope through ``DiskStorage.write``, 64 at a
time; a quarter then retried once or twice (``increment_attempts``, ``set_timestamp``) and
some partly delivered (``set_recipients_delivered``). Envelopes have 1 to 20 recipients (most
one), parsed messages of 150 bytes to 16 KiB, a null sender now and then. Cached in
``~/.cache/mqforensics/bench/`` by size and `DATA_VERSION`.

Subjects, each in a fresh process, on the same files:

- ``ours``: `disk.list_store` and `disk.read_items` of every ``.env`` id (in slimta's load
  order) and ``tmp`` file, each `items.Item` made into its `items.ITEMS` row: what the audit's
  Spark source (`fleet`) runs per partition. Every ``.env`` and ``.meta`` is read, hashed and
  decoded by `safe_pickle` (opcodes walked and checked before an inert load).
- ``baseline``: python-slimta's own load, under its runtime: ``DiskStorage.load()`` (every
  ``.meta``) and ``get(id)`` of every id it yields (the ``.meta`` again and the ``.env``,
  unpickled to an ``Envelope``, delivered recipients removed): ``load()`` in order, as
  slimta's ``Queue`` loads at start-up, then the ``get`` calls 64 greenlets at a time, as its
  delivery attempts run (one after another they take several times longer: each of slimta's
  aio reads waits for its 1 ms keep-awake loop). Timed inside that process from the first
  read, so the import of slimta and gevent is not counted.
- ``baseline-ids``: ``DiskStorage.load()`` alone (the ids and next-attempt times: what a
  slimta ``Queue`` reads at start-up).

The parent asserts that ours and the baseline found the same envelopes, pending recipients
(recipients less the delivered indexes), sender bytes and null senders, equal to what was
written, and that ``baseline-ids`` found every envelope.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import measure
from mqforensics.services.cache import cache_dir

BENCHMARK = "slimta_spool"
DATA_VERSION = "1"  # bump when the generated content changes: the cache key includes it
SEED = "1"
WRITER = Path(__file__).resolve().with_name("slimta_spool_writer.py")
ANSWERS = ("envelopes", "recipients", "sender_bytes", "null_senders")


def cached_spool(size: int) -> Path:
    return cache_dir("bench") / f"slimta-spool-{size}-v{DATA_VERSION}"


def _runtime() -> Path:
    from mqforensics.services import slimta_runtime

    return slimta_runtime.ensure_runtime()


def _clean_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run_writer(*args: str, timeout: float) -> str:
    """`bench/slimta_spool_writer.py` with `args` under the slimta runtime, in an empty working
    directory (a file there named like a standard module would break its imports); stdout."""
    with tempfile.TemporaryDirectory(prefix="mqf-bench-slimta-") as cwd:
        done = subprocess.run(
            [str(_runtime()), str(WRITER), *args],
            cwd=cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if done.returncode != 0:
        raise RuntimeError(f"slimta_spool_writer {args[0]} failed: {done.stderr[-800:]}")
    return done.stdout


def generate(size: int) -> dict[str, Any]:
    """Write the `size`-envelope spool with python-slimta into the cache; its metadata."""
    import time

    target = cached_spool(size)
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    dirs = [building / name for name in ("env", "meta", "tmp")]
    for directory in dirs:
        directory.mkdir(parents=True)
    started = time.perf_counter()
    out = _run_writer("write", str(size), SEED, *map(str, dirs), timeout=4 * 3600)
    facts = json.loads(out.strip().splitlines()[-1])
    meta = {
        **facts,
        "spool_bytes": sum(p.stat().st_size for d in dirs for p in d.iterdir()),
        "generate_seconds": round(time.perf_counter() - started, 3),
        "data_version": DATA_VERSION,
        "slimta": "5.0.5",
    }
    (building / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return meta


def ensure_spool(size: int) -> tuple[Path, dict[str, Any], bool]:
    """The cached spool of `size` envelopes (written when missing), its metadata, and whether
    it was written now."""
    target = cached_spool(size)
    if (target / "meta.json").exists():
        return target, json.loads((target / "meta.json").read_text()), False
    return target, generate(size), True


# --- the subjects (children) -----------------------------------------------------------------


def _columns(schema: str) -> list[str]:
    """The top-level column names of a Spark DDL schema string."""
    names, depth, start = [], 0, 0
    for at, char in enumerate(schema + ","):
        depth += (char == "<") - (char == ">")
        if char == "," and depth == 0:
            names.append(schema[start:at].split()[0])
            start = at + 1
    return names


def measure_ours(spool: Path) -> dict[str, Any]:
    """`list_store` and `read_items` of the whole spool, every item made into its row."""
    from mqforensics.systems.slimta import disk
    from mqforensics.systems.slimta.items import ITEMS

    column = {name: i for i, name in enumerate(_columns(ITEMS))}
    layout = disk.DiskLayout(str(spool / "env"), str(spool / "meta"), str(spool / "tmp"))
    listing = disk.list_store(layout)
    ids: list[tuple[str, int | None]] = [(i, n) for n, i in enumerate(listing.env_ids)]
    ids += [(i, None) for i in listing.meta_only_ids]
    envelopes = recipients = sender_bytes = null_senders = items = problems = 0
    for item in disk.read_items(layout, ids, listing.tmp_files):
        row = item.as_row()
        items += 1
        ok = row[column["envelope_state"]] == "ok" and row[column["meta_state"]] == "ok"
        if row[column["kind"]] != "message" or not ok:
            problems += 1
            continue
        envelopes += 1
        rcpts = row[column["recipients"]]
        delivered = {i for i in row[column["delivered_indexes"]] or [] if 0 <= i < len(rcpts)}
        recipients += len(rcpts) - len(delivered)
        sender = row[column["sender"]]
        sender_bytes += len(sender.encode())
        null_senders += not sender
    return {
        "envelopes": envelopes,
        "recipients": recipients,
        "sender_bytes": sender_bytes,
        "null_senders": null_senders,
        "items": items,
        "problems": problems,
    }


def measure_baseline(spool: Path, command: str) -> None:
    """python-slimta's load under its runtime; its own result line, passed on."""
    out = _run_writer(command, str(spool / "env"), str(spool / "meta"), timeout=4 * 3600)
    lines = [line for line in out.splitlines() if line.startswith(measure.MARKER)]
    if not lines:
        raise RuntimeError(f"slimta_spool_writer {command} printed no result: {out[-300:]}")
    result = json.loads(lines[-1][len(measure.MARKER) :])
    print(measure.MARKER + json.dumps({**result, "jvm_peak_rss": None}), flush=True)


# --- the parent ------------------------------------------------------------------------------

SUBJECTS = {
    "ours": ("mqforensics slimta disk read_items (every item)", "ours"),
    "baseline": ("python-slimta DiskStorage load() + get(id)", "baseline"),
    "baseline-ids": ("python-slimta DiskStorage load() alone", "baseline"),
}


def run(size: int, workdir: Path, *, with_ids: bool = True) -> list[measure.Measurement]:
    """Write (or reuse) the spool and measure each subject in a fresh process on it (read in
    place: no subject writes); the generation metadata is in each measurement's
    ``output["data"]``. Fails unless the answers agree with what was written. `workdir` is
    only created."""
    workdir.mkdir(parents=True, exist_ok=True)
    spool, meta, generated = ensure_spool(size)
    label = f"{size:,} envelopes"
    results = []
    for name in ["ours", "baseline", *(["baseline-ids"] if with_ids else [])]:
        subject, role = SUBJECTS[name]
        argv = ["-m", "bench.slimta_spool", "measure", name, "--spool", str(spool)]
        m = measure.run_subject(BENCHMARK, subject, role, label, argv)
        m.output["data"] = {**meta, "generated_now": generated}
        results.append(m)
    expected = {key: meta[key] for key in ANSWERS}
    for m in results[:2]:
        seen = {key: m.output[key] for key in ANSWERS}
        if seen != expected:
            raise AssertionError(f"{m.subject} saw {seen}, written {expected}")
    if with_ids and results[2].output["envelopes"] != size:
        raise AssertionError(f"load() yielded {results[2].output['envelopes']} of {size}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser, child, parent = measure.command_line("slimta_spool", __doc__, SUBJECTS, "the spool")
    child.add_argument("--spool", type=Path, required=True)
    parent.add_argument("--size", type=int, default=100_000, help="envelopes")
    parent.add_argument("--no-ids", action="store_true", help="skip the load()-only baseline")
    args = parser.parse_args(argv)
    if args.command == "run":
        return measure.print_all(run(args.size, args.workdir, with_ids=not args.no_ids))
    if args.subject == "ours":
        measure.timed(lambda: measure_ours(args.spool))
    else:
        measure_baseline(args.spool, "load" if args.subject == "baseline" else "load-ids")
    return 0


if __name__ == "__main__":
    sys.exit(main())
