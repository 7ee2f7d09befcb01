"""Spec.volumes: what a Spec accepts, which storage each volume gets (its own, else the
provider's, else a clear refusal), how volumes travel to a node, and the bootstrap's
s3fs step. No mounts here (tests/e2e/test_pool_volumes.py mounts for real)."""

from __future__ import annotations

import pickle

import pytest
from fake_cluster import FakeProvider

import skyward as sky
from skyward.providers.base import with_default_storage
from skyward.providers.ssh.image_script import Artifacts, render
from skyward.storage import StorageCredentialsError
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


def test_aws_fills_in_s3_of_the_pool_region() -> None:
    bare = sky.Volume(bucket="my-runs", mount="/runs")
    filled = with_default_storage(
        sky.Spec(provider=sky.AWS(region="eu-west-1"), volumes=[bare, DATA])
    ).volumes
    assert filled[0].storage == sky.storage.S3(region="eu-west-1")
    assert filled[1] == DATA
    elsewhere = sky.Spec(provider=sky.AWS(region="eu-west-1"), region="us-west-2", volumes=[bare])
    assert with_default_storage(elsewhere).volumes[0].storage == sky.storage.S3(region="us-west-2")


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


def test_a_storage_without_keys_gets_this_machines_credential_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "chain-token")
    volume = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    with resolved([volume]) as items:
        assert items[0].storage == ResolvedStorage(
            "https://s3.eu-west-1.amazonaws.com",
            "eu-west-1",
            "AKIACHAIN",
            "chain-secret",
            False,
            "chain-token",
        )


def test_no_credentials_anywhere_is_refused_naming_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", f"{tmp_path}/none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    volume = sky.Volume(bucket="my-runs", mount="/runs", storage=sky.storage.S3(region="eu-west-1"))
    with pytest.raises(
        StorageCredentialsError,
        match=r"no credentials for https://s3\.eu-west-1\.amazonaws\.com.*access_key=",
    ):
        with resolved([volume]):
            pass


def test_the_bootstrap_installs_s3fs_only_for_pools_with_volumes() -> None:
    artifacts = Artifacts("skyward-0.1.0-py3-none-any.whl", "key", None, "")
    step = "command -v s3fs >/dev/null 2>&1 || install_apt s3fs"
    assert step in render(sky.Image(), artifacts, "/tmp/pool", 60, fuse=True)
    assert "s3fs" not in render(sky.Image(), artifacts, "/tmp/pool", 60)
