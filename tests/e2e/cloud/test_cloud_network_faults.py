"""A network that fails under a pool of an emulated cloud (DigitalOcean's fake, its
Droplets real test hosts): the client's link to every machine of the pool dropped for
30 s in the middle of a ``pool.map`` (a laptop's Wi-Fi gone), as blackhole routes on
both ends (tests/netfaults.py). Every item counts itself on a strong counter, so
"every item exactly once, in order" is read from the results and the counter; the
cloud's API (on this machine's loopback) stays reachable, as a cloud's does from a
laptop whose link to its machines alone is gone."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.cloud.clouds import Cloud, started
from e2e.cloud.rotation import in_turn
from netfaults import link_dropped

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
ITEMS = 6_000


@sky.function
def counted(item: int) -> int:
    """The item doubled, after counting it."""
    time.sleep(0.003)
    sky.counter("items", consistency="strong").increment()
    return item * 2


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("digitalocean", lab) as running:
        yield running


@in_turn(2, of=3)  # with the 60 s dropped link of tests/e2e/ssh/test_network_faults.py
def test_the_clients_link_to_a_cloud_pool_dropped_for_30s_loses_nothing(cloud: Cloud, lab: Any) -> None:
    assert cloud.harness is not None
    with sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, options=OPTIONS) as pool:
        hosts = list(cloud.harness.hosts.values())
        assert len(hosts) == 2

        def drop() -> None:
            time.sleep(2)
            with contextlib.ExitStack() as stack:
                for host in hosts:
                    stack.enter_context(link_dropped(lab, host))
                time.sleep(30)

        fault = threading.Thread(target=drop, daemon=True)
        began = time.monotonic()
        fault.start()
        results = pool.map(counted, range(ITEMS))
        took = time.monotonic() - began
        fault.join(timeout=60)
        assert not fault.is_alive(), "the fault did not end"
        assert results == [item * 2 for item in range(ITEMS)]
        assert pool.counter("items", consistency="strong").value == ITEMS
        assert took > 30  # the link was down while the map ran: it waited, and then went on
    assert cloud.leftovers(pool.id) == []
