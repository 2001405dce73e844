"""The bundled Postfix sample (``datasets/postfix/sample``): a queue directory written by the real
Postfix 3.7 (``datasets/postfix/make_sample.py``), with anomalies planted in the copy
(``planted.json``, ``ANOMALIES.md``).

Git keeps neither file modes (beyond the executable bit) nor modification times, and both are
facts the checks read (a queue file is ready at mode 0700; a dead writer's file is old): the
sample records them in ``files.json``, and `materialize` copies the queue and restores them.
The ground truth is what each planted anomaly must give (`EXPECTED`), one finding per check.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mqforensics.errors import InputError
from mqforensics.spec import CHECKOUT_SAMPLES, Sample
from mqforensics.systems.postfix.options import PostfixOptions
from mqforensics.systems.postfix.queue_dir import LOG_QUEUES, MESSAGE_QUEUES

SAMPLE_HOST = "sample"  # what the bundled queue directory is called in findings and notebooks
BUNDLED = CHECKOUT_SAMPLES / "postfix" / "sample"

# Planted anomaly -> the (check, severity) findings it must give at the sample's as-of with the
# default thresholds.
EXPECTED: dict[str, tuple[tuple[str, str], ...]] = {
    "truncated": (("damaged_queue_file", "error"),),
    "flipped_length": (("damaged_queue_file", "error"),),
    "orphan_log": (("orphan_log", "warning"),),
    "incomplete": (("incomplete_queue_file", "warning"),),
    "corrupt": (("corrupt_queue_file", "error"),),
    "expired": (("expired_in_queue", "warning"), ("retention_exceeded", "warning")),
    "old_hold": (("old_hold", "warning"), ("retention_exceeded", "warning")),
    "deferred_without_log": (("deferred_without_log", "warning"),),
}
# The anomalies whose offset is the finding's detail.offset (where reading stops).
WITH_OFFSET = ("truncated", "flipped_length", "incomplete")


@dataclass(frozen=True)
class SampleCopy:
    """A materialized sample: its queue directory, the instant to judge it at, its ground truth."""

    queue_dir: Path
    as_of: str
    ground_truth: Path


def _recorded(sample: Path) -> dict[str, dict]:
    try:
        return dict(json.loads((sample / "files.json").read_text()))
    except (OSError, ValueError) as exc:
        raise InputError(f"{sample / 'files.json'}: not the sample's file list ({exc})") from None


def ground_truth(queue_dir: Path, sample: Path = BUNDLED) -> list[dict]:
    """The findings the planted anomalies must give: check, severity, subject (the file's
    absolute path in `queue_dir`), queue and, for a damaged or unfinished file, the offset where
    reading stops."""
    planted = json.loads((sample / "planted.json").read_text())
    findings = []
    for anomaly in planted:
        for check, severity in EXPECTED[anomaly["anomaly"]]:
            findings.append(
                {
                    "check": check,
                    "severity": severity,
                    "queue": anomaly["path"].split("/", 1)[0],
                    "subject": str(queue_dir / anomaly["path"]),
                    "offset": anomaly["offset"] if anomaly["anomaly"] in WITH_OFFSET else None,
                }
            )
    return sorted(findings, key=lambda f: (f["check"], f["subject"]))


def materialize(target: Path, truth: Path, sample: Path = BUNDLED) -> SampleCopy:
    """Copy the sample's queue to `target` with its recorded modes and mtimes (directories
    0700, as Postfix keeps them), and write its ground truth to `truth`."""
    target = Path(target).resolve()
    shutil.copytree(sample / "queue", target)
    recorded = _recorded(sample)
    for relative, facts in sorted(recorded.items()):
        path = target / relative
        if not path.is_file():
            raise InputError(f"{sample / 'files.json'}: {relative} is not in the sample's queue")
        path.chmod(int(facts["mode"], 8))
        os.utime(path, (facts["mtime"], facts["mtime"]))
    for queue in (*MESSAGE_QUEUES, *LOG_QUEUES):  # git keeps no empty directory
        (target / queue).mkdir(exist_ok=True)
    for directory in [target, *(p for p in target.rglob("*") if p.is_dir())]:
        directory.chmod(0o700)
    as_of = (sample / "as_of.txt").read_text().strip()
    document = {"sample": str(sample), "as_of": as_of, "findings": ground_truth(target, sample)}
    Path(truth).write_text(json.dumps(document, indent=2) + "\n")
    return SampleCopy(target, as_of, Path(truth))


def bundled(workdir: Path) -> Sample:
    """The bundled queue directory (written by the real Postfix, anomalies planted in the
    copy) under ``workdir/queue`` with its recorded modes and mtimes (git keeps neither)."""
    queue = Path(workdir) / "queue"
    shutil.rmtree(queue, ignore_errors=True)
    copy = materialize(queue, Path(workdir) / "ground_truth.json")
    return Sample(
        options=PostfixOptions(
            queue_dir=[f"{SAMPLE_HOST}={copy.queue_dir}"], main_cf=BUNDLED / "postconf.txt"
        ),
        as_of=copy.as_of,
        ground_truth=copy.ground_truth,
        policy=BUNDLED / "policy.toml",
    )
