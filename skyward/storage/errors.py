"""Errors of the object-store client and the volume mounts.

Each names what it was about (endpoint, bucket, key, mount point) and what to check;
none carries a secret."""

from __future__ import annotations

from skyward.api.errors import SkywardError


class StorageError(SkywardError):
    """Base class of the storage errors."""


class BucketNotFoundError(StorageError):
    """The bucket does not exist at that endpoint (S3 ``NoSuchBucket``)."""

    def __init__(self, bucket: str, endpoint: str) -> None:
        super().__init__(
            f"bucket {bucket!r} does not exist at {endpoint}: check the bucket name and that "
            "the endpoint (region) is the one the bucket lives in"
        )
        self.bucket = bucket
        self.endpoint = endpoint


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """No object under that key (S3 ``NoSuchKey`` / 404); also a FileNotFoundError."""

    def __init__(self, bucket: str, key: str, endpoint: str) -> None:
        super().__init__(f"no object s3://{bucket}/{key} at {endpoint}")
        self.bucket = bucket
        self.key = key
        self.endpoint = endpoint


class StorageCredentialsError(StorageError):
    """The endpoint refused the credentials, or none could be found or resolved."""

    def __init__(self, message: str, endpoint: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint


class EndpointUnreachableError(StorageError, ConnectionError):
    """The endpoint could not be reached (refused, unknown host, timed out)."""

    def __init__(self, endpoint: str, cause: str) -> None:
        super().__init__(
            f"could not reach the storage endpoint {endpoint}: {cause}; check the URL, the "
            "port and that this machine can reach it"
        )
        self.endpoint = endpoint


class VolumeMountError(StorageError):
    """A bucket could not be mounted (or unmounted) at a mount point."""

    def __init__(self, bucket: str, mount: str, cause: str) -> None:
        super().__init__(f"could not mount bucket {bucket!r} at {mount}: {cause}")
        self.bucket = bucket
        self.mount = mount
        self.cause = cause
