"""TensorDock against the local fake of its v2 API with real test hosts: offers from the
locations' GPUs priced as TensorDock bills them (GPUs, vCPUs, memory, disk), GPU names
read into the catalog, locations without port forwarding left out, ``region`` keeping
places; a pool whose VM is reached through the port its host forwards to port 22 (the
only port forwarded), with its key and boot script in the order, deleted on close; the
token from ``api_token=`` or the environment; spot and bad fields refused naming the
field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_tensordock import FakeTensorDock
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud.errors import CredentialsError
from skyward.providers.tensordock.api import BOOT_SCRIPT, accelerator, ssh_port
from skyward.providers.tensordock.provider import ROOT_LOGIN

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
RTX_4090 = sky.accelerators.RTX_4090()
AUSTIN, HELSINKI = "Austin, Texas, United States", "Helsinki, Uusimaa, Finland"


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("tensordock", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeTensorDock:
    assert isinstance(cloud.fake, FakeTensorDock)
    return cloud.fake


def test_offers_are_the_locations_gpus_priced_as_tensordock_bills(cloud: Cloud) -> None:
    provider = sky.TensorDock()
    offers = provider.offers(sky.Spec(provider=provider, accelerator=RTX_4090))
    seen = [(o.instance_type, o.region, round(o.hourly_price, 4)) for o in offers]
    # 0.35/GPU + 0.003/vCPU + 0.002/GB + 100 GB x 0.00005, memory 4 GB per vCPU
    assert seen[:2] == [
        ("1x geforcertx4090-pcie-24gb 4vCPU 16GB", AUSTIN, 0.399),
        ("1x geforcertx4090-pcie-24gb 8vCPU 32GB", AUSTIN, 0.443),
    ]
    assert {(o.accelerator, o.accelerator_memory_gb) for o in offers} == {("RTX_4090", 24)}
    assert {o.region for o in offers} == {AUSTIN, HELSINKI}
    assert not any(o.spot for o in offers)
    pair = provider.offers(
        sky.Spec(provider=provider, accelerator=sky.accelerators.RTX_4090(count=2), vcpus=20)
    )
    assert [(o.instance_type, o.region) for o in pair] == [
        ("2x geforcertx4090-pcie-24gb 32vCPU 128GB", AUSTIN)
    ], "2 GPUs only where 2 can be deployed; sizes capped by the location's maximum"
    finland = sky.TensorDock(region="finland")
    assert {o.region for o in finland.offers(sky.Spec(provider=finland, accelerator=RTX_4090))} == {
        HELSINKI
    }
    assert (
        provider.offers(sky.Spec(provider=provider, accelerator=sky.accelerators.RTX_A6000())) == []
    ), "a location that forwards no ports is not offered"
    assert provider.offers(sky.Spec(provider=provider, vcpus=2)) == [], "GPU machines only"
    [h100] = provider.offers(
        sky.Spec(provider=provider, accelerator=sky.accelerators.H100(count=8), vcpus=128)
    )
    assert (h100.accelerator, h100.accelerator_count, h100.vcpus, h100.memory_gb) == (
        "H100",
        8,
        128,
        296,
    )


@pytest.mark.rotated("tensordock")
def test_a_pool_is_reached_through_its_forwarded_port_and_deleted_on_close(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    fake.forwarding = True
    try:
        pool = sky.Compute(
            provider=sky.TensorDock(image_name="ubuntu2204"),
            nodes=1,
            accelerator=RTX_4090,
            disk_gb=50,  # 100 GB ordered
            options=OPTIONS,
        )
        with pool:
            assert square(6) >> pool == 36
            [machine] = fake.live(pool.id[:12])
            forward = fake.forwards[machine.id]
            assert forward.port != 22 and forward.target == (machine.address, 22)
            [body] = [
                b
                for b in fake.bodies("POST", "/instances")
                if b["data"]["attributes"]["name"] == machine.name
            ]
            attributes = body["data"]["attributes"]
            assert attributes["port_forwards"] == [{"internal_port": 22, "external_port": 0}], (
                "SSH only"
            )
            assert attributes["ssh_key"].startswith("ssh-") and "ssh_key_id" not in attributes
            assert attributes["image"] == "ubuntu2204"
            assert attributes["location_id"] == "8f2b1d4e-austin"
            assert attributes["resources"] == {
                "vcpu_count": 4,
                "ram_gb": 16,
                "storage_gb": 100,
                "gpus": {"geforcertx4090-pcie-24gb": {"count": 1}},
            }
            [script] = attributes["cloud_init"]["write_files"]
            assert script["path"] == BOOT_SCRIPT and script["content"].startswith(
                "#!/bin/bash\n" + ROOT_LOGIN
            )
            assert attributes["cloud_init"]["runcmd"] == [f"bash {BOOT_SCRIPT}"]
        assert cloud.leftovers(pool.id) == []
        assert [r.path for r in fake.requests if r.method == "DELETE"][
            -1
        ] == f"/instances/{machine.id}"
    finally:
        fake.forwarding = False


def test_spot_is_refused_naming_the_allocation() -> None:
    provider = sky.TensorDock()
    with pytest.raises(
        ValueError, match=r"Spec\.allocation='spot' is not valid: TensorDock sells no spot"
    ):
        provider.validate(
            sky.Spec(provider=provider, accelerator=RTX_4090, allocation="spot"), OPTIONS
        )


def test_the_token_comes_from_the_argument_or_the_environment(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    def spec(provider: sky.TensorDock) -> sky.Spec:
        return sky.Spec(provider=provider, accelerator=RTX_4090)

    wrong = sky.TensorDock(api_token="wrong")
    with pytest.raises(
        CredentialsError, match=r"refused.*TensorDock\(api_token=\.\.\.\) or \$TENSORDOCK_API_TOKEN"
    ):
        wrong.offers(spec(wrong))
    monkeypatch.delenv("TENSORDOCK_API_TOKEN")
    given = sky.TensorDock(api_token=TOKEN)
    assert given.offers(spec(given))
    with pytest.raises(CredentialsError, match=r"set \$TENSORDOCK_API_TOKEN"):
        sky.TensorDock().offers(spec(sky.TensorDock()))
    assert TOKEN not in repr(given)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"image_name": ""}, r"TensorDock\.image_name='' is not valid: .*ubuntu2404"),
        ({"image_name": sky.containers.cuda("12.8")}, r"TensorDock\.image_name=.*virtual machines"),
        ({"region": " "}, r"TensorDock\.region=' ' is not valid"),
        ({"api_token": 42}, r"TensorDock\.api_token of type int.*TENSORDOCK_API_TOKEN"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        sky.TensorDock(**fields)


def test_the_ssh_port_and_gpu_names_are_read_from_either_shape() -> None:
    assert (
        ssh_port(
            [
                {"internal_port": 80, "external_port": 20001},
                {"internal_port": 22, "external_port": 20000},
            ]
        )
        == 20000
    )
    assert ssh_port({"22": 34567}) == 34567
    assert ssh_port([{"internal_port": 80, "external_port": 20001}]) is None
    assert ssh_port(None) is None
    assert accelerator("geforcertx4090-pcie-24gb") == ("RTX 4090 PCIE", 24.0)
    assert accelerator("rtxa6000-pcie-48gb") == ("RTX A6000 PCIE", 48.0)
    assert accelerator("h100-sxm5-80gb") == ("H100 SXM5", 80.0)
    assert accelerator("mystery-gpu") == ("mystery-gpu", None)


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_TENSORDOCK_API_URL", "http://dashboard.example.com/api/v2")
    monkeypatch.setenv("TENSORDOCK_API_TOKEN", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_TENSORDOCK_API_URL=.*https://"):
        sky.TensorDock().api()
