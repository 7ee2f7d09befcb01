"""Vultr against the local fake of its API v2 with real test hosts: offers priced from
the plans (monthly cost / 730: Vultr's OpenAPI gives a plan no hourly cost; vGPU shares
left out, whole GPUs counted, GPU names read into the catalog), every page of a list
read; a region Vultr lacks and spot and more nodes than a firewall group can admit
refused naming the field; a pool in a firewall group of its own that admits SSH from
anywhere and everything else from the pool's own instances only (each admitted before it
is used), created before any instance and deleted after the last; the API key from
``api_key=``, the environment or vultr-cli's config file (plans and regions are read
without one, as Vultr serves them); an orphan firewall group found and removed by
``sky.gc``; bad fields refused."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_vultr import FakeVultr
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.errors import CredentialsError
from skyward.providers.vultr.api import MAX_NODES

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
L40S = sky.accelerators.L40S()


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("vultr", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeVultr:
    assert isinstance(cloud.fake, FakeVultr)
    return cloud.fake


def offered(
    provider: sky.Vultr, **fields: Any
) -> list[tuple[str, float, float, str | None, float | None]]:
    return [
        (
            o.instance_type,
            round(o.hourly_price, 4),
            o.accelerator_count,
            o.accelerator,
            o.accelerator_memory_gb,
        )
        for o in provider.offers(sky.Spec(provider=provider, **fields))
    ]


def test_offers_come_from_the_plans_of_the_region(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    fake.page_limit = 2  # every page is read
    try:
        a100 = offered(sky.Vultr(), accelerator=sky.accelerators.A100())
        ord_ = offered(sky.Vultr(region="ord"), accelerator=sky.accelerators.MI300X())
        fra = offered(sky.Vultr(region="fra"), accelerator=sky.accelerators.H100())
        cpu = offered(sky.Vultr(), vcpus=2)
    finally:
        fake.page_limit = 500
    assert a100 == [
        ("vcg-a100-12c-120g-80vram", round(1750 / 730, 4), 1.0, "A100", 80.0),
        ("vcg-a100-24c-240g-160vram", round(3500 / 730, 4), 2.0, "A100", 80.0),
    ], "a vGPU share (4 GB of an A100) is not offered; 160 GB of A100s are two"
    assert ord_ == [("vcg-mi300x-32c-256g-192vram", 2.5, 1.0, "MI300X", 192.0)], (
        "monthly cost / 730"
    )
    assert fra == [("vcg-h100-24c-240g-80vram", 3.0, 1.0, "H100", 80.0)], (
        "NVIDIA_HGX_H100 is an H100"
    )
    assert cpu == [
        ("vc2-2c-4gb", round(20 / 730, 4), 0.0, None, None),
        ("vhf-2c-4gb", round(24 / 730, 4), 0.0, None, None),
    ]
    assert {
        o.region for o in sky.Vultr(region="ord").offers(sky.Spec(provider=sky.Vultr(), vcpus=2))
    } == {"ord"}


def test_a_region_vultr_lacks_and_spot_are_refused_naming_the_field(cloud: Cloud) -> None:
    with pytest.raises(
        ValueError, match=r"Vultr\.region='xyz' is not valid: Vultr's regions are .*ewr"
    ):
        sky.Vultr(region="xyz").offers(sky.Spec(provider=sky.Vultr(), vcpus=2))
    provider = sky.Vultr()
    with pytest.raises(
        ValueError, match=r"Spec\.allocation='spot' is not valid: Vultr sells no spot"
    ):
        provider.validate(sky.Spec(provider=provider, allocation="spot"), OPTIONS)
    for allocation in ("spot-if-available", "cheapest"):
        found = provider.offers(
            sky.Spec(provider=provider, accelerator=L40S, allocation=allocation)
        )
        assert [(o.instance_type, o.spot) for o in found] == [
            ("vcg-l40s-16c-180g-48vram", False)
        ], allocation
    too_many = sky.Spec(provider=provider, nodes=sky.Nodes(desired=2, max=MAX_NODES + 1))
    with pytest.raises(
        ValueError, match=rf"Spec\.nodes=.* is not valid: .*at most {MAX_NODES} nodes"
    ):
        provider.validate(too_many, OPTIONS)


@pytest.mark.rotated("vultr")
def test_a_pool_sits_in_its_own_firewall_group_admitting_only_ssh_from_outside(
    cloud: Cloud,
) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(provider=sky.Vultr(), nodes=1, accelerator=L40S, options=OPTIONS)
    with pool:  # one node keeps it short; the conformance suite runs two
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        [(group_id, group)] = [(i, f) for i, f in fake.firewalls.items() if f["name"] == name]
        instances = [m for m in fake.live() if m.name.startswith(name)]
        peers = sorted(
            (r["subnet"], r["protocol"])
            for r in group["rules"][1:]
            if (r["subnet_size"], r["port"]) == (32, "1:65535")
        )
        ssh = group["rules"][0]
        assert (ssh["protocol"], ssh["subnet"], ssh["subnet_size"], ssh["port"]) == (
            "tcp",
            "0.0.0.0",
            0,
            "22",
        )
        assert len(group["rules"]) == 3 and peers == sorted(
            (m.address, protocol) for m in instances for protocol in ("tcp", "udp")
        ), "inbound: SSH from anywhere, everything else from the pool's own instances only"
        [key_id] = [k for k, v in fake.keys.items() if v["name"] == name]
        body = fake.bodies("POST", "/instances")[-1]
        assert (body["firewall_group_id"], body["sshkey_id"], body["tags"]) == (
            group_id,
            [key_id],
            ["skyward", name],
        )
        assert (body["plan"], body["region"], body["os_id"], body["user_scheme"]) == (
            "vcg-l40s-16c-180g-48vram",
            "ewr",
            2284,
            "root",
        )
        assert base64.b64decode(body["user_data"]).decode().startswith("#!/bin/bash"), (
            "user data is base64"
        )
        posted = [r.path for r in fake.requests if r.method == "POST"]
        assert posted.index("/firewalls") < posted.index("/instances"), (
            "no instance is ever outside it"
        )
    assert cloud.leftovers(pool.id) == []
    deletions = [r.path for r in fake.requests if r.method == "DELETE"]
    assert deletions[-2:] == [f"/firewalls/{group_id}", f"/ssh-keys/{key_id}"], (
        "then the group, then the key"
    )
    assert {f"/instances/{m.id}" for m in instances} <= set(deletions[:-2]), "the instances first"


def test_the_api_key_comes_from_the_argument_the_environment_or_the_cli_config(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = sky.Spec(provider=sky.Vultr(), vcpus=2)
    assert sky.Vultr(api_key="wrong").offers(spec), "plans and regions are public (Vultr's OpenAPI)"
    with pytest.raises(
        CredentialsError, match=r"refused.*Vultr\(api_key=\.\.\.\) or \$VULTR_API_KEY"
    ):
        sky.Vultr(api_key="wrong").api().machines()
    monkeypatch.delenv("VULTR_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sky.Vultr(api_key=TOKEN).offers(spec)
    with pytest.raises(CredentialsError, match=r"set \$VULTR_API_KEY \(or ~/\.vultr-cli\.yaml\)"):
        sky.Vultr().offers(spec)
    (tmp_path / ".vultr-cli.yaml").write_text(f"api-key: {TOKEN}\n")
    assert sky.Vultr().offers(spec), "vultr-cli's config file"
    assert TOKEN not in repr(sky.Vultr(api_key=TOKEN))


def test_gc_removes_an_orphan_firewall_group_and_key(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    api = sky.Vultr().api()
    group_id = api.add_firewall(orphan)
    key_id = api.add_key(orphan, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted planted")
    found = {(o.kind, o.id) for o in sky.gc([sky.Vultr()])}
    assert {("firewall", group_id), ("ssh-key", key_id)} <= found
    sky.gc([sky.Vultr()], delete=True)
    assert group_id not in fake.firewalls and key_id not in fake.keys


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"region": "New Jersey"}, r"Vultr\.region='New Jersey'.*ewr"),
        ({"os_id": 0}, r"Vultr\.os_id=0.*2284"),
        ({"os_id": "ubuntu"}, r"Vultr\.os_id='ubuntu'"),
        ({"os_id": sky.containers.cuda("12.8")}, r"Vultr\.os_id=.*virtual machines"),
        ({"api_key": 42}, r"Vultr\.api_key of type int.*VULTR_API_KEY"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        sky.Vultr(**fields)


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_VULTR_API_URL", "http://api.vultr.example.com/v2")
    monkeypatch.setenv("VULTR_API_KEY", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_VULTR_API_URL=.*https://"):
        sky.Vultr().api()
