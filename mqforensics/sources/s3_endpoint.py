"""An S3-compatible endpoint and its keys (`S3Endpoint`), and how a failed S3 call is retried
(`classify_s3_error`). Apart from the ``mqf_blobs`` data source (`blobstore`), so that what only
talks to S3, as a purge does, does not import pyspark."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class S3Endpoint:
    """An S3-compatible service and the keys to use; the secret never appears in a repr."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls) -> S3Endpoint:
        """``MQF_S3_ENDPOINT`` (refused when it holds credentials) plus the standard ``AWS_*``
        variables."""
        from mqforensics.credentials import AWS_LOGIN, refuse_in_variable

        endpoint = os.environ.get("MQF_S3_ENDPOINT") or None
        refuse_in_variable("MQF_S3_ENDPOINT", endpoint, AWS_LOGIN)
        return cls(
            endpoint,
            os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None,
            os.environ.get("AWS_ACCESS_KEY_ID") or None,
            os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
        )

    def to_options(self) -> dict[str, str]:
        pairs = {
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
        }
        return {k: v for k, v in pairs.items() if v}

    @classmethod
    def from_options(cls, options: Any) -> S3Endpoint:
        return cls(
            options.get("endpoint_url"),
            options.get("region"),
            options.get("aws_access_key_id"),
            options.get("aws_secret_access_key"),
        )

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region or "us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5),
        )

    @property
    def where(self) -> str:
        from mqforensics.credentials import mask_secrets

        return mask_secrets(self.endpoint_url) if self.endpoint_url else "AWS S3"


def classify_s3_error(exc: BaseException) -> str | None:
    """ "retry" for timeouts and unavailable endpoints, "auth" for refused credentials."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, NoCredentialsError):
        return "auth"
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError):
        return "retry"
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
            return "auth"
        if code in ("SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "503"):
            return "retry"
    if isinstance(exc, ConnectionError | TimeoutError):
        return "retry"
    return None
