"""slimta's options (which stores to read, the thresholds), its purge options, and the settings
every check receives; no Spark here (the spec and the command line import this)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.credentials import AWS_LOGIN, Login
from mqforensics.errors import ConfigError, InputError
from mqforensics.options import Options, option
from mqforensics.spec import refuse_checkout_sample
from mqforensics.systems.slimta.redis_server import REDIS_LOGIN
from mqforensics.systems.slimta.redis_store import DEFAULT_PREFIX
from mqforensics.units import counter, parse_duration, utc_now

if TYPE_CHECKING:
    from mqforensics.systems.slimta.fleet import Stores

DEFAULT_RETRY_MAXIMUM = 0  # the slimta app's default: no `retry` section means no retry at all
DEFAULT_RETENTION = dt.timedelta(days=7)
DEFAULT_STALE_TMP = dt.timedelta(hours=1)

STORES = "stores (at least one)"
THRESHOLDS = "thresholds"


@dataclass(frozen=True)
class Settings:
    """What the checks judge against (the settings of every check); `as_of` is every finding's
    ``observed_at``.

    `retry_maximum` is the slimta app's ``retry: maximum`` (its backoff gives up once
    ``attempts > maximum``). `retention`: how long a queued message may hold personal data.
    `sqs_export`: an SQS export was read, so an object no SQS message names was never queued.
    `env_dir`, `meta_dir`, `tmp_dir`: the DiskStorage read (if any), which names the files of
    its items. `subjects` are the keyed hashes of the data subjects searched (``--erasure-policy``)
    under `subject_key` (`mqforensics.subjects`); none: `personal_data` finds nothing. The
    items were searched for them when read (`fleet.read_items`); `depth` is how deep
    (`content_search.Searched.depth`: ``headers`` or ``full``).
    """

    as_of: dt.datetime = field(default_factory=utc_now)
    retry_maximum: int = DEFAULT_RETRY_MAXIMUM
    retention: dt.timedelta = DEFAULT_RETENTION
    stale_tmp: dt.timedelta = DEFAULT_STALE_TMP
    sqs_export: bool = False
    env_dir: str | None = None
    meta_dir: str | None = None
    tmp_dir: str | None = None
    subjects: frozenset[str] = frozenset()
    subject_key: bytes = b""
    depth: str = "headers"


@dataclass(frozen=True, kw_only=True)
class SlimtaOptions(Options):
    """Which slimta stores to read (any combination, at least one) and the thresholds of the
    checks (``mqforensics audit slimta``: the same names with dashes)."""

    disk: Path | None = option(
        None, parse=Path, metavar="ENV_DIR", group=STORES,
        help="DiskStorage env_dir (the .env files)",
    )  # fmt: skip
    meta_dir: Path | None = option(
        None, parse=Path, metavar="DIR", group=STORES,
        help="DiskStorage meta_dir (default: ENV_DIR)",
    )  # fmt: skip
    tmp_dir: Path | None = option(
        None, parse=Path, metavar="DIR", group=STORES,
        help="DiskStorage tmp_dir, for stale_tmp (slimta's default is the system temp dir)",
    )  # fmt: skip
    redis: str | None = option(
        None, metavar="URL", group=STORES, login=Login(REDIS_LOGIN, host=True),
        help="redis://HOST[:PORT][/DB]; login from MQF_REDIS_USERNAME / MQF_REDIS_PASSWORD",
    )  # fmt: skip
    redis_prefix: str = option(
        DEFAULT_PREFIX, metavar="PREFIX", group=STORES,
        help=f"RedisStorage prefix (default {DEFAULT_PREFIX})",
    )  # fmt: skip
    s3: str | None = option(
        None, metavar="s3://BUCKET[/PREFIX]", group=STORES, login=Login(AWS_LOGIN),
        help="cloud storage bucket; endpoint from --s3-endpoint or MQF_S3_ENDPOINT, keys AWS_*",
    )  # fmt: skip
    s3_endpoint: str | None = option(
        None, metavar="URL", group=STORES, login=Login(AWS_LOGIN),
        help="S3 endpoint (default: AWS)",
    )  # fmt: skip
    sqs_export: Path | None = option(
        None, parse=Path, metavar="FILE", group=STORES,
        help="SQS messages of the queue (aws sqs receive-message JSON, or JSON Lines); needs --s3",
    )  # fmt: skip
    retry_maximum: int = option(
        DEFAULT_RETRY_MAXIMUM, parse=counter("--retry-maximum"), metavar="N", group=THRESHOLDS,
        help=f"the slimta app's retry: maximum (default {DEFAULT_RETRY_MAXIMUM}: no retry "
        "configured)",
    )  # fmt: skip
    retention: dt.timedelta = option(
        DEFAULT_RETENTION, parse=parse_duration, metavar="AGE", group=THRESHOLDS,
        help="how long a queued message may hold personal data (default 7d)",
    )  # fmt: skip
    stale_tmp: dt.timedelta = option(
        DEFAULT_STALE_TMP, parse=parse_duration, metavar="AGE", group=THRESHOLDS,
        help="age after which a tmp_dir file is a leftover (default 1h)",
    )  # fmt: skip

    def stores(self) -> Stores:
        """The `fleet.Stores` the options name; a ConfigError/InputError for bad ones (a missing
        directory or export file, a password in a URL), all before Spark starts."""
        from mqforensics.sources.blobstore import S3Endpoint
        from mqforensics.systems.slimta.cloud import Bucket
        from mqforensics.systems.slimta.disk import DiskLayout
        from mqforensics.systems.slimta.fleet import Stores
        from mqforensics.systems.slimta.redis_server import RedisServer

        if (self.meta_dir or self.tmp_dir) and not self.disk:
            raise ConfigError("--meta-dir and --tmp-dir describe a --disk store")
        if not (self.disk or self.redis or self.s3):
            raise ConfigError("name at least one store: --disk ENV_DIR, --redis URL or --s3 s3://B")
        if self.sqs_export is not None and not self.s3:
            raise ConfigError("--sqs-export needs --s3: the bucket its messages point into")
        if self.sqs_export is not None and Path(self.sqs_export).is_dir():
            raise InputError(f"{self.sqs_export}: a directory, not an SQS export file")
        if self.sqs_export is not None and not Path(self.sqs_export).is_file():
            raise InputError(f"{self.sqs_export}: no such SQS export file")
        endpoint = S3Endpoint.from_env()
        if self.s3_endpoint:
            endpoint = S3Endpoint(self.s3_endpoint, endpoint.region, endpoint.access_key,
                                  endpoint.secret_key)  # fmt: skip
        return Stores(
            disk=DiskLayout.checked(self.disk, self.meta_dir, self.tmp_dir) if self.disk else None,
            redis=RedisServer.parse(self.redis) if self.redis else None,
            redis_prefix=self.redis_prefix,
            s3=Bucket.parse(self.s3) if self.s3 else None,
            s3_endpoint=endpoint,
            sqs_export=self.sqs_export,
        )

    def check(self) -> None:
        """Everything about the stores that can be checked before Spark starts: the directories
        are directories, the options agree (`stores`), a disk store read alone holds something
        (a slimta file: an empty directory is nothing to audit), and the Redis server
        answers."""
        from mqforensics.sources.reachable import check_reachable

        for flag, given in (("--disk", self.disk), ("--meta-dir", self.meta_dir),
                            ("--tmp-dir", self.tmp_dir)):  # fmt: skip
            if given is not None and Path(given).exists() and not Path(given).is_dir():
                raise InputError(f"{flag} {given}: is a file: no such slimta queue directory")
            if given is not None:
                refuse_checkout_sample("slimta", given, "its files' modification times")
        stores = self.stores()
        if stores.disk is not None and stores.redis is None and stores.s3 is None:
            from mqforensics.systems.slimta.disk import list_store

            listed = list_store(stores.disk)
            if not (listed.env_ids or listed.meta_only_ids or listed.tmp_files):
                # The words of the runner's own refusal (`runner.load`), which the read would
                # give after Spark started; what it looked for, said.
                looked = "no .env or .meta file" + (", no file in --tmp-dir" if stores.disk.tmp_dir
                                                    else "")  # fmt: skip
                raise InputError(
                    f"nothing to audit: disk {stores.disk.env_dir} holds nothing slimta keeps "
                    f"({looked})"
                )
        if stores.redis is not None:
            server = stores.redis
            check_reachable([(server.host, server.port)], "Redis", where=server.where)


@dataclass(frozen=True, kw_only=True)
class PurgeOptions(Options):
    """What the purge of a slimta plan takes beyond the plan: where its Redis and S3 are (never
    a login: that comes from the environment)."""

    redis: str | None = option(
        None, metavar="URL", group="slimta plans", login=Login(REDIS_LOGIN, host=True),
        help="Redis of a RedisStorage plan, redis://HOST[:PORT][/DB] or rediss:// "
        "(default: the plan's); login from MQF_REDIS_USERNAME/_PASSWORD",
    )  # fmt: skip
    s3_endpoint: str | None = option(
        None, metavar="URL", group="slimta plans", login=Login(AWS_LOGIN),
        help="S3 endpoint of the blob store (or MQF_S3_ENDPOINT)",
    )  # fmt: skip
