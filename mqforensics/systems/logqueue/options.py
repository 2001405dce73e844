"""The log queue's options (which queue directories, the thresholds of the checks) and the
settings every check receives; no Spark here (the spec imports this). The system has no purge
options: its executor needs nothing beyond the plan."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from mqforensics.errors import ConfigError, InputError
from mqforensics.options import Options, option
from mqforensics.units import counter, parse_duration

DEFAULT_RETRY_HORIZON = dt.timedelta(days=5)
DEFAULT_RESTART_LAG_BYTES = 64 * 1024 * 1024


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


@dataclass(frozen=True)
class Settings:
    """What the checks judge against: `as_of` is every finding's ``observed_at``; `subjects`
    are the keyed hashes of the data subjects `personal_data` looks for (none: it finds
    nothing), keyed with `subject_key` (`mqforensics.subjects`)."""

    as_of: dt.datetime = field(default_factory=_now)
    retry_horizon: dt.timedelta = DEFAULT_RETRY_HORIZON
    restart_lag_bytes: int = DEFAULT_RESTART_LAG_BYTES
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    # The `subjects` also searched in message bodies and attachments (spool files).
    full_subjects: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class LogQueueOptions(Options):
    """Which log queue directories to read and the thresholds of the checks (``mqforensics
    audit logqueue DIR...``: the directories as arguments, the others the same names with
    dashes)."""

    dirs: list[Path] = option(
        parse=Path, metavar="DIR", positional=True, many=True, group="queues",
        help="queue directories, each holding seg-<n>.lq segment files, restart.lq and spool/",
    )  # fmt: skip
    retry_horizon: dt.timedelta = option(
        DEFAULT_RETRY_HORIZON, parse=parse_duration, metavar="AGE", group="thresholds",
        help="a message not finished this long after its first envelope is stuck (30s, 5m, "
        "12h, 5d, 2w; default 5d)",
    )  # fmt: skip
    restart_lag_bytes: int = option(
        DEFAULT_RESTART_LAG_BYTES, parse=counter("--restart-lag-bytes", "a byte count"),
        metavar="BYTES", group="thresholds",
        help="segment bytes the saved restart suffix may lag the garbage end before it is a "
        "restart_lag finding (default 64 MiB)",
    )  # fmt: skip

    def check(self) -> None:
        """Every DIR exists, is a directory, can be listed, and is given once; directories
        that hold no segment file at all are nothing to audit, said before Spark starts (one
        without segments next to others is audited, with a note)."""
        from mqforensics.systems.logqueue.layout import segments

        seen: set[Path] = set()
        for given in self.dirs:
            path = Path(given)
            if not path.exists():
                raise InputError(f"{path}: no such queue directory")
            if not path.is_dir():
                raise InputError(f"{path}: not a directory (a queue is a directory of segments)")
            if not os.access(path, os.R_OK | os.X_OK):
                raise InputError(f"{path}: not readable")
            resolved = path.resolve()
            if resolved in seen:
                raise ConfigError(f"{resolved} is given twice")
            seen.add(resolved)
        dirs = [Path(given).resolve() for given in self.dirs]
        if dirs and not any(segments(path) for path in dirs):
            # The words of the runner's own refusal (`runner.load`), which the read would give.
            queues = ", ".join(map(str, dirs))
            raise InputError(
                f"nothing to audit: log queue(s) {queues} holds nothing logqueue keeps"
            )
