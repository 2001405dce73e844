"""Make the bundled log-structured queue sample with the crash-only writer and simulated MTA.

    .venv/bin/python datasets/logqueue/make_sample.py

writes ``datasets/logqueue/sample/``, two queue directories of one MTA host:

- ``outbound/``: a seeded run of 40 messages that crashed three times (torn writes included) and
  was left as its last crash left it: messages in flight, a possibly torn tail, and garbage
  segments its reclaimer never deleted (``delete_garbage=False``).
- ``inbound/``: a seeded run of 25 messages that crashed twice, restarted and finished; its
  garbage segments were reclaimed.

Each directory holds the simulator's ``ground_truth.json`` (what the MTA really did, from its own
journal; the journal itself is dropped) next to the segments, and ``sample.json`` says when the
sample is judged: six days after the simulated clock started (2027-01-15, in the simulator's
future), so messages left in flight are past the five-day retry horizon. The run is
deterministic: the same seeds give the same bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from datasets.logqueue.simulate import (  # noqa: E402
    JOURNAL,
    SECOND,
    T0_US,
    write_dataset,
)

SAMPLE = HERE / "sample"
JUDGED_AFTER = dt.timedelta(days=6)


def main() -> None:
    shutil.rmtree(SAMPLE, ignore_errors=True)
    write_dataset(
        SAMPLE / "outbound",
        seed=20261122,
        messages=40,
        crashes=3,
        stop_at_last_crash=True,
        delete_garbage=False,
    )
    write_dataset(SAMPLE / "inbound", seed=20261123, messages=25, crashes=2)
    for journal in SAMPLE.glob(f"*/{JOURNAL}"):
        journal.unlink()
    start = dt.datetime.fromtimestamp(T0_US // SECOND, dt.UTC)
    as_of = (start + JUDGED_AFTER).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"as_of": as_of, "queues": ["outbound", "inbound"]}
    (SAMPLE / "sample.json").write_text(json.dumps(meta, indent=1) + "\n")
    for directory in sorted(p for p in SAMPLE.iterdir() if p.is_dir()):
        size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
        print(f"{directory.relative_to(HERE.parent.parent)}: {size:,} bytes")


if __name__ == "__main__":
    main()
