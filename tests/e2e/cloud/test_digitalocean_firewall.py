"""A DigitalOcean pool behind its own Cloud Firewall, against the local fake of the API
with real test hosts: the firewall exists before the first Droplet, guards and admits
the pool's Droplets by their group tag (inbound otherwise SSH only), and teardown
deletes it and its tag once the Droplets are gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_digitalocean import FakeDigitalOcean
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("digitalocean", lab) as running:
        yield running


@pytest.mark.rotated("digitalocean")
def test_a_pool_sits_behind_its_own_firewall_until_its_droplets_are_gone(cloud: Cloud) -> None:
    fake = cloud.fake
    assert isinstance(fake, FakeDigitalOcean)
    pool = sky.Compute(provider=sky.DigitalOcean(), nodes=2, options=OPTIONS, vcpus=2)
    with pool:
        assert pool.map(square, range(4)) == [0, 1, 4, 9]
        name = naming.key_name(pool.id)
        [firewall] = [f for f in fake.firewalls.values() if f["name"] == name]
        assert firewall["tags"] == [name]
        opened = [(r["protocol"], r["ports"], r["sources"]) for r in firewall["inbound_rules"]]
        assert opened == [
            ("tcp", "22", {"addresses": ["0.0.0.0/0", "::/0"]}),
            ("tcp", "0", {"tags": [name]}),
            ("udp", "0", {"tags": [name]}),
        ], "inbound: SSH from anywhere, everything else from the pool's own Droplets only"
        droplets = fake.live(pool.id[:12])
        assert len(droplets) == 2 and all(name in d.extra["tags"] for d in droplets)
        posted = [r.path for r in fake.requests if r.method == "POST"]
        assert posted.index("/v2/firewalls") < posted.index("/v2/droplets"), "no Droplet is ever outside it"
    assert not [f for f in fake.firewalls.values() if f["name"] == name], "teardown deletes the firewall"
    assert name not in fake.tags
    assert cloud.leftovers(pool.id) == []
    deletions = [r.path for r in fake.requests if r.method == "DELETE"]
    last_droplet = max(i for i, path in enumerate(deletions) if path.startswith("/v2/droplets/"))
    assert deletions.index(f"/v2/firewalls/{firewall['id']}") > last_droplet, "the firewall goes after its Droplets"
