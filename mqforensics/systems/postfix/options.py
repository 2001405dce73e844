"""Postfix's options (where the queue directories are, the thresholds), its purge options, and
the settings every check receives; no Spark here (the spec imports this)."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from mqforensics.content_search import Searched
from mqforensics.errors import ConfigError, InputError
from mqforensics.filenames import shown
from mqforensics.options import Options, option
from mqforensics.spec import refuse_checkout_sample
from mqforensics.systems.postfix.postconf import Lifetimes, lifetimes
from mqforensics.systems.postfix.queue_dir import LOG_QUEUES, MESSAGE_QUEUES, QueueDir
from mqforensics.units import parse_duration, utc_now

MAIN_CF = "main.cf"

DEFAULT_INCOMPLETE_GRACE = dt.timedelta(hours=1)
DEFAULT_EXPIRY_GRACE = dt.timedelta(hours=1)
DEFAULT_HOLD_AGE = dt.timedelta(days=7)
DEFAULT_RETENTION = dt.timedelta(days=7)


@dataclass(frozen=True)
class Settings:
    """What the checks judge against; `as_of` is every finding's ``observed_at``.

    `lifetimes`: the instance's ``maximal_queue_lifetime`` and ``bounce_queue_lifetime``.
    `expiry_grace`: how long past its lifetime a deferred message may stay before it counts as
    stuck (the queue manager bounces it at its next attempt, up to ``maximal_backoff_time``
    later). `incomplete_grace`: how old a file not marked ready must be to be a crashed writer's
    leftover rather than one being written. `hold_age`: how long mail may stay on hold.
    `retention`: how long queued mail may hold personal data. `subjects` / `subject_key`: the
    keyed hashes of the data subjects searched (``--erasure-policy``), `full_subjects` those
    of them also searched in bodies and attachments (``search = "full"``).
    """

    as_of: dt.datetime = field(default_factory=utc_now)
    lifetimes: Lifetimes = field(default_factory=Lifetimes)
    expiry_grace: dt.timedelta = DEFAULT_EXPIRY_GRACE
    incomplete_grace: dt.timedelta = DEFAULT_INCOMPLETE_GRACE
    hold_age: dt.timedelta = DEFAULT_HOLD_AGE
    retention: dt.timedelta = DEFAULT_RETENTION
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    full_subjects: frozenset[str] = frozenset()

    @property
    def searched(self) -> Searched:
        """What the content search looks for (`content_search.Searched`)."""
        return Searched(self.subject_key, self.subjects, self.full_subjects & self.subjects)


@dataclass(frozen=True, kw_only=True)
class PostfixOptions(Options):
    """Which Postfix queue directories to read, where the instance's settings are, and the
    thresholds of the checks (``mqforensics audit postfix``: the same names with dashes)."""

    queue_dir: list[str] = option(
        metavar="[HOST=]DIR", repeat=True, group="queues",
        help="a Postfix queue_directory (live: read only; or a copy), repeatable for a fleet; "
        "HOST names it in findings (default: the directory)",
    )  # fmt: skip
    config_dir: Path | None = option(
        None, parse=Path, metavar="DIR", group="queues",
        help="the instance's Postfix config directory (postconf -c): its main.cf gives the "
        "queue lifetimes, and a plan purges through postsuper -c DIR",
    )  # fmt: skip
    main_cf: Path | None = option(
        None, parse=Path, metavar="FILE", group="queues",
        help="a main.cf or `postconf -n` output giving maximal_queue_lifetime and "
        "bounce_queue_lifetime (default: --config-dir's main.cf, else Postfix's 5d)",
    )  # fmt: skip
    expiry_grace: dt.timedelta = option(
        DEFAULT_EXPIRY_GRACE, parse=parse_duration, metavar="AGE", group="thresholds",
        help="how long past its lifetime deferred mail may stay (default 1h)",
    )  # fmt: skip
    incomplete_grace: dt.timedelta = option(
        DEFAULT_INCOMPLETE_GRACE, parse=parse_duration, metavar="AGE", group="thresholds",
        help="age after which a queue file not marked ready is a dead writer's (default 1h)",
    )  # fmt: skip
    hold_age: dt.timedelta = option(
        DEFAULT_HOLD_AGE, parse=parse_duration, metavar="AGE", group="thresholds",
        help="how long mail may stay on hold (default 7d)",
    )  # fmt: skip
    retention: dt.timedelta = option(
        DEFAULT_RETENTION, parse=parse_duration, metavar="AGE", group="thresholds",
        help="how long queued mail may hold personal data (default 7d)",
    )  # fmt: skip

    def queue_dirs(self) -> list[QueueDir]:
        """The queue directories named, checked; a ConfigError for one named twice."""
        dirs = [QueueDir.parse(given) for given in self.queue_dir]
        for what in ("host", "path"):
            values = [getattr(d, what) for d in dirs]
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ConfigError(f"--queue-dir names the {what} {repeated[0]} twice")
        return dirs

    def main_cf_file(self) -> Path | None:
        """Where the lifetimes come from: main_cf, else config_dir's main.cf, else nowhere."""
        if self.main_cf is not None:
            return Path(self.main_cf)
        if self.config_dir is not None:
            return Path(self.config_dir) / MAIN_CF
        return None

    def check(self) -> None:
        """The directories are queue directories, the config directory is one, the lifetimes
        read; the bundled sample as git keeps it is refused (it has lost its modes and times);
        queue directories without a single file are nothing to audit, said before Spark."""
        dirs = self.queue_dirs()
        for queue in dirs:
            refuse_checkout_sample("postfix", queue.path, "its file modes and times")
        if not any(_holds_a_file(queue.path) for queue in dirs):
            # The words of the runner's own refusal (`runner.load`), which the read would give.
            source = "; ".join(
                f"postfix {shown(d.host)}: {shown(d.path)}" if d.host != d.path
                else f"postfix {shown(d.path)}"
                for d in dirs
            )  # fmt: skip
            raise InputError(
                f"nothing to audit: {source} holds nothing postfix keeps (no file in any queue)"
            )
        if self.config_dir is not None and not Path(self.config_dir).is_dir():
            raise InputError(f"--config-dir {self.config_dir}: no such directory")
        main_cf = self.main_cf_file()
        if main_cf is not None:
            if main_cf.is_dir():
                raise InputError(f"{main_cf}: a directory, not a main.cf")
            if not main_cf.is_file():
                raise InputError(f"{main_cf}: no such main.cf")
            lifetimes(main_cf)


def _holds_a_file(root: str) -> bool:
    """Whether any message or log queue of the queue directory `root` holds a file (at any
    depth; the first one found ends the walk: a live queue may hold many)."""
    for queue in (*MESSAGE_QUEUES, *LOG_QUEUES):
        for _directory, _dirs, files in os.walk(os.path.join(root, queue)):
            if files:
                return True
    return False


@dataclass(frozen=True, kw_only=True)
class PurgeOptions(Options):
    """What the purge of a Postfix plan takes beyond the plan."""

    postfix_config: Path | None = option(
        None, parse=Path, metavar="DIR", group="Postfix plans",
        help="Postfix config directory postsuper -c uses (default: the audit's --config-dir, "
        "from the plan); its queue_directory must be the plan's",
    )  # fmt: skip
