"""Elastic pools on the local AWS (tests/cloud): nodes are EC2 instances that are real
test hosts, so a spot interruption (``Machines.interrupt``: the instance terminated and
its host killed at once) loses a real machine. Seconds-scale intervals. In CI the three
take turns by the commit's day (``rotation.in_turn``, 1.5-2 minutes each there), beside
tests/e2e/cloud/test_cloud_elastic.py, which runs an elastic pool, scaling to zero and a
reclaimed spot machine on another cloud every day."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cloud.aws_emulator import AWSEmulator
from cloud.machines import Machines
from e2e.cloud.rotation import in_turn

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(
    console=False, logging=False, ssh_retry_interval=1, reconcile_tick_interval=1.0, autoscale_cooldown=1.0,
    autoscale_idle_timeout=4.0,
)
WAIT = 180.0
SICK = "/tmp/skyward-test-sick"


def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.2)


@sky.function
def where() -> tuple[int, int, str]:
    info = sky.instance_info()  # no assert here: pytest rewrites asserts, and nodes have no pytest
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.total_nodes, info.peers[info.node].private_ip


@sky.function
def nap(seconds: float) -> int:
    time.sleep(seconds)
    info = sky.instance_info()
    return -1 if info is None else info.node


def slow_cube(x: int) -> int:
    time.sleep(0.1)
    return x**3


def healthy() -> bool:
    return not os.path.exists(SICK)


@sky.function
def fall_sick() -> None:
    with open(SICK, "w") as marker:
        marker.write("sick\n")


def provider(subnet: str) -> sky.AWS:
    return sky.AWS(subnet_id=subnet, use_private_ip=True, username="root")


def live(machines: Machines, pool: sky.Pool) -> list[str]:
    return [i["InstanceId"] for i in machines.running(**{"skyward:pool": pool.id}) if i["State"]["Name"] != "stopped"]


def leftovers(aws: AWSEmulator, pool_id: str) -> list[str]:
    ec2 = aws.client("ec2")
    tag = [{"Name": "tag:skyward:pool", "Values": [pool_id]}]
    states = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
    reservations = ec2.describe_instances(Filters=tag + states)["Reservations"]
    return [i["InstanceId"] for r in reservations for i in r["Instances"]]


@pytest.fixture(scope="module")
def subnet(machines: Machines) -> str:
    return machines.subnet()


@in_turn(2, of=3)
def test_a_spot_interruption_during_a_map_loses_no_item(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    instances: dict[int, str] = {}
    events: list[Any] = []
    finished: list[sky.TaskCompleted] = []
    pool = sky.Compute(provider=provider(subnet), nodes=3, options=OPTIONS)
    pool.on(sky.InstanceProvisioned, lambda e: instances.__setitem__(e.node, e.instance_id))
    pool.on(sky.InstancePreempted, events.append)
    pool.on(sky.InstanceReplaced, events.append)
    pool.on(sky.TaskCompleted, finished.append)
    with pool:
        interrupted = instances[2]
        results: list[int] = []
        errors: list[BaseException] = []

        def run_map() -> None:
            try:
                results.extend(pool.map(slow_cube, range(200)))
            except BaseException as exc:
                errors.append(exc)

        mapping = threading.Thread(target=run_map)
        mapping.start()
        eventually(lambda: len(finished) >= 3, "the map under way", 60)
        machines.interrupt(interrupted)
        mapping.join(WAIT)
        assert not errors, errors
        assert results == [x**3 for x in range(200)], "every result, once, in order"
        assert any(isinstance(e, sky.InstancePreempted) and e.node == 2 and e.instance_id == interrupted for e in events)
        eventually(lambda: any(isinstance(e, sky.InstanceReplaced) and e.node == 2 for e in events), "the replacement")
        eventually(lambda: pool.current_nodes() == 3, "three nodes again")
        assert instances[2] != interrupted, "a new instance took rank 2"
        ranks = where() @ pool
        assert sorted(rank for rank, _, _ in ranks) == [0, 1, 2] and {total for _, total, _ in ranks} == {3}
        assert {address for _, _, address in ranks} <= {host.address for host in machines.hosts.values()}
        assert interrupted not in live(machines, pool)
    assert leftovers(aws, pool.id) == [], "the replacement was terminated too"


@in_turn(0, of=3)
def test_partial_readiness_autoscaling_and_resize(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    up: dict[int, float] = {}
    pool = sky.Compute(provider=provider(subnet), nodes=sky.Nodes(desired=2, min=1, max=3), options=OPTIONS)
    pool.on(sky.InstanceBootstrapped, lambda e: up.setdefault(e.node, time.monotonic()))
    with pool:
        first = nap(0) >> pool
        answered = time.monotonic()
        assert first == 0
        eventually(lambda: pool.current_nodes() == 2, "growing to desired")
        assert answered < up[1], "work ran before the second node was up"
        futures = [nap(0.5) > pool for _ in range(60)]
        eventually(lambda: pool.current_nodes() == 3, "scaling up under the queue")
        assert {future.result(WAIT) for future in futures} <= {0, 1, 2}
        eventually(lambda: pool.current_nodes() == 1, "scaling down to the floor once idle")
        eventually(lambda: len(live(machines, pool)) == 1, "the idle instances terminated", 60)
        with pytest.raises(ValueError, match=r"min=0 is below this pool's lowest size, 1.*Nodes\(min=0\)"):
            pool.resize(sky.Nodes(desired=1, min=0, max=3))  # its head never leaves: refused, not ignored
        assert pool.current_nodes() == 1
        pool.resize(2)
        assert pool.map(slow_cube, range(40)) == [x**3 for x in range(40)]
        eventually(lambda: pool.current_nodes() == 2, "resized to 2")
    assert leftovers(aws, pool.id) == []


@in_turn(1, of=3)
def test_a_node_failing_its_health_check_is_replaced(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    instances: dict[int, str] = {}
    replaced: list[sky.InstanceReplaced] = []
    checker = sky.HealthChecker(check=healthy, interval=1.0, failures=2, warmup=1.0, timeout=10)
    pool = sky.Compute(provider=provider(subnet), nodes=2, options=OPTIONS.with_(health_checker=checker))
    pool.on(sky.InstanceProvisioned, lambda e: instances.__setitem__(e.node, e.instance_id))
    pool.on(sky.InstanceReplaced, replaced.append)
    with pool:
        sick = instances[1]
        pool.run(fall_sick(), target=1)
        eventually(lambda: any(event.node == 1 for event in replaced), "node 1 replaced")
        assert "health check healthy" in replaced[0].reason
        eventually(lambda: pool.current_nodes() == 2 and instances[1] != sick, "a new instance at rank 1")
        eventually(lambda: sick not in live(machines, pool), "the sick instance terminated", 60)
        assert sorted(rank for rank, _, _ in where() @ pool) == [0, 1]
    assert leftovers(aws, pool.id) == []
