"""A network that fails under a pool of an emulated cloud (DigitalOcean's fake, its
Droplets real test hosts), in the middle of a ``pool.map``, under the map of
tests/netfaults.py: the client's link to every machine of the pool dropped for 10 s and 60 s (a
laptop's Wi-Fi gone) and one machine cut off from the others for 30 s (a partition
inside the cloud), as blackhole routes on both ends; every path to the machines slowed
to 10 Mbit/s and to 1 Mbit/s (a token bucket), and node 0's sshd restarted; the client's link dropped past
``Spec.ttl``, the client process stopped for 60 s (a laptop asleep), and every connection
of the client reset (a NAT that dropped them). Every item counts
itself on a strong counter (one in 500 under a lock), so "every item exactly once, in
order" is read from the results and the counter; the cloud's API (on this machine's
loopback) stays reachable, as a cloud's does from a laptop whose link to its machines
alone is gone."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.cloud.clouds import Cloud, started
from e2e.cloud.rotation import in_turn
from netfaults import (
    ITEMS,
    connections_reset,
    connections_to,
    counted,
    link_dropped,
    mapped_through,
    partitioned,
    slowed,
    stopped_mid_map,
)

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)


@sky.function
def head_address() -> str:
    return sky.instance_info().head_addr


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("digitalocean", lab) as running:
        yield running


@pytest.mark.parametrize("seconds", [10, pytest.param(60, marks=in_turn(2, of=3))])  # 60: with the SSH hosts' 60 s
def test_the_clients_link_to_a_cloud_pool_dropped_loses_nothing(cloud: Cloud, lab: Any, seconds: int) -> None:
    """The client's link to both Droplets gone for 10 s, and for 60 s (longer than the
    keepalives of its connections wait, shorter than ``Spec.ttl``): the map waits, and
    then returns every item once, in order."""
    assert cloud.harness is not None
    with sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, options=OPTIONS) as pool:
        hosts = list(cloud.harness.hosts.values())
        assert len(hosts) == 2

        def drop() -> None:
            with contextlib.ExitStack() as stack:
                for host in hosts:
                    stack.enter_context(link_dropped(lab, host))
                time.sleep(seconds)

        results, counted_items, took = mapped_through(pool, drop)
        print(f"link to a cloud pool dropped {seconds} s: the map took {took:.1f} s")
        assert results == [item * 2 for item in range(ITEMS)]
        assert counted_items == ITEMS
        assert took > seconds  # the link was down while the map ran: it waited, and then went on
    assert cloud.leftovers(pool.id) == []


def test_every_connection_to_a_cloud_pool_reset_is_resumed_and_loses_nothing(cloud: Cloud, lab: Any) -> None:
    """Every connection of the client to both Droplets reset mid-map: the client reaches
    both again, resumes its session with the relay, and loses no machine and no item."""
    assert cloud.harness is not None
    said: list[str] = []
    with sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, options=OPTIONS) as pool:
        pool.on(sky.Error, lambda event: said.append(event.message))
        hosts = list(cloud.harness.hosts.values())
        reset: list[int] = []
        results, counted_items, _ = mapped_through(pool, lambda: reset.extend(connections_reset(h) for h in hosts))
        assert len(reset) == 2 and all(reset), reset
        assert results == [item * 2 for item in range(ITEMS)]
        assert counted_items == ITEMS
        deadline = time.monotonic() + 30
        while not all(connections_to(host) for host in hosts) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(connections_to(host) for host in hosts), "both machines reached again"
        assert [message for message in said if "resumed the session" in message], said
        assert not [message for message in said if "sshd is gone" in message or " lost" in message], said
    assert cloud.leftovers(pool.id) == []


@in_turn(1, of=3)  # with the past-ttl link and the stopped client of tests/e2e/ssh/test_network_faults.py
def test_a_cloud_machine_cut_off_from_the_others_for_30s_loses_nothing(cloud: Cloud, lab: Any) -> None:
    """One Droplet of three cut off from the other two (the client and the cloud's API
    still reach it) for 30 s: node 0's lane to it gives up, the machine counts as lost,
    the chunk it ran runs again elsewhere, and the map returns every item once, in order."""
    assert cloud.harness is not None
    with sky.Compute(provider=sky.DigitalOcean(), nodes=3, vcpus=2, options=OPTIONS) as pool:
        hosts = list(cloud.harness.hosts.values())
        assert len(hosts) == 3
        head = pool.run(head_address(), target=0)
        workers = [host for host in hosts if host.address != head]
        assert len(workers) == 2, (head, [host.address for host in hosts])

        def cut() -> None:
            with partitioned(lab, workers[-1]):
                time.sleep(30)

        results, counted_items, took = mapped_through(pool, cut)
        print(f"a machine cut off 30 s: the map took {took:.1f} s, {counted_items - ITEMS} items ran twice")
        assert took > 20  # the map waited on the cut-off machine's chunk until its lane gave up
        assert results == [item * 2 for item in range(ITEMS)]
        assert counted_items >= ITEMS  # a re-run chunk's side effects happen at least once
    assert cloud.leftovers(pool.id) == []


@in_turn(0, of=3)  # with the partitions of tests/e2e/ssh
def test_a_cloud_pool_through_a_slowed_path_and_a_restarted_sshd_loses_nothing(cloud: Cloud, lab: Any) -> None:
    """Every path to and from the pool's two Droplets through a 10 Mbit/s token bucket for
    a whole map, then 1 Mbit/s for another, then node 0's sshd restarted during a third
    (as a package upgrade does):
    as on SSH hosts, each map returns every item once, in order."""
    assert cloud.harness is not None
    with sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, options=OPTIONS) as pool:
        hosts = list(cloud.harness.hosts.values())
        assert len(hosts) == 2
        for rate in ("10mbit", "1mbit"):
            with slowed(lab, rate, hosts):
                results, counted_items, took = mapped_through(pool, lambda: None, after=0.0)
            print(f"{rate}: {ITEMS} items in {took:.1f} s ({ITEMS / took:,.0f}/s)")
            assert results == [item * 2 for item in range(ITEMS)]
            assert counted_items == ITEMS
        head = pool.run(head_address(), target=0)
        node_0 = next(host for host in hosts if host.address == head)
        listening, restarted, began = node_0.sshd.pid, [], time.monotonic()
        results, counted_items, took = mapped_through(
            pool, lambda: (lab.restart_sshd(node_0), restarted.append(time.monotonic() - began))
        )
        assert restarted and restarted[0] < took and node_0.sshd.pid != listening  # restarted during the map
        assert results == [item * 2 for item in range(ITEMS)]
        assert counted_items == ITEMS
    assert cloud.leftovers(pool.id) == []


@in_turn(2, of=3)
def test_a_link_to_a_cloud_pool_dropped_past_ttl_ends_the_map_saying_why_and_leaves_nothing(
    cloud: Cloud, lab: Any
) -> None:
    """The client's link to both Droplets gone for longer than ``Spec.ttl``: the map
    raises ``ConnectionError`` saying so within one keepalive of the ttl, and the close
    (through the cloud's API, still reachable) leaves nothing in the cloud."""
    assert cloud.harness is not None
    ttl = 20
    pool = sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, ttl=ttl, options=OPTIONS)
    pool.open()
    try:
        hosts = list(cloud.harness.hosts.values())
        assert len(hosts) == 2
        with contextlib.ExitStack() as stack:
            for host in hosts:
                stack.enter_context(link_dropped(lab, host))
            dropped = time.monotonic()
            with pytest.raises(ConnectionError) as lost:
                pool.map(counted, range(ITEMS))
            noticed = time.monotonic() - dropped
            pool.close()
    finally:
        pool.close()
    said = str(lost.value)
    assert f"node 0 answered nothing for {ttl} s" in said and "Spec.ttl" in said, said
    assert ttl <= noticed < ttl + 20, noticed  # keepalives every 5 s: given up within one more
    assert cloud.leftovers(pool.id) == []


SLEEPER = """
import json, os, sys
sys.path[:0] = [os.environ["TESTS"]]
import skyward as sky
from netfaults import ITEMS, counted

options = sky.Options(console=False, logging=False, ssh_retry_interval=1)
with sky.Compute(provider=sky.DigitalOcean(), nodes=2, vcpus=2, options=options) as pool:
    print("mapping", pool.id, flush=True)
    results = pool.map(counted, range(ITEMS))
    counted_items = pool.counter("items", consistency="strong").value
    print(json.dumps({"in_order": results == [i * 2 for i in range(ITEMS)], "counted": counted_items}), flush=True)
"""


@in_turn(0, of=3)
def test_a_cloud_pools_client_stopped_for_60s_as_a_sleeping_laptop_goes_on(cloud: Cloud, tmp_path: Path) -> None:
    """The client process of a 2-Droplet pool stopped (SIGSTOP) for 60 s two seconds
    into its map, then resumed: the map returns every item once, in order, and the
    client's close leaves nothing in the cloud."""
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    tests = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    started = stopped_mid_map(script, {**os.environ, "TESTS": tests, "TMPDIR": str(tmp_path)})
    assert cloud.leftovers(started[1]) == []
