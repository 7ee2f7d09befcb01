"""Errors of the object-store client and the volume mounts.

Each names what it was about (endpoint, bucket, key, mount point) and what to check;
none carries a secret."""

from __future__ import annotations

from skyward.core.errors import SkywardError


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


class VolumeCredentialsError(StorageCredentialsError, ValueError):
    """A remote pool's Volume whose storage has no keys and does not opt in to shipping
    this machine's AWS credential chain; also a ValueError (the Spec cannot be used)."""

    def __init__(
        self, index: int, bucket: str, mount: str, endpoint: str, *, aws_s3: bool
    ) -> None:
        shipping = (
            ", or opt in to giving every node this machine's whole AWS credential chain "
            "with ship_client_credentials=True on the storage (sky.storage.S3(region=..., "
            "ship_client_credentials=True))"
            if aws_s3
            else " (this machine's AWS credential chain is never sent to another service)"
        )
        super().__init__(
            f"Spec.volumes[{index}] (bucket {bucket!r} at {mount}) has a storage without keys "
            f"({endpoint}), and a remote pool's nodes get only the credentials given to a "
            f"volume's storage: pass access_key= and secret_key= scoped to bucket "
            f"{bucket!r}{shipping}",
            endpoint,
        )
        self.index = index
        self.bucket = bucket
        self.mount = mount


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
