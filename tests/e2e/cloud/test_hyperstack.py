"""Hyperstack against the local fake of its Infrahub API with real test hosts: offers
priced from the pricebook (spot flavors as spot, flavors out of stock or without a price
left out, GPU names read into the catalog); a pool in an environment of its own whose
VMs admit SSH from anywhere and the rest from the private network only, torn down VMs
first, then the keypair, then the environment; the API key from ``api_key=`` or the
environment; orphan keypairs found and removed with their environment; bad fields
refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_hyperstack import FakeHyperstack
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.errors import CredentialsError
from skyward.providers.hyperstack.api import PRIVATE_NETWORK
from skyward.providers.hyperstack.provider import ROOT_LOGIN

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
A6000 = sky.accelerators.RTX_A6000()


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("hyperstack", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeHyperstack:
    assert isinstance(cloud.fake, FakeHyperstack)
    return cloud.fake


def test_offers_come_from_flavors_in_stock_priced_by_the_pricebook(cloud: Cloud) -> None:
    provider = sky.Hyperstack()
    offers = provider.offers(sky.Spec(provider=provider, accelerator=A6000))
    assert [(o.instance_type, o.hourly_price, o.spot, o.accelerator) for o in offers] == [
        ("n3-RTX-A6000x1-spot", 0.25, True, "RTX_A6000"),
        ("n3-RTX-A6000x1", 0.50, False, "RTX_A6000"),
        ("n3-RTX-A6000x2", 1.00, False, "RTX_A6000"),
    ]
    pair = provider.offers(
        sky.Spec(provider=provider, accelerator=sky.accelerators.RTX_A6000(count=2))
    )
    assert [(o.instance_type, o.hourly_price) for o in pair] == [("n3-RTX-A6000x2", 1.0)], (
        "price per GPU x GPUs"
    )
    assert (
        provider.offers(sky.Spec(provider=provider, accelerator=sky.accelerators.H100())) == []
    ), "out of stock"
    assert provider.offers(sky.Spec(provider=provider, vcpus=2)) == [], (
        "a flavor without a price is not sold"
    )
    norway = sky.Hyperstack(region="NORWAY-1")
    [a100] = norway.offers(sky.Spec(provider=norway, accelerator=sky.accelerators.A100()))
    assert (a100.instance_type, a100.region, a100.accelerator, a100.accelerator_memory_gb) == (
        "n3-A100x1",
        "NORWAY-1",
        "A100",
        80.0,
    )


@pytest.mark.rotated("hyperstack")
def test_a_pool_has_its_own_environment_and_admits_only_ssh_from_outside(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(
        provider=sky.Hyperstack(),
        nodes=1,
        accelerator=A6000,
        allocation="on-demand",
        options=OPTIONS,
    )
    with pool:
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        assert [e["region"] for e in fake.environments.values() if e["name"] == name] == [
            "CANADA-1"
        ]
        assert [k["environment"]["name"] for k in fake.keys.values() if k["name"] == name] == [name]
        [body] = [
            b
            for b in fake.bodies("POST", "/core/virtual-machines")
            if b["environment_name"] == name
        ]
        assert (body["key_name"], body["flavor_name"], body["assign_floating_ip"]) == (
            name,
            "n3-RTX-A6000x1",
            True,
        )
        assert body["image_name"] == "Ubuntu Server 24.04 LTS R570 CUDA 12.8", (
            "the newest Ubuntu with CUDA"
        )
        assert body["user_data"].startswith("#!/bin/bash\n" + ROOT_LOGIN)
        rules = [
            (r["direction"], r["protocol"], r["remote_ip_prefix"], r.get("port_range_min"))
            for r in body["security_rules"]
        ]
        assert rules == [
            ("ingress", "tcp", "0.0.0.0/0", 22),
            ("ingress", "tcp", PRIVATE_NETWORK, None),
            ("ingress", "udp", PRIVATE_NETWORK, None),
        ], "inbound: SSH from anywhere, everything else from the private network only"
        posted = [r.path for r in fake.requests if r.method == "POST"]
        assert (
            posted.index("/core/environments")
            < posted.index("/core/keypairs")
            < posted.index("/core/virtual-machines")
        )
    assert cloud.leftovers(pool.id) == []
    deletions = [r.path.rsplit("/", 2)[-2] for r in fake.requests if r.method == "DELETE"]
    assert deletions[-3:] == ["virtual-machines", "keypair", "environments"], (
        "VMs, then the keypair, then the environment"
    )


def test_the_api_key_comes_from_the_argument_or_the_environment(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(
        CredentialsError, match=r"refused.*Hyperstack\(api_key=\.\.\.\) or \$HYPERSTACK_API_KEY"
    ):
        sky.Hyperstack(api_key="wrong").offers(spec_of(sky.Hyperstack(api_key="wrong")))
    monkeypatch.delenv("HYPERSTACK_API_KEY")
    assert sky.Hyperstack(api_key=TOKEN).offers(spec_of(sky.Hyperstack(api_key=TOKEN)))
    with pytest.raises(CredentialsError, match=r"set \$HYPERSTACK_API_KEY"):
        sky.Hyperstack().offers(spec_of(sky.Hyperstack()))
    assert TOKEN not in repr(sky.Hyperstack(api_key=TOKEN))


def test_gc_removes_an_orphan_keypair_with_its_environment(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    api = sky.Hyperstack().api()
    key_id = api.add_key(orphan, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted planted")
    found = sky.gc([sky.Hyperstack()])
    assert ("ssh-key", key_id) in {(o.kind, o.id) for o in found}
    sky.gc([sky.Hyperstack()], delete=True)
    assert key_id not in fake.keys
    assert orphan not in {e["name"] for e in fake.environments.values()}


def spec_of(provider: sky.Hyperstack) -> sky.Spec:
    return sky.Spec(provider=provider, accelerator=A6000)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"region": "MARS-1"}, r"Hyperstack\.region='MARS-1'.*CANADA-1"),
        ({"image_name": ""}, r"Hyperstack\.image_name=''"),
        ({"image_name": sky.containers.cuda("12.8")}, r"Hyperstack\.image_name=.*virtual machines"),
        ({"api_key": 42}, r"Hyperstack\.api_key of type int.*HYPERSTACK_API_KEY"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        sky.Hyperstack(**fields)


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_HYPERSTACK_API_URL", "http://infrahub.example.com/v1")
    monkeypatch.setenv("HYPERSTACK_API_KEY", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_HYPERSTACK_API_URL=.*https://"):
        sky.Hyperstack().api()
