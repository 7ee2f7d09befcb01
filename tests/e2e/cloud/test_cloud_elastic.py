"""Elastic pools on every machine cloud of the conformance suite (its local fake; every
machine a real test host): the pool grows under queued work and shrinks back to its floor
with the idle machine deleted, and, on a cloud that sells spot machines, a spot machine the
cloud reclaims during a map loses no item while a new machine takes its rank, and a pool
that scales to zero deletes every machine while it sleeps. AWS has its
own file (test_aws_elastic.py, the same checks against the local EC2). Seconds-scale
intervals. ``rotated(single=True)``: in CI each commit runs these on its day's clouds but AWS, in turn;
the spot test on those of them that sell spot machines, or on one that does picked by the day."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from e2e.cloud.clouds import CLOUDS, SPOT_CLOUDS, Cloud, started

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(
    console=False, logging=False, ssh_retry_interval=1, reconcile_tick_interval=1.0, autoscale_cooldown=1.0,
    autoscale_idle_timeout=4.0,
)
WAIT = 180.0


def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.2)


@sky.function
def nap(seconds: float) -> int:
    time.sleep(seconds)
    info = sky.instance_info()
    return -1 if info is None else info.node


@sky.function
def where() -> tuple[int, int]:
    info = sky.instance_info()  # no assert here: nodes have no pytest
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.total_nodes


def slow_cube(x: int) -> int:
    time.sleep(0.1)
    return x**3


def machines_of(cloud: Cloud, pool_id: str) -> list[str]:
    return [left for left in cloud.leftovers(pool_id) if left.startswith("machine ")]


@pytest.fixture(scope="module", params=[name for name in CLOUDS if name != "aws"])
def cloud(request: pytest.FixtureRequest, lab: Any) -> Iterator[Cloud]:
    with started(request.param, lab) as running:
        yield running


@pytest.mark.rotated(single=True)
def test_an_elastic_pool_grows_under_work_and_shrinks_when_idle(cloud: Cloud) -> None:
    with sky.Compute(provider=cloud.make(), nodes=(1, 2), options=OPTIONS, **cloud.pool) as pool:
        assert pool.current_nodes() == 1
        futures = [nap(0.5) > pool for _ in range(40)]
        eventually(lambda: pool.current_nodes() == 2, "growing under the queue")
        assert {future.result(WAIT) for future in futures} <= {0, 1}
        eventually(lambda: pool.current_nodes() == 1, "shrinking to the floor once idle")
        eventually(lambda: len(machines_of(cloud, pool.id)) == 1, "the idle machine deleted", 60)
    assert cloud.leftovers(pool.id) == []


@pytest.mark.rotated(single=True)
def test_an_idle_pool_that_scales_to_zero_deletes_every_machine(cloud: Cloud) -> None:
    """``Nodes(min=0)``: asleep, the pool has no machine, key or firewall on the cloud
    (waking it is the provider's launch again: tests/e2e/ssh/test_ssh_sleep.py)."""
    options = OPTIONS.with_(cluster=False, autoscale_idle_timeout=1.0)
    with sky.Compute(provider=cloud.make(), nodes=sky.Nodes(desired=1, min=0), options=options, **cloud.pool) as pool:
        assert where() >> pool == (0, 1)
        eventually(lambda: pool.current_nodes() == 0 and not cloud.leftovers(pool.id), "everything deleted", 90)
    assert cloud.leftovers(pool.id) == []


@pytest.mark.rotated(single=True, among=SPOT_CLOUDS)
@pytest.mark.parametrize("cloud", SPOT_CLOUDS, indirect=True)
def test_a_reclaimed_spot_machine_loses_no_item(cloud: Cloud) -> None:
    machines: dict[int, str] = {}
    events: list[Any] = []
    finished: list[sky.TaskCompleted] = []
    pool = sky.Compute(provider=cloud.make(), nodes=2, allocation="spot", options=OPTIONS, **cloud.pool)
    pool.on(sky.InstanceProvisioned, lambda e: machines.__setitem__(e.node, e.instance_id))
    pool.on(sky.InstancePreempted, events.append)
    pool.on(sky.InstanceReplaced, events.append)
    pool.on(sky.TaskCompleted, finished.append)
    assert cloud.harness is not None
    fake = cloud.harness.sources[0]
    with pool:
        reclaimed = machines[1]
        results: list[int] = []
        errors: list[BaseException] = []

        def run_map() -> None:
            try:
                results.extend(pool.map(slow_cube, range(100)))
            except BaseException as exc:
                errors.append(exc)

        mapping = threading.Thread(target=run_map)
        mapping.start()
        eventually(lambda: len(finished) >= 2, "the map under way", 60)
        fake.reclaim(reclaimed)
        mapping.join(WAIT)
        assert not errors, errors
        assert results == [x**3 for x in range(100)], "every result, once, in order"
        eventually(lambda: any(isinstance(e, sky.InstancePreempted) and e.node == 1 for e in events), "the preemption")
        eventually(lambda: any(isinstance(e, sky.InstanceReplaced) and e.node == 1 for e in events), "the replacement")
        eventually(lambda: pool.current_nodes() == 2, "two nodes again")
        assert machines[1] != reclaimed, "a new machine took rank 1"
        assert sorted(where() @ pool) == [(0, 2), (1, 2)]
    assert cloud.leftovers(pool.id) == [], "the replacement was deleted too"
