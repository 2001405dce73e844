"""The conditional S3 delete every executor of objects ends with, right after its last check.

``DeleteObject`` with ``If-Match`` on the ETag the check saw: an object overwritten since is
refused (412) and kept, and the action is skipped (`TargetChanged`). An object deleted by someone
else meanwhile is gone, not a change (SeaweedFS answers 412 to If-Match on a missing key, AWS
S3 404). A store that does not implement conditional deletes (``NotImplemented``), or an object
with no ETag to condition on, gets a plain delete: the check was then the last line.
"""

from __future__ import annotations

from typing import Any

from mqforensics.purge.contract import TargetChanged

_REFUSED = ("PreconditionFailed", "412", "NoSuchKey", "404", "NotFound")


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore `ClientError` (else its HTTP status), or ""."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


def _exists(client: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def delete_if_match(client: Any, bucket: str, key: str, etag: str | None, overwritten: str) -> bool:
    """Delete `key` if its ETag is still `etag` (as HEAD gave it, quoted); True when deleted,
    False when it was gone already; `TargetChanged(overwritten)` when it was overwritten."""
    from botocore.exceptions import ClientError

    if etag is None:
        client.delete_object(Bucket=bucket, Key=key)
        return True
    try:
        client.delete_object(Bucket=bucket, Key=key, IfMatch=etag)
    except ClientError as exc:
        code = error_code(exc)
        if code == "NotImplemented":
            client.delete_object(Bucket=bucket, Key=key)
        elif code in _REFUSED:
            if _exists(client, bucket, key):
                raise TargetChanged(overwritten) from None
            return False
        else:
            raise
    return True
