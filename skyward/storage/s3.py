"""boto3 underneath a Storage: the client (bounded timeouts and retries), the transfer
settings, and the translation of botocore failures into StorageErrors.

Imported only when a storage is opened, so ``import skyward`` never loads boto3."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
import botocore.exceptions
from boto3.exceptions import RetriesExceededError, S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from skyward.storage.errors import (
    BucketNotFoundError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageCredentialsError,
    StorageError,
)

if TYPE_CHECKING:
    from skyward.storage.client import S3Client

CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 60
#: Attempts per request, the first included; a dead endpoint fails within seconds.
MAX_ATTEMPTS = 3
MIB = 1024 * 1024

#: Files above the threshold move in parallel parts (multipart upload, ranged download).
TRANSFER = TransferConfig(
    multipart_threshold=64 * MIB,
    multipart_chunksize=16 * MIB,
    max_concurrency=8,
    use_threads=True,
)


_NO_CREDENTIALS = (
    botocore.exceptions.NoCredentialsError,
    botocore.exceptions.PartialCredentialsError,
)
#: Refused, unknown host, TLS failure, timed out: the request never got an answer.
_UNREACHABLE = (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)


@dataclass(frozen=True, slots=True)
class Target:
    """What a request was about, for the error message."""

    endpoint: str
    bucket: str
    key: str | None = None


def make_client(
    endpoint: str,
    region: str,
    access_key: str | None,
    secret_key: str | None,
    *,
    path_style: bool,
) -> S3Client:
    """A boto3 S3 client for ``endpoint``; None keys mean boto3's own credential chain."""
    config = Config(
        region_name=region,
        signature_version="s3v4",
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        s3={"addressing_style": "path" if path_style else "virtual"},
        # Checksums only where S3 requires them: many S3-compatible services refuse the
        # streamed (aws-chunked) bodies that boto3 sends by default otherwise.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session(
        aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=region
    )
    return session.client("s3", endpoint_url=endpoint, config=config)


def translate(error: Exception, target: Target) -> Exception:
    """The StorageError for a botocore/boto3 failure; other exceptions come back as is."""
    error = _unwrap(error)
    if isinstance(error, botocore.exceptions.ClientError):
        return _client_error(error, target)
    if isinstance(error, _NO_CREDENTIALS):
        return StorageCredentialsError(
            f"no credentials for {target.endpoint}: pass access_key= and secret_key=, or "
            "set up the AWS credential chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "~/.aws/credentials, or an instance role)",
            target.endpoint,
        )
    if isinstance(error, _UNREACHABLE):
        return EndpointUnreachableError(target.endpoint, _reason(error))
    return error


def _client_error(error: botocore.exceptions.ClientError, target: Target) -> StorageError:
    info = error.response.get("Error", {})
    code = str(info.get("Code", ""))
    message = str(info.get("Message", "")) or code
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    where = f"s3://{target.bucket}/{target.key}" if target.key else f"bucket {target.bucket!r}"
    if code == "NoSuchBucket":
        return BucketNotFoundError(target.bucket, target.endpoint)
    if code in ("NoSuchKey", "404", "NotFound") and target.key is not None:
        return ObjectNotFoundError(target.bucket, target.key, target.endpoint)
    if code in ("404", "NotFound"):
        return BucketNotFoundError(target.bucket, target.endpoint)
    if code == "InvalidAccessKeyId":
        return StorageCredentialsError(
            f"{target.endpoint} does not know the access key: check access_key "
            f"(InvalidAccessKeyId while accessing {where})",
            target.endpoint,
        )
    if code == "SignatureDoesNotMatch":
        return StorageCredentialsError(
            f"{target.endpoint} rejected the request signature: check secret_key (it does "
            f"not belong to access_key; SignatureDoesNotMatch while accessing {where})",
            target.endpoint,
        )
    if code in ("AccessDenied", "403", "Forbidden") or status == 403:
        return StorageCredentialsError(
            f"{target.endpoint} denied access to {where} ({code or status}): check access_key "
            "and secret_key, and that they are allowed to use this bucket",
            target.endpoint,
        )
    return StorageError(f"{where} at {target.endpoint}: {code}: {message}")


def _unwrap(error: Exception) -> Exception:
    """boto3 wraps transfer failures: S3UploadFailedError over a ClientError (as context),
    RetriesExceededError over the last connection error."""
    if isinstance(error, S3UploadFailedError) and isinstance(
        error.__context__, botocore.exceptions.ClientError
    ):
        return error.__context__
    if isinstance(error, RetriesExceededError) and isinstance(error.last_exception, Exception):
        return error.last_exception
    return error


def _reason(error: Exception) -> str:
    """The innermost cause's text (connection refused, name resolution), short."""
    cause: BaseException = error
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    text = str(cause) or type(cause).__name__
    return text if len(text) <= 300 else text[:300] + "..."
