"""Massed Compute against the local fake of its VM API v1 with real test hosts: offers from
the GPU inventory (products in the regions with room only, GPUs read from the product
names, cents per hour); a pool's VM launched with the pool's key by name, the first
Ubuntu image and the boot script (root login first) as its startup command, the key
deleted after the VM is terminated; spot and bad fields refused naming the field; the key
from the argument or the environment; an orphan key removed by ``sky.gc``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_massedcompute import FakeMassedCompute
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.errors import CredentialsError

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
A6000 = sky.accelerators.RTX_A6000()


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("massedcompute", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeMassedCompute:
    assert isinstance(cloud.fake, FakeMassedCompute)
    return cloud.fake


def offered(provider: sky.MassedCompute, **fields: Any) -> list[tuple[str, float, str | None, str | None, float, float | None]]:
    return [
        (o.instance_type, o.hourly_price, o.region, o.accelerator, o.accelerator_count, o.accelerator_memory_gb)
        for o in provider.offers(sky.Spec(provider=provider, **fields))
    ]


def test_offers_come_from_the_inventory_of_the_regions_with_room(cloud: Cloud) -> None:
    provider = sky.MassedCompute()
    assert offered(provider, accelerator=A6000) == [
        ("gpu_1x_a6000", 0.62, "us-central-3", "RTX_A6000", 1.0, 48.0),
        ("gpu_2x_a6000", 1.24, "us-central-3", "RTX_A6000", 2.0, 48.0),
    ]
    assert offered(provider, accelerator=sky.accelerators.H100()) == [
        ("gpu_8x_h100", 18.8, "us-central-1", "H100", 8.0, 80.0),
    ], "the 1x H100 has no region with room"
    assert offered(provider, accelerator=sky.accelerators.A100(memory="80GB")) == [
        ("gpu_1x_a100_80gb", 1.72, "us-central-2", "A100", 1.0, 80.0),
    ]
    assert [o[2] for o in offered(sky.MassedCompute(region="us-central-2"), accelerator=sky.accelerators.L40S())] == [
        "us-central-2"
    ]
    assert provider.offers(sky.Spec(provider=provider, vcpus=2)) == [], "GPU VMs only"


@pytest.mark.rotated("massedcompute")
def test_a_pool_launches_its_vm_with_the_pools_key_and_boot_script(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(provider=sky.MassedCompute(), nodes=1, accelerator=A6000, options=OPTIONS)
    with pool:
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        [key_id] = [k for k, v in fake.keys.items() if v["name"] == name]
        [vm] = fake.live(name)
        body = vm.extra["launch"]
        assert (body["productName"], body["regionName"], body["imageId"], body["sshKeys"]) == (
            "gpu_1x_a6000", "us-central-3", 12, [name],
        ), "the first Ubuntu image; the key by its name"
        command = body["command"]
        assert command.startswith("#!/bin/bash\n") and "/root/.ssh/authorized_keys" in command.splitlines()[1]
        assert "shutdown -h" in command, "a VM no client takes over shuts down"
    assert cloud.leftovers(pool.id) == []
    calls = [(r.method, r.path) for r in fake.requests]
    assert calls.index(("POST", "/instance/terminate")) < calls.index(("DELETE", f"/ssh-keys/{key_id}"))


def test_spot_and_bad_fields_are_refused_naming_the_field(cloud: Cloud) -> None:
    provider = sky.MassedCompute()
    with pytest.raises(ValueError, match=r"Spec\.allocation='spot' is not valid: Massed Compute sells no spot"):
        provider.validate(sky.Spec(provider=provider, allocation="spot"), OPTIONS)
    for fields, named in [
        ({"region": "US Central"}, r"MassedCompute\.region='US Central'.*us-central-3"),
        ({"image_id": 0}, r"MassedCompute\.image_id=0.*GET /images"),
        ({"image_id": True}, r"MassedCompute\.image_id=True"),
        ({"image_id": sky.containers.cuda("12.8")}, r"MassedCompute\.image_id=.*virtual machines"),
        ({"api_key": 42}, r"MassedCompute\.api_key of type int.*MASSED_COMPUTE_API_KEY"),
    ]:
        with pytest.raises(ValueError, match=named):
            sky.MassedCompute(**fields)


def test_the_key_comes_from_the_argument_or_the_environment(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = sky.Spec(provider=sky.MassedCompute(), accelerator=A6000)
    with pytest.raises(CredentialsError, match=r"refused.*MassedCompute\(api_key=\.\.\.\) or \$MASSED_COMPUTE_API_KEY"):
        sky.MassedCompute(api_key="wrong").offers(spec)
    monkeypatch.delenv("MASSED_COMPUTE_API_KEY")
    assert sky.MassedCompute(api_key=TOKEN).offers(spec)
    with pytest.raises(CredentialsError, match=r"set \$MASSED_COMPUTE_API_KEY"):
        sky.MassedCompute().offers(spec)
    assert TOKEN not in repr(sky.MassedCompute(api_key=TOKEN))


def test_gc_removes_an_orphan_key(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    key_id = sky.MassedCompute().api().add_key(orphan, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted planted")
    assert ("ssh-key", key_id) in {(o.kind, o.id) for o in sky.gc([sky.MassedCompute()])}
    sky.gc([sky.MassedCompute()], delete=True)
    assert key_id not in fake.keys


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_MASSED_COMPUTE_API_URL", "http://vm.massedcompute.example.com/api/v1")
    monkeypatch.setenv("MASSED_COMPUTE_API_KEY", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_MASSED_COMPUTE_API_URL=.*https://"):
        sky.MassedCompute().api()
