"""What `mqforensics audit slimta (--disk DIR | --redis URL | --s3 s3://BUCKET) --out DIR` reads.

The source options and their checks before Spark starts (`add_source_options`, `check_inputs`),
and the loader the audit runner calls (`load`): every store is listed on the driver and read by
Spark tasks (`fleet`), each pickle decoded by the allow-list unpickler (`safe_pickle`), into the
items frame (`items.ITEMS`) every check reads (`checks`, with `settings`). The runner writes the
findings, the manifest and the summary, and pseudonymises addresses; an empty store is nothing
to audit (exit 2).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqforensics.credentials import AWS_LOGIN, declare_login
from mqforensics.errors import ConfigError, InputError
from mqforensics.spec import AuditArgs, Loaded
from mqforensics.systems.slimta import options as defaults
from mqforensics.systems.slimta.options import AuditOptions
from mqforensics.systems.slimta.redis_server import REDIS_LOGIN
from mqforensics.systems.slimta.redis_store import DEFAULT_PREFIX
from mqforensics.units import counter, parse_duration, utc_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqforensics.systems.slimta.fleet import Stores

KINDS = ("message", "tmp_file", "queue_entry", "other_key")
NO_TMP_DIR = "no --tmp-dir given: stale_tmp was not checked"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """The options naming slimta stores (any combination, at least one) and the thresholds."""
    stores = parser.add_argument_group("stores (at least one)")
    stores.add_argument(
        "--disk", type=Path, metavar="ENV_DIR", help="DiskStorage env_dir (the .env files)"
    )
    stores.add_argument(
        "--meta-dir", type=Path, metavar="DIR", help="DiskStorage meta_dir (default: ENV_DIR)"
    )
    stores.add_argument(
        "--tmp-dir", type=Path, metavar="DIR",
        help="DiskStorage tmp_dir, for stale_tmp (slimta's default is the system temp dir)",
    )  # fmt: skip
    redis = stores.add_argument(
        "--redis", metavar="URL",
        help="redis://HOST[:PORT][/DB]; login from MQF_REDIS_USERNAME / MQF_REDIS_PASSWORD",
    )  # fmt: skip
    declare_login(redis, REDIS_LOGIN, host=True)
    stores.add_argument(
        "--redis-prefix", default=DEFAULT_PREFIX, metavar="PREFIX",
        help="RedisStorage prefix (default %(default)s)",
    )  # fmt: skip
    bucket = stores.add_argument(
        "--s3", metavar="s3://BUCKET[/PREFIX]",
        help="cloud storage bucket; endpoint from --s3-endpoint or MQF_S3_ENDPOINT, keys AWS_*",
    )  # fmt: skip
    endpoint = stores.add_argument(
        "--s3-endpoint", metavar="URL", help="S3 endpoint (default: AWS)"
    )
    declare_login(bucket, AWS_LOGIN)
    declare_login(endpoint, AWS_LOGIN)
    stores.add_argument(
        "--sqs-export", type=Path, metavar="FILE",
        help="SQS messages of the queue (aws sqs receive-message JSON, or JSON Lines); needs --s3",
    )  # fmt: skip
    thresholds = parser.add_argument_group("thresholds")
    thresholds.add_argument(
        "--retry-maximum", type=counter("--retry-maximum"), default=defaults.DEFAULT_RETRY_MAXIMUM,
        metavar="N",
        help="the slimta app's retry: maximum (default %(default)s: no retry configured)",
    )  # fmt: skip
    thresholds.add_argument(
        "--retention", type=parse_duration, default=defaults.DEFAULT_RETENTION, metavar="AGE",
        help="how long a queued message may hold personal data (default 7d)",
    )  # fmt: skip
    thresholds.add_argument(
        "--stale-tmp", type=parse_duration, default=defaults.DEFAULT_STALE_TMP, metavar="AGE",
        help="age after which a tmp_dir file is a leftover (default 1h)",
    )  # fmt: skip


def stores_of(args: argparse.Namespace) -> Stores:
    """The `fleet.Stores` the options name; a ConfigError/InputError for bad ones (a missing
    directory or export file, a password in a URL), all before Spark starts."""
    from mqforensics.sources.blobstore import S3Endpoint
    from mqforensics.systems.slimta.cloud import Bucket
    from mqforensics.systems.slimta.disk import DiskLayout
    from mqforensics.systems.slimta.fleet import Stores
    from mqforensics.systems.slimta.redis_server import RedisServer

    if (args.meta_dir or args.tmp_dir) and not args.disk:
        raise ConfigError("--meta-dir and --tmp-dir describe a --disk store")
    if not (args.disk or args.redis or args.s3):
        raise ConfigError("name at least one store: --disk ENV_DIR, --redis URL or --s3 s3://B")
    if args.sqs_export is not None and not args.s3:
        raise ConfigError("--sqs-export needs --s3: the bucket its messages point into")
    if args.sqs_export is not None and Path(args.sqs_export).is_dir():
        raise InputError(f"{args.sqs_export}: a directory, not an SQS export file")
    if args.sqs_export is not None and not Path(args.sqs_export).is_file():
        raise InputError(f"{args.sqs_export}: no such SQS export file")
    endpoint = S3Endpoint.from_env()
    if args.s3_endpoint:
        endpoint = S3Endpoint(args.s3_endpoint, endpoint.region, endpoint.access_key,
                              endpoint.secret_key)  # fmt: skip
    return Stores(
        disk=DiskLayout.checked(args.disk, args.meta_dir, args.tmp_dir) if args.disk else None,
        redis=RedisServer.parse(args.redis) if args.redis else None,
        redis_prefix=args.redis_prefix,
        s3=Bucket.parse(args.s3) if args.s3 else None,
        s3_endpoint=endpoint,
        sqs_export=args.sqs_export,
    )


def check_inputs(args: argparse.Namespace) -> None:
    """Everything about the stores that can be checked before Spark starts: the directories
    are directories, the options agree (`stores_of`), and the Redis server answers."""
    from mqforensics.sources.reachable import check_reachable

    for flag, given in (("--disk", args.disk), ("--meta-dir", args.meta_dir),
                        ("--tmp-dir", args.tmp_dir)):  # fmt: skip
        if given is not None and Path(given).exists() and not Path(given).is_dir():
            raise InputError(f"{flag} {given}: is a file: no such slimta queue directory")
    stores = stores_of(args)
    if stores.redis is not None:
        server = stores.redis
        check_reachable([(server.host, server.port)], "Redis", where=server.where)


def _file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def inputs_of(stores: Stores) -> list[dict[str, Any]]:
    """The run manifest's inputs: where each store is (never a credential)."""
    inputs: list[dict[str, Any]] = []
    if stores.disk is not None:
        layout = stores.disk
        inputs.append({"kind": "slimta DiskStorage", "location": layout.env_dir,
                       "meta_dir": layout.meta_dir, "tmp_dir": layout.tmp_dir})  # fmt: skip
    if stores.redis is not None:
        inputs.append({"kind": "slimta RedisStorage", "location": stores.redis.where,
                       "prefix": stores.redis_prefix})  # fmt: skip
    if stores.s3 is not None:
        inputs.append({"kind": "slimta cloud storage", "location": stores.s3.store,
                       "endpoint": stores.s3_endpoint.endpoint_url or "AWS"})  # fmt: skip
    if stores.sqs_export is not None:
        path = Path(stores.sqs_export)
        inputs.append({"kind": "SQS export", "location": str(path.resolve()),
                       "fingerprint": _file_fingerprint(path)})  # fmt: skip
    return inputs


def plan_inputs(stores: Stores, retry_maximum: int) -> dict[str, Any]:
    """The plan header's inputs: the stores (no credential) and the disk layout, which the
    executor's census needs to find each ``.meta``."""
    inputs: dict[str, Any] = {"stores": stores.describe(), "retry_maximum": retry_maximum}
    if stores.disk is not None:
        layout = stores.disk
        inputs["disk"] = {"env_dir": layout.env_dir, "meta_dir": layout.meta_dir,
                          "tmp_dir": layout.tmp_dir}  # fmt: skip
    return inputs


def load(spark: SparkSession, args: argparse.Namespace, common: AuditArgs) -> Loaded:
    """The stores read into the items frame (computed now: every check reads it)."""
    from mqforensics.spark import computed
    from mqforensics.systems.slimta.fleet import read_items

    stores = stores_of(args)
    items = computed(read_items(spark, stores))
    counts = {r["kind"]: r["count"] for r in items.groupBy("kind").count().collect()}
    notes = ["items: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)]
    if stores.disk is not None and stores.disk.tmp_dir is None:
        notes.append(NO_TMP_DIR)
    return Loaded(
        frames=items,
        source="; ".join(stores.describe()),
        as_of=common.as_of or utc_now(),
        objects=sum(counts.values()),
        inputs=inputs_of(stores),
        plan_inputs=plan_inputs(stores, args.retry_maximum),
        notes=notes,
    )


def settings(args: argparse.Namespace, common: AuditArgs, loaded: Loaded) -> AuditOptions:
    """What every check judges against."""
    disk = loaded.plan_inputs.get("disk") or {}
    return AuditOptions(
        as_of=loaded.as_of,
        retry_maximum=args.retry_maximum,
        retention=args.retention,
        stale_tmp=args.stale_tmp,
        sqs_export=args.sqs_export is not None,
        env_dir=disk.get("env_dir"),
        meta_dir=disk.get("meta_dir"),
        tmp_dir=disk.get("tmp_dir"),
        subjects=common.subjects,
        subject_key=common.subject_key,
    )
