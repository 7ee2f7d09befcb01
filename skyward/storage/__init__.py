"""Object storage: ``sky.Storage`` (an S3-compatible client), its presets
(``sky.storage.S3``, ``R2``, ``GCS``, ``Wasabi``, ``Backblaze``, ``Hyperstack``) and
``sky.Volume`` (a bucket mounted on every node).

    with sky.storage.S3(region="us-east-1") as s3:
        s3.upload("my-bucket", "model.pt", key="checkpoints/model.pt")
        keys = s3.ls("my-bucket", prefix="checkpoints/")

Importing this package does not import boto3: that happens when a storage is opened.
The FUSE mount primitive lives in ``skyward.storage.mount``.
"""

from __future__ import annotations

from skyward.storage.client import ResolvedStorage, Storage
from skyward.storage.credentials import Credential, LeasedCredential
from skyward.storage.errors import (
    BucketNotFoundError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageCredentialsError,
    StorageError,
    VolumeCredentialsError,
    VolumeMountError,
)
from skyward.storage.presets import GCS, R2, S3, Backblaze, Hyperstack, Wasabi
from skyward.storage.progress import RichTransferBar, TransferProgress, TransferUpdate, use_progress
from skyward.storage.volume import FORBIDDEN_MOUNTS, S3Volume, Volume

__all__ = [
    "FORBIDDEN_MOUNTS", "GCS", "R2", "S3", "Backblaze", "BucketNotFoundError", "Credential",
    "EndpointUnreachableError", "Hyperstack", "LeasedCredential", "ObjectNotFoundError",
    "ResolvedStorage", "RichTransferBar", "S3Volume", "Storage", "StorageCredentialsError",
    "StorageError", "TransferProgress", "TransferUpdate", "Volume", "VolumeCredentialsError",
    "VolumeMountError", "Wasabi", "use_progress",
]
