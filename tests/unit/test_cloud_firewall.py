"""A pool's firewall on a cloud that has one (DigitalOcean's Cloud Firewalls, against
the local fake of its API: tests/cloud/fake_digitalocean.py), without machines: the
rules it asks for, what ``sky gc`` finds and removes, the address peers use, and a
teardown that keeps the firewall while a machine may still run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_digitalocean import FakeDigitalOcean

import skyward as sky
from skyward.providers.base import TeardownError
from skyward.providers.cloud import machines, naming
from skyward.providers.cloud.api import Firewall, FirewallAPI, Machine
from skyward.providers.cloud.errors import CloudError
from skyward.providers.digitalocean.api import DigitalOceanAPI, _machine
from skyward.providers.verda.api import VerdaAPI

ANYWHERE = ["0.0.0.0/0", "::/0"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeDigitalOcean]:
    """The fake DigitalOcean, the process pointed at it, a fresh SKYWARD_HOME."""
    running = FakeDigitalOcean().serve_here(monkeypatch, tmp_path, subnet=None)
    try:
        yield running
    finally:
        running.stop()


def group() -> str:
    """The group name of a pool of this machine that is not open."""
    return naming.key_name(uuid.uuid4().hex)


def test_the_firewall_admits_ssh_from_anywhere_and_the_rest_from_the_pool_only(fake: FakeDigitalOcean) -> None:
    name = group()
    firewall_id = DigitalOceanAPI().add_firewall(name)
    firewall = fake.firewalls[firewall_id]
    assert firewall["name"] == name and firewall["tags"] == [name], "it guards the Droplets tagged with the pool's group"
    assert firewall["inbound_rules"] == [
        {"protocol": "tcp", "ports": "22", "sources": {"addresses": ANYWHERE}},
        {"protocol": "tcp", "ports": "0", "sources": {"tags": [name]}},
        {"protocol": "udp", "ports": "0", "sources": {"tags": [name]}},
    ]
    assert all(rule["destinations"] == {"addresses": ANYWHERE} for rule in firewall["outbound_rules"])
    assert {rule["protocol"] for rule in firewall["outbound_rules"]} == {"tcp", "udp", "icmp"}
    posted = [r.path for r in fake.requests if r.method == "POST"]
    assert posted == ["/v2/tags", "/v2/firewalls"], "the tag its rules name exists before the firewall"
    assert DigitalOceanAPI().firewalls() == [Firewall(firewall_id, name)]

    DigitalOceanAPI().remove_firewall(firewall_id, name)
    assert fake.firewalls == {} and name not in fake.tags
    DigitalOceanAPI().remove_firewall(firewall_id, name)  # gone already is fine


def test_a_firewall_that_cannot_be_made_leaves_no_tag(fake: FakeDigitalOcean) -> None:
    with pytest.raises(CloudError, match="name must begin"):
        DigitalOceanAPI().add_firewall("-starts-with-a-dash")
    assert fake.firewalls == {} and fake.tags == set()


def test_gc_removes_a_leftover_firewall_and_leaves_others_alone(fake: FakeDigitalOcean) -> None:
    leftover = group()
    leftover_id = DigitalOceanAPI().add_firewall(leftover)
    named = naming.parse(leftover)
    assert named is not None
    someone_elses = f"skyward-{named.pool}-{'000000' if named.owner != '000000' else '111111'}"
    others = [DigitalOceanAPI().add_firewall(someone_elses), DigitalOceanAPI().add_firewall("web-frontend")]

    found = sky.gc([sky.DigitalOcean()])
    assert [(o.kind, o.id) for o in found] == [("firewall", leftover_id)]
    sky.gc([sky.DigitalOcean()], delete=True)
    assert leftover_id not in fake.firewalls and leftover not in fake.tags
    assert sorted(fake.firewalls) == sorted(others), "firewalls of other clients and not skyward's are left"
    assert sky.gc([sky.DigitalOcean()]) == []


def test_peers_use_the_droplets_private_address_and_the_client_its_public_one() -> None:
    droplet: dict[str, Any] = {
        "id": 7, "name": "skyward-x", "status": "active", "size_slug": "s-2vcpu-4gb",
        "networks": {"v4": [{"ip_address": "10.116.0.5", "type": "private"},
                            {"ip_address": "203.0.113.9", "type": "public"}]},
    }
    machine = _machine(droplet)
    assert (machine.ssh_host, machine.private_ip, machine.state) == ("203.0.113.9", "10.116.0.5", "running")


class _Cloud:
    """A cloud API in memory whose machine deletions can fail."""

    def __init__(self, deletable: bool) -> None:
        self.deletable = deletable
        self.calls: list[str] = []

    def delete(self, machine_id: str) -> None:
        self.calls.append(f"delete {machine_id}")
        if not self.deletable:
            raise CloudError("the API is down")

    def get(self, machine_id: str) -> Machine | None:
        return None

    def remove_key(self, key_id: str) -> None:
        self.calls.append(f"remove_key {key_id}")

    def add_firewall(self, group: str) -> str:
        raise AssertionError("not called here")

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        self.calls.append(f"remove_firewall {firewall_id}")

    def firewalls(self) -> list[Firewall]:
        return []


def _resources() -> machines.PoolMachines:
    return machines.PoolMachines("Cloud", "p" * 32, "skyward-pppppppppppp-abcdef", key_id="k1", firewall_id="fw1", machines=["m1"])


def test_teardown_deletes_the_firewall_after_the_machines_are_gone() -> None:
    cloud = _Cloud(deletable=True)
    assert isinstance(cloud, FirewallAPI)
    machines.release(cloud, _resources())  # type: ignore[arg-type]
    assert cloud.calls == ["delete m1", "remove_firewall fw1", "remove_key k1"]


def test_teardown_keeps_the_firewall_while_a_machine_may_still_run() -> None:
    cloud = _Cloud(deletable=False)
    with pytest.raises(TeardownError, match="firewall skyward-pppppppppppp-abcdef") as failed:
        machines.release(cloud, _resources())  # type: ignore[arg-type]
    assert "remove_firewall fw1" not in cloud.calls
    assert "sky gc --provider cloud" in str(failed.value)


def test_a_cloud_without_a_firewall_api_creates_none() -> None:
    """Verda's API has no firewall (nor private network): its pools get none."""
    assert not isinstance(VerdaAPI.__new__(VerdaAPI), FirewallAPI)
    assert isinstance(DigitalOceanAPI.__new__(DigitalOceanAPI), FirewallAPI)
