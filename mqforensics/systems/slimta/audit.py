"""`mqforensics audit slimta (--disk DIR | --redis URL | --s3 s3://BUCKET) --out DIR`.

Every store is listed on the driver and read by Spark tasks (`fleet`), each pickle decoded by the
allow-list unpickler (`safe_pickle`); the checks (`checks`) are written as by `audit james`
(findings.json and findings.parquet, atomically) and summarised. Mail addresses are pseudonymised
unless ``--reveal-addresses``. Exit status: 0, 1 when any finding is ``error`` or worse, 2 on bad
input (a missing directory, a refused login: nothing is written then).
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.errors import ConfigError
from mqforensics.findings import exit_status
from mqforensics.sources.blobstore import S3Endpoint
from mqforensics.systems.james.audit import (
    add_findings_arguments,
    parse_duration,
    summarise,
    write_findings,
)
from mqforensics.systems.slimta import checks
from mqforensics.systems.slimta.redis_store import DEFAULT_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def parse_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"--retry-maximum {text!r} is not a count")
    return value


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The options naming slimta stores, shared by `audit slimta` and `plan slimta`."""
    stores = parser.add_argument_group("stores (at least one)")
    stores.add_argument("--disk", type=Path, metavar="ENV_DIR", help="DiskStorage env_dir")
    stores.add_argument("--meta-dir", type=Path, help="DiskStorage meta_dir (default: ENV_DIR)")
    stores.add_argument(
        "--tmp-dir", type=Path,
        help="DiskStorage tmp_dir, for stale_tmp (slimta's default is the system temp dir)",
    )  # fmt: skip
    stores.add_argument(
        "--redis", metavar="URL",
        help="redis://HOST[:PORT][/DB]; login from MQF_REDIS_USERNAME / MQF_REDIS_PASSWORD",
    )  # fmt: skip
    stores.add_argument(
        "--redis-prefix", default=DEFAULT_PREFIX, help="RedisStorage prefix (default %(default)s)"
    )
    stores.add_argument(
        "--s3", metavar="s3://BUCKET[/PREFIX]",
        help="cloud storage bucket; endpoint from --s3-endpoint or MQF_S3_ENDPOINT, keys AWS_*",
    )  # fmt: skip
    stores.add_argument("--s3-endpoint", metavar="URL", help="S3 endpoint (default: AWS)")
    stores.add_argument(
        "--sqs-export", type=Path, metavar="FILE",
        help="SQS messages of the queue (aws sqs receive-message JSON, or JSON Lines)",
    )  # fmt: skip


def stores_of(args: argparse.Namespace):  # -> fleet.Stores (imported lazily: Spark)
    """The `fleet.Stores` the options name; a ConfigError/InputError for bad ones."""
    from mqforensics.systems.slimta.cloud import Bucket
    from mqforensics.systems.slimta.disk import DiskLayout
    from mqforensics.systems.slimta.fleet import Stores
    from mqforensics.systems.slimta.redis_server import RedisServer

    if not (args.disk or args.redis or args.s3):
        raise ConfigError("name at least one store: --disk ENV_DIR, --redis URL or --s3 s3://B")
    if (args.meta_dir or args.tmp_dir) and not args.disk:
        raise ConfigError("--meta-dir and --tmp-dir describe a --disk store")
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


def add_parser(systems: argparse._SubParsersAction) -> None:
    parser = systems.add_parser("slimta", help="python-slimta queue storage (disk, Redis, S3)")
    add_store_arguments(parser)
    add_findings_arguments(parser)
    parser.add_argument(
        "--retry-maximum", type=parse_count, default=checks.DEFAULT_RETRY_MAXIMUM,
        help="the slimta app's retry: maximum (default %(default)s: no retry configured)",
    )  # fmt: skip
    parser.add_argument(
        "--retention", type=parse_duration, default=checks.DEFAULT_RETENTION,
        help="how long a queued message may hold personal data (default 7d)",
    )  # fmt: skip
    parser.add_argument(
        "--stale-tmp", type=parse_duration, default=checks.DEFAULT_STALE_TMP,
        help="age after which a tmp_dir file is a leftover (default 1h)",
    )  # fmt: skip
    parser.set_defaults(run=run)


def audit_options(args: argparse.Namespace, stores) -> checks.AuditOptions:
    return checks.AuditOptions(
        as_of=args.as_of or dt.datetime.now(dt.UTC).replace(microsecond=0),
        retry_maximum=args.retry_maximum,
        retention=args.retention,
        stale_tmp=args.stale_tmp,
        sqs_export=stores.sqs_export is not None,
        reveal_addresses=getattr(args, "reveal_addresses", False),
    )


def audit(spark: SparkSession, args: argparse.Namespace):  # -> (Stores, options, items, rows)
    """Read the stores into the items frame (computed), run the checks and write the findings."""
    from mqforensics.spark import computed
    from mqforensics.systems.slimta.fleet import read_items

    stores = stores_of(args)
    options = audit_options(args, stores)
    items = computed(read_items(spark, stores))
    return stores, options, items, write_findings(checks.run_checks(items, options), args.out)


def run(args: argparse.Namespace) -> int:
    from mqforensics.spark import session
    from mqforensics.views.progress import spark_progress

    spark = session("mqforensics-audit-slimta")
    with spark_progress(spark, "audit slimta"):
        stores, options, items, rows = audit(spark, args)
    counts = {r["kind"]: r["count"] for r in items.groupBy("kind").count().collect()}
    print(f"slimta: {', '.join(stores.describe())}; judged at {options.as_of:%Y-%m-%dT%H:%M:%SZ}")
    print("items: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in
                                ("message", "tmp_file", "queue_entry")))  # fmt: skip
    if stores.disk and stores.disk.tmp_dir is None:
        print("note: no --tmp-dir given: stale_tmp was not checked")
    print(summarise(rows))
    print(f"Wrote {args.out / 'findings.json'} and {args.out / 'findings.parquet'}")
    return exit_status(rows)
