"""Object storage: ``sky.Storage`` (an S3-compatible client), its presets
(``sky.storage.S3``, ``R2``, ``GCS``, ``Wasabi``, ``Backblaze``, ``Hyperstack``) and
``sky.Volume`` (a bucket mounted on every node).

    with sky.storage.S3(region="us-east-1") as s3:
        s3.upload("my-bucket", "model.pt", key="checkpoints/model.pt")
        keys = s3.ls("my-bucket", prefix="checkpoints/")

Importing this package imports none of its modules: each name is imported on first use
(``core.lazy``), and boto3 only when a storage is opened.
The FUSE mount primitive lives in ``skyward.storage.mount``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward.core.lazy import lazy_names

if TYPE_CHECKING:  # every name, as type checkers should see them
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

_LAZY = {
    **dict.fromkeys(("ResolvedStorage", "Storage"), "skyward.storage.client"),
    **dict.fromkeys(("Credential", "LeasedCredential"), "skyward.storage.credentials"),
    **dict.fromkeys((
        "BucketNotFoundError", "EndpointUnreachableError", "ObjectNotFoundError", "StorageCredentialsError",
        "StorageError", "VolumeCredentialsError", "VolumeMountError",
    ), "skyward.storage.errors"),
    **dict.fromkeys(("GCS", "R2", "S3", "Backblaze", "Hyperstack", "Wasabi"), "skyward.storage.presets"),
    **dict.fromkeys(("RichTransferBar", "TransferProgress", "TransferUpdate", "use_progress"), "skyward.storage.progress"),
    **dict.fromkeys(("FORBIDDEN_MOUNTS", "S3Volume", "Volume"), "skyward.storage.volume"),
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(globals(), _LAZY)
