"""``sky.Volume``: a bucket (or a folder of it) mounted as a directory on every node."""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.core.validation import fail
from skyward.storage.client import Storage

#: Mount points that would hide what the system or skyward needs.
FORBIDDEN_MOUNTS = ("/", "/opt", "/opt/skyward", "/root", "/tmp")

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BUCKET_RULES = (
    "S3 bucket names are 3-63 lowercase letters, digits, '.' and '-', start and end with a "
    "letter or digit, have no '..', '.-' or '-.', are not an IP address and do not start "
    "with 'xn--' or 'sthree-' nor end with '-s3alias' or '--ol-s3'"
)


@dataclass(frozen=True, slots=True)
class Volume:
    """Mount ``bucket`` (only ``prefix`` within it, when given) at the absolute path
    ``mount`` on every node, read-only unless ``read_only=False``. ``storage`` None means
    the provider's default storage. ``mount`` is kept normalised ("/data/" -> "/data");
    "/", "/opt", "/opt/skyward", "/root" and "/tmp" are refused."""

    bucket: str
    mount: str
    prefix: str = ""
    read_only: bool = True
    storage: Storage | None = None

    def __post_init__(self) -> None:
        names = {"bucket": "bucket", "mount": "mount", "prefix": "prefix"}
        mount = _check("Volume", names, self.bucket, self.mount, self.prefix, self.read_only)
        object.__setattr__(self, "mount", mount)
        if self.storage is not None and not isinstance(self.storage, Storage):
            raise fail(
                "Volume", "storage", self.storage,
                f"it must be a sky.Storage (e.g. sky.storage.S3(region=...)) or None, got "
                f"{type(self.storage).__name__}",
            )


def S3Volume(
    mount_path: str, bucket: str, prefix: str = "", read_only: bool = True
) -> Volume:
    """The older reference's spelling of a Volume (``mount_path`` is ``mount``); errors
    name these fields."""
    names = {"bucket": "bucket", "mount": "mount_path", "prefix": "prefix"}
    mount = _check("S3Volume", names, bucket, mount_path, prefix, read_only)
    return Volume(bucket=bucket, mount=mount, prefix=prefix, read_only=read_only)


def check_volumes(owner: str, field: str, value: object) -> tuple[Volume, ...]:
    """``value`` (one Volume, or an iterable of them) as a tuple; ValueError naming the
    field when an item is not a Volume or two mount points coincide or nest."""
    items = (value,) if isinstance(value, Volume) else value
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise fail(owner, field, value, "give a list of sky.Volume(bucket=..., mount=...)")
    volumes = tuple(items)
    for index, volume in enumerate(volumes):
        if not isinstance(volume, Volume):
            raise fail(
                owner, f"{field}[{index}]", volume,
                f"every item must be a sky.Volume(bucket=..., mount=...), got "
                f"{type(volume).__name__}",
            )
    for index, volume in enumerate(volumes):
        for other in volumes[:index]:
            if _nested(volume.mount, other.mount):
                raise fail(
                    owner, f"{field}[{index}]", volume,
                    f"its mount point {volume.mount} and {other.mount} (bucket "
                    f"{other.bucket!r}) are the same or one is inside the other; give each "
                    "volume a directory of its own, side by side (e.g. /data/a and /data/b)",
                )
    return volumes


def check_bucket(owner: str, field: str, value: object) -> None:
    """Raise ValueError unless ``value`` is a valid S3 bucket name."""
    if not isinstance(value, str):
        raise fail(owner, field, value, f"it must be a str, got {type(value).__name__}")
    if (
        not _BUCKET.fullmatch(value)
        or any(pair in value for pair in ("..", ".-", "-."))
        or _is_ip_address(value)
        or value.startswith(("xn--", "sthree-"))
        or value.endswith(("-s3alias", "--ol-s3"))
    ):
        raise fail(owner, field, value, _BUCKET_RULES)


def check_mount(owner: str, field: str, value: object) -> str:
    """``value`` normalised, or ValueError if it is not an absolute path or is one of
    FORBIDDEN_MOUNTS (in any spelling: trailing slashes, '//', '.', '..')."""
    if not isinstance(value, str):
        raise fail(
            owner, field, value, f"it must be an absolute path str such as '/data', got "
            f"{type(value).__name__}",
        )
    if not value.startswith("/"):
        raise fail(owner, field, value, "it must be an absolute path such as '/data'")
    if any(char in value for char in "\0\n"):
        raise fail(owner, field, value, "it must not contain NUL or newline characters")
    normalised = "/" + posixpath.normpath(value).lstrip("/")
    if normalised in FORBIDDEN_MOUNTS:
        forbidden = ", ".join(FORBIDDEN_MOUNTS)
        raise fail(
            owner, field, value,
            f"mounting over {normalised} would hide files the node needs ({forbidden} are "
            "refused); use a directory of its own such as '/data' or '/mnt/datasets'",
        )
    return normalised


def _check(
    owner: str, names: dict[str, str], bucket: object, mount: object, prefix: object, read_only: object
) -> str:
    check_bucket(owner, names["bucket"], bucket)
    normalised = check_mount(owner, names["mount"], mount)
    if not isinstance(prefix, str):
        raise fail(
            owner, names["prefix"], prefix,
            f"it must be a str folder within the bucket such as 'datasets/', got "
            f"{type(prefix).__name__}",
        )
    if not isinstance(read_only, bool):
        raise fail(owner, "read_only", read_only, "it must be True or False")
    return normalised


def _nested(first: str, second: str) -> bool:
    """Whether two normalised mount points are the same or one contains the other."""
    return (first + "/").startswith(second + "/") or (second + "/").startswith(first + "/")


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return True
