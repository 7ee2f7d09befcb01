"""Spec.volumes on local pools, for real: a moto S3 server on 127.0.0.1, s3fs-fuse
mounts, real agents. The client mounts once on this machine (the nodes share it) before
the agents start and unmounts at close, also when the pool fails or its block raises.

Needs root (or fusermount), /dev/fuse and s3fs; skipped with the reason otherwise."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from storage_server import MotoServer

import skyward as sky
from skyward.storage import VolumeMountError
from skyward.storage.mount import fuse_tool_available

_missing = fuse_tool_available()
pytestmark = pytest.mark.skipif(_missing is not None, reason=f"no FUSE mounts here: {_missing}")
QUIET = sky.Options(console=False, logging=False)


def storage_of(server: MotoServer) -> sky.Storage:
    return sky.Storage(
        server.endpoint, access_key=server.access_key, secret_key=server.secret_key, path_style=True
    )


def fuse_mounts() -> list[str]:
    """The FUSE mount points on this machine (s3fs's among them)."""
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if "fuse" in line.split()[2]]


def mounts_under(path: Path) -> list[str]:
    return [point for point in fuse_mounts() if point == str(path) or point.startswith(f"{path}/")]


@sky.function
def look(data: str, prefixed: str) -> tuple[int, str, list[str], list[str]]:
    """On a node: its index, a file read by path, and what two mounts list."""
    with open(os.path.join(data, "sets", "train.csv")) as handle:
        train = handle.read()
    return sky.instance_info().node, train, sorted(os.listdir(data)), sorted(os.listdir(prefixed))


@sky.function
def write_to(path: str) -> str:
    """Try writing ``path``; the OSError's errno name when refused."""
    try:
        with open(path, "w") as handle:
            handle.write("nope")
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, str(error.errno))
    return "written"


@sky.function
def checkpoint(folder: str) -> str | None:
    """The head node writes a file into a writable mount; the others do nothing."""
    if not sky.is_head():
        return None
    path = os.path.join(folder, "epoch-1.txt")
    with open(path, "w") as handle:
        handle.write("weights")
    return path


def test_two_nodes_read_write_and_see_only_their_prefix(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    """One pool, three volumes: the whole bucket read-only, one folder of it, and a
    writable folder of a second bucket. Every node reads by path, a read-only mount
    refuses a write, the head's checkpoint reaches the bucket, nothing stays mounted."""
    data, runs = moto_server.new_bucket(), moto_server.new_bucket()
    client = moto_server.client()
    for key, body in {
        "sets/train.csv": b"a,b\n1,2\n",
        "sets/test.csv": b"a,b\n",
        "README": b"hi",
    }.items():
        client.put_object(Bucket=data, Key=key, Body=body)
    storage = storage_of(moto_server)
    volumes = [
        sky.Volume(bucket=data, mount=str(tmp_path / "data"), storage=storage),
        sky.Volume(bucket=data, mount=str(tmp_path / "sets"), prefix="sets/", storage=storage),
        sky.Volume(
            bucket=runs,
            mount=str(tmp_path / "runs"),
            prefix="run-1/",
            read_only=False,
            storage=storage,
        ),
    ]
    phases: list[sky.BootstrapPhase] = []
    pool = sky.Compute(nodes=2, volumes=volumes, options=QUIET)
    pool.on(sky.BootstrapPhase, phases.append)
    with pool:
        seen = look(str(tmp_path / "data"), str(tmp_path / "sets")) @ pool
        assert sorted(node for node, *_ in seen) == [0, 1]
        for _, train, listed, prefixed in seen:
            assert train == "a,b\n1,2\n"
            assert listed == ["README", "sets"]
            assert prefixed == ["test.csv", "train.csv"]  # the prefix's files, at the top
        assert write_to(str(tmp_path / "data" / "new.txt")) >> pool in ("EROFS", "EACCES")
        written = [path for path in checkpoint(str(tmp_path / "runs")) @ pool if path is not None]
        assert written == [str(tmp_path / "runs" / "epoch-1.txt")]
        assert len(mounts_under(tmp_path)) == 3
    assert [phase.node for phase in phases if phase.phase == "volumes"] == [None]
    assert mounts_under(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == []  # the mount points it made are gone too
    with storage:
        assert storage.ls(runs) == ["run-1/epoch-1.txt"]
        assert storage.ls(data) == [
            "README",
            "sets/test.csv",
            "sets/train.csv",
        ]  # no write got through
    moto_server.drop_bucket(data)
    moto_server.drop_bucket(runs)


def test_a_block_that_raises_still_unmounts(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    volume = sky.Volume(
        bucket=bucket, mount=str(tmp_path / "data"), storage=storage_of(moto_server)
    )
    with pytest.raises(KeyError, match="on purpose"):
        with sky.Compute(nodes=1, volumes=[volume], options=QUIET):
            assert mounts_under(tmp_path) == [str(tmp_path / "data")]
            raise KeyError("on purpose")
    assert mounts_under(tmp_path) == []


def test_a_failing_mount_fails_the_open_and_leaves_nothing(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    """The second volume's bucket does not exist: opening fails naming its bucket, its
    mount point and S3's answer; the first volume, already mounted, is unmounted."""
    storage = storage_of(moto_server)
    good = sky.Volume(bucket=bucket, mount=str(tmp_path / "good"), storage=storage)
    wrong = sky.Volume(bucket="no-such-bucket-here", mount=str(tmp_path / "wrong"), storage=storage)
    with pytest.raises(VolumeMountError) as caught:
        with sky.Compute(nodes=2, volumes=[good, wrong], options=QUIET):
            pytest.fail("the pool opened")
    message = str(caught.value)
    assert "'no-such-bucket-here'" in message and str(tmp_path / "wrong") in message
    assert "NoSuchBucket" in message
    assert mounts_under(tmp_path) == []
    assert os.listdir(tmp_path) == []


def test_a_local_pool_mounts_a_storage_without_keys_with_this_machines_chain(
    moto_server: MotoServer, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing leaves this machine on a local pool, so a keyless storage needs no opt-in:
    the client mounts it with its own AWS credential chain (here, the environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_server.secret_key)
    moto_server.client().put_object(Bucket=bucket, Key="sets/train.csv", Body=b"a,b\n1,2\n")
    keyless = sky.Storage(moto_server.endpoint, path_style=True)
    volume = sky.Volume(bucket=bucket, mount=str(tmp_path / "data"), storage=keyless)
    with sky.Compute(nodes=1, volumes=[volume], options=QUIET) as pool:
        _, train, listed, _ = look(str(tmp_path / "data"), str(tmp_path / "data")) >> pool
        assert (train, listed) == ("a,b\n1,2\n", ["sets"])
    assert mounts_under(tmp_path) == []
