"""Spec.volumes: what a Spec accepts, which storage each volume gets (its own, else the
provider's, else a clear refusal), which credentials a node gets (the storage's keys,
this machine's AWS chain only where the storage opts in), how volumes travel to a node,
and the bootstrap's s3fs step. No mounts here (tests/e2e/test_pool_volumes.py mounts for
real)."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import tempfile

import pytest
from fake_cluster import FakeProvider

import skyward as sky
from skyward.image.script import Artifacts, render
from skyward.providers.base import with_default_storage
from skyward.storage import StorageCredentialsError, VolumeCredentialsError
from skyward.storage.client import ResolvedStorage
from skyward.storage.pool_volumes import NodeVolume, decode, encode, resolved

STORAGE = sky.Storage(
    "http://127.0.0.1:9000", access_key="AKID", secret_key="s3cr3t", path_style=True
)
DATA = sky.Volume(bucket="my-data", mount="/data", storage=STORAGE)


def test_spec_keeps_volumes_as_a_tuple_and_takes_a_single_one() -> None:
    other = sky.Volume(bucket="my-runs", mount="/runs", read_only=False, storage=STORAGE)
    assert sky.Spec(provider=sky.Local(), volumes=[DATA, other]).volumes == (DATA, other)
    assert sky.Spec(provider=sky.Local(), volumes=DATA).volumes == (DATA,)
    assert sky.Spec(provider=sky.Local()).volumes == ()


@pytest.mark.parametrize(
    "item", ["my-data", {"bucket": "my-data", "mount": "/data"}, ("my-data", "/data"), None]
)
def test_spec_refuses_items_that_are_not_volumes(item: object) -> None:
    with pytest.raises(ValueError, match=r"Spec\.volumes\[1\]=.*must be a sky\.Volume") as caught:
        sky.Spec(provider=sky.Local(), volumes=[DATA, item])
    assert type(item).__name__ in str(caught.value)


@pytest.mark.parametrize("value", ["my-data", b"x", 3, {"a": 1}])
def test_spec_refuses_a_volumes_value_that_is_not_a_list(value: object) -> None:
    with pytest.raises(ValueError, match=r"Spec\.volumes=.*give a list of sky\.Volume"):
        sky.Spec(provider=sky.Local(), volumes=value)


@pytest.mark.parametrize("mount", ["/data", "/data/", "/data/sub", "/data/a/b"])
def test_spec_refuses_mount_points_that_coincide_or_nest(mount: str) -> None:
    with pytest.raises(
        ValueError, match=r"Spec\.volumes\[1\]=.*same or one is inside the other"
    ) as caught:
        sky.Spec(provider=sky.Local(), volumes=[DATA, sky.Volume(bucket="other-b", mount=mount)])
    assert "/data" in str(caught.value) and "'my-data'" in str(caught.value)


def test_side_by_side_mount_points_are_fine() -> None:
    volumes = [
        DATA,
        sky.Volume(bucket="b-2", mount="/data2"),
        sky.Volume(bucket="b-3", mount="/srv/data"),
    ]
    assert len(sky.Spec(provider=sky.Local(), volumes=volumes).volumes) == 3


@pytest.mark.parametrize(
    "provider",
    [sky.Local(), sky.SSH(hosts=["10.0.0.5"])],
    ids=["Local", "SSH"],
)
def test_providers_without_storage_refuse_a_volume_without_one(provider: object) -> None:
    spec = sky.Spec(provider=provider, volumes=[DATA, sky.Volume(bucket="my-runs", mount="/runs")])
    with pytest.raises(ValueError) as caught:
        with_default_storage(spec)
    message = str(caught.value)
    assert message.startswith("Spec.volumes[1].storage=None is not valid")
    assert f"sky.{type(provider).__name__}() has no object storage" in message
    assert "'my-runs'" in message and "storage=sky.Storage(" in message


def test_opening_a_local_pool_refuses_a_volume_without_storage_before_starting_anything() -> None:
    volume = sky.Volume(bucket="my-runs", mount="/runs")
    with pytest.raises(
        ValueError, match=r"Spec\.volumes\[0\]\.storage=None.*sky\.Local\(\) has no object storage"
    ):
        with sky.Compute(
            nodes=1, volumes=[volume], options=sky.Options(console=False, logging=False)
        ):
            pass


def test_volumes_with_their_own_storage_are_kept() -> None:
    spec = sky.Spec(provider=sky.Local(), volumes=[DATA])
    assert with_default_storage(spec) is spec


def test_aws_fills_in_s3_of_the_pool_region_opted_in_to_the_client_chain() -> None:
    bare = sky.Volume(bucket="my-runs", mount="/runs")
    filled = with_default_storage(
        sky.Spec(provider=sky.AWS(region="eu-west-1"), volumes=[bare, DATA])
    ).volumes
    assert filled[0].storage == sky.storage.S3(region="eu-west-1", ship_client_credentials=True)
    assert filled[1] == DATA
    elsewhere = sky.Spec(provider=sky.AWS(region="eu-west-1"), region="us-west-2", volumes=[bare])
    assert with_default_storage(elsewhere).volumes[0].storage == sky.storage.S3(
        region="us-west-2", ship_client_credentials=True
    )


@pytest.mark.parametrize(
    "provider", [sky.SSH(hosts=["10.0.0.5"]), sky.AWS(region="eu-west-1")], ids=["SSH", "AWS"]
)
def test_remote_pools_refuse_a_storage_without_keys_that_does_not_opt_in(
    provider: object,
) -> None:
    keyless = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    with pytest.raises(VolumeCredentialsError) as caught:
        with_default_storage(sky.Spec(provider=provider, volumes=[DATA, keyless]))
    error = caught.value
    assert isinstance(error, StorageCredentialsError) and isinstance(error, ValueError)
    assert (error.index, error.bucket, error.mount) == (1, "my-runs", "/runs")
    message = str(error)
    assert message.startswith("Spec.volumes[1] (bucket 'my-runs' at /runs) has a storage without keys")
    assert "https://s3.eu-west-1.amazonaws.com" in message
    assert "pass access_key= and secret_key= scoped to bucket 'my-runs'" in message
    assert "ship_client_credentials=True" in message


def test_a_keyless_storage_elsewhere_than_aws_is_refused_without_offering_the_chain() -> None:
    keyless = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.Storage("http://10.0.0.9:9000"))
    with pytest.raises(VolumeCredentialsError) as caught:
        with_default_storage(sky.Spec(provider=sky.SSH(hosts=["10.0.0.5"]), volumes=[keyless]))
    message = str(caught.value)
    assert "Spec.volumes[0]" in message and "http://10.0.0.9:9000" in message
    assert "never sent to another service" in message
    assert "ship_client_credentials" not in message


def test_a_local_pool_takes_a_storage_without_keys() -> None:
    keyless = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    spec = sky.Spec(provider=sky.Local(), volumes=[keyless])
    assert with_default_storage(spec) is spec


def test_opening_an_ssh_pool_refuses_a_storage_without_keys_before_connecting() -> None:
    keyless = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    with pytest.raises(VolumeCredentialsError, match=r"Spec\.volumes\[0\] \(bucket 'my-runs'"):
        with sky.Compute(  # 192.0.2.1 (TEST-NET-1) answers nothing: connecting would hang
            provider=sky.SSH(hosts=["192.0.2.1"]), nodes=1, volumes=[keyless],
            options=sky.Options(console=False, logging=False, ssh_timeout=600),
        ):
            pass


def test_providers_that_mount_nothing_still_refuse_volumes() -> None:
    options = sky.Options()
    with pytest.raises(NotImplementedError, match="mount no volumes"):
        FakeProvider().validate(sky.Spec(provider=FakeProvider(), volumes=[DATA]), options)
    with pytest.raises(NotImplementedError, match=r"Spec\.volumes.*sky\.Ray\(\)"):
        sky.Ray(address="127.0.0.1:6379").validate(
            sky.Spec(provider=sky.Ray(address="127.0.0.1:6379"), volumes=[DATA]), options
        )


def test_node_volumes_travel_as_one_json_line_and_hide_their_keys() -> None:
    storage = ResolvedStorage("http://10.0.0.1:9000", "us-east-1", "AKID", "s3cr3t", True, "t0ken")
    items = (
        NodeVolume(sky.Volume(bucket="my-data", mount="/data", prefix="sets/"), storage),
        NodeVolume(sky.Volume(bucket="my-runs", mount="/runs", read_only=False), storage),
    )
    line = encode(items)
    assert "\n" not in line
    assert decode(line) == items
    assert pickle.loads(pickle.dumps(items)) == items
    for secret in ("AKID", "s3cr3t", "t0ken"):
        assert secret not in repr(items)


class Lease:
    """A key minted on demand: counts the leases taken and handed back."""

    def __init__(self, key: str) -> None:
        self.key, self.taken, self.released = key, 0, 0

    def __call__(self) -> str:
        self.taken += 1
        return self.key

    def release(self) -> None:
        self.released += 1


def test_each_storage_is_resolved_once_and_held_for_the_block() -> None:
    access, secret = Lease("AKLEASE"), Lease("leased-secret")
    storage = sky.Storage("http://127.0.0.1:9000", access_key=access, secret_key=secret)
    volumes = [
        sky.Volume(bucket="b-1", mount="/one", storage=storage),
        sky.Volume(bucket="b-2", mount="/two", storage=storage),
        DATA,
    ]
    with resolved(volumes) as items:
        assert (access.taken, access.released) == (1, 0)
        assert [item.storage.access_key for item in items] == ["AKLEASE", "AKLEASE", "AKID"]
        assert all(item.volume.storage is None for item in items)
        assert items[0].volume == sky.Volume(bucket="b-1", mount="/one")
    assert (access.released, secret.released) == (1, 1)


def chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's AWS credential chain: keys in the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "chain-token")


CHAIN = ResolvedStorage(
    "https://s3.eu-west-1.amazonaws.com", "eu-west-1", "AKIACHAIN", "chain-secret", False,
    "chain-token",
)


def test_remote_nodes_get_no_credentials_for_a_storage_without_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused before any storage is opened (the lease of the first is never taken),
    though this machine has a credential chain to give."""
    chain(monkeypatch)
    access, secret = Lease("AKLEASE"), Lease("leased-secret")
    leased = sky.Storage("http://127.0.0.1:9000", access_key=access, secret_key=secret)
    volumes = [
        sky.Volume(bucket="b-1", mount="/one", storage=leased),
        sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1")),
    ]
    with pytest.raises(VolumeCredentialsError, match=r"Spec\.volumes\[1\] \(bucket 'my-runs'"):
        with resolved(volumes):
            pass
    assert (access.taken, secret.taken) == (0, 0)


def test_a_storage_that_opts_in_ships_this_machines_credential_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain(monkeypatch)
    storage = sky.storage.S3(region="eu-west-1", ship_client_credentials=True)
    with resolved([sky.Volume(bucket="my-runs", mount="/runs", storage=storage)]) as items:
        assert items[0].storage == CHAIN


def test_a_local_pool_mounts_a_storage_without_keys_with_the_chain_of_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain(monkeypatch)
    volume = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    with resolved([volume], here=True) as items:
        assert items[0].storage == CHAIN


def test_no_credentials_anywhere_is_refused_naming_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    storage = sky.storage.S3(region="eu-west-1", ship_client_credentials=True)
    volume = sky.Volume(bucket="my-runs", mount="/runs", storage=storage)
    with pytest.raises(
        StorageCredentialsError,
        match=r"no credentials for https://s3\.eu-west-1\.amazonaws\.com.*access_key=",
    ):
        with resolved([volume]):
            pass


def test_the_bootstrap_prepares_s3fs_and_mount_points_only_for_pools_with_volumes() -> None:
    artifacts = Artifacts("skyward-0.1.0-py3-none-any.whl", "key", None, "")
    script = render(sky.Image(), artifacts, "/tmp/pool", 60, mount_points=("/data", "/my runs"))
    assert "command -v s3fs >/dev/null 2>&1 || install_apt s3fs" in script
    assert "prepare_mount_points /data '/my runs'" in script
    plain = render(sky.Image(), artifacts, "/tmp/pool", 60)
    assert "install_apt s3fs" not in plain and "prepare_mount_points /" not in plain


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root and runuser"
)
def test_a_non_root_user_gets_sudo_only_for_mount_points_it_cannot_create() -> None:
    """``prepare_mount_points`` run as nobody, with a sudo that records its arguments:
    sudo makes only the mount point under a directory nobody cannot write."""
    artifacts = Artifacts("skyward-0.1.0-py3-none-any.whl", "key", None, "")
    script = render(sky.Image(), artifacts, "/tmp/pool", 60, mount_points=("/x",))
    functions = "\n".join(
        re.search(rf"^{name}\(\) \{{.*?^\}}", script, re.S | re.M).group(0)  # type: ignore[union-attr]
        for name in ("run", "prepare_mount_points")
    )
    root = tempfile.mkdtemp(prefix="skyward-points-", dir="/tmp")
    try:
        os.chmod(root, 0o755)
        own, locked, shim = (os.path.join(root, name) for name in ("own", "locked", "bin"))
        for directory in (own, locked, shim):
            os.mkdir(directory, 0o755)
        os.chown(own, 65534, 65534)
        with open(os.path.join(shim, "sudo"), "w") as handle:
            handle.write(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {root}/own/sudo.log\n")
        os.chmod(os.path.join(shim, "sudo"), 0o755)
        points = [f"{own}/new/deeper", f"{locked}/data", own]
        done = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                "env",
                f"PATH={shim}:/usr/bin:/bin",
                "bash",
                "-c",
                f'{functions}\nprepare_mount_points "$@"',
                "bash",
                *points,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        with open(f"{own}/sudo.log") as log:
            assert log.read().splitlines() == [f"-n install -d -o 65534 -g 65534 {locked}/data"]
        assert not os.path.exists(f"{own}/new")  # left to mount_volume, which removes it after
    finally:
        shutil.rmtree(root)
