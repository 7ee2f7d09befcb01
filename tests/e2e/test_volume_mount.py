"""Volumes mounted for real through s3fs-fuse over a moto S3 server on 127.0.0.1.

Needs root (or fusermount), /dev/fuse and s3fs (scripts/system_deps.sh installs it);
skipped with the reason otherwise. Every test mounts under its own temp dir and unmounts
in teardown, also when it fails."""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from storage_server import MotoServer

import skyward as sky
from skyward.storage import VolumeMountError
from skyward.storage.mount import MountedVolume, fuse_tool_available, is_mounted, mount_volume, unmount

_missing = fuse_tool_available()
pytestmark = pytest.mark.skipif(_missing is not None, reason=f"no FUSE mounts here: {_missing}")

Mount = Callable[..., MountedVolume]


@pytest.fixture
def mount(moto_server: MotoServer) -> Iterator[Mount]:
    """``mount(volume, **overrides)`` mounts with the moto server's endpoint and keys;
    whatever is still mounted at the end of the test is unmounted."""
    made: list[MountedVolume] = []

    def mount_(volume: sky.Volume, **overrides: object) -> MountedVolume:
        arguments: dict[str, object] = {
            "endpoint": moto_server.endpoint, "access_key": moto_server.access_key,
            "secret_key": moto_server.secret_key, "path_style": True,
        }
        arguments.update(overrides)
        mounted = mount_volume(volume, **arguments)  # type: ignore[arg-type]
        made.append(mounted)
        return mounted

    yield mount_
    for mounted in made:
        unmount(mounted)


def put(server: MotoServer, bucket: str, files: dict[str, bytes]) -> None:
    client = server.client()
    for key, body in files.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)


def mount_options(path: Path) -> list[str]:
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[1] == str(path):
                return fields[3].split(",")
    return []


def test_read_only_mount_reads_lists_and_refuses_writes(
    moto_server: MotoServer, bucket: str, mount: Mount, tmp_path: Path
) -> None:
    put(moto_server, bucket, {"a.txt": b"alpha", "dir/b.txt": b"beta", "dir/c.bin": b"\0" * 9})
    point = tmp_path / "data"
    mount(sky.Volume(bucket=bucket, mount=str(point)))
    assert (point / "a.txt").read_bytes() == b"alpha"
    assert (point / "dir" / "b.txt").read_text() == "beta"
    assert sorted(os.listdir(point)) == ["a.txt", "dir"]
    assert sorted(os.listdir(point / "dir")) == ["b.txt", "c.bin"]
    assert "ro" in mount_options(point)
    with pytest.raises(OSError) as caught:
        (point / "new.txt").write_text("nope")
    assert caught.value.errno in (errno.EROFS, errno.EACCES)
    with pytest.raises(OSError):
        (point / "a.txt").unlink()
    assert moto_server.client().get_object(Bucket=bucket, Key="a.txt")["Body"].read() == b"alpha"


def test_writable_mount_writes_land_in_the_bucket(
    moto_server: MotoServer, bucket: str, mount: Mount, tmp_path: Path
) -> None:
    point = tmp_path / "checkpoints"
    mount(sky.Volume(bucket=bucket, mount=str(point), prefix="run-1/", read_only=False))
    (point / "epoch1").mkdir()
    (point / "epoch1" / "model.pt").write_bytes(b"weights-1")
    storage = sky.Storage(
        moto_server.endpoint, moto_server.access_key, moto_server.secret_key, path_style=True
    )
    with storage:
        assert "run-1/epoch1/model.pt" in storage.ls(bucket, prefix="run-1/")
        copy = storage.download(bucket, "run-1/epoch1/model.pt", tmp_path / "copy")
    assert copy.read_bytes() == b"weights-1"


def test_prefix_mount_shows_only_the_prefix(
    moto_server: MotoServer, bucket: str, mount: Mount, tmp_path: Path
) -> None:
    put(moto_server, bucket, {
        "datasets/train/x.csv": b"1,2", "datasets/readme": b"r", "other/secret": b"s",
        "top": b"t",
    })
    point = tmp_path / "ds"
    mount(sky.Volume(bucket=bucket, mount=str(point), prefix="datasets/"))
    assert sorted(os.listdir(point)) == ["readme", "train"]
    assert (point / "train" / "x.csv").read_bytes() == b"1,2"
    assert not (point / "other").exists() and not (point / "top").exists()


def test_unmount_leaves_nothing_behind_and_can_be_repeated(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    put(moto_server, bucket, {"f": b"x"})
    point = tmp_path / "made" / "for" / "mount"
    mounted = mount_volume(
        sky.Volume(bucket=bucket, mount=str(point)), moto_server.endpoint,
        moto_server.access_key, moto_server.secret_key, path_style=True,
    )
    try:
        assert is_mounted(str(point))
        assert oct(os.stat(mounted.private_dir).st_mode & 0o777) == "0o700"
        assert oct(os.stat(Path(mounted.private_dir) / "passwd").st_mode & 0o777) == "0o600"
    finally:
        started = time.monotonic()
        unmount(mounted)
    assert time.monotonic() - started < 10
    assert not is_mounted(str(point))
    assert str(point) not in Path("/proc/mounts").read_text()
    assert mounted.process.poll() is not None
    assert not os.path.exists(mounted.private_dir)  # password file gone with the mount
    assert not (tmp_path / "made").exists()  # only what mount_volume created is removed
    assert tmp_path.is_dir()
    unmount(mounted)  # idempotent


def test_unmount_keeps_a_mount_point_it_did_not_create(
    moto_server: MotoServer, bucket: str, mount: Mount, tmp_path: Path
) -> None:
    point = tmp_path / "existing"
    point.mkdir()
    mounted = mount(sky.Volume(bucket=bucket, mount=str(point)))
    unmount(mounted)
    assert point.is_dir() and not is_mounted(str(point))


def test_wrong_bucket_fails_naming_bucket_mount_point_and_cause(
    moto_server: MotoServer, mount: Mount, tmp_path: Path
) -> None:
    point = tmp_path / "nothing"
    started = time.monotonic()
    with pytest.raises(VolumeMountError) as caught:
        mount(sky.Volume(bucket="no-such-bucket", mount=str(point)))
    assert time.monotonic() - started < 20
    message = str(caught.value)
    assert "'no-such-bucket'" in message and str(point) in message
    assert "NoSuchBucket" in message
    assert not is_mounted(str(point)) and not point.exists()


def test_unreachable_endpoint_fails_in_bounded_time(
    moto_server: MotoServer, mount: Mount, tmp_path: Path
) -> None:
    point = tmp_path / "nowhere"
    with socket.socket() as unreachable:  # bound, never listening: refused, and no other process can take the port
        unreachable.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{unreachable.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(VolumeMountError) as caught:
            mount(sky.Volume(bucket="some-bucket", mount=str(point)), endpoint=endpoint)
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert "unable to connect" in message and endpoint in message and str(point) in message
    assert not is_mounted(str(point)) and not point.exists()


def test_bad_credentials_fail_the_mount_with_s3fs_reason(
    moto_auth_server: MotoServer, mount: Mount, tmp_path: Path
) -> None:
    bucket = moto_auth_server.new_bucket()
    point = tmp_path / "denied"
    with pytest.raises(VolumeMountError) as caught:
        mount(
            sky.Volume(bucket=bucket, mount=str(point)), endpoint=moto_auth_server.endpoint,
            access_key=moto_auth_server.access_key, secret_key="not-the-secret",
        )
    message = str(caught.value)
    assert "SignatureDoesNotMatch" in message and "check secret_key" in message
    assert "not-the-secret" not in message
    assert not is_mounted(str(point))
    moto_auth_server.drop_bucket(bucket)


def test_refuses_a_non_empty_mount_point(bucket: str, mount: Mount, tmp_path: Path) -> None:
    point = tmp_path / "busy"
    point.mkdir()
    (point / "keep.txt").write_text("mine")
    with pytest.raises(VolumeMountError, match="not empty"):
        mount(sky.Volume(bucket=bucket, mount=str(point)))
    assert (point / "keep.txt").read_text() == "mine"


def test_temporary_keys_mount_with_their_session_token(
    moto_server: MotoServer, moto_auth_server: MotoServer, bucket: str, mount: Mount, tmp_path: Path
) -> None:
    """Keys with a session token (a role, SSO) reach s3fs through its environment: the
    mount works, and the token is sent (a wrong one is refused as InvalidToken)."""
    put(moto_server, bucket, {"a.txt": b"alpha"})
    point = tmp_path / "temporary"
    mount(sky.Volume(bucket=bucket, mount=str(point)), session_token="a-session-token")
    assert (point / "a.txt").read_bytes() == b"alpha"
    guarded = moto_auth_server.new_bucket()
    denied = tmp_path / "denied"
    with pytest.raises(VolumeMountError, match="InvalidToken") as caught:
        mount(
            sky.Volume(bucket=guarded, mount=str(denied)), endpoint=moto_auth_server.endpoint,
            access_key=moto_auth_server.access_key, secret_key=moto_auth_server.secret_key,
            session_token="not-the-token",
        )
    assert "not-the-token" not in str(caught.value)
    assert not is_mounted(str(denied))
    moto_auth_server.drop_bucket(guarded)


def test_a_mount_point_that_cannot_be_created_is_a_mount_error(
    bucket: str, mount: Mount, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(VolumeMountError, match=r"could not be created \(Not a directory\)"):
        mount(sky.Volume(bucket=bucket, mount=str(blocker / "data")))
    assert blocker.read_text() == "not a directory"
