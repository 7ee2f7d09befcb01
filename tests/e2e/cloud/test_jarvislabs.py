"""JarvisLabs against the local fake of its backend with real test hosts: offers from each
region's GPU types (1, 2, 4 and 8 GPUs up to those free, Europe 1 and 8; per-GPU prices
and spot prices times the count; GPU names read into the catalog; a VM template sees the
VM types, without spot); a spot pool's instance ordered with the pool's key registered on
the account and deleted after the instance is destroyed; spot VMs, unknown regions and
bad fields refused naming the field; the token from the argument, the environment or the
jl CLI's config file; an orphan key removed by ``sky.gc``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_jarvislabs import FakeJarvisLabs
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.errors import CredentialsError

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("jarvislabs", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeJarvisLabs:
    assert isinstance(cloud.fake, FakeJarvisLabs)
    return cloud.fake


def offered(provider: sky.JarvisLabs, **fields: Any) -> list[tuple[str, float, bool, str | None, str | None, float | None]]:
    return [
        (o.instance_type, round(o.hourly_price, 4), o.spot, o.region, o.accelerator, o.accelerator_memory_gb)
        for o in provider.offers(sky.Spec(provider=provider, **fields))
    ]


def test_offers_come_from_the_gpu_types_free_in_each_region(cloud: Cloud) -> None:
    provider = sky.JarvisLabs()
    assert offered(provider, accelerator=sky.accelerators.L4(count=2), allocation="on-demand") == [
        ("2x L4", 0.88, False, "india-noida-01", "L4", 24.0),
        ("4x L4", 1.76, False, "india-noida-01", "L4", 24.0),
    ], "up to the four free"
    assert offered(provider, accelerator=sky.accelerators.A100(memory="40GB"), allocation="cheapest") == [
        ("1x A100", 0.79, True, "india-chennai-01", "A100", 40.0),
        ("1x A100", 1.29, False, "india-chennai-01", "A100", 40.0),
    ], "one A100 free: no 2x; JarvisLabs' A100 has 40 GB"
    assert offered(provider, accelerator=sky.accelerators.RTX_A6000(), allocation="on-demand") == [
        ("1x A6000", 0.79, False, "india-noida-01", "RTX_A6000", 48.0),
        ("2x A6000", 1.58, False, "india-noida-01", "RTX_A6000", 48.0),
    ], "the VM type is not a container's"
    assert [o[0] for o in offered(provider, accelerator=sky.accelerators.H100(count=8))] == ["8x H100"], (
        "Europe rents 1 or 8"
    )
    assert offered(sky.JarvisLabs(template="vm"), accelerator=sky.accelerators.RTX_A6000(), allocation="cheapest") == [
        ("1x A6000", 0.89, False, "india-noida-01", "RTX_A6000", 48.0),
        ("2x A6000", 1.78, False, "india-noida-01", "RTX_A6000", 48.0),
    ], "a VM template sees the VM types, without spot"
    assert offered(sky.JarvisLabs(region="india-chennai-01"), accelerator=sky.accelerators.L4()) == []
    assert offered(provider, accelerator=sky.accelerators.Quadro_RTX_5000(), allocation="on-demand")[0] == (
        "1x RTX5000", 0.39, False, "india-chennai-01", "Quadro_RTX_5000", 16.0,
    ), "its RTX5000 is the catalog's Quadro RTX 5000"
    assert provider.offers(sky.Spec(provider=provider, vcpus=2)) == [], "GPU instances only"


@pytest.mark.rotated("jarvislabs")
def test_a_spot_pool_orders_its_instance_with_the_pools_key(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    a5000 = sky.accelerators.RTX_A5000()
    pool = sky.Compute(provider=sky.JarvisLabs(), nodes=1, accelerator=a5000, allocation="spot", options=OPTIONS)
    with pool:
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        [key_id] = [k for k, v in fake.keys.items() if v["name"] == name]
        [instance] = fake.live(name)
        assert instance.spot and instance.public_key == fake.keys[key_id]["ssh_key"], "the account's key reached it"
        body = instance.extra["create"]
        assert (body["gpu_type"], body["num_gpus"], body["region"], body["is_spot"], body["hdd"], body["duration"]) == (
            "A5000", 1, "india-chennai-01", True, 40, "hour",
        )
        assert body["name"] == instance.name and instance.extra["template"] == "pytorch"
    assert cloud.leftovers(pool.id) == []
    posted = [r.path for r in fake.requests if r.method in ("POST", "DELETE")]
    assert posted.index("/misc/destroy") < posted.index(f"/ssh/{key_id}"), "the key goes after the instance"


def test_spot_vms_unknown_regions_and_bad_fields_are_refused_naming_the_field(cloud: Cloud) -> None:
    vm = sky.JarvisLabs(template="vm")
    with pytest.raises(ValueError, match=r"Spec\.allocation='spot' is not valid: JarvisLabs sells spot containers only"):
        vm.validate(sky.Spec(provider=vm, allocation="spot"), OPTIONS)
    provider = sky.JarvisLabs()
    with pytest.raises(ValueError, match=r"Spec\.region='us-east-1' is not valid: JarvisLabs regions are india-noida-01, india-chennai-01"):
        provider.validate(sky.Spec(provider=provider, region="us-east-1"), OPTIONS)
    for fields, named in [
        ({"region": "IN1"}, r"JarvisLabs\.region='IN1'.*'india-chennai-01'"),
        ({"template": "PyTorch 2"}, r"JarvisLabs\.template='PyTorch 2'.*jl templates"),
        ({"template": sky.containers.cuda("12.8")}, r"JarvisLabs\.template=.*virtual machines"),
        ({"api_key": 42}, r"JarvisLabs\.api_key of type int.*JL_API_KEY"),
    ]:
        with pytest.raises(ValueError, match=named):
            sky.JarvisLabs(**fields)


def test_the_token_comes_from_the_argument_the_environment_or_the_cli_config(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = sky.Spec(provider=sky.JarvisLabs(), accelerator=sky.accelerators.L4())
    with pytest.raises(CredentialsError, match=r"refused.*JarvisLabs\(api_key=\.\.\.\) or \$JL_API_KEY"):
        sky.JarvisLabs(api_key="wrong").offers(spec)
    monkeypatch.delenv("JL_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sky.JarvisLabs(api_key=TOKEN).offers(spec)
    with pytest.raises(CredentialsError, match=r"set \$JL_API_KEY \(or ~/\.config/jl/config\.toml\)"):
        sky.JarvisLabs().offers(spec)
    config = tmp_path / ".config" / "jl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[auth]\ntoken = "{TOKEN}"\n')
    assert sky.JarvisLabs().offers(spec), "the jl CLI's config file"
    assert TOKEN not in repr(sky.JarvisLabs(api_key=TOKEN))


def test_an_instance_is_reached_as_the_user_its_ssh_str_names(cloud: Cloud) -> None:
    fake = cloud.fake
    assert isinstance(fake, FakeJarvisLabs)
    vm, container = fake.plant(naming.machine_name("f" * 32, 0), "A6000"), fake.plant(naming.machine_name("f" * 32, 1), "A6000")
    vm.extra["template"] = "vm"
    fake.vm_user = "ubuntu"
    try:
        api = sky.JarvisLabs().api()
        assert [(m.ssh_host, m.ssh_user) for m in (api.get(vm.id), api.get(container.id)) if m is not None] == [
            (vm.address, "ubuntu"), (container.address, "root"),
        ]
    finally:
        fake.vm_user = "root"
        vm.state = container.state = "deleted"


def test_gc_removes_an_orphan_key(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    key_id = sky.JarvisLabs().api().add_key(orphan, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted planted")
    assert ("ssh-key", key_id) in {(o.kind, o.id) for o in sky.gc([sky.JarvisLabs()])}
    sky.gc([sky.JarvisLabs()], delete=True)
    assert key_id not in fake.keys


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_JARVISLABS_API_URL", "http://backend.jarvislabs.example.net")
    monkeypatch.setenv("JL_API_KEY", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_JARVISLABS_API_URL=.*https://"):
        sky.JarvisLabs().api()
