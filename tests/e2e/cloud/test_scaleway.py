"""Scaleway against the local fake of its Instance API v1 with real test hosts: offers from
the zone's server types (RAM and GPU memory read from bytes, types in shortage and of
another architecture left out, every page read); spot, another zone and bad fields
refused naming the field; a pool in a security group of its own that admits SSH from
anywhere and everything else from the pool's own servers only (each admitted before it is
used), made before any server and deleted after the last; each server's key in its
``AUTHORIZED_KEY`` tag, the boot script as cloud-init, powered on, terminated; a server
refused at power-on deleted with its volume; credentials from the arguments, the
environment or the scw CLI's config file; an orphan security group removed by ``sky.gc``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_scaleway import PROJECT, FakeScaleway
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.api import MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CredentialsError

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
L4 = sky.accelerators.L4()


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("scaleway", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeScaleway:
    assert isinstance(cloud.fake, FakeScaleway)
    return cloud.fake


def test_offers_come_from_the_server_types_of_the_zone(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    fake.page_limit = 3  # every page is read
    try:
        provider = sky.Scaleway()
        h100 = provider.offers(sky.Spec(provider=provider, accelerator=sky.accelerators.H100()))
        cpu = provider.offers(sky.Spec(provider=provider, vcpus=2))
        l4 = provider.offers(sky.Spec(provider=provider, accelerator=L4))
    finally:
        fake.page_limit = 100
    assert [(o.instance_type, o.hourly_price, o.accelerator_memory_gb, o.memory_gb) for o in h100] == [
        ("H100-1-80G", round(2.73 * 1.15, 6), 80.0, 240.0)
    ], "H100-2-80G is in shortage; memory is read from bytes; euros at the default 1.15 dollars"
    assert [o.hourly_price for o in sky.Scaleway(usd_per_eur=1.0).offers(sky.Spec(provider=provider, accelerator=sky.accelerators.H100()))] == [2.73]
    assert [o.instance_type for o in cpu] == ["DEV1-M", "PRO2-XXS"], "2 GB is too little; arm64 is not this machine"
    assert [(o.instance_type, o.accelerator_count, o.spot) for o in l4] == [("L4-1-24G", 1.0, False), ("L4-2-24G", 2.0, False)]
    assert {o.region for o in cpu + l4} == {"fr-par-2"}
    assert sky.Scaleway(zone="fr-par-1").offers(sky.Spec(provider=provider, accelerator=L4)) == [], "no GPUs there"


def test_spot_another_zone_and_bad_fields_are_refused_naming_the_field(cloud: Cloud) -> None:
    provider = sky.Scaleway()
    with pytest.raises(ValueError, match=r"Spec\.allocation='spot' is not valid: Scaleway sells no spot"):
        provider.validate(sky.Spec(provider=provider, allocation="spot"), OPTIONS)
    with pytest.raises(ValueError, match=r"Spec\.region='nl-ams-1' is not valid: .*fr-par-2.*Scaleway\(zone=\.\.\.\)"):
        provider.validate(sky.Spec(provider=provider, region="nl-ams-1"), OPTIONS)
    for fields, named in [
        ({"zone": "par1"}, r"Scaleway\.zone='par1'.*fr-par-2"),
        ({"image_name": "ubuntu noble"}, r"Scaleway\.image_name='ubuntu noble'.*ubuntu_noble"),
        ({"image_name": sky.containers.cuda("12.8")}, r"Scaleway\.image_name=.*virtual machines"),
        ({"project_id": "my-project"}, r"Scaleway\.project_id='my-project'.*UUID"),
        ({"secret_key": 42}, r"Scaleway\.secret_key of type int.*SCW_SECRET_KEY"),
        ({"usd_per_eur": 0}, r"Scaleway\.usd_per_eur=0.*dollars one euro buys"),
    ]:
        with pytest.raises(ValueError, match=named):
            sky.Scaleway(**fields)


@pytest.mark.rotated("scaleway")
def test_a_pool_sits_in_its_own_security_group_admitting_only_ssh_from_outside(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(provider=sky.Scaleway(), nodes=1, accelerator=L4, options=OPTIONS)
    with pool:  # one node keeps it short; the conformance suite runs two
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        [(group_id, group)] = [(i, f) for i, f in fake.firewalls.items() if f["name"] == name]
        [server] = [m for m in fake.live() if m.name.startswith(name)]
        settings = group["group"]
        assert (settings["inbound_default_policy"], settings["outbound_default_policy"], settings["stateful"]) == (
            "drop", "accept", True,
        )
        ssh, peer = group["rules"]
        assert (ssh["protocol"], ssh["direction"], ssh["ip_range"], ssh["dest_port_from"]) == ("TCP", "inbound", "0.0.0.0/0", 22)
        assert (peer["protocol"], peer["ip_range"]) == ("ANY", f"{server.address}/32"), "its own address, nothing else"
        body = server.extra["create"]
        key_tag = f"AUTHORIZED_KEY={server.public_key.replace(' ', '_')}"
        assert body["tags"] == ["skyward", name, key_tag] and " " not in key_tag
        assert (body["security_group"], body["commercial_type"], body["image"], body["project"]) == (
            group_id, "L4-1-24G", "ubuntu_noble_gpu_os_12", PROJECT,
        )
        assert body["dynamic_ip_required"] is True and fake.keys == {}, "no key is registered with the account"
        assert str(server.extra["user_data"]).startswith("#!/bin/bash"), "the boot script as cloud-init"
        posted = [r.path.rsplit("/", 1)[-1] for r in fake.requests if r.method == "POST"]
        assert posted.index("security_groups") < posted.index("servers") < posted.index("action")
    assert cloud.leftovers(pool.id) == [] and fake.volumes == {}
    actions = [r.body for r in fake.requests if r.method == "POST" and r.path.endswith(f"/servers/{server.id}/action")]
    assert actions == [{"action": "poweron"}, {"action": "terminate"}]
    deletions = [r.path for r in fake.requests if r.method == "DELETE"]
    assert deletions[-1].endswith(f"/security_groups/{group_id}"), "the group goes after the server"


def test_a_server_refused_at_power_on_is_deleted_with_its_volume(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    api = sky.Scaleway().api()
    group = naming.key_name("fedcba9876543210")
    group_id = api.add_firewall(group)
    kind = MachineType("L40S-1-48G", 8, 96, 1.4, region="fr-par-2", accelerator="L40S", accelerator_count=1)
    order = Order(naming.machine_name("fedcba9876543210", 0), kind, False, "ssh-ed25519 AAAAC3Nz planted", None,
                  "ubuntu_noble_gpu_os_12", "#!/bin/bash\n", group=group)
    fake.poweron_refused.add("L40S-1-48G")
    try:
        with pytest.raises(CapacityError, match="Scaleway has no L40S-1-48G in fr-par-2: .*out of stock"):
            api.create(order)
    finally:
        fake.poweron_refused.clear()
    assert fake.live(order.name) == [] and fake.volumes == {}, "the stopped server and its volume are deleted"
    api.remove_firewall(group_id, group)


def test_credentials_come_from_the_arguments_the_environment_or_the_cli_config(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = sky.Spec(provider=sky.Scaleway(), vcpus=2)
    with pytest.raises(CredentialsError, match=r"refused.*Scaleway\(secret_key=\.\.\.\) or \$SCW_SECRET_KEY"):
        sky.Scaleway(secret_key="wrong").offers(spec)
    monkeypatch.delenv("SCW_SECRET_KEY")
    monkeypatch.delenv("SCW_DEFAULT_PROJECT_ID")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sky.Scaleway(secret_key=TOKEN, project_id=PROJECT).offers(spec)
    with pytest.raises(CredentialsError, match=r"set \$SCW_SECRET_KEY \(or ~/\.config/scw/config\.yaml\)"):
        sky.Scaleway().offers(spec)
    with pytest.raises(CredentialsError, match=r"\$SCW_DEFAULT_PROJECT_ID or \$SCW_PROJECT_ID"):
        sky.Scaleway(secret_key=TOKEN).offers(spec)
    config = tmp_path / ".config" / "scw" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"access_key: SCWXXXXXXXXXXXXXXXXX\nsecret_key: {TOKEN}\ndefault_project_id: {PROJECT}\n"
                      "default_zone: fr-par-1\n")
    offers = sky.Scaleway().offers(spec)
    assert offers and {o.region for o in offers} == {"fr-par-1"}, "the scw CLI's key, project and zone"
    monkeypatch.setenv("SCW_DEFAULT_ZONE", "pl-waw-9")
    with pytest.raises(ValueError, match=r"Scaleway\.zone='pl-waw-9'.*SCW_DEFAULT_ZONE"):
        sky.Scaleway().api()
    assert TOKEN not in repr(sky.Scaleway(secret_key=TOKEN))


def test_gc_removes_an_orphan_security_group(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    group_id = sky.Scaleway().api().add_firewall(orphan)
    assert ("firewall", group_id) in {(o.kind, o.id) for o in sky.gc([sky.Scaleway()])}
    sky.gc([sky.Scaleway()], delete=True)
    assert group_id not in fake.firewalls


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_SCALEWAY_API_URL", "http://api.scaleway.example.com")
    monkeypatch.setenv("SCW_SECRET_KEY", TOKEN)
    monkeypatch.setenv("SCW_DEFAULT_PROJECT_ID", PROJECT)
    with pytest.raises(ValueError, match=r"SKYWARD_SCALEWAY_API_URL=.*https://"):
        sky.Scaleway().api()
